`timescale 1ns/1ps
`default_nettype none
// sm_wrap: ga2_sm beside the scratchpad, wired as in ga2.v (the unit reads on the p0 port and owns
// the compute write port), plus a host port on the DMA side (dr read port, wd write port) through
// which the cocotb test fills and checks the scratchpad.
module sm_wrap (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        sink_en,
    input  wire [7:0]  sink,
    input  wire [15:0] smul,
    input  wire [15:0] n,
    input  wire [11:0] src,
    input  wire [1:0]  mode,
    input  wire [11:0] st,
    input  wire [11:0] dst,
    output wire        unit_we,
    output wire        done,
    input  wire        host_we,
    input  wire [11:0] host_waddr,
    input  wire [31:0] host_wdata,
    input  wire        host_re,
    input  wire [11:0] host_raddr,
    output wire [31:0] host_rdata
);
    wire         re;
    wire [11:0]  rd_addr, waddr;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [127:0] line;  // the unit reads word 0 of the p0 line only
    /* verilator lint_on UNUSEDSIGNAL */
    wire [31:0]  wdata, unused_p1;

    ga2_sm u_sm (
        .clk(clk), .rst(rst), .start(start), .sink_en(sink_en), .mode(mode), .st(st), .sink(sink),
        .smul(smul), .n(n), .src(src),
        .dst(dst), .re(re), .rd_addr(rd_addr), .rd_data(line[31:0]), .we(unit_we), .waddr(waddr),
        .wdata(wdata), .done(done)
    );

    sram #(.WORDS(4096), .AW(12)) u_sram (
        .clk(clk),
        .p0_mask({3'd0, re}), .p0_addr(rd_addr), .p0_data(line),
        .p1_en(1'b0), .p1_addr(12'd0), .p1_data(unused_p1),
        .dr_en(host_re), .dr_addr(host_raddr), .dr_data(host_rdata),
        .wc_en(unit_we), .wc_addr(waddr), .wc_data(wdata),
        .wd_en(host_we), .wd_addr(host_waddr), .wd_data(host_wdata)
    );
endmodule
`default_nettype wire
