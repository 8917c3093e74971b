`timescale 1ns/1ps
`default_nettype none
// sm_wrap: ga2_sm beside the scratchpad, wired as in ga2.v (the unit owns the ra read port and the
// compute write port), plus a host port on the DMA side (rd read port, wd write port) through which
// the cocotb test fills and checks the scratchpad.
module sm_wrap (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        sink_en,
    input  wire [7:0]  sink,
    input  wire [15:0] smul,
    input  wire [15:0] n,
    input  wire [11:0] src,
    input  wire [11:0] dst,
    output wire        unit_we,
    output wire        done,
    input  wire        host_we,
    input  wire [11:0] host_addr,
    input  wire [31:0] host_wdata,
    output wire [31:0] host_rdata
);
    wire [11:0] ra_addr, waddr;
    wire [31:0] ra_data, wdata, unused_rb;

    ga2_sm u_sm (
        .clk(clk), .rst(rst), .start(start), .sink_en(sink_en), .sink(sink), .smul(smul), .n(n), .src(src), .dst(dst),
        .rd_addr(ra_addr), .rd_data(ra_data), .we(unit_we), .waddr(waddr), .wdata(wdata), .done(done)
    );

    sram #(.WORDS(4096), .AW(12)) u_sram (
        .clk(clk),
        .ra_addr(ra_addr), .ra_data(ra_data), .rb_addr(12'd0), .rb_data(unused_rb),
        .rd_addr(host_addr), .rd_data(host_rdata),
        .wc_en(unit_we), .wc_addr(waddr), .wc_data(wdata),
        .wd_en(host_we), .wd_addr(host_addr), .wd_data(host_wdata)
    );
endmodule
`default_nettype wire
