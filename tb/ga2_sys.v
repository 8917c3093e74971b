`timescale 1ns/1ps
`default_nettype none
`include "ga2_cfg.vh"
// ga2_sys: GA2 with its external memory (tb/extmem_rw.v) on the AXI4 port, as every testbench that
// runs whole programs uses it: the replay testbench (tb/ga2_tb.v) and the cocotb bench
// (tb/cocotb/ga2_wrap.v). The memory has EXTW words, and the chip's ext_limit says so. The
// testbenches reach u_ga2 and u_ext.mem by name (to fill and check the memories between programs).
module ga2_sys #(
    parameter integer EXTW         = 8192
) (
    input  wire        clk,
    input  wire        rst,
    input  wire [4:0]  latency,    // the memory's (tb/extmem_rw.v)
    input  wire [6:0]  stall_pct,
    input  wire [31:0] stall_seed,
    input  wire        imem_we,
    input  wire [11:0] imem_addr,
    input  wire [31:0] imem_wdata,
    output wire        halted,
    output wire        illegal,
    output wire [2:0]  status,
    output wire [9:0]  status_pc,
    output wire [31:0] c0,
    output wire [31:0] c1,
    output wire [31:0] c2,
    output wire [31:0] c3,
    output wire [31:0] c4,
    output wire [31:0] h_unit,
    output wire [31:0] h_sync,
    output wire        wr_en,      // the memory writes words this cycle (extmem_rw.v)
    output wire [31:0] wr_addr,
    output wire [`GA2_EXT_WORDS_D-1:0] wr_mask
);
    localparam [31:0] LIMIT = EXTW;
    wire                            axi_arid;
    wire [31:0]                     axi_araddr;
    wire [7:0]                      axi_arlen;
    wire [2:0]                      axi_arsize;
    wire [1:0]                      axi_arburst;
    wire                            axi_arlock;
    wire [3:0]                      axi_arcache;
    wire [2:0]                      axi_arprot;
    wire                            axi_arvalid;
    wire                            axi_rready;
    wire                            axi_awid;
    wire [31:0]                     axi_awaddr;
    wire [7:0]                      axi_awlen;
    wire [2:0]                      axi_awsize;
    wire [1:0]                      axi_awburst;
    wire                            axi_awlock;
    wire [3:0]                      axi_awcache;
    wire [2:0]                      axi_awprot;
    wire                            axi_awvalid;
    wire [32*`GA2_EXT_WORDS_D-1:0]  axi_wdata;
    wire [4*`GA2_EXT_WORDS_D-1:0]   axi_wstrb;
    wire                            axi_wlast;
    wire                            axi_wvalid;
    wire                            axi_bready;
    wire                            axi_arready;
    wire                            axi_rid;
    wire [32*`GA2_EXT_WORDS_D-1:0]  axi_rdata;
    wire [1:0]                      axi_rresp;
    wire                            axi_rlast;
    wire                            axi_rvalid;
    wire                            axi_awready;
    wire                            axi_wready;
    wire                            axi_bid;
    wire [1:0]                      axi_bresp;
    wire                            axi_bvalid;

    ga2 u_ga2 (
        .clk(clk), .rst(rst), .imem_we(imem_we), .imem_addr(imem_addr), .imem_wdata(imem_wdata),
        .halted(halted), .illegal(illegal), .c0(c0), .c1(c1), .c2(c2), .c3(c3), .c4(c4),
        .h_unit(h_unit), .h_sync(h_sync), .status(status), .status_pc(status_pc), .ext_limit(LIMIT),
        .m_axi_arid(axi_arid),
        .m_axi_araddr(axi_araddr),
        .m_axi_arlen(axi_arlen),
        .m_axi_arsize(axi_arsize),
        .m_axi_arburst(axi_arburst),
        .m_axi_arlock(axi_arlock),
        .m_axi_arcache(axi_arcache),
        .m_axi_arprot(axi_arprot),
        .m_axi_arvalid(axi_arvalid),
        .m_axi_rready(axi_rready),
        .m_axi_awid(axi_awid),
        .m_axi_awaddr(axi_awaddr),
        .m_axi_awlen(axi_awlen),
        .m_axi_awsize(axi_awsize),
        .m_axi_awburst(axi_awburst),
        .m_axi_awlock(axi_awlock),
        .m_axi_awcache(axi_awcache),
        .m_axi_awprot(axi_awprot),
        .m_axi_awvalid(axi_awvalid),
        .m_axi_wdata(axi_wdata),
        .m_axi_wstrb(axi_wstrb),
        .m_axi_wlast(axi_wlast),
        .m_axi_wvalid(axi_wvalid),
        .m_axi_bready(axi_bready),
        .m_axi_arready(axi_arready),
        .m_axi_rid(axi_rid),
        .m_axi_rdata(axi_rdata),
        .m_axi_rresp(axi_rresp),
        .m_axi_rlast(axi_rlast),
        .m_axi_rvalid(axi_rvalid),
        .m_axi_awready(axi_awready),
        .m_axi_wready(axi_wready),
        .m_axi_bid(axi_bid),
        .m_axi_bresp(axi_bresp),
        .m_axi_bvalid(axi_bvalid)
    );

    extmem_rw #(.EXTW(EXTW), .WORDS(`GA2_EXT_WORDS_D)) u_ext (
        .clk(clk), .rst(rst), .latency(latency), .stall_pct(stall_pct), .stall_seed(stall_seed), .wr_en(wr_en), .wr_addr(wr_addr), .wr_mask(wr_mask),
        .s_axi_arid(axi_arid),
        .s_axi_araddr(axi_araddr),
        .s_axi_arlen(axi_arlen),
        .s_axi_arsize(axi_arsize),
        .s_axi_arburst(axi_arburst),
        .s_axi_arlock(axi_arlock),
        .s_axi_arcache(axi_arcache),
        .s_axi_arprot(axi_arprot),
        .s_axi_arvalid(axi_arvalid),
        .s_axi_rready(axi_rready),
        .s_axi_awid(axi_awid),
        .s_axi_awaddr(axi_awaddr),
        .s_axi_awlen(axi_awlen),
        .s_axi_awsize(axi_awsize),
        .s_axi_awburst(axi_awburst),
        .s_axi_awlock(axi_awlock),
        .s_axi_awcache(axi_awcache),
        .s_axi_awprot(axi_awprot),
        .s_axi_awvalid(axi_awvalid),
        .s_axi_wdata(axi_wdata),
        .s_axi_wstrb(axi_wstrb),
        .s_axi_wlast(axi_wlast),
        .s_axi_wvalid(axi_wvalid),
        .s_axi_bready(axi_bready),
        .s_axi_arready(axi_arready),
        .s_axi_rid(axi_rid),
        .s_axi_rdata(axi_rdata),
        .s_axi_rresp(axi_rresp),
        .s_axi_rlast(axi_rlast),
        .s_axi_rvalid(axi_rvalid),
        .s_axi_awready(axi_awready),
        .s_axi_wready(axi_wready),
        .s_axi_bid(axi_bid),
        .s_axi_bresp(axi_bresp),
        .s_axi_bvalid(axi_bvalid)
    );
endmodule
`default_nettype wire
