`timescale 1ns/1ps
`default_nettype none
`include "ga2_cfg.vh"
// ga2_wrap: GA2 with tb/extmem_rw.v's external memory (tb/ga2_sys.v, as tb/ga2_tb.v uses it). The cocotb
// test loads each program through ga2's instruction memory port while rst is high, and fills and reads
// the external memory's `mem` array directly between programs (u_sys.u_ext.mem, as ga2_tb.v does). There is no
// back door into the chip: the scratchpad is never cleared, and a program only reads words it wrote.
module ga2_wrap #(
    parameter integer EXTW         = 1024,  // capra.randprog.SPAN
    parameter integer LATENCY      = 4,     // capra.isa.EXT_LATENCY
    parameter integer STALL        = 0,     // percent of cycles each memory channel stalls (tb/extmem_rw.v)
    parameter integer SEED         = 1      // the stall schedule's seed
) (
    input  wire        clk,
    input  wire        rst,
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
    output wire [31:0] h_sync
);
    wire       wr_en;
    wire [31:0] wr_addr;
    wire [`GA2_EXT_WORDS_D-1:0] wr_mask;
    ga2_sys #(.EXTW(EXTW)) u_sys (
        .clk(clk), .rst(rst), .latency(LATENCY[4:0]), .stall_pct(STALL[6:0]), .stall_seed(SEED[31:0]), .imem_we(imem_we), .imem_addr(imem_addr),
        .imem_wdata(imem_wdata), .halted(halted), .illegal(illegal), .status(status), .status_pc(status_pc),
        .c0(c0), .c1(c1), .c2(c2), .c3(c3), .c4(c4), .h_unit(h_unit), .h_sync(h_sync), .wr_en(wr_en), .wr_addr(wr_addr), .wr_mask(wr_mask)
    );
endmodule
`default_nettype wire
