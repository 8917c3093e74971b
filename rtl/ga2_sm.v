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
//     per slot: difference times smul, shift and clamp, table read, lane sum, running sum
//   the division starts when the sum is final and pass 3 starts the cycle after divu says done;
//   pass 3 writes each word five cycles after its data arrives.
// `done` is high in the cycle of the last write: cycles = 3 * nw + DIV_CYCLES + 18.
module ga2_sm #(
    parameter integer AW = 12  // scratchpad address bits
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        sink_en,
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
                     S_SINK = 4'd5, S_DIV = 4'd6, S_NORM = 4'd7, S_END = 4'd8;
    reg [3:0]  state;
    wire       run = (state != S_IDLE);  // the pipelines advance only while the unit runs
    reg [15:0] len, nw, w;
    reg [AW-1:0] ps, pd;
    reg        has_sink;
    reg [7:0]  sink_r, m;
    reg [15:0] smul_r;
    reg [31:0] sum;
    reg        div_go, div_wait;

    wire last_w = (w == nw - 16'd1);
    assign re      = (state == S_MAX) || (state == S_SUM) || (state == S_NORM);
    assign rd_addr = ps + w[AW-1:0];

    // the slot's tag: 1 = pass 1, 2 = pass 2, 3 = the sink slot, 4 = pass 3
    localparam [2:0] K_NONE = 3'd0, K_MAX = 3'd1, K_SUM = 3'd2, K_SINK = 3'd3, K_NORM = 3'd4;
    wire [2:0] k_now = (state == S_MAX) ? K_MAX : (state == S_SUM) ? K_SUM : (state == S_SINK) ? K_SINK :
                       (state == S_NORM) ? K_NORM : K_NONE;
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
            k1 <= K_NONE;
            k2 <= K_NONE;
            w1 <= 14'd0;
            w2 <= {AW{1'b0}};
            l1 <= 1'b0;
            l2 <= 1'b0;
            ok2 <= 4'd0;
            sink_slot <= 1'b0;
        end else begin
            if (run) begin
                k1 <= k_now;
                w1 <= w[13:0];
                l1 <= last_w;
                k2 <= k1;
                w2 <= w1[AW-1:0];
                l2 <= l1;
                sink_slot <= (k1 == K_SINK);
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
                    has_sink <= sink_en;
                    sink_r <= sink;
                    smul_r <= smul;
                    state <= S_SETUP;
                end
                S_SETUP: begin
                    w <= 16'd0;
                    state <= S_MAX;
                end
                S_MAX: begin
                    w <= last_w ? 16'd0 : w + 16'd1;
                    if (last_w) state <= S_GAP;
                end
                S_GAP: state <= S_SUM;  // the last word's maximum reaches m
                S_SUM: begin
                    w <= last_w ? 16'd0 : w + 16'd1;
                    if (last_w) state <= S_SINK;
                end
                S_SINK: state <= S_DIV;
                S_DIV: begin  // wait for the sum, divide, wait for the quotient
                    if (sum_final) begin
                        div_go <= 1'b1;
                        div_wait <= 1'b1;
                    end else if (div_wait && div_done && !div_go) begin  // divu's done is stale in its start cycle
                        div_wait <= 1'b0;
                        state <= S_NORM;
                    end
                end
                S_NORM: begin
                    w <= last_w ? 16'd0 : w + 16'd1;
                    if (last_w) state <= S_END;
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
        else if (word_max_on) m <= max8(m, word_max);
    end

    // passes 2 and 3: table index, table value
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
    /* verilator lint_off UNUSEDSIGNAL */
    wire [31:0] quotient;  // S >= 2^15 (see the header): the quotient is below 2^17
    /* verilator lint_on UNUSEDSIGNAL */
    assign recip = quotient[16:0];
    integer l;
    always @(posedge clk) if (run) begin
        for (l = 0; l < 4; l = l + 1) begin
            s1_prod[l] <= {16'd0, m - lane_x(l[1:0], sink_slot, sink_r, rd_data)} * {8'd0, smul_r};  // m - x: 0..255 below n
            e[l] <= e_rom[l];
            s4_p[l] <= {16'd0, e[l]} * {15'd0, recip};
        end
        s1_ok <= ok2;
        s2_ok <= s1_ok;
        s3_ok <= s2_ok;
        s4_ok <= s3_ok;
        s1_a <= pd + w2;
        s2_a <= s1_a;
        s3_a <= s2_a;
        s4_a <= s3_a;
    end
    always @(posedge clk) begin
        if (rst) begin
            s1_k <= K_NONE;
            s2_k <= K_NONE;
            s3_k <= K_NONE;
            s4_k <= K_NONE;
            s1_l <= 1'b0;
            s2_l <= 1'b0;
            s3_l <= 1'b0;
            s4_l <= 1'b0;
            sum <= 32'd0;
        end else if (run || start) begin
            s1_k <= k2;
            s2_k <= s1_k;
            s3_k <= s2_k;
            s4_k <= s3_k;
            s1_l <= l2;
            s2_l <= s1_l;
            s3_l <= s2_l;
            s4_l <= s3_l;
            if (start) sum <= 32'd0;
            else if (s3_k == K_SUM || s3_k == K_SINK) begin
                sum <= sum + (s3_ok[0] ? {16'd0, e[0]} : 32'd0) + (s3_ok[1] ? {16'd0, e[1]} : 32'd0)
                           + (s3_ok[2] ? {16'd0, e[2]} : 32'd0) + (s3_ok[3] ? {16'd0, e[3]} : 32'd0);
            end
        end
    end
    wire sum_final = (s4_k == K_SINK);  // the sink slot's term went into `sum` last cycle

    /* verilator lint_off PINCONNECTEMPTY */
    wire div_done;
    divu u_div (
        .clk(clk), .rst(rst), .start(div_go), .dividend(32'd1 << GA2_SM_RECIP_BITS), .divisor(sum),
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
    always @(posedge clk) begin
        if (rst) begin
            we <= 1'b0;
            done <= 1'b0;
            waddr <= {AW{1'b0}};
            wdata <= 32'd0;
        end else if (run) begin
            we <= (s4_k == K_NORM);
            done <= (s4_k == K_NORM) && s4_l;
            waddr <= s4_a;
            wdata <= {prob(s4_p[3], s4_ok[3]), prob(s4_p[2], s4_ok[2]), prob(s4_p[1], s4_ok[1]), prob(s4_p[0], s4_ok[0])};
        end
    end
endmodule
`default_nettype wire
