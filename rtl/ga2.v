`timescale 1ns/1ps
`default_nettype none
// ga2: the top. Instruction fetch and decode, dispatch to the units, the DMA engine, the five
// cycle counters, halt.
// The sequencer fetches one 4-word instruction per cycle from imem (loaded by the testbench).
//   LOAD/STORE  hand the transfer to the DMA queue and go on (stall first while the queue is full)
//   WAIT, HALT  stall until the DMA queue is empty (WAIT keep=1: until one transfer is left)
//   QCFG        set the quantization registers qa, qb, qs and the bias address
//   MM/VEC/SMAX start the unit and wait for its done cycle
// Counters: c0 total cycles, c1 DMA busy, c2 MM busy, c3 VEC+SMAX busy, c4 cycles stalled on the DMA.
// An unknown opcode halts with `illegal` set.
module ga2 #(
    parameter integer IMEM_WORDS = 4096  // 1024 instructions of 4 words; addresses are 12 bits
) (
    input  wire        clk,
    input  wire        rst,
    // instruction memory load port (used while rst is high)
    input  wire        imem_we,
    input  wire [11:0] imem_addr,
    input  wire [31:0] imem_wdata,
    output reg         halted,
    output reg         illegal,
    output reg  [31:0] c0,
    output reg  [31:0] c1,
    output reg  [31:0] c2,
    output reg  [31:0] c3,
    output reg  [31:0] c4,
    output wire [15:0] ext_addr,
    input  wire [31:0] ext_rdata,
    output wire        ext_we,
    output wire [31:0] ext_wdata
);
    `include "ga2_defs.vh"

    reg [31:0] imem [0:IMEM_WORDS-1];
    always @(posedge clk) begin
        if (imem_we) imem[imem_addr] <= imem_wdata;
    end

    reg        executing;
    reg [3:0]  cur_op;
    reg [15:0] pc;
    reg [15:0] qa, qb;
    reg [11:0] qbias;
    reg [5:0]  qs;

    // ---- fetch and decode ----
    wire [11:0] base = {pc[9:0], 2'b00};
    wire [31:0] w0 = imem[base];
    wire [31:0] w1 = imem[base + 12'd1];
    wire [31:0] w2 = imem[base + 12'd2];
    wire [31:0] w3 = imem[base + 12'd3];  // bits 31:24 are reserved by every instruction
    wire [3:0]  op    = w0[31:28];
    wire [3:0]  flags = w0[27:24];
    wire [3:0]  sub   = w0[23:20];
    wire [15:0] cnt   = w0[15:0];
    wire [3:0]  reserved = w0[19:16];  // must be zero: an instruction using them is illegal
    wire [15:0] fa = w1[15:0];
    wire [15:0] fb = w1[31:16];
    wire [15:0] fc = w2[15:0];
    wire [15:0] fd = w2[31:16];

    wire running  = !halted;
    wire fetching = running && !executing;
    wire dma_busy, dma_full;
    wire is_dma   = (op == OP_LOAD) || (op == OP_STORE);
    // A transfer waits only for room in the DMA queue. HALT, and WAIT with cnt = 0, wait for the
    // queue to empty; WAIT with cnt = 1 only until the older of two queued transfers is done.
    wire drains   = (op == OP_HALT) || (op == OP_WAIT && cnt == 16'd0);
    wire keeps1   = (op == OP_WAIT) && (cnt == 16'd1);
    wire stall    = fetching && ((is_dma && dma_full) || (drains && (dma_busy || dma_full)) || (keeps1 && dma_full));
    wire go       = fetching && !stall;

    // an illegal instruction (unknown opcode, a reserved bit set, WAIT keeping more than one
    // transfer) halts the chip and starts nothing
    wire known_op  = (op <= OP_SMAX) && (reserved == 4'd0) && (w3[31:24] == 8'd0)
                     && !(op == OP_WAIT && cnt > 16'd1);
    wire start_mm  = go && known_op && (op == OP_MM);
    wire start_vec = go && known_op && (op == OP_VEC);
    wire start_sm  = go && known_op && (op == OP_SMAX);
    wire start_dma = go && known_op && ((op == OP_LOAD) || (op == OP_STORE));

    // ---- units ----
    wire [11:0] mm_ra, vec_ra_addr, vec_rb_addr, sm_ra, mm_wa, vec_wa, sm_wa, dma_sra, dma_swa;
    wire [31:0] ra_data, rb_data, dma_srd, mm_wd, vec_wd, sm_wd, dma_swd;
    wire        mm_we, vec_we, sm_we, dma_swe, mm_done, vec_done, sm_done;

    dma u_dma (
        .clk(clk), .rst(rst), .start(start_dma), .is_store(op == OP_STORE),
        .rows(cnt), .cols(fc), .sram_base(fa[11:0]), .ext_base(fb), .ext_stride(fd), .sram_stride(w3[11:0]),
        .busy(dma_busy), .full(dma_full), .ext_addr(ext_addr), .ext_rdata(ext_rdata), .ext_we(ext_we), .ext_wdata(ext_wdata),
        .sram_raddr(dma_sra), .sram_rdata(dma_srd), .sram_we(dma_swe), .sram_waddr(dma_swa),
        .sram_wdata(dma_swd)
    );

    // Each unit sees read data only while it runs: an idle unit's datapath then stays still,
    // which costs nothing in hardware and keeps event-driven simulation fast.
    wire [31:0] mm_rd  = (cur_op == OP_MM) ? ra_data : 32'd0;
    wire [31:0] vec_ra = (cur_op == OP_VEC) ? ra_data : 32'd0;
    wire [31:0] vec_rb = (cur_op == OP_VEC) ? rb_data : 32'd0;
    wire [31:0] sm_rd  = (cur_op == OP_SMAX) ? ra_data : 32'd0;

    ga2_mm u_mm (
        .clk(clk), .rst(rst), .start(start_mm), .flags(flags), .r_total(cnt), .k_len(fd), .m_total(w3[15:0]),
        .a_base(fa), .b_base(fb), .out_base(fc), .qa(qa), .qs(qs), .qbias(qbias),
        .rd_addr(mm_ra), .rd_data(mm_rd), .we(mm_we), .waddr(mm_wa), .wdata(mm_wd), .done(mm_done)
    );

    ga2_vec u_vec (
        .clk(clk), .rst(rst), .start(start_vec), .sub(sub), .n(cnt), .src_a(fa[11:0]), .src_b(fb[11:0]), .dst(fc[11:0]),
        .qa(qa), .qb(qb), .qs(qs), .ra_addr(vec_ra_addr), .ra_data(vec_ra), .rb_addr(vec_rb_addr), .rb_data(vec_rb),
        .we(vec_we), .waddr(vec_wa), .wdata(vec_wd), .done(vec_done)
    );

    ga2_sm u_sm (
        .clk(clk), .rst(rst), .start(start_sm), .sink_en(flags[0]), .sink(w3[7:0]), .smul(w3[23:8]), .n(cnt), .src(fa[11:0]),
        .dst(fc[11:0]), .rd_addr(sm_ra), .rd_data(sm_rd), .we(sm_we), .waddr(sm_wa), .wdata(sm_wd), .done(sm_done)
    );

    // ---- scratchpad: compute ports go to the unit that is running ----
    wire        is_mm  = (cur_op == OP_MM);
    wire        is_vec = (cur_op == OP_VEC);
    wire [11:0] ra_addr = is_mm ? mm_ra : is_vec ? vec_ra_addr : sm_ra;
    wire        wc_en   = is_mm ? mm_we : is_vec ? vec_we : sm_we;
    wire [11:0] wc_addr = is_mm ? mm_wa : is_vec ? vec_wa : sm_wa;
    wire [31:0] wc_data = is_mm ? mm_wd : is_vec ? vec_wd : sm_wd;

    sram #(.WORDS(GA2_SRAM_WORDS), .AW(GA2_SRAM_AW)) u_sram (
        .clk(clk),
        .ra_addr(ra_addr), .ra_data(ra_data), .rb_addr(vec_rb_addr), .rb_data(rb_data),
        .rd_addr(dma_sra), .rd_data(dma_srd),
        .wc_en(executing && wc_en), .wc_addr(wc_addr), .wc_data(wc_data),
        .wd_en(dma_swe), .wd_addr(dma_swa), .wd_data(dma_swd)
    );

    wire unit_done = is_mm ? mm_done : is_vec ? vec_done : sm_done;

    // ---- sequencer and counters ----
    always @(posedge clk) begin
        if (rst) begin
            halted <= 1'b0;
            illegal <= 1'b0;
            executing <= 1'b0;
            cur_op <= OP_HALT;
            pc <= 16'd0;
            qa <= 16'd0;
            qb <= 16'd0;
            qs <= 6'd0;
            qbias <= 12'd0;
            c0 <= 32'd0;
            c1 <= 32'd0;
            c2 <= 32'd0;
            c3 <= 32'd0;
            c4 <= 32'd0;
        end else if (running) begin
            c0 <= c0 + 32'd1;
            if (dma_busy) c1 <= c1 + 32'd1;
            if (executing && is_mm) c2 <= c2 + 32'd1;
            if (executing && !is_mm) c3 <= c3 + 32'd1;
            if (stall) c4 <= c4 + 32'd1;
            if (executing) begin
                if (unit_done) begin
                    executing <= 1'b0;
                    pc <= pc + 16'd1;
                end
            end else if (go) begin
                if (!known_op) begin
                    illegal <= 1'b1;
                    halted <= 1'b1;
                end else if (op == OP_HALT) begin
                    halted <= 1'b1;
                end else if (op == OP_MM || op == OP_VEC || op == OP_SMAX) begin
                    executing <= 1'b1;
                    cur_op <= op;
                end else begin
                    if (op == OP_QCFG) begin
                        qa <= fa;
                        qb <= fb;
                        qs <= fc[5:0];
                        qbias <= fd[11:0];
                    end
                    pc <= pc + 16'd1;
                end
            end
        end
    end
endmodule
`default_nettype wire
