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

    // The read comes first and takes the word as it was before this edge; the write after it may
    // then be a blocking one. No other block of the chip reads mem (the replay testbench reads it
    // only between clock edges, after a program), so no process can see the order, and synthesis
    // infers the same non-transparent block RAM as with `<=`. Verilator
    // keeps a write flag, an address and a value a cycle for an array written with `<=` (36 of
    // these memories: 4% of a replay's instructions, docs/cycle_model.md).
    always @(posedge clk) begin
        if (re) rdata <= mem[raddr];
        /* verilator lint_off BLKSEQ */
        if (we) mem[waddr] = wdata;
        /* verilator lint_on BLKSEQ */
    end
endmodule
`default_nettype wire
