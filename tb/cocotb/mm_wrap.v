`timescale 1ns/1ps
`default_nettype none
// mm_wrap: ga2_mm beside the scratchpad, wired as in ga2.v (the unit owns the ra read port and the
// compute write port), plus a host port on the DMA side (rd read port, wd write port) through which
// the cocotb test fills and checks the scratchpad.
module mm_wrap (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [3:0]  flags,
    input  wire [15:0] r_total,
    input  wire [15:0] k_len,
    input  wire [15:0] m_total,
    input  wire [15:0] a_base,
    input  wire [15:0] b_base,
    input  wire [15:0] out_base,
    input  wire [15:0] qa,
    input  wire [5:0]  qs,
    input  wire [11:0] qbias,
    output wire        unit_we,
    output wire        done,
    input  wire        host_we,
    input  wire [11:0] host_addr,
    input  wire [31:0] host_wdata,
    output wire [31:0] host_rdata
);
    wire [11:0] ra_addr, waddr;
    wire [31:0] ra_data, wdata, unused_rb;

    ga2_mm u_mm (
        .clk(clk), .rst(rst), .start(start), .flags(flags), .r_total(r_total), .k_len(k_len),
        .m_total(m_total), .a_base(a_base), .b_base(b_base), .out_base(out_base), .qa(qa), .qs(qs),
        .qbias(qbias), .rd_addr(ra_addr), .rd_data(ra_data), .we(unit_we), .waddr(waddr), .wdata(wdata),
        .done(done)
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
