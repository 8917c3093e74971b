`timescale 1ns/1ps
`default_nettype none
// sram: GA2's scratchpad, WORDS 32-bit words in 16 one-read one-write banks (ram_1r1w).
// Bank of a word address: lane = addr[1:0], group = addr[AW-1:AW-2]; its row is addr[AW-3:2].
// Four consecutive words always lie in four different lanes, so a line of up to four words can be
// read (or written) in one cycle from any address.
//
// Ports (every read returns its data in the second cycle after the request, GA2_SRAM_RD_LAT = 2):
//   p0  line read: word j (j = 0..3) of p0_addr + j when p0_mask[j]; data word j in bits 32j+31:32j
//   p1  one word (the vector unit's second operand)
//   p2  one word (the softmax unit, the second compute engine)
//   dr  the DMA engine's STORE reads: a line of EW words (word j of dr_addr + j when dr_en[j])
//   wc  one write (the matmul engine or the vector unit)
//   w2  one write (the softmax unit)
//   wd  the DMA engine's LOAD writes: a line of EW words (word j to wd_addr + j when wd_en[j])
// Each bank serves one read and one write per cycle. Programs keep the users of a bank apart (the
// machine model rejects a program where a DMA transfer and a compute instruction, or the two
// compute engines, would use the same port of the same bank while both run; the vector unit spaces
// its own two reads itself), so the fixed priorities below (DMA first, then p0, p1, p2; wd, then
// wc, w2) only ever choose among requests nobody needs.
module sram #(
    parameter integer WORDS = 4096,
    parameter integer AW    = 12,
    parameter integer EW    = 1      // words of the DMA ports' lines: the external interface's width (1, 2)
) (
    input  wire          clk,
    input  wire [3:0]    p0_mask,
    input  wire [AW-1:0] p0_addr,
    output reg  [127:0]  p0_data,
    input  wire          p1_en,
    input  wire [AW-1:0] p1_addr,
    output reg  [31:0]   p1_data,
    input  wire          p2_en,
    input  wire [AW-1:0] p2_addr,
    output reg  [31:0]   p2_data,
    input  wire [EW-1:0]    dr_en,
    input  wire [AW-1:0]    dr_addr,
    output reg  [32*EW-1:0] dr_data,
    input  wire          wc_en,
    input  wire [AW-1:0] wc_addr,
    input  wire [31:0]   wc_data,
    input  wire          w2_en,
    input  wire [AW-1:0] w2_addr,
    input  wire [31:0]   w2_data,
    input  wire [EW-1:0]    wd_en,
    input  wire [AW-1:0]    wd_addr,
    input  wire [32*EW-1:0] wd_data
);
    localparam integer BANKS = 16;
    localparam integer BW    = WORDS / BANKS;  // words per bank
    localparam integer RW    = AW - 4;         // row address bits

    // bank and row of each request's address
    wire [3:0]    p1_bank = {p1_addr[AW-1:AW-2], p1_addr[1:0]};
    wire [3:0]    wc_bank = {wc_addr[AW-1:AW-2], wc_addr[1:0]};
    wire [3:0]    p2_bank = {p2_addr[AW-1:AW-2], p2_addr[1:0]};
    wire [3:0]    w2_bank = {w2_addr[AW-1:AW-2], w2_addr[1:0]};
    wire [RW-1:0] p1_row  = p1_addr[AW-3:2];
    wire [RW-1:0] p2_row  = p2_addr[AW-3:2];
    wire [RW-1:0] wc_row  = wc_addr[AW-3:2];
    wire [RW-1:0] w2_row  = w2_addr[AW-3:2];

    // The ports seen from the banks. Each port's request is decoded once into the set of banks it
    // uses this cycle (bit b: bank b) and, for each of the four lanes, the row (and data) it brings
    // to that lane's banks: a line of up to four consecutive words puts at most one word in each
    // lane. A bank then only picks among those (a simulator evaluates five decodes and sixteen small
    // selects per cycle instead of every port against every bank).
    reg  [15:0]   p0_use;                 // the banks each line port uses
    wire [15:0]   dr_use, wd_use;
    reg  [3:0]    p0_bank [0:3];          // the bank of word j of each line
    reg  [1:0]    p0_lgrp [0:3];          // lane l: the group and row of the line's word in lane l
    reg  [RW-1:0] p0_lrow [0:3];
    wire [15:0]   p1_use  = p1_en ? (16'd1 << p1_bank) : 16'd0;
    wire [15:0]   p2_use  = p2_en ? (16'd1 << p2_bank) : 16'd0;
    wire [15:0]   wc_use  = wc_en ? (16'd1 << wc_bank) : 16'd0;
    wire [15:0]   w2_use  = w2_en ? (16'd1 << w2_bank) : 16'd0;
    genvar j;
    generate
        for (j = 0; j < 4; j = j + 1) begin : g_line
            // lane j holds word (j - p0_addr mod 4) of the line, one row group on when it wraps
            wire [1:0]    k  = j[1:0] - p0_addr[1:0];
            wire          wrap = ({1'b0, p0_addr[1:0]} + {1'b0, k}) > 3'd3;  // the line passed a row end
            wire [AW-3:0] hi = p0_addr[AW-1:2] + {{(AW-3){1'b0}}, wrap};
            always @* p0_lgrp[j] = hi[AW-3:AW-4];
            always @* p0_lrow[j] = hi[AW-5:0];
            wire          req = p0_mask[k];
            wire [1:0]    lane = p0_addr[1:0] + j[1:0];  // the lane of word j
            always @* p0_bank[j] = {p0_lgrp[lane], lane};
            wire [15:0]   use_j = req ? (16'd1 << {hi[AW-3:AW-4], j[1:0]}) : 16'd0;
        end
    endgenerate
    always @* p0_use = g_line[0].use_j | g_line[1].use_j | g_line[2].use_j | g_line[3].use_j;
    // the DMA lines (EW = 1 or 2 words: word d of a line lands in lane (address + d) mod 4), as
    // continuous assignments: a simulator re-evaluates only what an address or data change reaches
    /* verilator lint_off UNUSEDSIGNAL */
    wire [AW-1:0] dr_word1 = dr_addr + {{(AW-1){1'b0}}, 1'b1};  // a line's second word (its bank only with EW = 2)
    wire [AW-1:0] wd_word1 = wd_addr + {{(AW-1){1'b0}}, 1'b1};
    /* verilator lint_on UNUSEDSIGNAL */
    wire [3:0]    dr_bank [0:EW-1];
    assign dr_bank[0] = {dr_addr[AW-1:AW-2], dr_addr[1:0]};
    wire [3:0]    wd_bank0 = {wd_addr[AW-1:AW-2], wd_addr[1:0]};
    wire [RW-1:0] dr_lrow [0:3];
    wire [RW-1:0] wd_lrow [0:3];
    wire [31:0]   wd_ldata [0:3];
    generate
        if (EW > 1) begin : g_dma2
            assign dr_bank[1] = {dr_word1[AW-1:AW-2], dr_word1[1:0]};
            assign dr_use = (dr_en[0] ? (16'd1 << dr_bank[0]) : 16'd0) | (dr_en[1] ? (16'd1 << dr_bank[1]) : 16'd0);
            assign wd_use = (wd_en[0] ? (16'd1 << wd_bank0) : 16'd0)
                               | (wd_en[1] ? (16'd1 << {wd_word1[AW-1:AW-2], wd_word1[1:0]}) : 16'd0);
        end else begin : g_dma1
            assign dr_use = dr_en[0] ? (16'd1 << dr_bank[0]) : 16'd0;
            assign wd_use = wd_en[0] ? (16'd1 << wd_bank0) : 16'd0;
        end
        for (j = 0; j < 4; j = j + 1) begin : g_dlane
            // lane j takes the line's second word when it follows the first one's lane (EW = 2)
            wire second_r = (EW > 1) && (j[1:0] == dr_addr[1:0] + 2'd1);
            wire second_w = (EW > 1) && (j[1:0] == wd_addr[1:0] + 2'd1);
            assign dr_lrow[j] = second_r ? dr_word1[AW-3:2] : dr_addr[AW-3:2];
            assign wd_lrow[j] = second_w ? wd_word1[AW-3:2] : wd_addr[AW-3:2];
            assign wd_ldata[j] = second_w ? wd_data[32*EW-1 -: 32] : wd_data[31:0];
        end
    endgenerate
    wire [15:0] rd_use = dr_use | p0_use | p1_use | p2_use;
    wire [15:0] wr_use = wd_use | wc_use | w2_use;

    reg  [BANKS*32-1:0] bank_rdata;  // bank b's read data in bits 32b+31:32b (see g_bank)
    genvar b;
    generate
        for (b = 0; b < BANKS; b = b + 1) begin : g_bank
            localparam [3:0] B = b;
            localparam [1:0] LANE = B[1:0];
            wire [31:0] q;
            ram_1r1w #(.WIDTH(32), .DEPTH(BW), .AW(RW)) u_ram (
                .clk(clk),
                .we(wr_use[b]), .waddr(wd_use[b] ? wd_lrow[LANE] : wc_use[b] ? wc_row : w2_row),
                .wdata(wd_use[b] ? wd_ldata[LANE] : wc_use[b] ? wc_data : w2_data),
                .re(rd_use[b]),
                .raddr(dr_use[b] ? dr_lrow[LANE] : p0_use[b] ? p0_lrow[LANE] : p1_use[b] ? p1_row : p2_row),
                .rdata(q)
            );
            // a procedural copy into the bus: Icarus rebuilds a bus driven by port parts bit by bit
            always @* bank_rdata[b*32 +: 32] = q;
        end
    endgenerate

    // which bank answers each read, one cycle later when the banks' data is out (the registers
    // move only for a read: idle ports cost nothing)
    reg [3:0] p0_sel [0:3];
    reg [3:0] dr_sel [0:EW-1];
    reg [3:0] p1_sel, p2_sel;
    reg       p0_v, p1_v, p2_v, dr_v;
    integer k;
    always @(posedge clk) begin
        p0_v <= |p0_mask;
        p1_v <= p1_en;
        p2_v <= p2_en;
        dr_v <= |dr_en;
        if (|p0_mask) for (k = 0; k < 4; k = k + 1) p0_sel[k] <= p0_bank[k];
        if (p0_v) for (k = 0; k < 4; k = k + 1) p0_data[k*32 +: 32] <= bank_rdata[p0_sel[k]*32 +: 32];
        if (|dr_en) for (k = 0; k < EW; k = k + 1) dr_sel[k] <= dr_bank[k];
        if (dr_v) for (k = 0; k < EW; k = k + 1) dr_data[k*32 +: 32] <= bank_rdata[dr_sel[k]*32 +: 32];
        if (p1_en) p1_sel <= p1_bank;
        if (p1_v) p1_data <= bank_rdata[p1_sel*32 +: 32];
        if (p2_en) p2_sel <= p2_bank;
        if (p2_v) p2_data <= bank_rdata[p2_sel*32 +: 32];
    end
endmodule
`default_nettype wire
