`timescale 1ns/1ps
`default_nettype none
// requant: int32 -> int8, pipelined, one result per cycle.
//   y = saturate_int8((acc * mult + 2^(shift-1)) >>> shift)   (no rounding term when shift = 0)
// mult is an unsigned 16-bit multiplier, shift is 0..47 (model/capra/isa.py MAX_SHIFT): the
// product fits 49 bits and the rounded sum 50, so nothing overflows. Rounding is half up.
// Timing: inputs presented in cycle t give y in cycle t + 5 (registers after the inputs, after the
// multiplier, after the rounding add, after the shift, after the saturation), counting only cycles
// with en high: the pipeline holds while en is low (the units that share it keep it running while
// they execute).
module requant (
    input  wire        clk,
    input  wire        en,
    input  wire [31:0] acc,
    input  wire [15:0] mult,
    input  wire [5:0]  shift,
    output reg  [7:0]  y
);
    reg signed [31:0] acc_r;
    reg        [15:0] mult_r;
    reg        [5:0]  shift_r, shift_p, shift_s;
    reg signed [49:0] prod, rnd_p, sum, q;

    always @(posedge clk) if (en) begin
        // stage 1: registered inputs
        acc_r <= acc;
        mult_r <= mult;
        shift_r <= shift;
        // stage 2: the product, and the rounding term for this shift
        prod <= {{18{acc_r[31]}}, acc_r} * $signed({34'd0, mult_r});
        rnd_p <= (shift_r == 6'd0) ? 50'sd0 : (50'sd1 <<< (shift_r - 6'd1));
        shift_p <= shift_r;
        // stage 3: round
        sum <= prod + rnd_p;
        shift_s <= shift_p;
        // stage 4: shift
        q <= sum >>> shift_s;
        // stage 5: saturate
        y <= (q > 50'sd127) ? 8'h7f : (q < -50'sd128) ? 8'h80 : q[7:0];
    end
endmodule
`default_nettype wire
