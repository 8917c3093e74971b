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
    reg  [N*N*8-1:0]  a_reg;   // the A operand each PE passes to its right neighbour
    reg  [N*N*8-1:0]  b_reg;   // the B operand each PE passes down
    wire [N*N*8-1:0]  a_src;   // the A operand each PE uses this cycle
    wire [N*N*8-1:0]  b_src;
    wire [N*N*32-1:0] acc_next;

    genvar i, j;
    generate
        for (i = 0; i < N; i = i + 1) begin : g_row
            for (j = 0; j < N; j = j + 1) begin : g_col
                if (j == 0) begin : g_a_edge
                    assign a_src[(i*N+j)*8 +: 8] = a_left[i*8 +: 8];
                end else begin : g_a_inner
                    assign a_src[(i*N+j)*8 +: 8] = a_reg[(i*N+j-1)*8 +: 8];
                end
                if (i == 0) begin : g_b_edge
                    assign b_src[(i*N+j)*8 +: 8] = b_top[j*8 +: 8];
                end else begin : g_b_inner
                    assign b_src[(i*N+j)*8 +: 8] = b_reg[((i-1)*N+j)*8 +: 8];
                end
                wire signed [15:0] prod = $signed(a_src[(i*N+j)*8 +: 8]) * $signed(b_src[(i*N+j)*8 +: 8]);
                assign acc_next[(i*N+j)*32 +: 32] = acc[(i*N+j)*32 +: 32] + {{16{prod[15]}}, prod};
            end
        end
    endgenerate

    always @(posedge clk) begin
        if (clear) begin
            a_reg <= {N*N*8{1'b0}};
            b_reg <= {N*N*8{1'b0}};
            acc   <= {N*N*32{1'b0}};
        end else if (en) begin
            a_reg <= a_src;
            b_reg <= b_src;
            acc   <= acc_next;
        end
    end
endmodule
`default_nettype wire
