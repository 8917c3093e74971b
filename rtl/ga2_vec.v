`timescale 1ns/1ps
`default_nettype none
// ga2_vec: the element-wise unit, four int8 lanes (one word of each operand) per cycle.
//   COPY y = a;  RELU y = max(a, 0);  MAX y = max(a, b)
//   ADD  y = sat8((a*qa + b*qb + rnd) >> qs)     (a residual of two tensors with their own scales)
//   MUL  y = sat8((a*b*qa + rnd) >> qs)          (element-wise products, e.g. rotary positions)
//   ARGMAX: one int32 word, the index of the first maximum of a[0:n]
// Timing: words n/4 rounded up, one per cycle, then one finishing cycle (ARGMAX writes in it).
// Lanes past n are written as zero.
module ga2_vec (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [3:0]  sub,
    input  wire [15:0] n,
    input  wire [11:0] src_a,
    input  wire [11:0] src_b,
    input  wire [11:0] dst,
    input  wire [15:0] qa,
    input  wire [15:0] qb,
    input  wire [5:0]  qs,
    output wire [11:0] ra_addr,
    input  wire [31:0] ra_data,
    output wire [11:0] rb_addr,
    input  wire [31:0] rb_data,
    output wire        we,
    output wire [11:0] waddr,
    output wire [31:0] wdata,
    output wire        done
);
    `include "ga2_defs.vh"

    reg        running, finishing;
    reg [3:0]  op;
    reg [15:0] len, nw, w, qa_r, qb_r;
    reg [11:0] pa, pb, pd;
    reg [5:0]  qs_r;
    reg [7:0]  best;
    reg [15:0] best_idx;

    assign ra_addr = pa + w[11:0];
    assign rb_addr = pb + w[11:0];

    wire [7:0]  y     [0:3];
    wire [3:0]  valid;
    wire [15:0] first = {w[13:0], 2'b00};  // element index of lane 0 in this word

    genvar l;
    generate
        for (l = 0; l < 4; l = l + 1) begin : g_lane
            localparam [15:0] LANE = l;
            wire signed [7:0]  a = ra_data[l*8 +: 8];
            wire signed [7:0]  b = rb_data[l*8 +: 8];
            wire signed [31:0] a_x = {{24{a[7]}}, a};
            wire signed [31:0] b_x = {{24{b[7]}}, b};
            wire signed [31:0] sum = a_x * $signed({16'd0, qa_r}) + b_x * $signed({16'd0, qb_r});
            wire signed [31:0] prd = a_x * b_x;
            wire [7:0] rq;
            requant u_rq (.acc(op == VEC_ADD ? sum : prd), .mult(op == VEC_ADD ? 16'd1 : qa_r),
                          .shift(qs_r), .y(rq));
            assign valid[l] = (first + LANE) < len;
            assign y[l] = !valid[l] ? 8'd0 :
                          (op == VEC_COPY) ? a :
                          (op == VEC_RELU) ? (a[7] ? 8'd0 : a) :
                          (op == VEC_MAX)  ? ((a > b) ? a : b) : rq;
        end
    endgenerate

    // running argmax across the four lanes of this word: the first maximum wins
    reg [7:0]  scan_v;
    reg [15:0] scan_i;
    integer q;
    always @(*) begin
        scan_v = best;
        scan_i = best_idx;
        for (q = 0; q < 4; q = q + 1) begin
            if (valid[q] && $signed(ra_data[q*8 +: 8]) > $signed(scan_v)) begin
                scan_v = ra_data[q*8 +: 8];
                scan_i = first + q[15:0];
            end
        end
    end

    assign we    = (running && op != VEC_ARGMAX) || (finishing && op == VEC_ARGMAX);
    assign waddr = (op == VEC_ARGMAX) ? pd : (pd + w[11:0]);
    assign wdata = (op == VEC_ARGMAX) ? {16'd0, best_idx} : {y[3], y[2], y[1], y[0]};
    assign done  = finishing;

    always @(posedge clk) begin
        if (rst) begin
            running <= 1'b0;
            finishing <= 1'b0;
            op <= 4'd0;
            len <= 16'd0;
            nw <= 16'd0;
            w <= 16'd0;
            pa <= 12'd0;
            pb <= 12'd0;
            pd <= 12'd0;
            qa_r <= 16'd0;
            qb_r <= 16'd0;
            qs_r <= 6'd0;
            best <= 8'h80;
            best_idx <= 16'd0;
        end else if (start) begin
            running <= 1'b1;
            op <= sub;
            len <= n;
            nw <= (n + 16'd3) >> 2;
            w <= 16'd0;
            pa <= src_a;
            pb <= src_b;
            pd <= dst;
            qa_r <= qa;
            qb_r <= qb;
            qs_r <= qs;
            best <= 8'h80;
            best_idx <= 16'd0;
        end else if (running) begin
            best <= scan_v;
            best_idx <= scan_i;
            if (w == nw - 16'd1) begin
                running <= 1'b0;
                finishing <= 1'b1;
            end else begin
                w <= w + 16'd1;
            end
        end else if (finishing) begin
            finishing <= 1'b0;
        end
    end
endmodule
`default_nettype wire
