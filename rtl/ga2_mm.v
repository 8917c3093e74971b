`timescale 1ns/1ps
`default_nettype none
// ga2_mm: the matmul engine around the systolic array.
//   out[r][m] = sum_k A[r][k] * B(k, m)  (+ bias[m]) (relu) (requantized to int8 or kept int32)
// A is R packed int8 rows of K. B is either M rows of K (flag BROWS = 0: dot products with rows,
// as in q @ K.T) or K rows of M (BROWS = 1: x @ W). The work is cut into tiles of N batch rows by
// N output columns. Phases, one SRAM word per cycle, no gaps between them:
//   LA    rows*ceil(K/4)    load the batch tile's A rows into rowmem A          (once per batch tile)
//   LB    cols*ceil(K/4)    load the column tile of B into rowmem B (or K cycles when BROWS)
//   LBIAS cols              read the bias words                                 (only with BIAS)
//   CMP   K + 2N - 1        one clear cycle, then K + 2N - 2 cycles of skewed operands
//   WR    rows (int8) or rows*cols (int32)   write the results
// `done` is high in the last cycle; the cycle count is isa.mm_cycles() exactly.
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

    localparam [2:0] S_IDLE = 3'd0, S_LA = 3'd1, S_LB = 3'd2, S_LBIAS = 3'd3, S_CMP = 3'd4, S_WR = 3'd5;

    reg [2:0]  state;
    reg [3:0]  fl;
    reg [15:0] rt, kl, mt, kw, mw;
    reg [11:0] qbase;
    reg [15:0] qa_r;
    reg [5:0]  qs_r;
    reg [15:0] r0, c0;
    reg [15:0] i, w, tau;
    reg [15:0] a_ptr, b_ptr, b_col, o_tile, o_ptr;
    reg [31:0] bias [0:N-1];
    reg [15:0] b_base_r;

    wire out8  = fl[0];
    wire relu  = fl[1];
    wire use_b = fl[2];
    wire brows = fl[3];

    wire [15:0] r_left = rt - r0;
    wire [15:0] c_left = mt - c0;
    wire [15:0] rows   = (r_left > 16'd4) ? 16'd4 : r_left;
    wire [15:0] cols   = (c_left > 16'd4) ? 16'd4 : c_left;
    wire last_col_tile = (c0 + 16'd4) >= mt;
    wire last_row_tile = (r0 + 16'd4) >= rt;

    // ---- phase-end conditions ----
    wire la_end   = (i == rows - 16'd1) && (w == kw - 16'd1);
    wire lb_end   = brows ? (w == kl - 16'd1) : ((i == cols - 16'd1) && (w == kw - 16'd1));
    wire bias_end = (i == cols - 16'd1);
    wire cmp_end  = (tau == kl + 16'd2 * N[15:0] - 16'd2);
    wire wr_end   = out8 ? (i == rows - 16'd1) : ((i == rows - 16'd1) && (w == cols - 16'd1));
    assign done   = (state == S_WR) && wr_end && last_col_tile && last_row_tile;

    // ---- SRAM read address per phase ----
    assign rd_addr = (state == S_LA) ? a_ptr[11:0] :
                     (state == S_LB) ? b_ptr[11:0] :
                     (qbase + c0[11:0] + i[11:0]);

    // ---- rowmem A (batch rows) and B (output columns) ----
    wire [N*IW-1:0] a_idx, b_idx;
    wire [N*8-1:0]  a_row, b_row, a_feed, b_feed;
    genvar q;
    generate
        for (q = 0; q < N; q = q + 1) begin : g_feed
            wire [15:0] k_here = tau - 16'd1 - q;     // the k this lane feeds in this cycle
            wire        in_k   = (tau >= 16'd1 + q) && (k_here < kl);
            assign a_idx[q*IW +: IW] = k_here[IW-1:0];
            assign b_idx[q*IW +: IW] = k_here[IW-1:0];
            assign a_feed[q*8 +: 8] = (in_k && (q < rows)) ? a_row[q*8 +: 8] : 8'd0;
            assign b_feed[q*8 +: 8] = (in_k && (q < cols)) ? b_row[q*8 +: 8] : 8'd0;
        end
    endgenerate

    rowmem #(.NB(N), .DEPTH(GA2_MM_MAX_K), .IW(IW)) u_rowa (
        .clk(clk), .we(state == S_LA), .scatter(1'b0), .sel(i[1:0]), .idx(w[IW-1:0]),
        .wdata(rd_data), .rd_idx(a_idx), .rd_data(a_row)
    );
    rowmem #(.NB(N), .DEPTH(GA2_MM_MAX_K), .IW(IW)) u_rowb (
        .clk(clk), .we(state == S_LB), .scatter(brows), .sel(i[1:0]),
        .idx(w[IW-1:0]), .wdata(rd_data), .rd_idx(b_idx), .rd_data(b_row)
    );

    wire [N*N*32-1:0] acc;
    systolic #(.N(N)) u_array (
        .clk(clk), .clear(state == S_CMP && tau == 16'd0), .en(state == S_CMP && tau != 16'd0),
        .a_left(a_feed), .b_top(b_feed), .acc(acc)
    );

    // ---- results of batch row i: bias, relu, requantize ----
    wire [31:0] val [0:N-1];
    wire [7:0]  q8  [0:N-1];
    generate
        for (q = 0; q < N; q = q + 1) begin : g_out
            wire [31:0] raw    = acc[({14'd0, i[1:0]} * N + q) * 32 +: 32];
            wire [31:0] biased = raw + (use_b ? bias[q] : 32'd0);
            assign val[q] = (relu && biased[31]) ? 32'd0 : biased;
            requant u_rq (.acc(val[q]), .mult(qa_r), .shift(qs_r), .y(q8[q]));
        end
    endgenerate

    wire [31:0] word8 = {(cols > 16'd3) ? q8[3] : 8'd0, (cols > 16'd2) ? q8[2] : 8'd0,
                         (cols > 16'd1) ? q8[1] : 8'd0, q8[0]};
    assign we    = (state == S_WR);
    assign waddr = out8 ? o_ptr[11:0] : (o_ptr[11:0] + w[11:0]);
    assign wdata = out8 ? word8 : val[w[1:0]];

    integer b;
    always @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            fl <= 4'd0;
            rt <= 16'd0; kl <= 16'd0; mt <= 16'd0; kw <= 16'd0; mw <= 16'd0;
            qbase <= 12'd0; qa_r <= 16'd0; qs_r <= 6'd0;
            r0 <= 16'd0; c0 <= 16'd0; i <= 16'd0; w <= 16'd0; tau <= 16'd0;
            a_ptr <= 16'd0; b_ptr <= 16'd0; b_col <= 16'd0; o_tile <= 16'd0; o_ptr <= 16'd0;
            for (b = 0; b < N; b = b + 1) bias[b] <= 32'd0;
        end else begin
            case (state)
                S_IDLE: if (start) begin
                    fl <= flags;
                    rt <= r_total; kl <= k_len; mt <= m_total;
                    kw <= (k_len + 16'd3) >> 2;
                    mw <= (m_total + 16'd3) >> 2;
                    qbase <= qbias; qa_r <= qa; qs_r <= qs;
                    r0 <= 16'd0; c0 <= 16'd0; i <= 16'd0; w <= 16'd0; tau <= 16'd0;
                    a_ptr <= a_base; b_ptr <= b_base; b_col <= b_base; o_tile <= out_base;
                    state <= S_LA;
                end
                S_LA: begin
                    a_ptr <= a_ptr + 16'd1;
                    if (w == kw - 16'd1) begin
                        w <= 16'd0;
                        i <= i + 16'd1;
                    end else begin
                        w <= w + 16'd1;
                    end
                    if (la_end) begin
                        i <= 16'd0;
                        w <= 16'd0;
                        state <= S_LB;
                    end
                end
                S_LB: begin
                    if (brows) begin
                        b_ptr <= b_ptr + mw;
                        w <= w + 16'd1;
                    end else begin
                        b_ptr <= b_ptr + 16'd1;
                        if (w == kw - 16'd1) begin
                            w <= 16'd0;
                            i <= i + 16'd1;
                        end else begin
                            w <= w + 16'd1;
                        end
                    end
                    if (lb_end) begin
                        i <= 16'd0;
                        w <= 16'd0;
                        tau <= 16'd0;
                        state <= use_b ? S_LBIAS : S_CMP;
                    end
                end
                S_LBIAS: begin
                    bias[i[1:0]] <= rd_data;
                    i <= i + 16'd1;
                    if (bias_end) begin
                        i <= 16'd0;
                        state <= S_CMP;
                    end
                end
                S_CMP: begin
                    tau <= tau + 16'd1;
                    if (cmp_end) begin
                        i <= 16'd0;
                        w <= 16'd0;
                        o_ptr <= o_tile + (out8 ? (c0 >> 2) : c0);
                        state <= S_WR;
                    end
                end
                S_WR: begin
                    if (out8) begin
                        o_ptr <= o_ptr + mw;
                        i <= i + 16'd1;
                    end else if (w == cols - 16'd1) begin
                        w <= 16'd0;
                        i <= i + 16'd1;
                        o_ptr <= o_ptr + mt;
                    end else begin
                        w <= w + 16'd1;
                    end
                    if (wr_end) begin
                        i <= 16'd0;
                        w <= 16'd0;
                        if (!last_col_tile) begin
                            c0 <= c0 + 16'd4;
                            b_col <= b_col + 16'd1;
                            // dot form: the next column tile's rows follow this one's in memory
                            b_ptr <= brows ? (b_col + 16'd1) : b_ptr;
                            state <= S_LB;
                        end else if (!last_row_tile) begin
                            r0 <= r0 + 16'd4;
                            c0 <= 16'd0;
                            b_ptr <= b_base_r;
                            b_col <= b_base_r;
                            o_tile <= o_tile + (out8 ? (mw << 2) : (mt << 2));
                            state <= S_LA;
                        end else begin
                            state <= S_IDLE;
                        end
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    // B's base is needed again at every new batch tile.
    always @(posedge clk) begin
        if (rst) b_base_r <= 16'd0;
        else if (state == S_IDLE && start) b_base_r <= b_base;
    end
endmodule
`default_nettype wire
