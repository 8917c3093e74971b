`timescale 1ns/1ps
`default_nettype none
`include "ga2_cfg.vh"
// ga2_wrap: the GA2 top with tb/extmem_rw.v's external memory, wired as in tb/ga2_tb.v. The cocotb test
// loads each program through ga2's instruction memory port while rst is high, and fills and reads the
// external memory's `mem` array directly between programs (u_ext.mem, as ga2_tb.v does). There is no
// back door into the chip: the scratchpad is never cleared, and a program only reads words it wrote.
module ga2_wrap #(
    parameter integer EXTW         = 1024,  // capra.randprog.SPAN
    parameter integer LATENCY      = 4,     // capra.isa.EXT_LATENCY
    parameter integer RANDOM_READY = 0
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        imem_we,
    input  wire [11:0] imem_addr,
    input  wire [31:0] imem_wdata,
    output wire        halted,
    output wire        illegal,
    output wire [31:0] c0,
    output wire [31:0] c1,
    output wire [31:0] c2,
    output wire [31:0] c3,
    output wire [31:0] c4
);
    wire        req_valid, req_ready, req_we, rsp_valid;
    wire [31:0] req_addr;
    wire [`GA2_EXT_WORDS_D-1:0]    req_mask;
    wire [32*`GA2_EXT_WORDS_D-1:0] req_wdata, rsp_rdata;

    ga2 u_ga2 (
        .clk(clk), .rst(rst), .imem_we(imem_we), .imem_addr(imem_addr), .imem_wdata(imem_wdata),
        .halted(halted), .illegal(illegal), .c0(c0), .c1(c1), .c2(c2), .c3(c3), .c4(c4),
        .ext_req_valid(req_valid), .ext_req_ready(req_ready), .ext_req_we(req_we), .ext_req_mask(req_mask),
        .ext_req_addr(req_addr),
        .ext_req_wdata(req_wdata), .ext_rsp_valid(rsp_valid), .ext_rsp_rdata(rsp_rdata)
    );

    extmem_rw #(.EXTW(EXTW), .WORDS(`GA2_EXT_WORDS_D), .RANDOM_READY(RANDOM_READY)) u_ext (
        .clk(clk), .rst(rst), .latency(LATENCY[4:0]), .req_valid(req_valid), .req_ready(req_ready), .req_we(req_we),
        .req_mask(req_mask), .req_addr(req_addr), .req_wdata(req_wdata), .rsp_valid(rsp_valid), .rsp_rdata(rsp_rdata)
    );
endmodule
`default_nettype wire
