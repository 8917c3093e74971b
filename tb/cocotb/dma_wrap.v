`timescale 1ns/1ps
`default_nettype none
// dma_wrap: the DMA engine and the scratchpad wired as in ga2.v (the DMA owns the sram's dr read port
// and wd write port), plus a host port on the compute side (p1 read port, wc write port) through
// which the cocotb test fills and checks the scratchpad while the engine is idle. The external port
// is the engine's own: the test is the external memory. The engine's scratchpad requests are brought
// out so the test can check in which cycle each word is read and written.
module dma_wrap (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        is_store,
    input  wire [15:0] rows,
    input  wire [15:0] cols,
    input  wire [31:0] ext_base,
    input  wire [15:0] ext_stride,
    input  wire [11:0] sram_base,
    input  wire [11:0] sram_stride,
    output wire [2:0]  inflight,
    output wire        busy,
    output wire        ext_req_valid,
    input  wire        ext_req_ready,
    output wire        ext_req_we,
    output wire        ext_req_mask,   // the one-word interface's beat always moves its word
    output wire [31:0] ext_req_addr,
    output wire [31:0] ext_req_wdata,
    input  wire        ext_rsp_valid,
    input  wire [31:0] ext_rsp_rdata,
    output wire        sram_re,
    output wire [11:0] sram_raddr,
    output wire        sram_we,
    output wire [11:0] sram_waddr,
    output wire [31:0] sram_wdata,
    input  wire        host_we,
    input  wire [11:0] host_waddr,
    input  wire [31:0] host_wdata,
    input  wire        host_re,
    input  wire [11:0] host_raddr,
    output wire [31:0] host_rdata
);
    wire [31:0]  sram_rdata;
    wire [127:0] unused_p0;

    dma u_dma (
        .clk(clk), .rst(rst), .start(start), .is_store(is_store), .rows(rows), .cols(cols),
        .ext_base(ext_base), .ext_stride(ext_stride), .sram_base(sram_base), .sram_stride(sram_stride),
        .inflight(inflight), .busy(busy),
        .ext_req_valid(ext_req_valid), .ext_req_ready(ext_req_ready), .ext_req_we(ext_req_we),
        .ext_req_mask(ext_req_mask), .ext_req_addr(ext_req_addr), .ext_req_wdata(ext_req_wdata), .ext_rsp_valid(ext_rsp_valid),
        .ext_rsp_rdata(ext_rsp_rdata),
        .sram_re(sram_re), .sram_raddr(sram_raddr), .sram_rdata(sram_rdata),
        .sram_we(sram_we), .sram_waddr(sram_waddr), .sram_wdata(sram_wdata)
    );

    sram #(.WORDS(4096), .AW(12)) u_sram (
        .clk(clk),
        .p0_mask(4'd0), .p0_addr(12'd0), .p0_data(unused_p0),
        .p1_en(host_re), .p1_addr(host_raddr), .p1_data(host_rdata),
        .dr_en(sram_re), .dr_addr(sram_raddr), .dr_data(sram_rdata),
        .wc_en(host_we), .wc_addr(host_waddr), .wc_data(host_wdata),
        .wd_en(sram_we), .wd_addr(sram_waddr), .wd_data(sram_wdata)
    );
endmodule
`default_nettype wire
