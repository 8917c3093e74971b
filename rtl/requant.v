`timescale 1ns/1ps
`default_nettype none
// requant: int32 -> int8, combinational.
//   y = saturate_int8((acc * mult + 2^(shift-1)) >>> shift)   (no rounding term when shift = 0)
// mult is an unsigned 16-bit multiplier, shift is 0..47 (model/capra/isa.py MAX_SHIFT): the
// product fits 49 bits and the rounded sum 50, so nothing overflows. Rounding is half up.
module requant (
    input  wire [31:0] acc,
    input  wire [15:0] mult,
    input  wire [5:0]  shift,
    output wire [7:0]  y
);
    wire signed [49:0] acc_x  = {{18{acc[31]}}, acc};
    wire signed [49:0] mult_x = {34'd0, mult};
    wire signed [49:0] prod   = acc_x * mult_x;
    wire signed [49:0] rnd    = (shift == 6'd0) ? 50'sd0 : (50'sd1 <<< (shift - 6'd1));
    wire signed [49:0] sum    = prod + rnd;
    wire signed [49:0] q      = sum >>> shift;

    assign y = (q > 50'sd127) ? 8'h7f : (q < -50'sd128) ? 8'h80 : q[7:0];
endmodule
`default_nettype wire
