`timescale 1ns/1ps
`default_nettype none
// ga2_vec: the element-wise unit, four int8 lanes (one word of each operand) per cycle.
//   COPY y = a;  RELU y = max(a, 0);  MAX y = max(a, b)   (model/capra/isa.py's VEC_OPS: every sub-op)
//   ADD  y = sat8((a*qa + b*qb + rnd) >> qs)     (a residual of two tensors with their own scales)
//   MUL  y = sat8((a*b*qa + rnd) >> qs)          (element-wise products, e.g. rotary positions)
//   ARGMAX: one int32 word per row, the index of the first maximum of the row's a[0:n]
// rnd = 2^(qs-1) (none when qs = 0). Lanes past n are written as zero. A VEC runs over `rows`
// rows of n elements (0 means one), each row packed in ceil(n/4) words right after the one before;
// ARGMAX writes row r's index at dst + r.
//
// Timing: the start cycle is 0, cycle 1 sets up, and from cycle 2 the unit reads one word of each
// operand per cycle: `a` on the scratchpad's p0 port, `b` on p1. When word w of a and word w of b
// lie in the same bank (same lane and group) the bank cannot answer both, so b is read one cycle
// later: such a word costs two cycles. A word's operands are here two cycles after its last read;
// it is written eight cycles after that (products, ADD's sum, the requant bank's five stages that
// ga2 shares with the matmul engine, the write). ARGMAX writes a row's index in the cycle its last
// word would be written. `done` is high in the cycle of the last write: cycles = rows*nw + C + 11,
// nw = ceil(n/4) words, C = the words whose operands share a bank.
module ga2_vec #(
    parameter integer AW = 12  // scratchpad address bits
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [3:0]  sub,
    input  wire [15:0] n,
    input  wire [15:0] rows,
    input  wire [AW-1:0] src_a,
    input  wire [AW-1:0] src_b,
    input  wire [AW-1:0] dst,
    input  wire [15:0] qa,
    input  wire [15:0] qb,
    input  wire [5:0]  qs,
    output wire        ra_en,
    output wire [AW-1:0] ra_addr,
    input  wire [31:0] ra_data,
    output wire        rb_en,
    output wire [AW-1:0] rb_addr,
    input  wire [31:0] rb_data,
    output reg         we,
    output reg  [AW-1:0] waddr,
    output reg  [31:0] wdata,
    output reg         done,
    // the requant bank (see ga2_mm): four int32 lanes in, four int8 lanes out five cycles later
    output wire [127:0] rq_acc,
    output wire [15:0]  rq_mult,
    output wire [5:0]   rq_shift,
    output wire         rq_busy,
    input  wire [31:0]  rq_y
);
    `include "ga2_defs.vh"
    localparam integer LAT = 8;  // operands here -> written

    // ------------------------------------------------------------------ instruction and reads
    reg        setup, issuing, second;
    reg        busy;                     // from the start to `done`: the pipelines advance only then
    reg [3:0]  op;
    reg [15:0] len, nw, w, qa_r, qb_r;
    reg [15:0] rows_r, rw, row;          // the rows; the word within its row, and that row
    reg [AW-1:0] pa, pb, pd;
    reg [5:0]  qs_r;
    wire two = (op == VEC_ADD) || (op == VEC_MUL) || (op == VEC_MAX);

    wire [AW-1:0] a_addr = pa + w[AW-1:0];
    wire [AW-1:0] b_addr = pb + w[AW-1:0];
    wire        clash  = two && ({a_addr[AW-1:AW-2], a_addr[1:0]} == {b_addr[AW-1:AW-2], b_addr[1:0]});
    wire        row_end = (rw == nw - 16'd1);
    wire        last_w = row_end && (row == rows_r - 16'd1);
    // this cycle completes word w's reads (its b read, or its only read)
    wire        word_done = issuing && (second || !clash);

    assign ra_en   = issuing && !second;
    assign ra_addr = a_addr;
    assign rb_en   = issuing && two && (second || !clash);
    assign rb_addr = b_addr;

    always @(posedge clk) begin
        if (rst) begin
            setup <= 1'b0;
            busy <= 1'b0;
            issuing <= 1'b0;
            second <= 1'b0;
            op <= 4'd0;
            len <= 16'd0;
            nw <= 16'd0;
            w <= 16'd0;
            rows_r <= 16'd0;
            rw <= 16'd0;
            row <= 16'd0;
            pa <= {AW{1'b0}};
            pb <= {AW{1'b0}};
            pd <= {AW{1'b0}};
            qa_r <= 16'd0;
            qb_r <= 16'd0;
            qs_r <= 6'd0;
        end else begin
            setup <= start;
            busy <= start || (busy && !done);
            if (start) begin
                op <= sub;
                len <= n;
                nw <= {2'd0, n[15:2]} + {15'd0, n[1] | n[0]};
                w <= 16'd0;
                rows_r <= (rows == 16'd0) ? 16'd1 : rows;
                rw <= 16'd0;
                row <= 16'd0;
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
                    rw <= row_end ? 16'd0 : rw + 16'd1;
                    if (row_end) row <= row + 16'd1;
                    if (last_w) issuing <= 1'b0;
                end
            end
        end
    end

    // ------------------------------------------------------- the word's tag, two reads down
    // t1/t2: the cycle after word_done and the one after that, when b is here. So is a: when the
    // two clash, a was read a cycle before b, and the scratchpad's line port holds a read's data
    // until its next read (rtl/sram.v), which comes after b's.
    reg        t1_on, t2_on, t1_last, t2_last;
    reg        t1_rfirst, t2_rfirst, t1_rend, t2_rend;  // the first, the last word of its row
    reg [AW-1:0] t1_w, t2_w;           // word index (in the scratchpad: below 2^AW)
    reg [AW-1:0] t1_row, t2_row;       // its row
    reg [13:0] t1_rw, t2_rw;           // its word within the row (n < 2^16: below 2^14)
    reg [3:0]  t2_ok;                    // the word's lanes below n (worked out a cycle early)
    wire [15:0] first1 = {t1_rw, 2'b00};
    always @(posedge clk) begin
        if (rst) begin
            t1_on <= 1'b0;
            t2_on <= 1'b0;
            t1_last <= 1'b0;
            t2_last <= 1'b0;
            t1_rfirst <= 1'b0;
            t2_rfirst <= 1'b0;
            t1_rend <= 1'b0;
            t2_rend <= 1'b0;
            t1_w <= {AW{1'b0}};
            t2_w <= {AW{1'b0}};
            t1_row <= {AW{1'b0}};
            t2_row <= {AW{1'b0}};
            t1_rw <= 14'd0;
            t2_rw <= 14'd0;
            t2_ok <= 4'd0;
        end else if (busy) begin
            t1_on <= word_done;
            t1_last <= word_done && last_w;
            t1_rfirst <= rw == 16'd0;
            t1_rend <= row_end;
            t1_w <= w[AW-1:0];
            t1_row <= row[AW-1:0];
            t1_rw <= rw[13:0];
            t2_on <= t1_on;
            t2_last <= t1_last;
            t2_rfirst <= t1_rfirst;
            t2_rend <= t1_rend;
            t2_w <= t1_w;
            t2_row <= t1_row;
            t2_rw <= t1_rw;
            t2_ok <= {first1 + 16'd3 < len, first1 + 16'd2 < len, first1 + 16'd1 < len, first1 < len};
        end
    end

    // --------------------------------------------------------------------- the lanes' pipeline
    // Stage 1: the products (ADD: a*qa and b*qb; MUL: a*b) and the results that need no
    // requantization. Stage 2: ADD's sum, which with MUL's product goes to the requant bank
    // (ADD: multiplier 1; MUL: qa) and comes back five cycles later; the rest keeps pace.
    wire [31:0] a_word = ra_data;
    wire [15:0] first  = {t2_rw, 2'b00};  // element index (in its row) of lane 0 in this word
    wire        is_argmax = (op == VEC_ARGMAX);

    reg  signed [24:0] s1_pa [0:3];
    reg  signed [24:0] s1_pb [0:3];
    reg  signed [15:0] s1_ab [0:3];
    reg  [7:0]  s1_y [0:3];             // a lane's int8 result for the sub-ops of the case below
    reg  [31:0] s2_acc [0:3];
    reg  [3:0]  s1_ok;
    reg  [LAT-1:1] p_on, p_last, p_rend;  // the word's place in the pipeline
    reg  [AW*(LAT-1)-1:0] p_addr;       // stage s (1..LAT-1) at bits AW(s-1): the word's address
    reg  [36*(LAT-2)-1:0] p_rest;       // stage s (2..LAT-1) at 36(s-2): {lanes below n, result without requantization}
    integer l;
    always @(posedge clk) if (busy) begin
        for (l = 0; l < 4; l = l + 1) begin
            s1_pa[l] <= $signed(a_word[l*8 +: 8]) * $signed({1'b0, qa_r});
            s1_pb[l] <= $signed(rb_data[l*8 +: 8]) * $signed({1'b0, qb_r});
            s1_ab[l] <= $signed(a_word[l*8 +: 8]) * $signed(rb_data[l*8 +: 8]);
            s1_ok[l] <= t2_ok[l];
            case (op)
                VEC_RELU: s1_y[l] <= a_word[l*8 + 7] ? 8'd0 : a_word[l*8 +: 8];
                VEC_MAX:  s1_y[l] <= ($signed(a_word[l*8 +: 8]) > $signed(rb_data[l*8 +: 8])) ? a_word[l*8 +: 8]
                                                                                          : rb_data[l*8 +: 8];
                default:  s1_y[l] <= a_word[l*8 +: 8];
            endcase
            s2_acc[l] <= (op == VEC_ADD) ? $signed({{7{s1_pa[l][24]}}, s1_pa[l]}) + $signed({{7{s1_pb[l][24]}}, s1_pb[l]})
                                         : {{16{s1_ab[l][15]}}, s1_ab[l]};
        end
        p_rest <= {p_rest[36*(LAT-3)-1:0], s1_ok, s1_y[3], s1_y[2], s1_y[1], s1_y[0]};
        // the word's address, or ARGMAX's: its row's index word
        p_addr <= {p_addr[AW*(LAT-2)-1:0], pd + (is_argmax ? t2_row : t2_w)};
    end
    always @(posedge clk) begin
        if (rst) begin
            p_on <= {(LAT-1){1'b0}};
            p_last <= {(LAT-1){1'b0}};
            p_rend <= {(LAT-1){1'b0}};
        end else if (busy) begin
            p_on <= {p_on[LAT-2:1], t2_on};
            p_last <= {p_last[LAT-2:1], t2_last};
            p_rend <= {p_rend[LAT-2:1], t2_on && t2_rend};
        end
    end
    assign rq_acc   = {s2_acc[3], s2_acc[2], s2_acc[1], s2_acc[0]};
    assign rq_busy  = |p_on[LAT-2:2];  // a word between its sum (stage 2) and its requantized lanes
    assign rq_mult  = (op == VEC_ADD) ? 16'd1 : qa_r;
    assign rq_shift = qs_r;

    // ARGMAX: each word's first maximum by a tree of compares (registered), then the running one
    // of its row (from the row's first word on).
    function [23:0] first_max;        // {value, index} of the larger; the earlier on a tie
        input [23:0] p;
        input [23:0] q;
        begin
            first_max = ($signed(q[23:16]) > $signed(p[23:16])) ? q : p;
        end
    endfunction
    function [23:0] cand;             // a lane's {value, index}; a lane past n can never win: it
        input [1:0]  lane;             // becomes the smallest value at the largest index
        input        ok;
        input [31:0] word;
        input [15:0] first_el;
        begin
            cand = ok ? {word[lane*8 +: 8], first_el + {14'd0, lane}} : {8'h80, 16'hffff};
        end
    endfunction
    // (the tree takes two stages, pairs then the word: a word's row maximum so far is in `best`
    // when the word is at stage 3; stages 4..LAT-1 carry it to the row's write)
    localparam [23:0] NONE_YET = {8'h80, 16'd0};  // a row's maximum before its first word
    reg [23:0] pair_best [0:1];
    reg [23:0] word_best, best;
    reg        pair_on, word_on, pair_first, word_first;
    reg [16*(LAT-4)-1:0] p_best;      // stage s (4..LAT-1) at bits 16(s-4): the row's index so far
    always @(posedge clk) begin
        if (busy) begin
            pair_best[0] <= first_max(cand(2'd0, t2_ok[0], a_word, first), cand(2'd1, t2_ok[1], a_word, first));
            pair_best[1] <= first_max(cand(2'd2, t2_ok[2], a_word, first), cand(2'd3, t2_ok[3], a_word, first));
            word_best <= first_max(pair_best[0], pair_best[1]);
        end
        if (busy || rst) pair_on <= !rst && t2_on;
        if (busy || rst) word_on <= !rst && pair_on;
        if (busy || rst) pair_first <= !rst && t2_rfirst;
        if (busy || rst) word_first <= !rst && pair_first;
        if (rst || start) best <= NONE_YET;
        else if (word_on) best <= first_max(word_first ? NONE_YET : best, word_best);
        if (busy) p_best <= {p_best[16*(LAT-5)-1:0], best[15:0]};
    end

    // the write: requantized lanes (ADD, MUL), the others, or ARGMAX's index; zero past n
    wire requantized = (op == VEC_ADD) || (op == VEC_MUL);
    function [7:0] y;                 // a lane of the word written
        input       ok;                // the lane is below n
        input       rq;                // requantized (ADD, MUL)
        input [7:0] rq_lane;
        input [7:0] plain;
        begin
            y = !ok ? 8'd0 : rq ? rq_lane : plain;
        end
    endfunction
    always @(posedge clk) begin
        if (rst) begin
            we <= 1'b0;
            done <= 1'b0;
            waddr <= {AW{1'b0}};
            wdata <= 32'd0;
        end else if (busy) begin
            we <= is_argmax ? p_rend[LAT-1] : p_on[LAT-1];
            done <= p_last[LAT-1];
            waddr <= p_addr[AW*(LAT-2) +: AW];
            wdata <= is_argmax ? {16'd0, p_best[16*(LAT-5) +: 16]}
                               : {y(p_rest[36*(LAT-3) + 35], requantized, rq_y[31:24], p_rest[36*(LAT-3) + 24 +: 8]),
                                  y(p_rest[36*(LAT-3) + 34], requantized, rq_y[23:16], p_rest[36*(LAT-3) + 16 +: 8]),
                                  y(p_rest[36*(LAT-3) + 33], requantized, rq_y[15:8], p_rest[36*(LAT-3) + 8 +: 8]),
                                  y(p_rest[36*(LAT-3) + 32], requantized, rq_y[7:0], p_rest[36*(LAT-3) +: 8])};
        end
    end
endmodule
`default_nettype wire
