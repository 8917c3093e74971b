`timescale 1ns/1ps
`default_nettype none
// ga2_sm: integer softmax of one packed int8 row into probabilities (scale 1/128).
//   m = max(x[0:n], sink)                               pass 1
//   d(x) = min(255, ((m - x) * smul + 2^9) >> 10)       the difference in table steps of 1/16
//                                                       (smul = 2^14 * the input scale)
//   S = sum E[d(x)] (+ E[d(sink)])                      pass 2, E = exp_lut
//   R = floor(2^31 / S)                                 one division (divu)
//   p = min(127, (E[d(x)] * R + 2^23) >> 24)            pass 3, written one word per cycle
// One reciprocal per row instead of one division per element. With the sink flag an extra logit
// takes part in the max and the sum but gets no output. Lanes past n are written as zero.
// S >= E[0] = 2^15 (the maximum's own term), so R <= 2^16: 17 bits of the quotient are enough.
//
// Timing: the start cycle is 0, cycle 1 sets up, then each pass reads one word per cycle on the
// scratchpad's p0 port, its data two cycles later:
//   pass 1 reads in cycles 2 .. nw+1 (nw = ceil(n/4)); a word's maximum takes two cycles (a tree
//     of compares, then the running maximum), so the max is final when pass 2's data arrives
//   pass 2 reads in cycles nw+3 .. 2nw+2, then one slot for the sink (a zero term without it);
//     per slot: the difference, times smul, shift and clamp, table read, lane sum, running sum
//   the division starts when the sum is final and pass 3 starts the cycle after divu says done;
//   divu takes the sum in the cycle the sink slot's term is added to it (the divisor is that sum);
//   pass 3 writes each word six cycles after its data arrives.
// `done` is high in the cycle of the last write: cycles = 3 * nw + DIV_CYCLES + 18.
//
// The online-softmax modes (`mode`, the instruction's sub field) keep a three-word state per row
// at `st`: m (int8, sign-extended), l (uint32), alpha (Q15).
//   STEP (1): cycles 2, 3 read m_old and l_old (m starts at m_old, and m_old takes the sink's slot);
//     pass 1 in cycles 4 .. nw+3, a gap, then the write pass in nw+5 .. 2nw+4 with
//     p = min(127, (E + 2^7) >> 8) (the reciprocal replaced by 2^16), the slot of m_old gives
//     alpha = E[d(m_old)]; m is written before the first p (it is final when the write pass's first
//     data arrives), and after the last p two writes: alpha, then l = (l_old*alpha + 2^14) >> 15
//     + sum p. cycles = 2 * nw + 14.
//   ACC (2): cycle 2 reads alpha; then T[i] and O[i] in turn (cycles 3 + 2i, 4 + 2i), each O[i]
//     written as ((O*alpha + 2^14) >>> 15) + T three cycles after its data (O registered, the two
//     products registered, the sum): cycles = 2 * n + 7.
//   NORM (3): out = clamp((O * R + 2^(30-k)) >>> (31-k)), k = the sink field's bits 3:0 (an output
//     scale of 2^-k of O's); cycle 2 reads l, divu divides 2^31 by it from cycle 5, O[i] is read in cycle 39 + i
//     and each int8 word is written six cycles after its last lane's data (O, the four products, two
//     sums, the shift, then the clamp and the write): cycles = n + DIV_CYCLES + 14.
module ga2_sm #(
    parameter integer AW = 12  // scratchpad address bits
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        sink_en,
    input  wire [1:0]  mode,           // SM_SOFTMAX, SM_STEP, SM_ACC, SM_NORM
    input  wire [AW-1:0] st,           // the row's state (STEP, ACC, NORM)
    input  wire [7:0]  sink,
    input  wire [15:0] smul,
    input  wire [15:0] n,
    input  wire [AW-1:0] src,
    input  wire [AW-1:0] dst,
    output wire        re,
    output wire [AW-1:0] rd_addr,
    input  wire [31:0] rd_data,
    output reg         we,
    output reg  [AW-1:0] waddr,
    output reg  [31:0] wdata,
    output reg         done
);
    `include "ga2_defs.vh"

    localparam [3:0] S_IDLE = 4'd0, S_SETUP = 4'd1, S_MAX = 4'd2, S_GAP = 4'd3, S_SUM = 4'd4,
                     S_SINK = 4'd5, S_DIV = 4'd6, S_NORM = 4'd7, S_END = 4'd8, S_STATE = 4'd9,
                     S_AST = 4'd10, S_ACC = 4'd11, S_NST = 4'd12, S_NDIV = 4'd13, S_NPASS = 4'd14;
    localparam [1:0] M_SOFTMAX = SM_SOFTMAX[1:0], M_STEP = SM_STEP[1:0], M_ACC = SM_ACC[1:0],
                     M_NORM = SM_NORM[1:0];
    reg [3:0]  state;
    wire       run = (state != S_IDLE);  // the pipelines advance only while the unit runs
    reg [15:0] len, nw, w;
    reg [AW-1:0] ps, pd;
    reg        has_sink;
    reg [7:0]  sink_r, m;
    reg [15:0] smul_r;
    reg [31:0] sum;
    wire [31:0] sum_next;               // sum with the terms of stage 3 added
    wire       div_now;                 // SMAX: divu starts, with sum_next as the divisor
    reg [31:0] lold, lreg;              // STEP: l_old; NORM: l
    reg [15:0] alpha;                   // STEP: E[d(m_old)]; ACC: the state's alpha
    reg        div_go, div_wait;
    reg [1:0]  md;                      // the running instruction's mode
    reg [AW-1:0] pst;
    reg        ph;                      // ACC: 0 reads T[w], 1 reads O[w]

    wire last_w = (w == nw - 16'd1);
    wire last_n = (w == len - 16'd1);   // ACC and NORM step over n int32 words
    assign re      = (state == S_MAX) || (state == S_SUM) || (state == S_NORM) || (state == S_STATE)
                     || (state == S_AST) || (state == S_ACC) || (state == S_NST) || (state == S_NPASS);
    assign rd_addr = (state == S_STATE) ? pst + w[AW-1:0]
                   : (state == S_AST)   ? pst + 2
                   : (state == S_NST)   ? pst + 1
                   : (state == S_ACC && ph) ? pd + w[AW-1:0]
                   : ps + w[AW-1:0];

    // the slot's tag: 1 = pass 1, 2 = pass 2, 3 = the sink slot, 4 = pass 3
    // 5 = a state word, 6 = ACC's alpha, 7 = an ACC or NORM data word (T when l1/l2's phase says)
    localparam [2:0] K_NONE = 3'd0, K_MAX = 3'd1, K_SUM = 3'd2, K_SINK = 3'd3, K_NORM = 3'd4, K_ST = 3'd5,
                     K_AL = 3'd6, K_DAT = 3'd7;
    wire [2:0] k_now = (state == S_MAX) ? K_MAX : (state == S_SUM) ? K_SUM : (state == S_SINK) ? K_SINK :
                       (state == S_NORM) ? K_NORM : (state == S_STATE || state == S_NST) ? K_ST :
                       (state == S_AST) ? K_AL : (state == S_ACC || state == S_NPASS) ? K_DAT : K_NONE;
    reg  ph1, ph2;                      // the data word's phase (ACC: 1 = O)
    reg  dl1, dl2;                      // ACC / NORM: the last element
    reg  [2:0]  k1, k2;
    reg  [13:0] w1;
    reg  [AW-1:0] w2;                   // the slot's word index, as an address offset
    reg         l1, l2;                 // the pass's last word
    reg  [3:0]  ok2;                    // the slot's lanes below n (lane_ok below), worked out a cycle early
    reg         sink_slot;              // k2 == K_SINK, worked out a cycle early

    always @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            len <= 16'd0;
            nw <= 16'd0;
            w <= 16'd0;
            ps <= {AW{1'b0}};
            pd <= {AW{1'b0}};
            has_sink <= 1'b0;
            sink_r <= 8'd0;
            smul_r <= 16'd0;
            div_go <= 1'b0;
            div_wait <= 1'b0;
            lold <= 32'd0;
            lreg <= 32'd0;
            alpha <= 16'd0;
            k1 <= K_NONE;
            k2 <= K_NONE;
            w1 <= 14'd0;
            w2 <= {AW{1'b0}};
            l1 <= 1'b0;
            l2 <= 1'b0;
            ok2 <= 4'd0;
            sink_slot <= 1'b0;
            md <= M_SOFTMAX;
            pst <= {AW{1'b0}};
            ph <= 1'b0;
            ph1 <= 1'b0;
            ph2 <= 1'b0;
            dl1 <= 1'b0;
            dl2 <= 1'b0;
        end else begin
            if (run) begin
                ph1 <= ph;
                ph2 <= ph1;
                dl1 <= last_n;
                dl2 <= dl1;
                k1 <= k_now;
                w1 <= w[13:0];
                l1 <= last_w;
                k2 <= k1;
                w2 <= w1[AW-1:0];
                l2 <= l1;
                sink_slot <= (k1 == K_SINK);
                if (k2 == K_ST && md == M_STEP) begin
                    if (w2 == {AW{1'b0}}) sink_r <= rd_data[7:0];  // m_old takes the sink's slot: alpha
                    else lold <= rd_data;
                end
                if (k2 == K_ST && md == M_NORM) lreg <= rd_data;
                if (k2 == K_AL) alpha <= rd_data[15:0];
                else if (md == M_STEP && s3_k == K_SINK) alpha <= e[0];  // E[d(m_old)]
                ok2 <= {lane_ok(2'd3, k1 == K_SINK, has_sink, {w1, 2'b00}, len),
                        lane_ok(2'd2, k1 == K_SINK, has_sink, {w1, 2'b00}, len),
                        lane_ok(2'd1, k1 == K_SINK, has_sink, {w1, 2'b00}, len),
                        lane_ok(2'd0, k1 == K_SINK, has_sink, {w1, 2'b00}, len)};
            end
            div_go <= 1'b0;
            case (state)
                S_IDLE: if (start) begin
                    len <= n;
                    nw <= {2'd0, n[15:2]} + {15'd0, n[1] | n[0]};
                    ps <= src;
                    pd <= dst;
                    pst <= st;
                    md <= mode;
                    has_sink <= sink_en && (mode == M_SOFTMAX);
                    sink_r <= sink;
                    smul_r <= smul;
                    state <= S_SETUP;
                end
                S_SETUP: begin
                    w <= 16'd0;
                    ph <= 1'b0;
                    state <= (md == M_STEP) ? S_STATE : (md == M_ACC) ? S_AST : (md == M_NORM) ? S_NST : S_MAX;
                end
                S_STATE: begin  // m_old, l_old
                    w <= (w == 16'd1) ? 16'd0 : w + 16'd1;
                    if (w == 16'd1) state <= S_MAX;
                end
                S_AST: state <= S_ACC;
                S_ACC: begin
                    ph <= !ph;
                    if (ph) w <= w + 16'd1;
                    if (ph && last_n) state <= S_END;
                end
                S_NST: state <= S_NDIV;
                S_NDIV: begin  // l arrives, divide, wait for the quotient
                    if (k2 == K_ST) begin
                        div_go <= 1'b1;
                        div_wait <= 1'b1;
                    end else if (div_wait && div_done && !div_go) begin
                        div_wait <= 1'b0;
                        w <= 16'd0;
                        state <= S_NPASS;
                    end
                end
                S_NPASS: begin
                    w <= w + 16'd1;
                    if (last_n) state <= S_END;
                end
                S_MAX: begin
                    w <= last_w ? 16'd0 : w + 16'd1;
                    if (last_w) state <= S_GAP;
                end
                S_GAP: state <= (md == M_STEP) ? S_NORM : S_SUM;  // the last word's maximum reaches m
                S_SUM: begin
                    w <= last_w ? 16'd0 : w + 16'd1;
                    if (last_w) state <= S_SINK;
                end
                S_SINK: state <= (md == M_STEP) ? S_END : S_DIV;
                S_DIV: begin  // wait for the sum's last term (divu starts with it), wait for the quotient
                    if (div_now) begin
                        div_wait <= 1'b1;
                    end else if (div_wait && div_done && !div_go) begin  // divu's done is stale in its start cycle
                        div_wait <= 1'b0;
                        state <= S_NORM;
                    end
                end
                S_NORM: begin
                    w <= last_w ? 16'd0 : w + 16'd1;
                    if (last_w) state <= (md == M_STEP) ? S_SINK : S_END;
                end
                S_END: if (done) state <= S_IDLE;
                default: state <= S_IDLE;
            endcase
        end
    end

    // ------------------------------------------------------------------- the lanes' pipeline
    // Stage 0 is the slot's arrival (its data is here): x = the word's lanes, or the sink. The
    // lanes' values are functions of their arguments, evaluated where they are registered (a
    // simulator works them out only while the unit runs).
    function [7:0] lane_x;             // x of a lane
        input [1:0]  lane;
        input        sink_now;         // the sink slot
        input [7:0]  sink_v;
        input [31:0] word;
        begin
            lane_x = sink_now ? sink_v : word[lane*8 +: 8];
        end
    endfunction
    function lane_ok;                  // a lane below n (the sink slot: lane 0 with a sink)
        input [1:0]  lane;
        input        sink_now;
        input        with_sink;
        input [15:0] first_el;         // the element in lane 0
        input [15:0] n_el;
        begin
            lane_ok = sink_now ? (lane == 2'd0 && with_sink) : ((first_el + {14'd0, lane}) < n_el);
        end
    endfunction

    // pass 1: each word's maximum by a tree of compares (registered), then the running maximum
    function [7:0] max8;
        input [7:0] p;
        input [7:0] q;
        begin
            max8 = ($signed(p) > $signed(q)) ? p : q;
        end
    endfunction
    function [7:0] max4;               // the largest of four lanes: six compares side by side, then a select
        input [31:0] v;
        reg ge01, ge02, ge03, ge12, ge13, ge23;
        begin
            ge01 = $signed(v[7:0]) >= $signed(v[15:8]);
            ge02 = $signed(v[7:0]) >= $signed(v[23:16]);
            ge03 = $signed(v[7:0]) >= $signed(v[31:24]);
            ge12 = $signed(v[15:8]) >= $signed(v[23:16]);
            ge13 = $signed(v[15:8]) >= $signed(v[31:24]);
            ge23 = $signed(v[23:16]) >= $signed(v[31:24]);
            if (ge01 && ge02 && ge03) max4 = v[7:0];
            else if (!ge01 && ge12 && ge13) max4 = v[15:8];
            else if (!ge02 && !ge12 && ge23) max4 = v[23:16];
            else max4 = v[31:24];
        end
    endfunction
    function [7:0] max_x;              // a lane's x, or -128 (never raises a maximum) past n
        input       ok;
        input [7:0] x;
        begin
            max_x = ok ? x : 8'h80;
        end
    endfunction
    reg [7:0] word_max;
    reg       word_max_on;
    always @(posedge clk) begin
        // (a pass-1 slot is never the sink's: the sink enters m at the start)
        if (run) word_max <= max4({max_x(ok2[3], rd_data[31:24]), max_x(ok2[2], rd_data[23:16]),
                                   max_x(ok2[1], rd_data[15:8]), max_x(ok2[0], rd_data[7:0])});
        if (run || rst) word_max_on <= !rst && (k2 == K_MAX);
        if (rst) m <= 8'd0;
        else if (start) m <= sink_en ? sink : 8'h80;
        else if (run && md == M_STEP && k2 == K_ST && w2 == {AW{1'b0}}) m <= rd_data[7:0];  // m_old
        else if (word_max_on) m <= max8(m, word_max);
    end

    // passes 2 and 3: table index, table value
    reg  [7:0]  d_diff [0:3];           // m - x (0..255 below n), registered before its multiply
    reg  [2:0]  d_k;
    reg  [3:0]  d_ok;
    reg  [AW-1:0] d_a;
    reg         d_l;
    reg  [23:0] s1_prod [0:3];
    wire [15:0] e_rom [0:3];            // the table's answer for the slot at stage 2 (read from stage 1's index)
    reg  [15:0] e [0:3];                // the slot's table values, at stage 3
    reg  [2:0]  s1_k, s2_k, s3_k, s4_k;
    reg  [3:0]  s1_ok, s2_ok, s3_ok, s4_ok;
    reg  [AW-1:0] s1_a, s2_a, s3_a, s4_a;
    reg         s1_l, s2_l, s3_l, s4_l;
    function [7:0] table_step;         // min(255, (prod + 2^9) >> 10): the difference in table steps
        input [23:0] prod;
        reg   [24:0] steps;
        begin
            steps = ({1'b0, prod} + (25'd1 << (GA2_SM_SCALE_SHIFT - 1))) >> GA2_SM_SCALE_SHIFT;
            table_step = (steps > 25'd255) ? 8'd255 : steps[7:0];
        end
    endfunction
    genvar gl;
    generate
        for (gl = 0; gl < 4; gl = gl + 1) begin : g_lut
            exp_lut u_exp (.clk(clk), .d(table_step(s1_prod[gl])), .e(e_rom[gl]));
        end
    endgenerate

    // pass 2: the sum; pass 3: the probabilities
    /* verilator lint_off UNUSEDSIGNAL */
    reg  [31:0] s4_p [0:3];             // E*R; bits 22:0 only round away
    /* verilator lint_on UNUSEDSIGNAL */
    wire [16:0] recip;
    wire [31:0] quotient;  // SMAX: S >= 2^15 (see the header), the quotient is below 2^17; NORM: all 32 bits
    assign recip = (md == M_STEP) ? 17'h10000 : quotient[16:0];  // STEP: p = (E + 2^7) >> 8
    integer l;
    always @(posedge clk) if (run) begin
        for (l = 0; l < 4; l = l + 1) begin
            d_diff[l] <= m - lane_x(l[1:0], sink_slot, sink_r, rd_data);
            s1_prod[l] <= {16'd0, d_diff[l]} * {8'd0, smul_r};
            e[l] <= e_rom[l];
            s4_p[l] <= {16'd0, e[l]} * {15'd0, recip};
        end
        d_ok <= ok2;
        s1_ok <= d_ok;
        s2_ok <= s1_ok;
        s3_ok <= s2_ok;
        s4_ok <= s3_ok;
        d_a <= pd + w2;
        s1_a <= d_a;
        s2_a <= s1_a;
        s3_a <= s2_a;
        s4_a <= s3_a;
    end
    always @(posedge clk) begin
        if (rst) begin
            d_k <= K_NONE;
            s1_k <= K_NONE;
            s2_k <= K_NONE;
            s3_k <= K_NONE;
            s4_k <= K_NONE;
            d_l <= 1'b0;
            s1_l <= 1'b0;
            s2_l <= 1'b0;
            s3_l <= 1'b0;
            s4_l <= 1'b0;
            sum <= 32'd0;
        end else if (run || start) begin
            d_k <= k2;
            s1_k <= d_k;
            s2_k <= s1_k;
            s3_k <= s2_k;
            s4_k <= s3_k;
            d_l <= l2;
            s1_l <= d_l;
            s2_l <= s1_l;
            s3_l <= s2_l;
            s4_l <= s3_l;
            if (start) sum <= 32'd0;
            else if (s3_k == K_SUM || s3_k == K_SINK) sum <= sum_next;
        end
    end
    assign sum_next = sum + (s3_ok[0] ? {16'd0, e[0]} : 32'd0) + (s3_ok[1] ? {16'd0, e[1]} : 32'd0)
                               + (s3_ok[2] ? {16'd0, e[2]} : 32'd0) + (s3_ok[3] ? {16'd0, e[3]} : 32'd0);
    // the division starts in the cycle the sink slot's term is added: divu takes the final sum as it is formed
    assign div_now = (state == S_DIV) && (s3_k == K_SINK);

    /* verilator lint_off PINCONNECTEMPTY */
    wire div_done;
    divu u_div (
        .clk(clk), .rst(rst), .start(div_go || div_now), .dividend(32'd1 << GA2_SM_RECIP_BITS),
        .divisor((md == M_NORM) ? lreg : sum_next),
        .quotient(quotient), .remainder(), .done(div_done)
    );
    /* verilator lint_on PINCONNECTEMPTY */

    // the written word: p = min(127, (E * R + 2^23) >> 24), zero past n
    // (E*R + 2^23) >> 24 is E*R's bits 31:24 plus its bit 23 (E*R <= 2^31)
    function [7:0] prob;               // a lane's p from its E*R
        input [31:0] er;
        input        ok;
        reg   [8:0]  rounded;
        begin
            rounded = {1'b0, er[31:GA2_SM_OUT_SHIFT]} + {8'd0, er[GA2_SM_OUT_SHIFT - 1]};
            prob = !ok ? 8'd0 : (rounded > {1'b0, GA2_SM_OUT_MAX[7:0]}) ? GA2_SM_OUT_MAX[7:0] : rounded[7:0];
        end
    endfunction
    // STEP: the sum of the written p; l = (l_old * alpha + 2^14) >> 15 + that sum
    function [9:0] psum4;
        input [31:0] wd;
        begin
            psum4 = {2'd0, wd[7:0]} + {2'd0, wd[15:8]} + {2'd0, wd[23:16]} + {2'd0, wd[31:24]};
        end
    endfunction

    // The wide products of STEP, ACC and NORM, cut into 16 x 16 pieces (each one MULT18X18D) that
    // are registered before they are added. With x = xh * 2^16 + xl (xl unsigned):
    //   (x * alpha + 2^14) >> 15 = 2 * (xh * alpha) + ((xl * alpha + 2^14) >> 15)   exactly,
    // as xh * alpha * 2^16 is a multiple of 2^15.
    // STEP and ACC share the two products of alpha: STEP's x is l_old (unsigned, in the cycle after
    // alpha is final), ACC's the O word of stage a (signed).
    reg  [31:0] a_o, a_t, b_t;          // ACC stage a: O and its T; stage b: T
    reg         a_v, a_l, b_v, b_l;     // ACC: a write in stage a / b, the last element
    reg  [AW-1:0] a_a, b_a;             // ACC: the element's address
    wire [31:0] x_mul = (md == M_ACC) ? a_o : lold;
    wire        x_neg = (md == M_ACC) && a_o[31];
    reg  [31:0] q_lo;                   // xl * alpha
    /* verilator lint_off UNUSEDSIGNAL */
    reg  [33:0] q_hi;                   // xh * alpha, signed; bits 33:31 leave the 32-bit result
    /* verilator lint_on UNUSEDSIGNAL */
    /* verilator lint_off UNUSEDSIGNAL */
    wire [32:0] q_lo_r = {1'b0, q_lo} + (33'd1 << (GA2_SM_ALPHA_BITS - 1));  // bits 14:0 round away
    /* verilator lint_on UNUSEDSIGNAL */
    wire [31:0] q_scaled = {q_hi[30:0], 1'b0} + {14'd0, q_lo_r[32:GA2_SM_ALPHA_BITS]};  // mod 2^32

    // NORM: clamp((O * R + 2^(30-k)) >>> (31-k)), R the 32-bit quotient, in five stages: O (a_o),
    // the four 16 x 16 products (b), the low and middle sums (c), the 65-bit sum (d), the shift (e);
    // the write stage clamps and packs.
    reg  [31:0] nb_ll, nb_lh;           // Ol * Rl, Ol * Rh (unsigned)
    reg  [32:0] nb_hl, nb_hh;           // Oh * Rl, Oh * Rh (signed)
    reg  [32:0] nc_lo;                  // Ol * Rl + 2^(30-k)
    reg  [33:0] nc_mid;                 // Ol * Rh + Oh * Rl, signed
    reg  [32:0] nc_hi;                  // Oh * Rh, signed
    /* verilator lint_off UNUSEDSIGNAL */
    reg  [64:0] nd_sum;                 // O * R + 2^(30-k), signed
    wire [64:0] nd_shifted = $signed(nd_sum) >>> (GA2_SM_NORM_SHIFT - {28'd0, sink_r[3:0]});
    /* verilator lint_on UNUSEDSIGNAL */
    reg  [48:0] ne_val;                 // the shifted sum: |O * R| < 2^63, shifted by 16 or more
    reg  [4:0]  n_v, n_l;               // NORM: an element in stage a .. e, the last element
    wire [32:0] n_rnd = 33'd1 << (GA2_SM_NORM_SHIFT - 1 - {28'd0, sink_r[3:0]});
    wire        n_fits = (ne_val[48:7] == {42{ne_val[48]}});
    wire [7:0]  n_byte = n_fits ? ne_val[7:0] : ne_val[48] ? 8'h80 : 8'h7f;
    always @(posedge clk) if (run) begin
        a_o <= rd_data;
        a_t <= tr;
        a_a <= pd + w2;
        b_t <= a_t;
        b_a <= a_a;
        q_lo <= x_mul[15:0] * alpha;
        q_hi <= $signed({x_neg, x_mul[31:16]}) * $signed({1'b0, alpha});
        nb_ll <= a_o[15:0] * quotient[15:0];
        nb_lh <= a_o[15:0] * quotient[31:16];
        nb_hl <= $signed(a_o[31:16]) * $signed({1'b0, quotient[15:0]});
        nb_hh <= $signed(a_o[31:16]) * $signed({1'b0, quotient[31:16]});
        nc_lo <= {1'b0, nb_ll} + n_rnd;
        nc_mid <= $signed({nb_hl[32], nb_hl}) + $signed({2'b00, nb_lh});
        nc_hi <= nb_hh;
        nd_sum <= {nc_hi, 32'd0} + {{15{nc_mid[33]}}, nc_mid, 16'd0} + {32'd0, nc_lo};
        ne_val <= nd_shifted[48:0];
    end

    reg  [31:0] tr, pack, psum;
    reg  [1:0]  tl;                     // STEP: the state writes after the last p
    reg         pw;                     // STEP: wdata holds a written p word (its sum goes to psum)
    reg  [15:0] ni;                     // NORM: the element leaving stage e
    wire [31:0] p_word = {prob(s4_p[3], s4_ok[3]), prob(s4_p[2], s4_ok[2]), prob(s4_p[1], s4_ok[1]),
                          prob(s4_p[0], s4_ok[0])};
    wire [31:0] n_pack = ((ni[1:0] == 2'd0) ? 32'd0 : pack) | ({24'd0, n_byte} << {ni[1:0], 3'b000});
    always @(posedge clk) begin
        if (rst) begin
            we <= 1'b0;
            done <= 1'b0;
            waddr <= {AW{1'b0}};
            wdata <= 32'd0;
            tr <= 32'd0;
            pack <= 32'd0;
            psum <= 32'd0;
            tl <= 2'd0;
            pw <= 1'b0;
            ni <= 16'd0;
            a_v <= 1'b0;
            a_l <= 1'b0;
            b_v <= 1'b0;
            b_l <= 1'b0;
            n_v <= 5'd0;
            n_l <= 5'd0;
        end else if (start) begin
            psum <= 32'd0;
            pw <= 1'b0;
            ni <= 16'd0;
            a_v <= 1'b0;
            b_v <= 1'b0;
            n_v <= 5'd0;
        end else if (run) begin
            we <= 1'b0;
            done <= 1'b0;
            a_v <= (md == M_ACC) && (k2 == K_DAT) && ph2;
            a_l <= dl2;
            b_v <= a_v;
            b_l <= a_l;
            n_v <= {n_v[3:0], (md == M_NORM) && (k2 == K_DAT)};
            n_l <= {n_l[3:0], dl2};
            pw <= 1'b0;
            case (md)
                M_ACC: begin
                    if (k2 == K_DAT && !ph2) tr <= rd_data;
                    if (b_v) begin
                        we <= 1'b1;
                        done <= b_l;
                        waddr <= b_a;
                        wdata <= q_scaled + b_t;
                    end
                end
                M_NORM: if (n_v[4]) begin
                    ni <= ni + 16'd1;
                    pack <= n_pack;
                    if (ni[1:0] == 2'd3 || n_l[4]) begin
                        we <= 1'b1;
                        done <= n_l[4];
                        waddr <= pd + ni[AW+1:2];
                        wdata <= n_pack;
                    end
                end
                M_STEP: begin
                    waddr <= s4_a;
                    wdata <= p_word;
                    if (pw) psum <= psum + {22'd0, psum4(wdata)};
                    if (k2 == K_NORM && w2 == {AW{1'b0}}) begin  // m is final: written before the first p
                        we <= 1'b1;
                        waddr <= pst;
                        wdata <= {{24{m[7]}}, m};
                    end
                    if (s4_k == K_NORM) begin
                        we <= 1'b1;
                        pw <= 1'b1;
                        if (s4_l) tl <= 2'd1;
                    end
                    if (tl == 2'd1) begin  // alpha is final; the last p's sum goes to psum; q_lo, q_hi take l_old * alpha
                        we <= 1'b1;
                        waddr <= pst + 2;
                        wdata <= {16'd0, alpha};
                        tl <= 2'd2;
                    end else if (tl == 2'd2) begin
                        we <= 1'b1;
                        done <= 1'b1;
                        waddr <= pst + 1;
                        wdata <= q_scaled + psum;
                        tl <= 2'd0;
                    end
                end
                default: begin
                    we <= (s4_k == K_NORM);
                    done <= (s4_k == K_NORM) && s4_l;
                    waddr <= s4_a;
                    wdata <= p_word;
                end
            endcase
        end
    end
endmodule
`default_nettype wire
