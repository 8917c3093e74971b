`timescale 1ns/1ps
`default_nettype none
// ga2_mm: the matmul engine around the systolic array.
//   out[r][m] = sum_k A[r][k] * B(k, m)  (+ bias[m]) (relu) (requantized to int8 or kept int32)
// A is R packed int8 rows of K. B is either M rows of K (flag BROWS = 0: dot products with rows,
// as in q @ K.T) or K rows of M (BROWS = 1: x @ W). Work is cut into batch tiles of N rows and
// column tiles of N outputs.
//
// Per batch tile: LA loads its A rows into rowmem A (rows * ceil(K/4) cycles). Then the column
// tiles go through three stages in lock step: in step s
//   load    tile s:   B into rowmem B bank s%2 (cols*ceil(K/4) cycles, or K when BROWS), then the bias
//   compute tile s-1: one clear cycle, K + rows + cols - 2 cycles of skewed operands, and one
//                     cycle in which the last products settle in the accumulators
//   write   tile s-2: from the output buffer, rows words (int8) or rows*cols words (int32)
// A step lasts as long as its longest active stage; at its last cycle the array's results are
// captured (with bias and relu) into the output buffer. T column tiles take T + 2 steps.
// `done` is high in the very last cycle; the count equals isa.mm_cycles() exactly.
// A column tile is as wide as the int8 lanes of one word (N = LANES = 4): the tile and word
// arithmetic below (c0 = 4 * tile, the B word of a tile, two-bit row and column indices) relies on it.
module ga2_mm (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [3:0]  flags,
    input  wire [15:0] r_total,
    input  wire [15:0] k_len,
    input  wire [15:0] m_total,
    input  wire [15:0] a_base,
    input  wire [15:0] b_base,
    input  wire [15:0] out_base,
    input  wire [15:0] qa,
    input  wire [5:0]  qs,
    input  wire [11:0] qbias,
    output wire [11:0] rd_addr,
    input  wire [31:0] rd_data,
    output wire        we,
    output wire [11:0] waddr,
    output wire [31:0] wdata,
    output wire        done
);
    `include "ga2_defs.vh"
    localparam integer N  = GA2_N;
    localparam integer IW = 10;

    localparam [1:0] S_IDLE = 2'd0, S_LA = 2'd1, S_PIPE = 2'd2;

    reg [1:0]  state;
    reg [3:0]  fl;
    reg [15:0] rt, kl, mt, kw, mw;
    reg [11:0] qbase;
    reg [15:0] qa_r, b_base_r;
    reg [5:0]  qs_r;
    reg [15:0] r0;          // first row of the batch tile
    reg [15:0] step, cc;    // pipeline step and the cycle within it
    reg [15:0] la_i, la_w;  // LA counters: row, word
    reg [15:0] lj, lw;      // load-stage counters (dot form): column, word
    reg [15:0] a_ptr, b_ptr, bk_ptr, o_tile, o_ptr;
    reg [15:0] wi, wj;      // write-stage counters (int32 results): row, column
    reg [N*32-1:0] bias_l, bias_c;
    reg [N*N*32-1:0] obuf;

    wire out8  = fl[0];
    wire relu  = fl[1];
    wire use_b = fl[2];
    wire brows = fl[3];

    // ---- geometry of the batch tile and of the tiles in each stage this step ----
    wire [15:0] r_left = rt - r0;
    wire [15:0] rows   = (r_left > 16'd4) ? 16'd4 : r_left;
    wire [15:0] tiles  = mw;  // N = 4 output columns per tile, as many as words in an int8 row

    function [15:0] cols_of;
        input [13:0] t;
        input [15:0] m;
        reg   [15:0] left;
        begin
            left = m - {t, 2'b00};
            cols_of = (left > 16'd4) ? 16'd4 : left;
        end
    endfunction

    wire        l_act  = (step < tiles);
    wire        c_act  = (step >= 16'd1) && (step <= tiles);
    wire        w_act  = (step >= 16'd2);
    wire [13:0] l_tile = step[13:0];          // the column tile in each stage
    wire [13:0] c_tile = step[13:0] - 14'd1;
    wire [13:0] w_tile = step[13:0] - 14'd2;
    wire [15:0] l_cols = cols_of(l_tile, mt);
    wire [15:0] c_cols = cols_of(c_tile, mt);
    wire [15:0] w_cols = cols_of(w_tile, mt);
    wire [15:0] l_b    = brows ? kl : l_cols * kw;
    wire [15:0] l_len  = l_b + (use_b ? l_cols : 16'd0);
    wire [15:0] c_len  = kl + rows + c_cols;
    wire [15:0] w_len  = out8 ? rows : rows * w_cols;
    wire [15:0] len_lc = (l_act && c_act) ? ((l_len > c_len) ? l_len : c_len) : (l_act ? l_len : (c_act ? c_len : 16'd0));
    wire [15:0] p_len  = (w_act && w_len > len_lc) ? w_len : len_lc;
    wire        step_end  = (state == S_PIPE) && (cc == p_len - 16'd1);
    wire        last_step = (step == tiles + 16'd1);
    wire        last_bt   = (r0 + 16'd4) >= rt;
    assign done = step_end && last_step && last_bt;

    // ---- load stage: B words, then the bias words ----
    wire in_lb   = (state == S_PIPE) && l_act && (cc < l_b);
    wire in_bias = (state == S_PIPE) && l_act && (cc >= l_b) && (cc < l_len);
    wire [1:0]  bias_j = cc[1:0] - l_b[1:0];  // the bias word (0..3) read in this cycle
    assign rd_addr = (state == S_LA) ? a_ptr[11:0] :
                     in_bias ? (qbase + {l_tile[9:0], 2'b00} + {10'd0, bias_j}) :
                     brows ? bk_ptr[11:0] : b_ptr[11:0];

    reg [N*32-1:0] bias_l_next;
    always @(*) begin
        bias_l_next = bias_l;
        if (in_bias) bias_l_next[bias_j*32 +: 32] = rd_data;
    end

    // ---- compute stage: skewed operands from rowmem A and the compute bank of rowmem B ----
    wire [N*IW-1:0] k_idx;
    wire [N*8-1:0]  a_row, b_row0, b_row1, a_feed, b_feed;
    wire            c_bank = c_tile[0];
    genvar q;
    generate
        for (q = 0; q < N; q = q + 1) begin : g_feed
            localparam [15:0] Q = q;
            wire [15:0] k_here = cc - 16'd1 - Q;    // the k this lane feeds in this cycle
            wire        in_k   = c_act && (cc >= 16'd1 + Q) && (k_here < kl);
            wire [7:0]  b_val  = c_bank ? b_row1[q*8 +: 8] : b_row0[q*8 +: 8];
            assign k_idx[q*IW +: IW] = k_here[IW-1:0];
            assign a_feed[q*8 +: 8] = (in_k && (Q < rows)) ? a_row[q*8 +: 8] : 8'd0;
            assign b_feed[q*8 +: 8] = (in_k && (Q < c_cols)) ? b_val : 8'd0;
        end
    endgenerate

    rowmem #(.NB(N), .DEPTH(GA2_MM_MAX_K), .IW(IW)) u_rowa (
        .clk(clk), .we(state == S_LA), .scatter(1'b0), .sel(la_i[1:0]), .idx(la_w[IW-1:0]),
        .wdata(rd_data), .rd_idx(k_idx), .rd_data(a_row)
    );
    wire [IW-1:0] lb_idx = brows ? cc[IW-1:0] : lw[IW-1:0];
    rowmem #(.NB(N), .DEPTH(GA2_MM_MAX_K), .IW(IW)) u_rowb0 (
        .clk(clk), .we(in_lb && !l_tile[0]), .scatter(brows), .sel(lj[1:0]), .idx(lb_idx),
        .wdata(rd_data), .rd_idx(k_idx), .rd_data(b_row0)
    );
    rowmem #(.NB(N), .DEPTH(GA2_MM_MAX_K), .IW(IW)) u_rowb1 (
        .clk(clk), .we(in_lb && l_tile[0]), .scatter(brows), .sel(lj[1:0]), .idx(lb_idx),
        .wdata(rd_data), .rd_idx(k_idx), .rd_data(b_row1)
    );

    wire [N*N*32-1:0] acc;
    wire in_c = (state == S_PIPE) && c_act && (cc < c_len);
    systolic #(.N(N)) u_array (
        .clk(clk), .clear(in_c && cc == 16'd0), .en(in_c && cc != 16'd0),
        .a_left(a_feed), .b_top(b_feed), .acc(acc)
    );

    // a result with bias and relu, as captured into the output buffer at a step's end
    function [31:0] finish;
        input [31:0] raw;
        input [31:0] bias;
        reg   [31:0] biased;
        begin
            biased = raw + (use_b ? bias : 32'd0);
            finish = (relu && biased[31]) ? 32'd0 : biased;
        end
    endfunction

    // ---- write stage: from the output buffer ----
    wire [1:0]  w_row = out8 ? cc[1:0] : wi[1:0];
    wire [7:0]  q8 [0:N-1];
    generate
        for (q = 0; q < N; q = q + 1) begin : g_rq
            requant u_rq (.acc(obuf[({14'd0, w_row} * N + q) * 32 +: 32]), .mult(qa_r), .shift(qs_r), .y(q8[q]));
        end
    endgenerate
    wire [31:0] word8 = {(w_cols > 16'd3) ? q8[3] : 8'd0, (w_cols > 16'd2) ? q8[2] : 8'd0,
                         (w_cols > 16'd1) ? q8[1] : 8'd0, q8[0]};
    assign we    = (state == S_PIPE) && w_act && (cc < w_len);
    assign waddr = out8 ? o_ptr[11:0] : (o_ptr[11:0] + wj[11:0]);
    wire [3:0]  w_cell = {wi[1:0], wj[1:0]};  // (row, column) of the int32 result being written
    assign wdata = out8 ? word8 : obuf[{w_cell, 5'd0} +: 32];

    // pointers for the first cycle of a step: tile s's B, tile s-2's output words
    wire [15:0] next_step = last_step ? 16'd0 : step + 16'd1;
    wire [15:0] next_w_c0 = {next_step[13:0], 2'b00} - 16'd8;

    integer pe;
    always @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            fl <= 4'd0;
            rt <= 16'd0;
            kl <= 16'd0;
            mt <= 16'd0;
            kw <= 16'd0;
            mw <= 16'd0;
            qbase <= 12'd0;
            qa_r <= 16'd0;
            qs_r <= 6'd0;
            b_base_r <= 16'd0;
            r0 <= 16'd0;
            step <= 16'd0;
            cc <= 16'd0;
            la_i <= 16'd0;
            la_w <= 16'd0;
            lj <= 16'd0;
            lw <= 16'd0;
            a_ptr <= 16'd0;
            b_ptr <= 16'd0;
            bk_ptr <= 16'd0;
            o_tile <= 16'd0;
            o_ptr <= 16'd0;
            wi <= 16'd0;
            wj <= 16'd0;
            bias_l <= {N*32{1'b0}};
            bias_c <= {N*32{1'b0}};
            obuf <= {N*N*32{1'b0}};
        end else begin
            case (state)
                S_IDLE: if (start) begin
                    fl <= flags;
                    rt <= r_total;
                    kl <= k_len;
                    mt <= m_total;
                    kw <= (k_len + 16'd3) >> 2;
                    mw <= (m_total + 16'd3) >> 2;
                    qbase <= qbias;
                    qa_r <= qa;
                    qs_r <= qs;
                    b_base_r <= b_base;
                    r0 <= 16'd0;
                    la_i <= 16'd0;
                    la_w <= 16'd0;
                    a_ptr <= a_base;
                    o_tile <= out_base;
                    state <= S_LA;
                end
                S_LA: begin
                    a_ptr <= a_ptr + 16'd1;
                    if (la_w == kw - 16'd1) begin
                        la_w <= 16'd0;
                        la_i <= la_i + 16'd1;
                        if (la_i == rows - 16'd1) begin
                            la_i <= 16'd0;
                            state <= S_PIPE;
                            step <= 16'd0;
                            cc <= 16'd0;
                            lj <= 16'd0;
                            lw <= 16'd0;
                            wi <= 16'd0;
                            wj <= 16'd0;
                            b_ptr <= b_base_r;
                            bk_ptr <= b_base_r;
                        end
                    end else begin
                        la_w <= la_w + 16'd1;
                    end
                end
                S_PIPE: begin
                    // load stage
                    if (in_lb) begin
                        b_ptr <= b_ptr + 16'd1;
                        bk_ptr <= bk_ptr + mw;
                        if (lw == kw - 16'd1) begin
                            lw <= 16'd0;
                            lj <= lj + 16'd1;
                        end else begin
                            lw <= lw + 16'd1;
                        end
                    end
                    if (in_bias) bias_l[bias_j*32 +: 32] <= rd_data;
                    // write stage
                    if (we) begin
                        if (out8) begin
                            o_ptr <= o_ptr + mw;
                        end else if (wj == w_cols - 16'd1) begin
                            wj <= 16'd0;
                            wi <= wi + 16'd1;
                            o_ptr <= o_ptr + mt;
                        end else begin
                            wj <= wj + 16'd1;
                        end
                    end
                    cc <= cc + 16'd1;
                    if (step_end) begin
                        cc <= 16'd0;
                        lj <= 16'd0;
                        lw <= 16'd0;
                        wi <= 16'd0;
                        wj <= 16'd0;
                        bk_ptr <= b_base_r + next_step;
                        o_ptr <= o_tile + (out8 ? (next_step - 16'd2) : next_w_c0);
                        if (c_act) begin
                            for (pe = 0; pe < N * N; pe = pe + 1)
                                obuf[pe*32 +: 32] <= finish(acc[pe*32 +: 32], bias_c[(pe % N)*32 +: 32]);
                        end
                        bias_c <= bias_l_next;  // includes a bias word read in this last cycle
                        step <= next_step;
                        if (last_step) begin
                            if (last_bt) begin
                                state <= S_IDLE;
                            end else begin
                                r0 <= r0 + 16'd4;
                                o_tile <= o_tile + (out8 ? {mw[13:0], 2'b00} : {mt[13:0], 2'b00});
                                state <= S_LA;
                            end
                        end
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end
endmodule
`default_nettype wire
