`timescale 1ns/1ps
`default_nettype none
// systolic: an N x N output-stationary array of int8 MACs with int32 accumulators.
// Row i of A enters at the left edge (a_left lane i) and moves one PE right per cycle; column j
// of B enters at the top (b_top lane j) and moves one PE down per cycle. The driver skews the
// inputs (A[i][k] at cycle k+i, B[k][j] at cycle k+j) so PE(i,j) sees A[i][k] and B[k][j] in the
// same cycle k+i+j and accumulates C[i][j] = sum_k A[i][k]*B[k][j].
// `clear` zeroes the accumulators and the pipeline registers; `en` advances the array one step.
// After the last operands are fed in cycle K-1 (relative), results are complete 2N-2 cycles later.
module systolic #(
    parameter integer N = 4
) (
    input  wire              clk,
    input  wire              clear,
    input  wire              en,
    input  wire [N*8-1:0]    a_left,
    input  wire [N*8-1:0]    b_top,
    output reg  [N*N*32-1:0] acc
);
    // Each PE keeps its own registers (declared inside its generate block), so a simulator only
    // re-evaluates a PE when its own inputs change.
    genvar i, j;
    generate
        for (i = 0; i < N; i = i + 1) begin : g_row
            for (j = 0; j < N; j = j + 1) begin : g_col
                reg  [7:0]  a_q;     // the A operand passed to the right neighbour
                reg  [7:0]  b_q;     // the B operand passed down
                reg  [31:0] acc_q;
                wire [7:0]  a_in;
                wire [7:0]  b_in;
                if (j == 0) begin : g_a_edge
                    assign a_in = a_left[i*8 +: 8];
                end else begin : g_a_inner
                    assign a_in = g_row[i].g_col[j-1].a_q;
                end
                if (i == 0) begin : g_b_edge
                    assign b_in = b_top[j*8 +: 8];
                end else begin : g_b_inner
                    assign b_in = g_row[i-1].g_col[j].b_q;
                end
                wire signed [15:0] prod = $signed(a_in) * $signed(b_in);
                always @(posedge clk) begin
                    if (clear) begin
                        a_q <= 8'd0;
                        b_q <= 8'd0;
                        acc_q <= 32'd0;
                    end else if (en) begin
                        a_q <= a_in;
                        b_q <= b_in;
                        acc_q <= acc_q + {{16{prod[15]}}, prod};
                    end
                end
                always @(*) acc[(i*N+j)*32 +: 32] = acc_q;
            end
        end
    endgenerate
endmodule
`default_nettype wire
