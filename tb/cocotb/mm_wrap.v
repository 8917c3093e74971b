`timescale 1ns/1ps
`default_nettype none
// mm_wrap: ga2_mm beside the scratchpad and the requant bank, wired as in ga2.v (the unit owns the
// p0 line read port and the compute write port), plus a host port on the DMA side (dr read port,
// wd write port) through which the cocotb test fills and checks the scratchpad.
module mm_wrap (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [3:0]  flags,
    input  wire [15:0] r_total,
    input  wire [15:0] k_len,
    input  wire [15:0] m_total,
    input  wire [7:0]  win_first,
    input  wire [3:0]  win_tiles,
    input  wire [11:0] a_base,
    input  wire [11:0] b_base,
    input  wire [11:0] out_base,
    input  wire [7:0]  out_stride,
    input  wire [15:0] qa,
    input  wire [5:0]  qs,
    input  wire [11:0] qbias,
    output wire        unit_we,
    output wire        done,
    output wire        take,
    output wire        more,
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
    wire [3:0]   rd_mask;
    wire [11:0]  rd_addr, waddr;
    wire [127:0] rd_data;
    wire [31:0]  wdata, unused_p1;

    ga2_mm u_mm (
        .clk(clk), .rst(rst), .start(start), .flags(flags), .r_total(r_total), .k_len(k_len),
        .m_total(m_total), .win_first(win_first), .win_tiles(win_tiles), .a_base(a_base), .b_base(b_base),
        .out_base(out_base), .out_stride(out_stride), .qa(qa), .qs(qs), .qbias(qbias), .rd_mask(rd_mask), .rd_addr(rd_addr),
        .rd_data(rd_data), .we(unit_we), .waddr(waddr), .wdata(wdata), .done(done),
        .take(take), .more(more),
        .rq_acc(rq_acc), .rq_mult(rq_mult), .rq_shift(rq_shift), .rq_busy(rq_busy), .rq_y(rq_y)
    );

    // the requant bank, as in ga2.v
    requant_bank #(.LANES(4)) u_rq (.clk(clk), .en(rq_busy), .acc(rq_acc), .mult(rq_mult), .shift(rq_shift), .y(rq_y));

    sram #(.WORDS(4096), .AW(12)) u_sram (
        .clk(clk),
        .p0_mask(rd_mask), .p0_addr(rd_addr), .p0_data(rd_data),
        .p1_en(1'b0), .p1_addr(12'd0), .p1_data(unused_p1),
        .dr_en(host_re), .dr_addr(host_raddr), .dr_data(host_rdata),
        .wc_en(unit_we), .wc_addr(waddr), .wc_data(wdata),
        .wd_en(host_we), .wd_addr(host_waddr), .wd_data(host_wdata)
    );
endmodule
`default_nettype wire
