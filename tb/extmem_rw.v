`timescale 1ns/1ps
`default_nettype none
// extmem_rw: the external memory of the testbenches, an AXI4 slave of EXTW 32-bit words with a data
// bus of WORDS words (1 or 2). It serves what GA2's DMA sends (rtl/dma.v): single-beat bursts with
// ID 0. Byte addresses; the bus lanes follow the address as AXI defines them (word j of the bus is
// word 2*floor(addr/8) + j of a two-word bus), and a write changes the bytes its strobes name.
//
// A read taken in cycle t (arvalid and arready high) is due in cycle t + 1 + latency, with the
// words as they were when it was taken; a write is done in the cycle both its address and its data
// have been taken (they may come in different cycles: each is held until the other comes), and
// its answer (B, OKAY) is due in that cycle + 1 + latency. Answers come in order, at most one read
// and one write answer per cycle, each in the first cycle at or after it is due (and after the one
// before) in which its channel does not stall.
//
// Stalls: in cycle c (counted from reset, as the chip's counter c0 counts), channel ch (AR, R,
// AW, W, B = 0..4) stalls when hash(stall_seed, ch, c) % 100 < stall_pct, the hash of
// capra.dma.stall_hash: a stalled AR, AW or W has its ready low, a stalled R or B holds back the
// answer that is due. The same schedule in the machine model keeps every cycle counter exact.
// stall_pct 0 (the default) is a memory that is always ready. The latency (0 .. 30), the rate and
// the seed are inputs, held steady while the memory is in use, so one simulator build serves every
// memory (the replay testbench takes them from +LATENCY, +STALL and +SEED). An answer, once
// offered, stays until the chip takes it (AXI), though the chip's rready and bready are always high.
//
// wr_en, wr_addr, wr_mask tell a testbench which words each write changes (the aligned first word,
// and a bit per word of the bus). The testbench fills and checks `mem` directly between programs.
module extmem_rw #(
    parameter integer EXTW         = 8192,
    parameter integer WORDS        = 1
) (
    input  wire        clk,
    input  wire        rst,
    input  wire [4:0]  latency,
    input  wire [6:0]  stall_pct,
    input  wire [31:0] stall_seed,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire        s_axi_arid,      // the chip sends ID 0 and single-beat bursts: these are not
    input  wire [7:0]  s_axi_arlen,     // needed to answer it
    input  wire [2:0]  s_axi_arsize,
    input  wire [1:0]  s_axi_arburst,
    input  wire        s_axi_arlock,
    input  wire [3:0]  s_axi_arcache,
    input  wire [2:0]  s_axi_arprot,
    input  wire        s_axi_awid,
    input  wire [7:0]  s_axi_awlen,
    input  wire [2:0]  s_axi_awsize,
    input  wire [1:0]  s_axi_awburst,
    input  wire        s_axi_awlock,
    input  wire [3:0]  s_axi_awcache,
    input  wire [2:0]  s_axi_awprot,
    input  wire        s_axi_wlast,
    input  wire [31:0] s_axi_araddr,
    input  wire [31:0] s_axi_awaddr,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire        s_axi_arvalid,
    output wire        s_axi_arready,
    input  wire        s_axi_rready,
    input  wire        s_axi_bready,
    output wire        s_axi_rid,
    output wire [32*WORDS-1:0] s_axi_rdata,
    output wire [1:0]  s_axi_rresp,
    output wire        s_axi_rlast,
    output wire        s_axi_rvalid,
    input  wire        s_axi_awvalid,
    output wire        s_axi_awready,
    input  wire [32*WORDS-1:0] s_axi_wdata,
    input  wire [4*WORDS-1:0]  s_axi_wstrb,
    input  wire        s_axi_wvalid,
    output wire        s_axi_wready,
    output wire        s_axi_bid,
    output wire [1:0]  s_axi_bresp,
    output wire        s_axi_bvalid,
    output wire        wr_en,
    output wire [31:0] wr_addr,
    output wire [WORDS-1:0] wr_mask
);
    localparam integer AW    = (EXTW > 1) ? $clog2(EXTW) : 1;
    localparam integer DW    = 32 * WORDS;

    reg [31:0] mem [0:EXTW-1];

    // the stall schedule
    localparam [2:0] CH_AR = 3'd0, CH_R = 3'd1, CH_AW = 3'd2, CH_W = 3'd3, CH_B = 3'd4;
    reg [31:0] cyc;  // the cycle, from reset
    always @(posedge clk) begin
        if (rst) cyc <= 32'd0;
        else cyc <= cyc + 32'd1;
    end
    function [31:0] stall_hash(input [31:0] seed, input [2:0] ch, input [31:0] c);
        reg [31:0] x;
        begin
            x = c * 32'h9E37_79B1 + seed * 32'h85EB_CA6B + {29'd0, ch} * 32'hC2B2_AE35;
            x = x ^ (x >> 16);
            x = x * 32'h7FEB_352D;
            x = x ^ (x >> 15);
            x = x * 32'h846C_A68B;
            stall_hash = x ^ (x >> 16);
        end
    endfunction
    // (every signal a function reads is an argument: a continuous assignment follows its arguments only)
    function stalls(input [6:0] pct, input [31:0] seed, input [2:0] ch, input [31:0] c);
        stalls = (pct != 7'd0) && ((stall_hash(seed, ch, c) % 32'd100) < {25'd0, pct});
    endfunction
    // The stalls of a cycle are worked out at the clock edge that starts it, for the count cyc
    // takes there, and only by a memory that stalls: one that never does keeps them low without
    // five hashes a cycle (a fifth of an Icarus replay; Verilator computes every expression of a
    // wire each cycle, but skips the branch of an `if` not taken). The rate and seed are steady.
    wire [31:0] cyc_next = rst ? 32'd0 : cyc + 32'd1;
    reg ar_stall = 1'b0, r_stall = 1'b0, aw_stall = 1'b0, w_stall = 1'b0, b_stall = 1'b0;
    always @(posedge clk) begin
        if (stall_pct != 7'd0) begin
            ar_stall <= stalls(stall_pct, stall_seed, CH_AR, cyc_next);
            r_stall <= stalls(stall_pct, stall_seed, CH_R, cyc_next);
            aw_stall <= stalls(stall_pct, stall_seed, CH_AW, cyc_next);
            w_stall <= stalls(stall_pct, stall_seed, CH_W, cyc_next);
            b_stall <= stalls(stall_pct, stall_seed, CH_B, cyc_next);
        end
    end
    wire ar_rdy = !ar_stall;
    wire aw_rdy = !aw_stall;
    wire w_rdy  = !w_stall;

    // the first word of a request's bus (the aligned word, programs stay below EXTW: the machine
    // model checks, and the chip refuses words at or past its ext_limit)
    wire [31:0] ar_word = {2'b00, s_axi_araddr[31:2]} & ~(WORDS - 1);

    // writes: an address or data taken before the other waits here
    reg          aw_held, w_held;
    reg [31:0]   aw_word_h;
    reg [DW-1:0] w_data_h;
    reg [4*WORDS-1:0] w_strb_h;
    assign s_axi_arready = ar_rdy;
    assign s_axi_awready = aw_rdy && !aw_held;
    assign s_axi_wready  = w_rdy && !w_held;
    wire take_read = s_axi_arvalid && s_axi_arready;
    wire aw_fire   = s_axi_awvalid && s_axi_awready;
    wire w_fire    = s_axi_wvalid && s_axi_wready;
    wire [31:0] aw_word = aw_held ? aw_word_h : {2'b00, s_axi_awaddr[31:2]} & ~(WORDS - 1);
    wire [DW-1:0] w_data = w_held ? w_data_h : s_axi_wdata;
    wire [4*WORDS-1:0] w_strb = w_held ? w_strb_h : s_axi_wstrb;
    wire [DW-1:0] rword;
    wire [AW-1:0] w_idx [0:WORDS-1];  // the memory word of each word of the write bus
    genvar gj;
    generate
        for (gj = 0; gj < WORDS; gj = gj + 1) begin : g_word
            /* verilator lint_off UNUSEDSIGNAL */
            wire [31:0] ra = ar_word + gj;
            wire [31:0] wa = aw_word + gj;
            /* verilator lint_on UNUSEDSIGNAL */
            assign rword[32*gj +: 32] = mem[ra[AW-1:0]];
            assign w_idx[gj] = wa[AW-1:0];
        end
    endgenerate
    wire do_write  = (aw_held || aw_fire) && (w_held || w_fire);
    assign wr_en   = do_write;
    assign wr_addr = aw_word;
    generate
        for (gj = 0; gj < WORDS; gj = gj + 1) begin : g_mask
            assign wr_mask[gj] = |w_strb[4*gj +: 4];
        end
    endgenerate
    integer j, b;
    always @(posedge clk) begin
        if (rst) begin
            aw_held <= 1'b0;
            w_held <= 1'b0;
        end else begin
            if (do_write) begin
                aw_held <= 1'b0;
                w_held <= 1'b0;
            end else begin
                if (aw_fire) begin
                    aw_held <= 1'b1;
                    aw_word_h <= aw_word;
                end
                if (w_fire) begin
                    w_held <= 1'b1;
                    w_data_h <= s_axi_wdata;
                    w_strb_h <= s_axi_wstrb;
                end
            end
        end
        if (do_write) begin
            for (j = 0; j < WORDS; j = j + 1) begin
                for (b = 0; b < 4; b = b + 1) begin
                    if (w_strb[4*j + b]) mem[w_idx[j]][8*b +: 8] <= w_data[32*j + 8*b +: 8];
                end
            end
        end
    end

    // answers: a queue each, in order, with the cycle each is due
    localparam integer QD = 64;  // more than the chip ever leaves unanswered (32 of each)
    reg [31:0]   r_due [0:QD-1];
    reg [DW-1:0] r_data [0:QD-1];
    reg [31:0]   b_due [0:QD-1];
    reg [5:0]    r_rp, r_wp, b_rp, b_wp;
    reg [6:0]    r_n, b_n;
    reg          r_shown, b_shown;  // an answer offered and not yet taken stays offered
    wire [31:0]  due = cyc + 32'd1 + {27'd0, latency};
    assign s_axi_rvalid = (r_n != 7'd0) && (r_due[r_rp] <= cyc) && (r_shown || !r_stall);
    assign s_axi_bvalid = (b_n != 7'd0) && (b_due[b_rp] <= cyc) && (b_shown || !b_stall);
    wire r_pop = s_axi_rvalid && s_axi_rready;
    wire b_pop = s_axi_bvalid && s_axi_bready;
    always @(posedge clk) begin
        if (rst) begin
            r_rp <= 6'd0;
            r_wp <= 6'd0;
            b_rp <= 6'd0;
            b_wp <= 6'd0;
            r_n <= 7'd0;
            b_n <= 7'd0;
            r_shown <= 1'b0;
            b_shown <= 1'b0;
        end else begin
            if (take_read) begin
                r_due[r_wp] <= due;
                r_data[r_wp] <= rword;
                r_wp <= r_wp + 6'd1;
            end
            if (r_pop) r_rp <= r_rp + 6'd1;
            r_n <= r_n + {6'd0, take_read} - {6'd0, r_pop};
            r_shown <= s_axi_rvalid && !s_axi_rready;
            if (do_write) begin
                b_due[b_wp] <= due;
                b_wp <= b_wp + 6'd1;
            end
            if (b_pop) b_rp <= b_rp + 6'd1;
            b_n <= b_n + {6'd0, do_write} - {6'd0, b_pop};
            b_shown <= s_axi_bvalid && !s_axi_bready;
        end
    end
    assign s_axi_rdata  = r_data[r_rp];
    assign s_axi_rid    = 1'b0;
    assign s_axi_rresp  = 2'b00;
    assign s_axi_rlast  = 1'b1;
    assign s_axi_bid    = 1'b0;
    assign s_axi_bresp  = 2'b00;
endmodule
`default_nettype wire
