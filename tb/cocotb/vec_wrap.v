`timescale 1ns/1ps
`default_nettype none
// vec_wrap: ga2_vec beside the scratchpad and the requant bank, wired as in ga2.v (the unit reads a
// on the p0 port and b on p1, and owns the compute write port), plus a host port on the DMA side
// (dr read port, wd write port) through which the cocotb test fills and checks the scratchpad.
module vec_wrap (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [3:0]  sub,
    input  wire [15:0] n,
    input  wire [15:0] rows,
    input  wire [11:0] src_a,
    input  wire [11:0] src_b,
    input  wire [11:0] dst,
    input  wire [15:0] qa,
    input  wire [15:0] qb,
    input  wire [5:0]  qs,
    output wire        unit_we,
    output wire        done,
    input  wire        host_we,
    input  wire [11:0] host_waddr,
    input  wire [31:0] host_wdata,
    input  wire        host_re,
    input  wire [11:0] host_raddr,
    output wire [31:0] host_rdata
);
    wire [127:0] rq_acc;
    wire [15:0]  rq_mult;
    wire [5:0]   rq_shift;
    wire         rq_busy;
    wire [31:0]  rq_y;
    wire         ra_en, rb_en;
    wire [11:0]  ra_addr, rb_addr, waddr;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [127:0] line;  // the unit reads word 0 of the p0 line only
    /* verilator lint_on UNUSEDSIGNAL */
    wire [31:0]  rb_data, wdata;

    ga2_vec u_vec (
        .clk(clk), .rst(rst), .start(start), .sub(sub), .n(n), .rows(rows), .src_a(src_a), .src_b(src_b), .dst(dst),
        .qa(qa), .qb(qb), .qs(qs), .ra_en(ra_en), .ra_addr(ra_addr), .ra_data(line[31:0]),
        .rb_en(rb_en), .rb_addr(rb_addr), .rb_data(rb_data),
        .we(unit_we), .waddr(waddr), .wdata(wdata), .done(done),
        .rq_acc(rq_acc), .rq_mult(rq_mult), .rq_shift(rq_shift), .rq_busy(rq_busy), .rq_y(rq_y)
    );

    // the requant bank, as in ga2.v
    requant_bank #(.LANES(4)) u_rq (.clk(clk), .en(rq_busy), .acc(rq_acc), .mult(rq_mult), .shift(rq_shift), .y(rq_y));

    sram #(.WORDS(4096), .AW(12)) u_sram (
        .clk(clk),
        .p0_mask({3'd0, ra_en}), .p0_addr(ra_addr), .p0_data(line),
        .p1_en(rb_en), .p1_addr(rb_addr), .p1_data(rb_data),
        .dr_en(host_re), .dr_addr(host_raddr), .dr_data(host_rdata),
        .wc_en(unit_we), .wc_addr(waddr), .wc_data(wdata),
        .wd_en(host_we), .wd_addr(host_waddr), .wd_data(host_wdata)
    );
endmodule
`default_nettype wire
