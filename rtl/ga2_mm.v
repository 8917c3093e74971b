`timescale 1ns/1ps
`default_nettype none
// ga2_mm: the matmul engine around the systolic array.
//   out[r][m] = sum_k A[r][k] * B(k, m)  (+ bias[m]) (relu) (requantized to int8, or kept int32)
// A is R packed int8 rows of K. B is K rows of M (flag BROWS: x @ W) or M rows of K (dot products
// with rows, as in q @ K.T). A is taken N rows at a time (a batch tile of rt rows). A column window
// (first column tile, number of tiles; 0 = to the last) restricts the work to those output columns,
// so a program can run the part of a matmul whose weights have arrived.
//
// Dataflow. A batch tile's A rows are first copied into rowmem (one bank per row, one word per
// cycle). Then B streams from the scratchpad, one read per cycle, in passes of one reduction each:
//   BROWS: read k of a pass is the line of g consecutive words B[k][4t .. 4t+4g-1], column tiles
//          t .. t+g-1. The array runs g = N/rt groups of rt rows side by side, one column tile
//          each, all fed the same A rows: a one-row matmul keeps all N*N PEs busy and reads four B
//          words per cycle. A enters from the left, B is injected at each group's top row.
//   dot:   read q of a pass is word q/4 of B row 4t + q%4 (column tile t): array row i takes B row
//          4t+i from the left through a shift register, array column c takes A row c from the top.
//          K is padded to a multiple of four.
// Lane i of each edge is delayed i cycles so that PE(i,c) meets both operands of a reduction step
// in the same cycle. `first` and `last` flags travel with the left operand: a pass follows the one
// before it with no gap, and each PE keeps its finished sum in `res` while the next pass streams in.
//
// Timing (exact; model/capra/isa.py:mm_cycles is the same arithmetic). The start cycle is 0;
// cycle 1 works out the first batch tile. Then, per batch tile b (kw = ceil(K/4)):
//   A load step   max(rt*kw + 1, G of tile b-1) cycles, the first tile's just rt*kw + 1: pad
//                 cycles, rt*kw reads, one cycle for the last rowmem write to land. A tile before
//                 another is full (rt = N, so G >= 2N-1): its operands leave the array before the
//                 next tile's group layout takes effect.
//   passes        ceil(window tiles / g) of them (dot: g = 1); a pass reads R = (BROWS ? K : 4*kw)
//                 + BIAS words (the bias line comes after the B reads); every pass but a tile's
//                 first takes max(R, G) cycles, G = W + N - 1 (+ 2 with BIAS), pad cycles first.
// The writer reads a pass's results READ_TO_RES cycles after its last B read (3 to reach the array,
// 3 in a PE, N-1 of skew) and handles W slots, one per cycle: W = U for int8 output (one word
// each), U*N for int32 (one result each), U = used rows g*rt (BROWS) or columns rt (dot). A slot
// is written WR_LAT cycles after it is read (bias and relu, then the five stages of the requant
// bank, which ga2 shares between this unit and the vector unit); `done` is high in the cycle of the
// last slot's write (a slot with nothing to write still takes its cycle).
// G keeps a pass's results in `res` until the writer has read them and, with BIAS, the pass's bias
// words until its last slot.
module ga2_mm #(
    parameter integer AW = 12  // scratchpad address bits (11..14)
) (
    input  wire         clk,
    input  wire         rst,
    input  wire         start,
    input  wire [3:0]   flags,
    input  wire [15:0]  r_total,
    input  wire [15:0]  k_len,
    input  wire [15:0]  m_total,
    input  wire [7:0]   win_first,    // the column window: first column tile
    input  wire [3:0]   win_tiles,    // and its tiles (0: to the last column tile)
    input  wire [AW-1:0]  a_base,
    input  wire [AW-1:0]  b_base,
    input  wire [AW-1:0]  out_base,
    input  wire [15:0]  qa,
    input  wire [5:0]   qs,
    input  wire [AW-1:0]  qbias,
    output wire [3:0]   rd_mask,
    output wire [AW-1:0]  rd_addr,
    input  wire [127:0] rd_data,
    output wire         we,
    output wire [AW-1:0]  waddr,
    output wire [31:0]  wdata,
    output wire         done,
    // the requant bank (four requant pipelines in ga2, shared with the vector unit): four int32
    // lanes in, four int8 lanes out five cycles later
    output wire [127:0] rq_acc,
    output wire [15:0]  rq_mult,
    output wire [5:0]   rq_shift,
    output wire         rq_busy,      // a slot is in the requant bank: it must advance
    input  wire [31:0]  rq_y
);
    `include "ga2_defs.vh"
    // The array is as wide as a word has int8 lanes: a column tile is one word of four outputs, and
    // the shifts by 2 below (4 * tile, k / 4) rely on N = LANES = 4.
    localparam integer N           = GA2_N;
    localparam integer READ_TO_RES = 3 + 3 + N - 1;
    localparam integer WR_LAT      = 6;

    // ---------------------------------------------------------------- the instruction, latched
    reg [3:0]  fl;
    reg [15:0] r_all, kl, mt, qa_r;
    reg [AW-1:0] b_r, qbias_r;
    reg [5:0]  qs_r;
    reg [8:0]  kw;                    // words of a K row: ceil(K/4) <= 256
    reg [AW-1:0] kw2, kw3;            // 2*kw, 3*kw (dot: the offsets of B rows 4t+2, 4t+3)
    reg [AW-1:0] tiles;               // column tiles: ceil(M/4) (a word row of an operand: < the scratchpad)
    reg [15:0] t_first, t_end;        // the column window's first tile and the tile after its last
    wire out8  = fl[0];
    wire relu  = fl[1];
    wire biasf = fl[2];
    wire brows = fl[3];
    wire [10:0] b_reads    = brows ? kl[10:0] : {kw, 2'b00};  // B reads of a pass (K <= 1024)
    wire [10:0] pass_reads = b_reads + {10'd0, biasf};

    // ------------------------------------------------------------------- batch tile geometry
    function [2:0] rows_of;           // rt = min(N, rows left)
        input [15:0] left;
        begin
            rows_of = (left > 16'd4) ? 3'd4 : left[2:0];
        end
    endfunction
    function [2:0] groups_of;         // g: N/rt rounded down to a power of two; 1 for dot or BIAS
        input [2:0] rt;
        begin
            if (!brows || biasf) groups_of = 3'd1;
            else if (rt == 3'd1) groups_of = 3'd4;
            else if (rt == 3'd2) groups_of = 3'd2;
            else groups_of = 3'd1;
        end
    endfunction
    function [4:0] slots_of;          // W
        input [2:0] rt;
        input [2:0] g;
        reg   [4:0] used;
        begin
            used = brows ? ((g == 3'd4) ? {2'd0, rt} << 2 : (g == 3'd2) ? {2'd0, rt} << 1 : {2'd0, rt})
                         : {2'd0, rt};
            slots_of = out8 ? used : (used << 2);
        end
    endfunction

    reg [15:0] r_left;                // rows of A not yet in a tile, this tile's included
    reg [AW-1:0] t_out;                 // output word of this tile's first row
    reg [2:0]  t_rt, t_g;
    reg [4:0]  t_w;
    // derived, registered one cycle after what they follow (used many cycles later)
    reg [5:0]  t_gap;                 // G = W + N - 1 (+ 2 with BIAS)
    reg [5:0]  t_pass_pad;            // max(0, G - pass_reads)
    reg [2:0]  n_rt;                  // the next tile
    reg [5:0]  n_aload_pad;           // max(rt*kw + 1, G) - (rt*kw + 1) for the next tile
    // ------------------------------------------------------------------- the read sequencer
    // One step after another: an A load (pad, reads, turnaround) or a pass (pad, reads).
    localparam [2:0] P_IDLE = 3'd0, P_SETUP = 3'd1, P_APAD = 3'd2, P_AREAD = 3'd3, P_ATURN = 3'd4,
                     P_BPAD = 3'd5, P_BREAD = 3'd6, P_DRAIN = 3'd7;
    reg [2:0]  phase;
    reg [10:0] cnt;                   // pad cycles left, or the read index within a pass
    reg [2:0]  a_row;
    reg [8:0]  a_word;
    reg [AW-1:0] a_ptr;
    reg [15:0] tile;                  // the pass's first column tile
    reg [AW-1:0] b_ptr;                 // BROWS: the line of reduction step cnt; dot: B row 4*tile
    reg [AW-1:0] b_first;               // dot: B row 4*t_first, where every batch tile's first pass starts
    reg        tile_start;            // this pass is its batch tile's first
    // The pipelines below advance only while the engine runs (from the setup cycle to `done`):
    // a clock enable, which an idle engine's simulation (and power) thanks it for.
    wire       run = (phase != P_IDLE);

    wire [15:0] left_after = r_left - 16'd4;
    wire [10:0] n_aload    = kw * {8'd0, n_rt} + 11'd1;
    always @(posedge clk) begin
        if (rst) begin
            t_gap <= 6'd0;
            t_pass_pad <= 6'd0;
            n_rt <= 3'd0;
            n_aload_pad <= 6'd0;
        end else if (run) begin
            t_gap <= {1'b0, t_w} + 6'd3 + (biasf ? 6'd2 : 6'd0);
            t_pass_pad <= ({5'd0, t_gap} > pass_reads) ? (t_gap - pass_reads[5:0]) : 6'd0;
            n_rt <= rows_of(left_after);
            n_aload_pad <= ({5'd0, t_gap} > n_aload) ? (t_gap - n_aload[5:0]) : 6'd0;
        end
    end

    wire        a_last      = (a_row == t_rt - 3'd1) && (a_word == kw - 9'd1);
    wire        in_b        = (phase == P_BREAD) && (cnt < b_reads);
    wire        in_bias     = (phase == P_BREAD) && !in_b;
    wire        pass_end    = (phase == P_BREAD) && (cnt == pass_reads - 11'd1);
    wire        last_b      = in_b && (cnt == b_reads - 11'd1);
    wire [15:0] next_tile   = tile + {13'd0, t_g};
    wire        more_passes = next_tile < t_end;
    wire        more_tiles  = r_left > 16'd4;

    // valid line words (BROWS: column tiles in the window; dot: the pass's B rows below M) and
    // valid columns (bit 4j+c: column 4*(tile+j)+c < M)
    function [3:0] words_valid;
        input [15:0] t;
        input [2:0]  g;
        integer j;
        reg [17:0] row;
        begin
            for (j = 0; j < 4; j = j + 1) begin
                row = {t, 2'b00} + j[17:0];
                words_valid[j] = brows ? ((j < g) && ((t + j[15:0]) < t_end)) : (row < {2'b00, mt});
            end
        end
    endfunction
    function [15:0] cols_valid;
        input [15:0] t;
        integer j, c;
        reg [17:0] col;
        begin
            for (j = 0; j < 4; j = j + 1) begin
                for (c = 0; c < 4; c = c + 1) begin
                    col = {t + j[15:0], 2'b00} + c[17:0];
                    cols_valid[4*j+c] = col < {2'b00, mt};
                end
            end
        end
    endfunction
    reg [3:0]  pass_words;
    reg [15:0] pass_cols;

    // the read of this cycle
    wire [1:0]  dot_row  = cnt[1:0];
    wire [AW-1:0] dot_off = (dot_row == 2'd0) ? {AW{1'b0}} : (dot_row == 2'd1) ? {{(AW-9){1'b0}}, kw} :
                           (dot_row == 2'd2) ? kw2 : kw3;
    wire [AW-1:0] b_addr   = brows ? (b_ptr + tile[AW-1:0]) : (b_ptr + dot_off + {{(AW-9){1'b0}}, cnt[10:2]});
    assign rd_mask = (phase == P_AREAD) ? 4'b0001 :
                     in_b ? (brows ? pass_words : {3'd0, pass_words[dot_row]}) :
                     in_bias ? pass_cols[3:0] : 4'd0;
    assign rd_addr = (phase == P_AREAD) ? a_ptr : in_b ? b_addr : (qbias_r + {tile[AW-3:0], 2'b00});

    // enter the first step of batch tile `left` rows from now
    task begin_pass;
        input [15:0] t;
        input [2:0]  g;
        begin
            tile <= t;
            pass_words <= words_valid(t, g);
            pass_cols <= cols_valid(t);
        end
    endtask

    always @(posedge clk) begin
        if (rst) begin
            phase <= P_IDLE;
            fl <= 4'd0;
            r_all <= 16'd0;
            kl <= 16'd0;
            mt <= 16'd0;
            qa_r <= 16'd0;
            b_r <= {AW{1'b0}};
            qbias_r <= {AW{1'b0}};
            qs_r <= 6'd0;
            kw <= 9'd0;
            kw2 <= {AW{1'b0}};
            kw3 <= {AW{1'b0}};
            tiles <= {AW{1'b0}};
            t_first <= 16'd0;
            t_end <= 16'd0;
            r_left <= 16'd0;
            t_out <= {AW{1'b0}};
            t_rt <= 3'd0;
            t_g <= 3'd0;
            t_w <= 5'd0;
            cnt <= 11'd0;
            a_row <= 3'd0;
            a_word <= 9'd0;
            a_ptr <= {AW{1'b0}};
            tile <= 16'd0;
            b_ptr <= {AW{1'b0}};
            b_first <= {AW{1'b0}};
            tile_start <= 1'b0;
            pass_words <= 4'd0;
            pass_cols <= 16'd0;
        end else begin
            case (phase)
                P_IDLE: if (start) begin
                    fl <= flags;
                    r_all <= r_total;
                    kl <= k_len;
                    mt <= m_total;
                    qa_r <= qa;
                    qs_r <= qs;
                    t_out <= out_base;
                    b_r <= b_base;
                    qbias_r <= qbias;
                    a_ptr <= a_base;
                    kw <= k_len[10:2] + {8'd0, k_len[1] | k_len[0]};
                    tiles <= m_total[AW+1:2] + {{(AW-1){1'b0}}, m_total[1] | m_total[0]};
                    t_first <= {8'd0, win_first};
                    t_end <= (win_tiles == 4'd0) ? {2'd0, m_total[15:2]} + {15'd0, m_total[1] | m_total[0]}
                                                 : {8'd0, win_first} + {12'd0, win_tiles};
                    r_left <= r_total;
                    phase <= P_SETUP;
                end
                P_SETUP: begin  // cycle 1: the first batch tile, and where the column window starts
                    b_first <= b_r + (brows ? {AW{1'b0}} : t_first[9:0] * {kw, 2'b00});
                    kw2 <= {{(AW-10){1'b0}}, kw, 1'b0};
                    kw3 <= {{(AW-10){1'b0}}, kw, 1'b0} + {{(AW-9){1'b0}}, kw};
                    t_rt <= rows_of(r_all);
                    t_g <= groups_of(rows_of(r_all));
                    t_w <= slots_of(rows_of(r_all), groups_of(rows_of(r_all)));
                    a_row <= 3'd0;
                    a_word <= 9'd0;
                    phase <= P_AREAD;
                end
                P_APAD: begin
                    cnt <= cnt - 11'd1;
                    if (cnt == 11'd1) phase <= P_AREAD;
                end
                P_AREAD: begin
                    a_ptr <= a_ptr + {{(AW-1){1'b0}}, 1'b1};
                    if (a_word == kw - 9'd1) begin
                        a_word <= 9'd0;
                        a_row <= a_row + 3'd1;
                    end else begin
                        a_word <= a_word + 9'd1;
                    end
                    if (a_last) phase <= P_ATURN;
                end
                P_ATURN: begin  // the tile's first pass comes next
                    b_ptr <= brows ? b_r : b_first;
                    begin_pass(t_first, t_g);
                    tile_start <= 1'b1;
                    cnt <= 11'd0;
                    phase <= P_BREAD;
                end
                P_BPAD: begin
                    cnt <= cnt - 11'd1;
                    if (cnt == 11'd1) phase <= P_BREAD;  // cnt reaches 0, the first read index
                end
                P_BREAD: begin
                    cnt <= cnt + 11'd1;
                    if (brows && in_b) b_ptr <= b_ptr + tiles;
                    if (last_b) tile_start <= 1'b0;
                    if (pass_end) begin
                        if (more_passes) begin
                            begin_pass(next_tile, t_g);
                            b_ptr <= brows ? b_r : (b_ptr + {kw2[AW-2:0], 1'b0});
                            cnt <= (t_pass_pad != 6'd0) ? {5'd0, t_pass_pad} : 11'd0;
                            phase <= (t_pass_pad != 6'd0) ? P_BPAD : P_BREAD;
                        end else if (more_tiles) begin
                            r_left <= left_after;
                            t_rt <= n_rt;
                            t_g <= groups_of(n_rt);
                            t_w <= slots_of(n_rt, groups_of(n_rt));
                            t_out <= t_out + (out8 ? {tiles[AW-3:0], 2'b00} : {mt[AW-3:0], 2'b00});
                            a_row <= 3'd0;
                            a_word <= 9'd0;
                            cnt <= {5'd0, n_aload_pad};
                            phase <= (n_aload_pad != 6'd0) ? P_APAD : P_AREAD;
                        end else begin
                            phase <= P_DRAIN;
                        end
                    end
                end
                P_DRAIN: if (done) phase <= P_IDLE;
                default: phase <= P_IDLE;
            endcase
        end
    end

    // ------------------------------------------------ the tag of each read, two cycles down
    // Stage 1 (the cycle after a read) reads rowmem for a B read's reduction step; stage 2 (the
    // read's data is here) writes rowmem for an A read and fills the array's edge registers.
    localparam [1:0] T_NONE = 2'd0, T_A = 2'd1, T_B = 2'd2, T_BIAS = 2'd3;
    reg [1:0]  tg1_kind, tg2_kind;
    reg [1:0]  tg1_arow, tg2_arow;
    reg [7:0]  tg1_aword, tg2_aword;
    reg [9:0]  tg1_k, tg2_k;          // reduction step (dot: the read index q)
    reg        tg1_first, tg2_first, tg1_last, tg2_last, tg1_new, tg2_new;
    reg [3:0]  tg1_words, tg2_words;
    reg [15:0] tg1_cols, tg2_cols;
    reg [2:0]  tg1_rt, tg2_rt;
    always @(posedge clk) begin
        if (rst) begin
            tg1_kind <= T_NONE;
            tg2_kind <= T_NONE;
            tg1_arow <= 2'd0;
            tg2_arow <= 2'd0;
            tg1_aword <= 8'd0;
            tg2_aword <= 8'd0;
            tg1_k <= 10'd0;
            tg2_k <= 10'd0;
            tg1_first <= 1'b0;
            tg2_first <= 1'b0;
            tg1_last <= 1'b0;
            tg2_last <= 1'b0;
            tg1_new <= 1'b0;
            tg2_new <= 1'b0;
            tg1_words <= 4'd0;
            tg2_words <= 4'd0;
            tg1_cols <= 16'd0;
            tg2_cols <= 16'd0;
            tg1_rt <= 3'd0;
            tg2_rt <= 3'd0;
        end else if (run) begin
            tg1_kind <= (phase == P_AREAD) ? T_A : in_b ? T_B : in_bias ? T_BIAS : T_NONE;
            tg1_arow <= a_row[1:0];
            tg1_aword <= a_word[7:0];
            tg1_k <= cnt[9:0];
            tg1_first <= (cnt == 11'd0);
            tg1_last <= last_b;
            tg1_new <= tile_start && (cnt == 11'd0);
            tg1_words <= pass_words;
            tg1_cols <= pass_cols;
            tg1_rt <= t_rt;
            tg2_kind <= tg1_kind;
            tg2_arow <= tg1_arow;
            tg2_aword <= tg1_aword;
            tg2_k <= tg1_k;
            tg2_first <= tg1_first;
            tg2_last <= tg1_last;
            tg2_new <= tg1_new;
            tg2_words <= tg1_words;
            tg2_cols <= tg1_cols;
            tg2_rt <= tg1_rt;
        end
    end

    // rowmem: the batch tile's A rows, bank r = row r
    wire [N*32-1:0] rm_data;
    rowmem #(.NB(N), .DEPTH(GA2_MM_MAX_K / 4), .AW(8), .BW(2)) u_rowmem (
        .clk(clk),
        .we(tg2_kind == T_A), .wbank(tg2_arow), .waddr(tg2_aword), .wdata(rd_data[31:0]),
        .re(tg1_kind == T_B), .raddr(tg1_k[9:2]), .rdata(rm_data)
    );

    // ------------------------------------------------------------------- the array's edges
    // A lanes (lane r = A row r): BROWS left edge of the rows that take row r, dot top edge of
    // column r. Lane r is delayed r cycles. B lanes (BROWS): word j of the line, column c; delayed
    // c cycles. Dot: one shift register per array row holds that row's current B word and flags.
    // The next values are wires and each edge register is one vector: few events per cycle.
    wire        step_b    = (tg2_kind == T_B);
    // dot pads K to a multiple of 4: A's lanes past K enter as zero, so B's (whatever they hold)
    // add nothing to the sums
    wire        k_in      = {6'd0, tg2_k} < kl;
    wire [1:0]  dot_row2  = tg2_k[1:0];
    wire [7:0]  dot_word2 = tg2_k[9:2];
    reg  [N*8-1:0]   a_next;
    reg  [N*N*8-1:0] b_next;
    reg  [N*32-1:0]  sr_next;
    reg  [N*4-1:0]   srf_next, srl_next;
    reg  [N*8-1:0]   a_edge_v;
    reg  [N*N*8-1:0] b_edge_v;
    reg  [N*32-1:0]  sr_v;
    reg  [N*4-1:0]   srf_v, srl_v;
    reg              af_edge, al_edge;
    genvar ge, gc;
    generate
        for (ge = 0; ge < N; ge = ge + 1) begin : g_edge
            always @* a_next[ge*8 +: 8] = (step_b && tg2_rt > ge && k_in) ? rm_data[ge*32 + 8*tg2_k[1:0] +: 8] : 8'd0;
            for (gc = 0; gc < N; gc = gc + 1) begin : g_col
                always @* b_next[(ge*N+gc)*8 +: 8] = (step_b && brows && tg2_words[ge] && tg2_cols[4*ge+gc])
                                                  ? rd_data[ge*32 + gc*8 +: 8] : 8'd0;
            end
            wire load = step_b && !brows && dot_row2 == ge;
            always @* sr_next[ge*32 +: 32]  = load ? (tg2_words[ge] ? rd_data[31:0] : 32'd0) : {8'd0, sr_v[ge*32 + 8 +: 24]};
            always @* srf_next[ge*4 +: 4]   = load ? ((dot_word2 == 8'd0) ? 4'b0001 : 4'b0000) : {1'b0, srf_v[ge*4 + 1 +: 3]};
            always @* srl_next[ge*4 +: 4]   = load ? (({1'b0, dot_word2} == kw - 9'd1) ? 4'b1000 : 4'b0000)
                                                : {1'b0, srl_v[ge*4 + 1 +: 3]};
        end
    endgenerate
    always @(posedge clk) begin
        if (rst) begin
            af_edge <= 1'b0;
            al_edge <= 1'b0;
            srf_v <= {N*4{1'b0}};
            srl_v <= {N*4{1'b0}};
        end else if (run) begin
            a_edge_v <= a_next;
            b_edge_v <= b_next;
            af_edge <= step_b && tg2_first;
            al_edge <= step_b && tg2_last;
            sr_v <= sr_next;
            srf_v <= srf_next;
            srl_v <= srl_next;
        end
    end
    wire [7:0] a_edge [0:N-1];
    wire [7:0] b_edge [0:N*N-1];
    generate
        for (ge = 0; ge < N; ge = ge + 1) begin : g_lane
            assign a_edge[ge] = a_edge_v[ge*8 +: 8];
            for (gc = 0; gc < N; gc = gc + 1) begin : g_b
                assign b_edge[ge*N+gc] = b_edge_v[(ge*N+gc)*8 +: 8];
            end
        end
    endgenerate

    // lane delays: lane i of a_del / b_del is i cycles behind its edge register. One shift register
    // holds the last N-1 cycles' edges; synthesis keeps only the taps used (a triangle of registers).
    localparam integer EW = N * 8 + 2 + N * N * 8;  // an edge: A lanes, first, last, B lanes
    wire [EW-1:0]       edge_now = {b_edge_v, al_edge, af_edge, a_edge_v};
    reg  [EW*(N-1)-1:0] edge_past;                 // slice d-1: the edges of d cycles ago
    always @(posedge clk) begin
        if (rst) edge_past <= {EW*(N-1){1'b0}};
        else if (run) edge_past <= {edge_past[EW*(N-1)-EW-1:0], edge_now};
    end
    wire [7:0] a_del [0:N-1];
    wire       af_del [0:N-1];
    wire       al_del [0:N-1];
    wire [7:0] b_del [0:N*N-1];
    genvar gi, gj;
    generate
        for (gi = 0; gi < N; gi = gi + 1) begin : g_adel
            if (gi == 0) begin : g_now
                assign a_del[gi] = a_edge[gi];
                assign af_del[gi] = af_edge;
                assign al_del[gi] = al_edge;
            end else begin : g_late
                assign a_del[gi] = edge_past[EW*(gi-1) + gi*8 +: 8];
                assign af_del[gi] = edge_past[EW*(gi-1) + N*8];
                assign al_del[gi] = edge_past[EW*(gi-1) + N*8 + 1];
            end
        end
        for (gj = 0; gj < N * N; gj = gj + 1) begin : g_bdel
            localparam integer D = gj % N;
            if (D == 0) begin : g_now
                assign b_del[gj] = b_edge[gj];
            end else begin : g_late
                assign b_del[gj] = edge_past[EW*(D-1) + N*8 + 2 + gj*8 +: 8];
            end
        end
    endgenerate

    // the array's layout for the batch tile whose operands are arriving: array row i takes A row
    // i mod rt and (BROWS) belongs to group i / rt, whose top row takes B from the line
    reg [1:0]  lay_lane [0:N-1];
    reg [1:0]  lay_group [0:N-1];
    reg [N-1:0] lay_inj;
    integer i;
    always @(posedge clk) begin
        if (rst) begin
            for (i = 0; i < N; i = i + 1) begin
                lay_lane[i] <= 2'd0;
                lay_group[i] <= 2'd0;
            end
            lay_inj <= {N{1'b0}};
        end else if (step_b && tg2_new) begin
            for (i = 0; i < N; i = i + 1) begin
                lay_lane[i] <= brows ? mod_rt(i[1:0], tg2_rt) : i[1:0];
                lay_group[i] <= brows ? div_rt(i[1:0], tg2_rt) : 2'd0;
                lay_inj[i] <= brows ? (mod_rt(i[1:0], tg2_rt) == 2'd0) : (i == 0);
            end
        end
    end

    reg  [N*8-1:0]   a_left;
    reg  [N-1:0]     first_left, last_left;
    reg  [N*N*8-1:0] b_inj;
    wire [N*N*32-1:0] res;
    genvar gr, gt;
    generate
        for (gr = 0; gr < N; gr = gr + 1) begin : g_left
            always @* a_left[gr*8 +: 8] = brows ? a_del[lay_lane[gr]] : sr_v[gr*32 +: 8];
            always @* first_left[gr] = brows ? af_del[lay_lane[gr]] : srf_v[gr*4];
            always @* last_left[gr] = brows ? al_del[lay_lane[gr]] : srl_v[gr*4];
            for (gt = 0; gt < N; gt = gt + 1) begin : g_top
                always @* b_inj[(gr*N+gt)*8 +: 8] = brows ? b_del[lay_group[gr]*N + gt] :
                                                 (gr == 0) ? a_del[gt] : 8'd0;
            end
        end
    endgenerate

    systolic #(.N(N)) u_array (
        .clk(clk), .rst(rst), .en(run), .a_left(a_left), .first_left(first_left), .last_left(last_left),
        .b_inj(b_inj), .inj(lay_inj), .res(res)
    );

    // ------------------------------------------------------------------------- bias words
    reg [31:0] bias_l [0:N-1];
    integer l;
    always @(posedge clk) begin
        if (tg2_kind == T_BIAS) begin
            for (l = 0; l < N; l = l + 1) bias_l[l] <= rd_data[l*32 +: 32];
        end
    end

    // ------------------------------------------------------------------------- the writer
    // A pass's job (its tile's output base and layout, its column tile) waits in a small queue
    // until READ_TO_RES cycles after its last B read. Passes are at least G >= N cycles apart, so
    // at most ceil(READ_TO_RES / N) jobs wait at once.
    localparam integer JOBS = 4;
    reg [AW-1:0] jq_out  [0:JOBS-1];
    reg [2:0]  jq_rt   [0:JOBS-1];
    reg [4:0]  jq_w    [0:JOBS-1];
    reg [15:0] jq_tile [0:JOBS-1];
    reg        jq_last [0:JOBS-1];
    reg [1:0]  jq_wp, jq_rp;
    reg [READ_TO_RES-1:0] jq_go;      // bit d: a pass ended d+1 cycles ago
    wire       job_push = last_b;
    wire       job_pop  = jq_go[READ_TO_RES-2];

    reg        w_on;
    reg [4:0]  w_slot;
    reg [AW-1:0] w_out;
    reg [15:0] w_tile;
    reg [2:0]  w_rt;
    reg [4:0]  w_w;
    reg        w_last;
    always @(posedge clk) begin
        if (rst) begin
            jq_wp <= 2'd0;
            jq_rp <= 2'd0;
            jq_go <= {READ_TO_RES{1'b0}};
            w_on <= 1'b0;
            w_slot <= 5'd0;
            w_out <= {AW{1'b0}};
            w_tile <= 16'd0;
            w_rt <= 3'd0;
            w_w <= 5'd0;
            w_last <= 1'b0;
        end else if (run) begin
            jq_go <= {jq_go[READ_TO_RES-2:0], job_push};
            if (job_push) begin
                jq_out[jq_wp] <= t_out;
                jq_rt[jq_wp] <= t_rt;
                jq_w[jq_wp] <= t_w;
                jq_tile[jq_wp] <= tile;
                jq_last[jq_wp] <= !more_passes && !more_tiles;
                jq_wp <= jq_wp + 2'd1;
            end
            if (job_pop) begin
                w_on <= 1'b1;
                w_slot <= 5'd0;
                w_out <= jq_out[jq_rp];
                w_rt <= jq_rt[jq_rp];
                w_w <= jq_w[jq_rp];
                w_tile <= jq_tile[jq_rp];
                w_last <= jq_last[jq_rp];
                jq_rp <= jq_rp + 2'd1;
            end else if (w_on) begin
                w_slot <= w_slot + 5'd1;
                if (w_slot == w_w - 5'd1) w_on <= 1'b0;
            end
        end
    end

    // slot w_slot of the current job: which PEs, which output word, which lanes are real
    function [1:0] mod_rt;
        input [1:0] v;
        input [2:0] rt;
        begin
            mod_rt = (rt == 3'd1) ? 2'd0 : (rt == 3'd2) ? {1'b0, v[0]} : (rt == 3'd3) ? ((v == 2'd3) ? 2'd0 : v) : v;
        end
    endfunction
    function [1:0] div_rt;
        input [1:0] v;
        input [2:0] rt;
        begin
            div_rt = (rt == 3'd1) ? v : (rt == 3'd2) ? {1'b0, v[1]} : (rt == 3'd3) ? ((v == 2'd3) ? 2'd1 : 2'd0) : 2'd0;
        end
    endfunction

    wire [1:0]  s_hi     = w_slot[3:2];            // int32: slot / 4
    wire [1:0]  s_lo     = w_slot[1:0];            // int32: slot % 4
    // the array row (BROWS) or column (dot) of an int8 slot; (row i, column c) of an int32 slot
    wire [1:0]  pe_i     = out8 ? s_lo : (brows ? s_hi : s_lo);
    wire [1:0]  pe_c     = out8 ? s_lo : (brows ? s_lo : s_hi);
    // the A row and column tile of the slot
    wire [1:0]  s_arow   = brows ? mod_rt(pe_i, w_rt) : pe_c;
    wire [15:0] s_tile   = w_tile + (brows ? {14'd0, div_rt(pe_i, w_rt)} : 16'd0);
    // every slot of a pass (slot < W) is a used array row or column; only its column tile can lie
    // past the window
    wire        s_ok     = w_on && (s_tile < t_end);
    wire [AW-1:0] row_step = out8 ? tiles : mt[AW-1:0];
    wire [AW-1:0] s_rowadr = w_out + (s_arow[1] ? {row_step[AW-2:0], 1'b0} : {AW{1'b0}}) + (s_arow[0] ? row_step : {AW{1'b0}});
    // int32: the output column within the tile (bias word, lane) is c (BROWS) or i (dot)
    wire [1:0]  s_col    = brows ? pe_c : pe_i;
    wire [17:0] s_col32  = {s_tile, 2'b00} + {16'd0, s_col};
    wire [AW-1:0] s_addr   = s_rowadr + (out8 ? s_tile[AW-1:0] : s_col32[AW-1:0]);

    function [31:0] finish;           // bias, then relu
        input [31:0] raw;
        input [31:0] b;
        reg   [31:0] v;
        begin
            v = raw + (biasf ? b : 32'd0);
            finish = (relu && v[31]) ? 32'd0 : v;
        end
    endfunction

    // slot stage: the slot's results (bias added, relu), lanes, address; only a slot's cycle works
    reg [31:0] w1_val [0:N-1];
    reg [3:0]  w1_lanes;
    reg        w1_ok, w1_last;
    reg [AW-1:0] w1_addr;
    integer q;
    always @(posedge clk) begin
        if (rst) begin
            w1_ok <= 1'b0;
            w1_last <= 1'b0;
        end else if (run) begin
            w1_ok <= s_ok && (out8 || (s_col32 < {2'b00, mt}));
            w1_last <= w_on && w_last && (w_slot == w_w - 5'd1);
        end
        if (w_on) begin
            for (q = 0; q < N; q = q + 1) begin
                if (out8) begin
                    // lane q: PE(slot, q) (BROWS) or PE(q, slot) (dot); its column 4*tile + q
                    w1_val[q] <= finish(brows ? res[{pe_i, q[1:0]}*32 +: 32] : res[{q[1:0], pe_c}*32 +: 32], bias_l[q]);
                    w1_lanes[q] <= ({s_tile, 2'b00} + q[17:0]) < {2'b00, mt};
                end else begin
                    w1_val[q] <= (q == 0) ? finish(res[{pe_i, pe_c}*32 +: 32], bias_l[s_col]) : 32'd0;
                    w1_lanes[q] <= (q == 0) && (s_col32 < {2'b00, mt});
                end
            end
            w1_addr <= s_addr;
        end
    end

    // requantize the four lanes in the requant bank; the slot's address, lanes and int32 value
    // keep pace in one shift register (RQ stages of value, lanes, address, ok, last)
    assign rq_acc   = {w1_val[3], w1_val[2], w1_val[1], w1_val[0]};
    assign rq_mult  = qa_r;
    assign rq_shift = qs_r;
    wire [7:0] y8 [0:N-1];
    genvar gq;
    generate
        for (gq = 0; gq < N; gq = gq + 1) begin : g_rq
            assign y8[gq] = rq_y[gq*8 +: 8];
        end
    endgenerate
    localparam integer RQ = WR_LAT - 1;  // requant's latency
    localparam integer DW = 32 + 4 + AW + 2;
    reg  [RQ*DW-1:0] d_v;                // stage s (1..RQ) at bits (s-1)*DW: {last, ok, address, lanes, value}
    wire [DW-1:0]    d_in  = {w1_last, w1_ok, w1_addr, w1_lanes, w1_val[0]};
    wire [DW-1:0]    d_out = d_v[(RQ-1)*DW +: DW];
    always @(posedge clk) begin
        if (rst) d_v <= {RQ*DW{1'b0}};
        else if (run) d_v <= {d_v[(RQ-1)*DW-1:0], d_in};
    end
    // the requant bank advances while a slot is on its way through it
    reg  [RQ-1:0] d_oks;
    generate
        for (gq = 0; gq < RQ; gq = gq + 1) begin : g_ok
            always @* d_oks[gq] = d_v[gq*DW + DW-2];
        end
    endgenerate
    assign rq_busy = w1_ok || (d_oks != {RQ{1'b0}});
    wire [3:0]  d_lanes = d_out[32 +: 4];
    wire [31:0] word8 = {d_lanes[3] ? y8[3] : 8'd0, d_lanes[2] ? y8[2] : 8'd0,
                         d_lanes[1] ? y8[1] : 8'd0, d_lanes[0] ? y8[0] : 8'd0};
    assign we    = d_out[DW-2];
    assign waddr = d_out[36 +: AW];
    assign wdata = out8 ? word8 : d_out[31:0];
    assign done  = d_out[DW-1];
endmodule
`default_nettype wire
