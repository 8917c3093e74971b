`timescale 1ns/1ps
`default_nettype none
// requant_bank: LANES requant pipelines with one multiplier and one shift, the bank that ga2 shares
// between the matmul engine and the vector unit (they never run at the same time, so the chip
// needs one 32 x 16 multiplier per lane instead of two). Lane l takes acc[32l+31:32l] and gives
// y[8l+7:8l] five cycles with en high later (rtl/requant.v).
module requant_bank #(
    parameter integer LANES = 4
) (
    input  wire               clk,
    input  wire               en,
    input  wire [LANES*32-1:0] acc,
    input  wire [15:0]        mult,
    input  wire [5:0]         shift,
    output reg  [LANES*8-1:0] y
);
    genvar l;
    generate
        for (l = 0; l < LANES; l = l + 1) begin : g_lane
            wire [7:0] q;
            requant u_rq (.clk(clk), .en(en), .acc(acc[l*32 +: 32]), .mult(mult), .shift(shift), .y(q));
            // a procedural copy into the bus: Icarus rebuilds a bus driven by port parts bit by bit
            always @* y[l*8 +: 8] = q;
        end
    endgenerate
endmodule
`default_nettype wire
