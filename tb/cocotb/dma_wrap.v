`timescale 1ns/1ps
`default_nettype none
// dma_wrap: the DMA engine and the scratchpad wired as in ga2.v (the DMA owns the sram's dr read port
// and wd write port), plus a host port on the compute side (p1 read port, wc write port) through
// which the cocotb test fills and checks the scratchpad while the engine is idle. The external port
// is the engine's own AXI4 master on the one-word bus (EW = 1: 32 data bits, 4 strobe bits): the test
// is the AXI4 slave memory. The engine's scratchpad requests are brought out so the test can check in
// which cycle each word is read and written.
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
    input  wire [9:0]  pc,
    input  wire [31:0] ext_limit,      // sampled while rst is high
    output wire [2:0]  inflight,
    output wire        busy,
    output wire        quiet,
    output wire        err,
    output wire [1:0]  err_code,
    output wire [9:0]  err_pc,
    // AXI4 master
    output wire        m_axi_arid,
    output wire [31:0] m_axi_araddr,
    output wire [7:0]  m_axi_arlen,
    output wire [2:0]  m_axi_arsize,
    output wire [1:0]  m_axi_arburst,
    output wire        m_axi_arlock,
    output wire [3:0]  m_axi_arcache,
    output wire [2:0]  m_axi_arprot,
    output wire        m_axi_arvalid,
    input  wire        m_axi_arready,
    input  wire        m_axi_rid,
    input  wire [31:0] m_axi_rdata,
    input  wire [1:0]  m_axi_rresp,
    input  wire        m_axi_rlast,
    input  wire        m_axi_rvalid,
    output wire        m_axi_rready,
    output wire        m_axi_awid,
    output wire [31:0] m_axi_awaddr,
    output wire [7:0]  m_axi_awlen,
    output wire [2:0]  m_axi_awsize,
    output wire [1:0]  m_axi_awburst,
    output wire        m_axi_awlock,
    output wire [3:0]  m_axi_awcache,
    output wire [2:0]  m_axi_awprot,
    output wire        m_axi_awvalid,
    input  wire        m_axi_awready,
    output wire [31:0] m_axi_wdata,
    output wire [3:0]  m_axi_wstrb,
    output wire        m_axi_wlast,
    output wire        m_axi_wvalid,
    input  wire        m_axi_wready,
    input  wire        m_axi_bid,
    input  wire [1:0]  m_axi_bresp,
    input  wire        m_axi_bvalid,
    output wire        m_axi_bready,
    // the engine's scratchpad requests, observed
    output wire        sram_re,
    output wire [11:0] sram_raddr,
    output wire        sram_we,
    output wire [11:0] sram_waddr,
    output wire [31:0] sram_wdata,
    // the host port
    input  wire        host_we,
    input  wire [11:0] host_waddr,
    input  wire [31:0] host_wdata,
    input  wire        host_re,
    input  wire [11:0] host_raddr,
    output wire [31:0] host_rdata
);
    wire [31:0]  sram_rdata;
    wire [127:0] unused_p0;

    dma #(.QUEUE(4), .PENDING(32), .AW(12), .EW(1), .IAW(10), .QW(3)) u_dma (
        .clk(clk), .rst(rst), .start(start), .is_store(is_store), .rows(rows), .cols(cols),
        .ext_base(ext_base), .ext_stride(ext_stride), .sram_base(sram_base), .sram_stride(sram_stride),
        .gather(1'b0), .page_shift(4'd0), .page_off(16'd0),  // gathers: tests/test_gather.py, on the whole chip
        .pc(pc), .ext_limit(ext_limit), .inflight(inflight), .busy(busy), .quiet(quiet),
        .err(err), .err_code(err_code), .err_pc(err_pc),
        .m_axi_arid(m_axi_arid), .m_axi_araddr(m_axi_araddr), .m_axi_arlen(m_axi_arlen), .m_axi_arsize(m_axi_arsize),
        .m_axi_arburst(m_axi_arburst), .m_axi_arlock(m_axi_arlock), .m_axi_arcache(m_axi_arcache),
        .m_axi_arprot(m_axi_arprot), .m_axi_arvalid(m_axi_arvalid), .m_axi_arready(m_axi_arready),
        .m_axi_rid(m_axi_rid), .m_axi_rdata(m_axi_rdata), .m_axi_rresp(m_axi_rresp), .m_axi_rlast(m_axi_rlast),
        .m_axi_rvalid(m_axi_rvalid), .m_axi_rready(m_axi_rready),
        .m_axi_awid(m_axi_awid), .m_axi_awaddr(m_axi_awaddr), .m_axi_awlen(m_axi_awlen), .m_axi_awsize(m_axi_awsize),
        .m_axi_awburst(m_axi_awburst), .m_axi_awlock(m_axi_awlock), .m_axi_awcache(m_axi_awcache),
        .m_axi_awprot(m_axi_awprot), .m_axi_awvalid(m_axi_awvalid), .m_axi_awready(m_axi_awready),
        .m_axi_wdata(m_axi_wdata), .m_axi_wstrb(m_axi_wstrb), .m_axi_wlast(m_axi_wlast), .m_axi_wvalid(m_axi_wvalid),
        .m_axi_wready(m_axi_wready), .m_axi_bid(m_axi_bid), .m_axi_bresp(m_axi_bresp), .m_axi_bvalid(m_axi_bvalid),
        .m_axi_bready(m_axi_bready),
        .sram_re(sram_re), .sram_raddr(sram_raddr), .sram_rdata(sram_rdata),
        .sram_we(sram_we), .sram_waddr(sram_waddr), .sram_wdata(sram_wdata)
    );

    sram #(.WORDS(4096), .AW(12), .EW(1)) u_sram (
        .clk(clk),
        .p0_mask(4'd0), .p0_addr(12'd0), .p0_data(unused_p0),
        .p1_en(host_re), .p1_addr(host_raddr), .p1_data(host_rdata),
        .dr_en(sram_re), .dr_addr(sram_raddr), .dr_data(sram_rdata),
        .wc_en(host_we), .wc_addr(host_waddr), .wc_data(host_wdata),
        .wd_en(sram_we), .wd_addr(sram_waddr), .wd_data(sram_wdata)
    );
endmodule
`default_nettype wire
