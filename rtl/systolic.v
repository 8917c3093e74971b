`timescale 1ns/1ps
`default_nettype none
// systolic: an N x N output-stationary array of int8 MACs with int32 accumulators.
// The left operand of row i enters PE(i,0) on a_left lane i and moves one PE right per cycle,
// carrying two flags: `first` (the first reduction step of a result) and `last` (its final step).
// The top operand of column c enters at row 0 from b_inj (zero unless inj[0]) and moves one PE down
// per cycle; a row with inj[i] set takes its top operands from b_inj row i instead of from the row
// above, which splits the array into independent groups of rows (GA2 runs one column tile per
// group when a matmul has fewer rows than the array).
// The driver skews the operands so that PE(i,c) sees both operands of a reduction step in the same
// cycle. Each PE pipelines: operands registered (and passed on), product registered, then
//   acc = (first ? 0 : acc) + product;  with last, also res = that sum.
// An operand pair on a PE's inputs in cycle x is in res from cycle x + 3 on, and res holds it until
// the next `last` reaches the PE: results of one tile are read while the next tile streams in.
module systolic #(
    parameter integer N = 4
) (
    input  wire              clk,
    input  wire              rst,
    input  wire              en,        // the array advances one step per cycle while en is high
    input  wire [N*8-1:0]    a_left,
    input  wire [N-1:0]      first_left,
    input  wire [N-1:0]      last_left,
    input  wire [N*N*8-1:0]  b_inj,     // row i, column c at bits (i*N+c)*8
    input  wire [N-1:0]      inj,
    output reg  [N*N*32-1:0] res        // PE(i,c) at bits (i*N+c)*32
);
    // Each PE keeps its own registers (declared inside its generate block), so a simulator only
    // re-evaluates a PE when its own inputs change.
    genvar i, c;
    generate
        for (i = 0; i < N; i = i + 1) begin : g_row
            for (c = 0; c < N; c = c + 1) begin : g_col
                reg  [7:0]  a_q;     // the left operand, passed to the right neighbour
                reg  [7:0]  b_q;     // the top operand, passed down
                reg         f_q, l_q;
                reg  signed [15:0] prod;
                reg         f_p, l_p;
                reg  [31:0] acc_q;
                wire [7:0]  a_in;
                wire [7:0]  b_in;
                wire        f_in, l_in;
                if (c == 0) begin : g_a_edge
                    assign a_in = a_left[i*8 +: 8];
                    assign f_in = first_left[i];
                    assign l_in = last_left[i];
                end else begin : g_a_inner
                    assign a_in = g_row[i].g_col[c-1].a_q;
                    assign f_in = g_row[i].g_col[c-1].f_q;
                    assign l_in = g_row[i].g_col[c-1].l_q;
                end
                if (i == 0) begin : g_b_edge
                    assign b_in = inj[0] ? b_inj[c*8 +: 8] : 8'd0;
                end else begin : g_b_inner
                    assign b_in = inj[i] ? b_inj[(i*N+c)*8 +: 8] : g_row[i-1].g_col[c].b_q;
                end
                // reset last: the last nonblocking assignment to a register wins, so this is
                // `if (rst) ... else if (en) ...`; written in this order, every register is read
                // before it is written, and Verilator needs no copy of it (rtl/lint.vlt has none)
                always @(posedge clk) begin
                    if (en) begin  // the pipeline from its end, so each stage is read before it moves
                        // the product added to the running sum, or alone on a result's first
                        // step; the same sum goes to res on its last (written out twice rather
                        // than as a wire, so an event simulator computes it at the clock edge only)
                        if (l_p) res[(i*N+c)*32 +: 32] <= (f_p ? 32'd0 : acc_q) + {{16{prod[15]}}, prod};
                        acc_q <= (f_p ? 32'd0 : acc_q) + {{16{prod[15]}}, prod};
                        prod <= $signed(a_q) * $signed(b_q);
                        f_p <= f_q;
                        l_p <= l_q;
                        a_q <= a_in;
                        b_q <= b_in;
                        f_q <= f_in;
                        l_q <= l_in;
                    end
                    if (rst) begin
                        a_q <= 8'd0;
                        b_q <= 8'd0;
                        f_q <= 1'b0;
                        l_q <= 1'b0;
                        prod <= 16'sd0;
                        f_p <= 1'b0;
                        l_p <= 1'b0;
                        acc_q <= 32'd0;
                        res[(i*N+c)*32 +: 32] <= 32'd0;
                    end
                end
            end
        end
    endgenerate
endmodule
`default_nettype wire
