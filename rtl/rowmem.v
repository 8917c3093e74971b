`timescale 1ns/1ps
`default_nettype none
// rowmem: the matmul engine's A buffer, NB banks (one per A row of a batch tile) of DEPTH 32-bit
// words. A bank is four ram_1r1w of DEPTH/4 words, word w of the row in part w mod 4 at w / 4,
// so that the engine loads a row a line (up to four consecutive words) per cycle, and then reads
// word k/4 of every bank in the same cycle for reduction step k.
//   write: we in cycle t puts word j of wdata (bits 32j+31:32j) in bank wbank, word 4*wline + j,
//          for each j with wmask[j] (readable from cycle t + 1)
//   read:  re in cycle t gives word raddr of every bank in cycle t + 1 (bank b in bits 32b+31:32b),
//          held while re is low
module rowmem #(
    parameter integer NB    = 4,
    parameter integer DEPTH = 256,  // words of a bank (a multiple of 4)
    parameter integer AW    = 8,    // bits of a word address
    parameter integer BW    = 2     // bits of a bank index
) (
    input  wire             clk,
    input  wire             we,
    input  wire [BW-1:0]    wbank,
    input  wire [AW-3:0]    wline,
    input  wire [3:0]       wmask,
    input  wire [127:0]     wdata,
    input  wire             re,
    input  wire [AW-1:0]    raddr,
    output reg  [NB*32-1:0] rdata
);
    reg [1:0] rpart;  // the part the last read's word lies in
    always @(posedge clk) begin
        if (re) rpart <= raddr[1:0];
    end
    genvar b, j;
    generate
        for (b = 0; b < NB; b = b + 1) begin : g_bank
            wire [127:0] q;
            for (j = 0; j < 4; j = j + 1) begin : g_part
                ram_1r1w #(.WIDTH(32), .DEPTH(DEPTH / 4), .AW(AW - 2)) u_ram (
                    .clk(clk), .we(we && (wbank == b) && wmask[j]), .waddr(wline), .wdata(wdata[32*j +: 32]),
                    .re(re), .raddr(raddr[AW-1:2]), .rdata(q[32*j +: 32])
                );
            end
            // a procedural copy into the bus: Icarus rebuilds a bus driven by port parts bit by bit
            always @* rdata[b*32 +: 32] = q[32*rpart +: 32];
        end
    endgenerate
endmodule
`default_nettype wire
