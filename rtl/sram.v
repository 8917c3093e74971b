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
//   dr  the DMA engine's STORE reads: a line of EW words (word j of dr_addr + j when dr_en[j])
//   wc  one write (the compute units)
//   wd  the DMA engine's LOAD writes: a line of EW words (word j to wd_addr + j when wd_en[j])
// Each bank serves one read and one write per cycle. Programs keep the users of a bank apart (the
// machine model rejects a program where a DMA transfer and a compute instruction would use the
// same port of the same bank while both run; the vector unit spaces its own two reads itself), so
// the fixed priorities below (DMA first, then p0, then p1) only ever choose among reads nobody needs.
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
    input  wire [EW-1:0]    dr_en,
    input  wire [AW-1:0]    dr_addr,
    output reg  [32*EW-1:0] dr_data,
    input  wire          wc_en,
    input  wire [AW-1:0] wc_addr,
    input  wire [31:0]   wc_data,
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
    wire [RW-1:0] p1_row  = p1_addr[AW-3:2];
    wire [RW-1:0] wc_row  = wc_addr[AW-3:2];

    // the words of the lines: four for p0, EW for dr and wd (word j at address + j)
    wire [3:0]    p0_bank [0:3];
    wire [RW-1:0] p0_row  [0:3];
    wire [3:0]    dr_bank [0:EW-1];
    wire [RW-1:0] dr_row  [0:EW-1];
    wire [3:0]    wd_bank [0:EW-1];
    wire [RW-1:0] wd_row  [0:EW-1];
    genvar j;
    generate
        for (j = 0; j < 4; j = j + 1) begin : g_line
            wire [AW-1:0] word = p0_addr + j[AW-1:0];
            assign p0_bank[j] = {word[AW-1:AW-2], word[1:0]};
            assign p0_row[j]  = word[AW-3:2];
        end
        for (j = 0; j < EW; j = j + 1) begin : g_dma
            wire [AW-1:0] rword = dr_addr + j[AW-1:0];
            wire [AW-1:0] wword = wd_addr + j[AW-1:0];
            assign dr_bank[j] = {rword[AW-1:AW-2], rword[1:0]};
            assign dr_row[j]  = rword[AW-3:2];
            assign wd_bank[j] = {wword[AW-1:AW-2], wword[1:0]};
            assign wd_row[j]  = wword[AW-3:2];
        end
    endgenerate

    reg  [BANKS*32-1:0] bank_rdata;  // bank b's read data in bits 32b+31:32b (see g_bank)
    genvar b;
    generate
        for (b = 0; b < BANKS; b = b + 1) begin : g_bank
            localparam [3:0] B = b;
            // the word of each line that lands in this bank's lane, if any
            wire [1:0]    j0     = B[1:0] - p0_addr[1:0];
            wire          p0_hit = p0_mask[j0] && (p0_bank[j0] == B);
            wire          p1_hit = p1_en && (p1_bank == B);
            wire          wc_hit = wc_en && (wc_bank == B);
            reg           dr_hit, wd_hit;
            reg  [RW-1:0] dr_r, wd_r;
            reg  [31:0]   wd_d;
            integer       d;
            always @* begin
                dr_hit = 1'b0;
                wd_hit = 1'b0;
                dr_r = {RW{1'b0}};
                wd_r = {RW{1'b0}};
                wd_d = 32'd0;
                for (d = 0; d < EW; d = d + 1) begin
                    if (dr_en[d] && dr_bank[d] == B) begin
                        dr_hit = 1'b1;
                        dr_r = dr_row[d];
                    end
                    if (wd_en[d] && wd_bank[d] == B) begin
                        wd_hit = 1'b1;
                        wd_r = wd_row[d];
                        wd_d = wd_data[d*32 +: 32];
                    end
                end
            end
            wire [31:0] q;
            ram_1r1w #(.WIDTH(32), .DEPTH(BW), .AW(RW)) u_ram (
                .clk(clk),
                .we(wd_hit || wc_hit), .waddr(wd_hit ? wd_r : wc_row), .wdata(wd_hit ? wd_d : wc_data),
                .re(dr_hit || p0_hit || p1_hit), .raddr(dr_hit ? dr_r : p0_hit ? p0_row[j0] : p1_row),
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
    reg [3:0] p1_sel;
    reg       p0_v, p1_v, dr_v;
    integer k;
    always @(posedge clk) begin
        p0_v <= |p0_mask;
        p1_v <= p1_en;
        dr_v <= |dr_en;
        for (k = 0; k < 4; k = k + 1) begin
            if (|p0_mask) p0_sel[k] <= p0_bank[k];
            if (p0_v) p0_data[k*32 +: 32] <= bank_rdata[p0_sel[k]*32 +: 32];
        end
        for (k = 0; k < EW; k = k + 1) begin
            if (|dr_en) dr_sel[k] <= dr_bank[k];
            if (dr_v) dr_data[k*32 +: 32] <= bank_rdata[dr_sel[k]*32 +: 32];
        end
        if (p1_en) p1_sel <= p1_bank;
        if (p1_v) p1_data <= bank_rdata[p1_sel*32 +: 32];
    end
endmodule
`default_nettype wire
