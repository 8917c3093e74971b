`timescale 1ns/1ps
`default_nettype none
// rowmem: the matmul engine's A buffer, NB banks (one per A row of a batch tile) of DEPTH 32-bit
// words, each a ram_1r1w. The engine loads a row's packed words into its bank one word per cycle
// and then reads word k/4 of every bank in the same cycle for reduction step k.
//   write: we in cycle t puts wdata in bank wbank, word waddr (readable from cycle t + 1)
//   read:  re in cycle t gives word raddr of every bank in cycle t + 1 (bank b in bits 32b+31:32b)
module rowmem #(
    parameter integer NB    = 4,
    parameter integer DEPTH = 256,
    parameter integer AW    = 8,
    parameter integer BW    = 2   // bits of a bank index
) (
    input  wire             clk,
    input  wire             we,
    input  wire [BW-1:0]    wbank,
    input  wire [AW-1:0]    waddr,
    input  wire [31:0]      wdata,
    input  wire             re,
    input  wire [AW-1:0]    raddr,
    output reg  [NB*32-1:0] rdata
);
    genvar b;
    generate
        for (b = 0; b < NB; b = b + 1) begin : g_bank
            wire [31:0] q;
            ram_1r1w #(.WIDTH(32), .DEPTH(DEPTH), .AW(AW)) u_ram (
                .clk(clk), .we(we && (wbank == b)), .waddr(waddr), .wdata(wdata),
                .re(re), .raddr(raddr), .rdata(q)
            );
            // a procedural copy into the bus: Icarus rebuilds a bus driven by port parts bit by bit
            always @* rdata[b*32 +: 32] = q;
        end
    endgenerate
endmodule
`default_nettype wire
