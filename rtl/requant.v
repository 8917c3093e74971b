`timescale 1ns/1ps
`default_nettype none
// requant: int32 -> int8, pipelined, one result per cycle.
//   y = saturate_int8((acc * mult + 2^(shift-1)) >>> shift)   (no rounding term when shift = 0)
// mult is an unsigned 16-bit multiplier, shift is 0..47 (model/capra/isa.py MAX_SHIFT): the
// product fits 49 bits and the rounded sum 50, so nothing overflows. Rounding is half up.
// Timing: inputs presented in cycle t give y in cycle t + 5 (registers after the inputs, after the
// two partial products, after the add that joins them and rounds, after the shift, after the
// saturation), counting only cycles with en high: the pipeline holds while en is low (the units
// that share it keep it running while they execute).
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
    reg signed [31:0] prod_hi;
    reg        [31:0] prod_lo;
    reg signed [49:0] rnd_p, sum, q;

    always @(posedge clk) if (en) begin
        // stage 1: registered inputs
        acc_r <= acc;
        mult_r <= mult;
        shift_r <= shift;
        // stage 2: the product in two halves, acc * mult = acc[31:16] * mult * 2^16 + acc[15:0] * mult
        // (the high half signed, the low one unsigned, each 16 x 16 in 32 bits: one MULT18X18D each
        // on the ECP5), registered before they are added so that no carry chain follows a multiplier;
        // and the rounding term for this shift
        prod_hi <= $signed({{16{acc_r[31]}}, acc_r[31:16]}) * $signed({16'd0, mult_r});
        prod_lo <= {16'd0, acc_r[15:0]} * {16'd0, mult_r};
        rnd_p <= (shift_r == 6'd0) ? 50'sd0 : (50'sd1 <<< (shift_r - 6'd1));
        shift_p <= shift_r;
        // stage 3: join the halves and round
        sum <= {{2{prod_hi[31]}}, prod_hi, 16'd0} + {18'd0, prod_lo} + rnd_p;
        shift_s <= shift_p;
        // stage 4: shift
        q <= sum >>> shift_s;
        // stage 5: saturate
        y <= (q > 50'sd127) ? 8'h7f : (q < -50'sd128) ? 8'h80 : q[7:0];
    end
endmodule
`default_nettype wire
