`timescale 1ns/1ps
`default_nettype none
// ga2_vec: the element-wise unit, four int8 lanes (one word of each operand) per cycle.
//   COPY y = a;  RELU y = max(a, 0);  MAX y = max(a, b)
//   ADD  y = sat8((a*qa + b*qb + rnd) >> qs)     (a residual of two tensors with their own scales)
//   MUL  y = sat8((a*(b*qa) + rnd) >> qs)        (element-wise products, e.g. rotary positions)
//   ARGMAX: one int32 word, the index of the first maximum of a[0:n]
// rnd = 2^(qs-1) (none when qs = 0). Lanes past n are written as zero.
//
// Timing: the start cycle is 0, cycle 1 sets up, and from cycle 2 the unit reads one word of each
// operand per cycle: `a` on the scratchpad's p0 port, `b` on p1. When word w of a and word w of b
// lie in the same bank (same lane and group) the bank cannot answer both, so b is read one cycle
// later: such a word costs two cycles. A word's operands are here two cycles after its last read;
// it is written five cycles after that (products, sum, rounding, shift, saturation). ARGMAX writes
// its index in the cycle the last word would be written. `done` is high in the cycle of the last
// write: cycles = nw + C + 8, nw = ceil(n/4) words, C = the words whose operands share a bank.
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
    output wire        ra_en,
    output wire [11:0] ra_addr,
    input  wire [31:0] ra_data,
    output wire        rb_en,
    output wire [11:0] rb_addr,
    input  wire [31:0] rb_data,
    output reg         we,
    output reg  [11:0] waddr,
    output reg  [31:0] wdata,
    output reg         done
);
    `include "ga2_defs.vh"
    localparam integer LAT = 5;  // operands here -> written

    // ------------------------------------------------------------------ instruction and reads
    reg        setup, issuing, second;
    reg [3:0]  op;
    reg [15:0] len, nw, w, qa_r, qb_r;
    reg [11:0] pa, pb, pd;
    reg [5:0]  qs_r;
    wire two = (op == VEC_ADD) || (op == VEC_MUL) || (op == VEC_MAX);

    wire [11:0] a_addr = pa + w[11:0];
    wire [11:0] b_addr = pb + w[11:0];
    wire        clash  = two && ({a_addr[11:10], a_addr[1:0]} == {b_addr[11:10], b_addr[1:0]});
    wire        last_w = (w == nw - 16'd1);
    // this cycle completes word w's reads (its b read, or its only read)
    wire        word_done = issuing && (second || !clash);

    assign ra_en   = issuing && !second;
    assign ra_addr = a_addr;
    assign rb_en   = issuing && two && (second || !clash);
    assign rb_addr = b_addr;

    always @(posedge clk) begin
        if (rst) begin
            setup <= 1'b0;
            issuing <= 1'b0;
            second <= 1'b0;
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
        end else begin
            setup <= start;
            if (start) begin
                op <= sub;
                len <= n;
                nw <= {2'd0, n[15:2]} + {15'd0, n[1] | n[0]};
                w <= 16'd0;
                pa <= src_a;
                pb <= src_b;
                pd <= dst;
                qa_r <= qa;
                qb_r <= qb;
                qs_r <= qs;
            end
            if (setup) issuing <= 1'b1;
            if (issuing) begin
                if (clash && !second) begin
                    second <= 1'b1;
                end else begin
                    second <= 1'b0;
                    w <= w + 16'd1;
                    if (last_w) issuing <= 1'b0;
                end
            end
        end
    end

    // ------------------------------------------------------- the word's tag, two reads down
    // t1/t2: the cycle after word_done and the one after that, when b (and a, unless it came a
    // cycle earlier and waits in a_hold) is here.
    reg        t1_on, t2_on, t1_last, t2_last, t1_split, t2_split;
    reg [13:0] t1_w, t2_w;             // word index (n < 2^16: below 2^14)
    reg        h1_on, h2_on;             // an a read whose b comes a cycle later
    reg [31:0] a_hold;
    always @(posedge clk) begin
        if (rst) begin
            t1_on <= 1'b0;
            t2_on <= 1'b0;
            t1_last <= 1'b0;
            t2_last <= 1'b0;
            t1_split <= 1'b0;
            t2_split <= 1'b0;
            t1_w <= 14'd0;
            t2_w <= 14'd0;
            h1_on <= 1'b0;
            h2_on <= 1'b0;
        end else begin
            t1_on <= word_done;
            t1_last <= word_done && last_w;
            t1_split <= second;
            t1_w <= w[13:0];
            t2_on <= t1_on;
            t2_last <= t1_last;
            t2_split <= t1_split;
            t2_w <= t1_w;
            h1_on <= issuing && clash && !second;
            h2_on <= h1_on;
        end
        if (h2_on) a_hold <= ra_data;
    end

    // --------------------------------------------------------------------- the lanes' pipeline
    wire [31:0] a_word = t2_split ? a_hold : ra_data;
    wire [15:0] first  = {t2_w, 2'b00};  // element index of lane 0 in this word

    reg  [7:0]  s1_a [0:3];
    reg  [7:0]  s1_b [0:3];
    reg  signed [24:0] s1_pa [0:3];          // ADD: a*qa
    reg  signed [24:0] s1_pb [0:3];          // ADD: b*qb; MUL: b*qa
    reg  signed [49:0] s2_sum [0:3];       // 50 bits: the rounding term reaches 2^46
    reg  [7:0]  s2_a [0:3];
    reg  [7:0]  s2_b [0:3];
    reg  signed [49:0] s3_sum [0:3];
    reg  [7:0]  s3_a [0:3];
    reg  [7:0]  s3_b [0:3];
    reg  signed [49:0] s4_q [0:3];
    reg  [7:0]  s4_a [0:3];
    reg  [7:0]  s4_b [0:3];
    reg  [3:0]  s1_ok, s2_ok, s3_ok, s4_ok;  // lanes below n
    reg  [LAT-1:1] p_on, p_last;            // the word's place in the pipeline
    reg  [11:0] p_addr [1:LAT-1];
    wire signed [49:0] rnd = (qs_r == 6'd0) ? 50'sd0 : (50'sd1 <<< (qs_r - 6'd1));

    function [7:0] sat8;
        input signed [49:0] v;
        begin
            sat8 = (v > 50'sd127) ? 8'h7f : (v < -50'sd128) ? 8'h80 : v[7:0];
        end
    endfunction

    integer l, s;
    always @(posedge clk) begin
        for (l = 0; l < 4; l = l + 1) begin
            // stage 1: the products
            s1_a[l] <= a_word[l*8 +: 8];
            s1_b[l] <= rb_data[l*8 +: 8];
            s1_pa[l] <= $signed(a_word[l*8 +: 8]) * $signed({1'b0, qa_r});
            s1_pb[l] <= $signed(rb_data[l*8 +: 8]) * $signed({1'b0, (op == VEC_MUL) ? qa_r : qb_r});
            s1_ok[l] <= (first + l[15:0]) < len;
            // stage 2: the sum (ADD) or the second product (MUL)
            s2_sum[l] <= (op == VEC_MUL) ? $signed(s1_a[l]) * s1_pb[l]
                                         : ($signed({{25{s1_pa[l][24]}}, s1_pa[l]}) + $signed({{25{s1_pb[l][24]}}, s1_pb[l]}));
            s2_a[l] <= s1_a[l];
            s2_b[l] <= s1_b[l];
            // stage 3: round
            s3_sum[l] <= s2_sum[l] + rnd;
            s3_a[l] <= s2_a[l];
            s3_b[l] <= s2_b[l];
            // stage 4: shift
            s4_q[l] <= s3_sum[l] >>> qs_r;
            s4_a[l] <= s3_a[l];
            s4_b[l] <= s3_b[l];
        end
        s2_ok <= s1_ok;
        s3_ok <= s2_ok;
        s4_ok <= s3_ok;
        p_addr[1] <= pd + t2_w[11:0];
        for (s = 2; s < LAT; s = s + 1) p_addr[s] <= p_addr[s-1];
    end
    always @(posedge clk) begin
        if (rst) begin
            p_on <= {(LAT-1){1'b0}};
            p_last <= {(LAT-1){1'b0}};
        end else begin
            p_on <= {p_on[LAT-2:1], t2_on};
            p_last <= {p_last[LAT-2:1], t2_last};
        end
    end

    // ARGMAX: the running first maximum, updated as each word's operands arrive
    reg [7:0]  best;
    reg [15:0] best_idx;
    reg [7:0]  scan_v;
    reg [15:0] scan_i;
    integer q;
    always @(*) begin
        scan_v = best;
        scan_i = best_idx;
        for (q = 0; q < 4; q = q + 1) begin
            if (((first + q[15:0]) < len) && $signed(a_word[q*8 +: 8]) > $signed(scan_v)) begin
                scan_v = a_word[q*8 +: 8];
                scan_i = first + q[15:0];
            end
        end
    end
    always @(posedge clk) begin
        if (rst || start) begin
            best <= 8'h80;
            best_idx <= 16'd0;
        end else if (t2_on) begin
            best <= scan_v;
            best_idx <= scan_i;
        end
    end

    // stage 5: saturate, choose the operation's result, write
    reg [7:0] y [0:3];
    always @(*) begin
        for (q = 0; q < 4; q = q + 1) begin
            case (op)
                VEC_COPY: y[q] = s4_a[q];
                VEC_RELU: y[q] = s4_a[q][7] ? 8'd0 : s4_a[q];
                VEC_MAX:  y[q] = ($signed(s4_a[q]) > $signed(s4_b[q])) ? s4_a[q] : s4_b[q];
                default:  y[q] = sat8(s4_q[q]);
            endcase
            if (!s4_ok[q]) y[q] = 8'd0;
        end
    end
    wire is_argmax = (op == VEC_ARGMAX);
    always @(posedge clk) begin
        if (rst) begin
            we <= 1'b0;
            done <= 1'b0;
            waddr <= 12'd0;
            wdata <= 32'd0;
        end else begin
            we <= is_argmax ? p_last[LAT-1] : p_on[LAT-1];
            done <= p_last[LAT-1];
            waddr <= is_argmax ? pd : p_addr[LAT-1];
            wdata <= is_argmax ? {16'd0, best_idx} : {y[3], y[2], y[1], y[0]};
        end
    end
endmodule
`default_nettype wire
