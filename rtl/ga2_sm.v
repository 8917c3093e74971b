`timescale 1ns/1ps
`default_nettype none
// ga2_sm: integer softmax of one packed int8 row into probabilities (scale 1/128).
//   m = max(x[0:n], sink)              pass 1, one word per cycle
//   d(x) = min(255, ((m - x) * smul + 2^9) >> 10)   the difference in exponent-table steps of 1/16
//                                      (smul = 2^14 * the input scale)
//   S = sum LUT[d(x)] (+ LUT[d(sink)]) pass 2
//   R = floor(2^31 / S)                one division, DIV_CYCLES + 1 cycles (divu)
//   p = min(127, (LUT[d(x)] * R + 2^23) >> 24)    pass 3, written one word per cycle
// One reciprocal per row instead of one division per element. With the sink flag an extra logit
// takes part in the max and the sum but gets no output. Lanes past n are written as zero.
// Timing: 3 * ceil(n/4) + DIV_CYCLES + 1 cycles; done is high in the last.
module ga2_sm (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        sink_en,
    input  wire [7:0]  sink,
    input  wire [15:0] smul,
    input  wire [15:0] n,
    input  wire [11:0] src,
    input  wire [11:0] dst,
    output wire [11:0] rd_addr,
    input  wire [31:0] rd_data,
    output wire        we,
    output wire [11:0] waddr,
    output wire [31:0] wdata,
    output wire        done
);
    `include "ga2_defs.vh"

    // (diff * smul + 2^9) >> 10, clamped to the table's last entry
    function [7:0] table_step;
        input [7:0]  diff;
        input [15:0] scale;
        reg   [23:0] prod;
        reg   [23:0] steps;
        begin
            prod = {16'd0, diff} * {8'd0, scale} + (24'd1 << (GA2_SM_SCALE_SHIFT - 1));
            steps = prod >> GA2_SM_SCALE_SHIFT;
            table_step = (steps > 24'd255) ? 8'd255 : steps[7:0];
        end
    endfunction

    localparam [2:0] S_IDLE = 3'd0, S_MAX = 3'd1, S_SUM = 3'd2, S_DIV = 3'd3, S_NORM = 3'd4;

    reg [2:0]  state;
    reg [15:0] len, nw, w, dc;
    reg [11:0] ps, pd;
    reg        has_sink;
    reg [7:0]  sink_r, m;
    reg [15:0] smul_r;
    reg [31:0] sum;

    assign rd_addr = ps + w[11:0];

    wire [7:0]  e_d   [0:3];
    wire [4*16-1:0] e_val;  // the four lanes' table values
    wire [3:0]  valid;
    wire [7:0]  p [0:3];
    wire [31:0] recip;
    wire [15:0] first = {w[13:0], 2'b00};  // element index of lane 0 in this word

    genvar l;
    generate
        for (l = 0; l < 4; l = l + 1) begin : g_lane
            localparam [15:0] LANE = l;
            assign valid[l] = (first + LANE) < len;
            wire [7:0] diff = m - rd_data[l*8 +: 8];
            assign e_d[l] = table_step(diff, smul_r);
            exp_lut u_exp (.d(e_d[l]), .e(e_val[l*16 +: 16]));
            wire [47:0] scaled  = {32'd0, e_val[l*16 +: 16]} * {16'd0, recip};
            wire [47:0] prob    = (scaled + (48'd1 << (GA2_SM_OUT_SHIFT - 1))) >> GA2_SM_OUT_SHIFT;
            assign p[l] = !valid[l] ? 8'd0 : (prob > {16'd0, GA2_SM_OUT_MAX}) ? GA2_SM_OUT_MAX[7:0] : prob[7:0];
        end
    endgenerate

    // this word's contribution to the max and to the sum
    reg [7:0]  word_max;
    reg [31:0] word_sum;
    integer q;
    always @(*) begin
        word_max = m;
        word_sum = sum;
        for (q = 0; q < 4; q = q + 1) begin
            if (valid[q] && $signed(rd_data[q*8 +: 8]) > $signed(word_max)) word_max = rd_data[q*8 +: 8];
            if (valid[q]) word_sum = word_sum + {16'd0, e_val[q*16 +: 16]};
        end
    end

    wire [15:0] e_sink;
    wire [7:0]  sink_d = table_step(m - sink_r, smul_r);
    exp_lut u_exp_sink (.d(sink_d), .e(e_sink));
    wire [31:0] total = sum + (has_sink ? {16'd0, e_sink} : 32'd0);

    /* verilator lint_off PINCONNECTEMPTY */
    divu u_div (
        .clk(clk), .rst(rst), .start(state == S_DIV && dc == 16'd0),
        .dividend(32'd1 << GA2_SM_RECIP_BITS), .divisor(total), .quotient(recip), .remainder(), .done()
    );
    /* verilator lint_on PINCONNECTEMPTY */

    assign we    = (state == S_NORM);
    assign waddr = pd + w[11:0];
    assign wdata = {p[3], p[2], p[1], p[0]};
    assign done  = (state == S_NORM) && (w == nw - 16'd1);

    always @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            len <= 16'd0;
            nw <= 16'd0;
            w <= 16'd0;
            ps <= 12'd0;
            pd <= 12'd0;
            dc <= 16'd0;
            has_sink <= 1'b0;
            sink_r <= 8'd0;
            smul_r <= 16'd0;
            m <= 8'd0;
            sum <= 32'd0;
        end else begin
            case (state)
                S_IDLE: if (start) begin
                    len <= n;
                    nw <= (n + 16'd3) >> 2;
                    w <= 16'd0;
                    ps <= src;
                    pd <= dst;
                    has_sink <= sink_en;
                    sink_r <= sink;
                    smul_r <= smul;
                    m <= sink_en ? sink : 8'h80;
                    state <= S_MAX;
                end
                S_MAX: begin
                    m <= word_max;
                    if (w == nw - 16'd1) begin
                        w <= 16'd0;
                        sum <= 32'd0;
                        state <= S_SUM;
                    end else begin
                        w <= w + 16'd1;
                    end
                end
                S_SUM: begin
                    sum <= word_sum;
                    if (w == nw - 16'd1) begin
                        w <= 16'd0;
                        dc <= 16'd0;
                        state <= S_DIV;
                    end else begin
                        w <= w + 16'd1;
                    end
                end
                S_DIV: begin
                    dc <= dc + 16'd1;
                    if (dc == GA2_DIV_CYCLES[15:0]) state <= S_NORM;
                end
                S_NORM: begin
                    if (w == nw - 16'd1) state <= S_IDLE;
                    else w <= w + 16'd1;
                end
                default: state <= S_IDLE;
            endcase
        end
    end
endmodule
`default_nettype wire
