`timescale 1ns/1ps
`default_nettype none
// dma_wrap: the DMA engine and the scratchpad wired as in ga2.v (the DMA owns the sram's rd port and
// wd write port), plus a host port on the compute side (ra read port, wc write port) through which the
// cocotb test fills and checks the scratchpad. External memory is modelled by the test: it drives
// ext_rdata every cycle from ext_addr and captures ext_we / ext_wdata. `full` is brought out so the
// test can start transfers the way the sequencer does (only while it is low) and check it every cycle.
module dma_wrap (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        is_store,
    input  wire [15:0] rows,
    input  wire [15:0] cols,
    input  wire [11:0] sram_base,
    input  wire [15:0] ext_base,
    input  wire [15:0] ext_stride,
    input  wire [11:0] sram_stride,
    output wire        busy,
    output wire        full,
    output wire [15:0] ext_addr,
    input  wire [31:0] ext_rdata,
    output wire        ext_we,
    output wire [31:0] ext_wdata,
    output wire        sram_we,
    output wire [11:0] sram_waddr,
    input  wire        host_we,
    input  wire [11:0] host_addr,
    input  wire [31:0] host_wdata,
    output wire [31:0] host_rdata
);
    wire [11:0] dma_raddr;
    wire [31:0] dma_rdata, dma_wdata, unused_rb;

    dma u_dma (
        .clk(clk), .rst(rst), .start(start), .is_store(is_store), .rows(rows), .cols(cols),
        .sram_base(sram_base), .ext_base(ext_base), .ext_stride(ext_stride), .sram_stride(sram_stride),
        .busy(busy), .full(full),
        .ext_addr(ext_addr), .ext_rdata(ext_rdata), .ext_we(ext_we), .ext_wdata(ext_wdata),
        .sram_raddr(dma_raddr), .sram_rdata(dma_rdata), .sram_we(sram_we), .sram_waddr(sram_waddr),
        .sram_wdata(dma_wdata)
    );

    sram #(.WORDS(4096), .AW(12)) u_sram (
        .clk(clk),
        .ra_addr(host_addr), .ra_data(host_rdata), .rb_addr(12'd0), .rb_data(unused_rb),
        .rd_addr(dma_raddr), .rd_data(dma_rdata),
        .wc_en(host_we), .wc_addr(host_addr), .wc_data(host_wdata),
        .wd_en(sram_we), .wd_addr(sram_waddr), .wd_data(dma_wdata)
    );
endmodule
`default_nettype wire
