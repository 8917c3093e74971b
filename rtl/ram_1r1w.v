`timescale 1ns/1ps
`default_nettype none
// ram_1r1w: a memory with one synchronous write port and one synchronous read port, the shape of
// an FPGA block RAM (iCE40 SB_RAM40_4K, Xilinx/Lattice simple dual-port) and of a two-port SRAM macro.
//   write: with we high in cycle t, mem[waddr] = wdata from cycle t + 1 on
//   read:  with re high in cycle t, rdata = mem[raddr] in cycle t + 1 (and held while re is low)
// What a read of the word being written in the same cycle returns is left open (block RAMs
// differ); GA2 never does that (the machine model rejects programs that would).
module ram_1r1w #(
    parameter integer WIDTH = 32,
    parameter integer DEPTH = 256,
    parameter integer AW    = 8
) (
    input  wire             clk,
    input  wire             we,
    input  wire [AW-1:0]    waddr,
    input  wire [WIDTH-1:0] wdata,
    input  wire             re,
    input  wire [AW-1:0]    raddr,
    output reg  [WIDTH-1:0] rdata
);
    // GA2 never reads a word in the cycle it writes it, so synthesis needs no bypass logic for that
    (* no_rw_check *)
    reg [WIDTH-1:0] mem [0:DEPTH-1];

    always @(posedge clk) begin
        if (we) mem[waddr] <= wdata;
        if (re) rdata <= mem[raddr];
    end
endmodule
`default_nettype wire
