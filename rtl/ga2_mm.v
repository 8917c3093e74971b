`timescale 1ns/1ps
`default_nettype none
// ga2_mm: the matmul engine around the N x N systolic array (N = 2, 4 or 8: GA2_N).
//   out[r][m] = sum_k A[r][k] * B(k, m)  (+ bias[m]) (relu) (requantized to int8, or kept int32)
// A is R packed int8 rows of K. B is K rows of M (flag BROWS: x @ W) or M rows of K (dot products
// with rows, as in q @ K.T). A is taken N rows at a time (a batch tile of rt rows). A column window
// (first column tile, number of tiles; 0 = to the last) restricts the work to those output columns,
// so a program can run the part of a matmul whose weights have arrived. A column tile is one word
// of an int8 output row (four columns) whatever N is: the data layout does not depend on the array.
//
// Dataflow. A batch tile's A rows are first copied into rowmem (one bank per row, a line of up to
// four of the row's words per cycle). Then B streams from the scratchpad in passes of one reduction each, a pass computing
// `cols` output columns of every row of the tile:
//   BROWS: cycle k of a pass reads one line (up to four consecutive words) of B row k. The array
//          runs g groups of rt rows side by side, each on N columns, all fed the same A rows: g is
//          the largest power of two with g*rt <= N and g*N <= 16 (the lanes of a line), 1 with BIAS,
//          and cols = g*N. Group j takes line lanes j*N .. j*N+N-1 at its top row; A enters from
//          the left. A one-row matmul keeps g*N PEs busy (all 16 of a 4 x 4 array).
//   dot:   array row i takes B row (the pass's first column + i) from the left through a shift
//          register, array column c takes A row c from the top; cols = N. Cycle q of a pass reads
//          DOTW words (N int8 lanes for N = 8, else one word) of B row q mod PER, PER = 4*DOTW:
//          the cycles a shift register takes to pass them on (with N = 2, rows 2 and 3 of the
//          round are idle cycles). K is padded to a multiple of 4*DOTW.
// With N = 2 a pass of two columns (BROWS with rt = 2 or BIAS, and the dot form) fills half of each
// output word: passes then come in pairs, and the writer keeps the first half of each int8 word
// until the second arrives.
// Lane i of each edge is delayed i cycles so that every PE meets both operands of a reduction step
// in the same cycle. `first` and `last` flags travel with the left operand: a pass follows the one
// before it with no gap, and each PE keeps its finished sum in `res` while the next pass streams in.
//
// Timing (exact; model/capra/isa.py:mm_cycles is the same arithmetic). The start cycle is 0;
// cycle 1 works out the first batch tile. Then, per batch tile b (kw = ceil(K/4), AL = ceil(kw/4)):
//   A load step   max(rt*AL + 1, G of tile b-1) cycles, the first tile's just rt*AL + 1: pad
//                 cycles, rt*AL line reads (words 4i .. 4i+3 of a row in its read i, the last
//                 read of a row its last kw mod 4 words), one cycle for the last rowmem write to
//                 land. A tile before another is full (rt = N, so G >= 2N-1): its operands leave the array before the
//                 next tile's group layout takes effect.
//   passes        ceil(4 * window tiles / cols) of them; a pass takes P = (BROWS ? K : PER *
//                 ceil(kw/DOTW)) cycles plus, with BIAS, BL = ceil(N/4) line reads of its bias words
//                 (after the B reads); every pass but a tile's first takes max(P, G) cycles,
//                 G = W + N - 1 (+ 2 with BIAS), pad cycles first.
// The writer reads a pass's results READ_TO_RES cycles after its last B read (3 to reach the array,
// 3 in a PE, N-1 of skew) and handles W slots, one per cycle: an int8 slot is one output word (four
// columns of one row, two for a half pass), W = rt * max(1, cols/4); an int32 slot one result,
// W = rt * cols. Slots go column by column, the rows of the tile inside. A slot is written WR_LAT
// cycles after it is read (bias and relu, then the five stages of the requant bank, which ga2
// shares between this unit and the vector unit); `done` is high in the cycle of the last slot's
// write (a slot with nothing to write still takes its cycle).
// G keeps a pass's results in `res` until the writer has read them and, with BIAS, the pass's bias
// words until its last slot.
// Back to back: in the cycle after an MM's last read (cycle `front` of its execute cycles) the
// engine takes the next MM (`take`; ga2 starts one there only with CHAIN, and only when no third
// would be here), while the back end drains the old one. What the back end uses is its own: the
// tags of a read carry its form and reduction flags, the array's form changes with its layout,
// each writer job names its MM's parameter bank (flags, bias, scale, row step, window) and the slot
// stage hands its scale to the requant bank and its form to the write. The new MM's first B read
// waits (in P_ATURN of its first tile) until gap = max(G of the old one's last tile, 2N) cycles
// after the old one's last read when the array's layout changes: the old results and bias words
// are read, and the old operands have left the edge delays and the array's rows, before anything
// of the new one arrives. On the same layout it follows as the next pass of one MM would: its
// first pass's last B read G or more cycles after the old one's last B read (isa.mm_chain_gap).
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
    input  wire [7:0]   out_stride,   // words from one output row to the next (0: rows packed)
    input  wire [15:0]  qa,
    input  wire [5:0]   qs,
    input  wire [AW-1:0]  qbias,
    output wire [3:0]   rd_mask,
    output wire [AW-1:0]  rd_addr,
    input  wire [127:0] rd_data,
    output wire         we,
    output wire [AW-1:0]  waddr,
    output wire [31:0]  wdata,
    output wire         done,         // an MM's last write
    output wire         take,         // the front end takes a start (idle, or the one MM here drains)
    output wire         more,         // two MMs are here: a `done` now is the older one's
    // the requant bank (four requant pipelines in ga2, shared with the vector unit): four int32
    // lanes in, four int8 lanes out five cycles later
    output wire [127:0] rq_acc,
    output wire [15:0]  rq_mult,
    output wire [5:0]   rq_shift,
    output wire         rq_busy,      // a slot is in the requant bank: it must advance
    input  wire [31:0]  rq_y
);
    `include "ga2_defs.vh"
    localparam integer N           = GA2_N;
    localparam integer NB          = $clog2(N);            // bits of an array row or column index
    localparam integer RB          = NB + 1;               // bits of a row count 0..N
    localparam integer GMAX        = (N * N <= 16) ? N : 16 / N;  // most groups side by side (BROWS)
    localparam integer PC          = GMAX * N;             // most columns a pass computes (<= 16)
    localparam integer DOTW        = (N > 4) ? N / 4 : 1;  // words of a dot-form read
    localparam integer PER         = 4 * DOTW;             // dot form: cycles between reads of one row
    localparam integer SRB         = 4 * DOTW;             // bytes of a dot-form shift register
    localparam integer BL          = (N + 3) / 4;          // line reads of a pass's bias words
    localparam integer HALF        = (N < 4) ? 1 : 0;      // a pass may fill half an output word
    localparam integer PB          = $clog2(PER);          // bits of a dot-form round index
    localparam integer GB          = $clog2(GMAX);         // bits of a group index
    localparam integer WB          = (N * N + N + 2 > 64) ? $clog2(N * N + N + 2) : 6;  // bits of W or G
    localparam integer READ_TO_RES = 3 + 3 + N - 1;
    localparam integer WR_LAT      = 6;

    // ---------------------------------------------------------------- the instruction, latched
    reg [3:0]  fl;
    reg [15:0] kl, mt, qa_r;
    reg [AW-1:0] b_r, qbias_r;
    reg [5:0]  qs_r;
    reg [8:0]  kw;                    // words of a K row: ceil(K/4) <= 256
    reg [6:0]  alines;                // line reads of an A row: ceil(kw/4) <= 64
    reg [3:0]  a_tmask;               // the words of an A row's last line: kw mod 4 of them (4 when 0)
    reg [2:0]  a_tstep;               // and their count, from it to the next row's first word
    reg [8:0]  dot_lines;             // dot form: reads of one B row, ceil(kw / DOTW)
    reg [AW-1:0] tiles;               // column tiles: ceil(M/4) (a word row of an operand: < the scratchpad)
    reg [AW-1:0] nkw;                 // dot form: N B rows, N*kw words (the next pass's first row)
    reg [15:0] t_first, t_end;        // the column window's first tile and the tile after its last
    reg [7:0]  ostr;                  // the output row stride (0: rows packed)
    wire out8  = fl[0];
    wire relu  = fl[1];
    wire biasf = fl[2];
    wire brows = fl[3];
    reg  [10:0] b_reads, pass_reads;  // B cycles of a pass, and with its bias reads (registered below)
    reg  [10:0] b_reads_m1, pass_reads_m1;  // each minus one: the cycle of a pass's last B read, its end
    // words from one output row to the next: the stride, or a packed row (int8 words or int32 results)
    wire [AW-1:0] row_step = (ostr != 8'd0) ? {{(AW-8){1'b0}}, ostr} : out8 ? tiles : mt[AW-1:0];

    // ------------------------------------------------------------------- batch tile geometry
    function [RB-1:0] rows_of;        // rt = min(N, rows left)
        input [15:0] left;
        begin
            rows_of = (left > N[15:0]) ? N[RB-1:0] : left[RB-1:0];
        end
    endfunction
    function [2:0] groups_of;         // g: 1, 2 or 4 (see the header); 1 for dot or BIAS
        input [RB-1:0] rt;
        begin
            if (!brows || biasf) groups_of = 3'd1;
            else if (N == 4) groups_of = (rt == 1) ? 3'd4 : (rt == 2) ? 3'd2 : 3'd1;
            else if (N == 8) groups_of = (rt <= (N[RB-1:0] >> 1)) ? 3'd2 : 3'd1;
            else groups_of = (rt == 1) ? 3'd2 : 3'd1;
        end
    endfunction
    function [4:0] cols_of;           // columns a pass computes: g*N (BROWS) or N
        input [2:0] g;
        begin
            cols_of = g * N[4:0];
        end
    endfunction
    function [WB-1:0] rows_times;     // x * rt, by shifts and adds (a DSP multiplier would be slower)
        input [WB-1:0] x;
        input [RB-1:0] rt;
        integer i;
        begin
            rows_times = {WB{1'b0}};
            for (i = 0; i < RB; i = i + 1)
                if (rt[i]) rows_times = rows_times + (x << i);
        end
    endfunction
    function [WB-1:0] slots_of;       // W: rt * max(1, cols/4) int8 words or rt * cols int32 results
        input [RB-1:0] rt;
        input [2:0]    g;
        reg   [4:0]    c;
        begin
            c = cols_of(g);
            slots_of = rows_times(out8 ? ((c < 5'd4) ? {{(WB-1){1'b0}}, 1'b1} : {{(WB-3){1'b0}}, c[4:2]})
                                       : {{(WB-5){1'b0}}, c}, rt);
        end
    endfunction

    // more small products by shifts and adds
    function [10:0] words_times;      // words * rt
        input [8:0]    words;
        input [RB-1:0] rt;
        integer i;
        begin
            words_times = 11'd0;
            for (i = 0; i < RB; i = i + 1)
                if (rt[i]) words_times = words_times + ({2'b00, words} << i);
        end
    endfunction
    function [NB-1:0] times_mod_n;    // a * b mod N
        input [NB-1:0] a;
        input [NB-1:0] b;
        integer i;
        begin
            times_mod_n = {NB{1'b0}};
            for (i = 0; i < NB; i = i + 1)
                if (b[i]) times_mod_n = times_mod_n + (a << i);
        end
    endfunction

    reg [15:0]   r_left;              // rows of A not yet in a tile, this tile's included
    reg [AW-1:0] t_out;               // output word of this tile's first row
    reg [RB-1:0] t_rt;
    reg [2:0]    t_g;
    reg [WB-1:0] t_w;
    // derived, registered one cycle after what they follow (used many cycles later)
    reg [WB-1:0] t_gap;               // G = W + N - 1 (+ 2 with BIAS)
    reg [WB-1:0] t_pass_pad;          // max(0, G - pass_reads)
    reg [RB-1:0] rt_all;              // rows_of(R): the first tile's rows, latched with the instruction
    reg [RB-1:0] n_rt;                // the next tile
    reg [10:0]   n_aload;             // rt*alines + 1 for the next tile
    reg [WB-1:0] n_aload_pad;         // max(rt*alines + 1, G) - (rt*alines + 1) for the next tile
    // ------------------------------------------------------------------- the read sequencer
    // One step after another: an A load (pad, reads, turnaround) or a pass (pad, reads).
    localparam [2:0] P_IDLE = 3'd0, P_SETUP = 3'd1, P_APAD = 3'd2, P_AREAD = 3'd3, P_ATURN = 3'd4,
                     P_BPAD = 3'd5, P_BREAD = 3'd6, P_DRAIN = 3'd7;
    reg [2:0]    phase;
    reg [10:0]   cnt;                 // pad cycles left, or the cycle within a pass
    reg [NB-1:0] a_row;
    reg [8:0]    a_word;              // the A load's line of its row
    reg          a_rlast;             // and it is the row's last line
    reg [AW-1:0] a_ptr;
    reg [15:0]   tile;                // the pass's first column tile
    reg          half;                // N = 2: the pass is the second half of its tile
    reg [AW-1:0] b_ptr;               // BROWS: the line of reduction step cnt; dot: B row of the pass's first column
    reg [AW-1:0] b_first;             // dot: B row 4*t_first, where every batch tile's first pass starts
    reg [AW-1:0] bias_a;              // BIAS: the pass's bias words, qbias_r + 4 * tile + 2 * half, a cycle
                                      // after tile and half (a pass's first bias read is after its first B read)
    reg [AW-1:0] b_fofs;              // its offset from b_r, t_first * 4 * kw (P_SETUP; b_first a cycle later)
    reg [AW-1:0] b_lread;              // BROWS: b_ptr + tile, the line read, kept beside them (no adder before the read)
    reg [AW-1:0] d_line, d_addr;      // dot: this round's row-0 word, and the read of this cycle
    reg          tile_start;          // this pass is its batch tile's first
    // The pipelines below advance only while the engine runs (from the setup cycle to `done`):
    // a clock enable, which an idle engine's simulation (and power) thanks it for.
    wire       run = (phase != P_IDLE);

    wire [15:0]   left_after = r_left - N[15:0];
    wire [10:0]   b_reads_now = brows ? kl[10:0] : ({2'b00, dot_lines} << PB);
    wire [10:0]   pass_reads_now = b_reads_now + (biasf ? BL[10:0] : 11'd0);
    wire [WB-1:0] gap_now    = t_w + N[WB-1:0] - {{(WB-1){1'b0}}, 1'b1} + (biasf ? 2 : 0);
    always @(posedge clk) begin
        if (rst) begin
            t_gap <= {WB{1'b0}};
            t_pass_pad <= {WB{1'b0}};
            b_reads <= 11'd0;
            pass_reads <= 11'd0;
            b_reads_m1 <= 11'd0;
            pass_reads_m1 <= 11'd0;
            n_rt <= {RB{1'b0}};
            n_aload <= 11'd0;
            n_aload_pad <= {WB{1'b0}};
        end else if (run) begin
            // from the instruction and dot_lines (the setup cycle's): first used in cycle 4, a pass's first read
            b_reads <= b_reads_now;
            pass_reads <= pass_reads_now;
            b_reads_m1 <= b_reads_now - 11'd1;
            pass_reads_m1 <= pass_reads_now - 11'd1;
            t_gap <= gap_now;
            t_pass_pad <= ({{(11-WB){1'b0}}, t_gap} > pass_reads) ? (t_gap - pass_reads[WB-1:0]) : {WB{1'b0}};
            n_rt <= rows_of(left_after);
            n_aload <= words_times({2'b00, alines}, n_rt) + 11'd1;  // a stage of its own: a tile's A load and pass come before its use
            n_aload_pad <= ({{(11-WB){1'b0}}, t_gap} > n_aload) ? (t_gap - n_aload[WB-1:0]) : {WB{1'b0}};
        end
    end

    // ------------------------------------------------------- two MMs: one draining, the next in front
    // The front end (the read sequencer above and below) takes the next MM once this one has made
    // its last read, while the back end (the array, the writer's job queue, the slot stage and the
    // requant bank) still finishes it: the back end carries each MM's own parameters (the tags of a
    // read, the array's form, the jobs' parameter bank). At most two MMs are here at once. The next
    // MM's first B read waits until chain_gap cycles after the last read of the MM before it
    // (chain_wait, checked in P_ATURN): the old results and bias words leave the array and the bias
    // registers in time (G), and the old operands the array's edges and rows before its layout
    // changes (2N).
    // On the same layout (the old MM's last batch tile and the new one's first: BROWS with the same
    // rows and groups, or both dot form) the new MM's passes follow like passes of one MM: its first
    // pass's last B read comes G (the old tile's) or more cycles after the old one's last B read, so
    // its first B read waits until chain_same <= its pass's B reads + 1 (isa.mm_chain_gap).
    localparam integer LAYOUT_GAP = 2 * N;
    reg          fpar;                // the front's MM: its parameter bank (the writer's, below)
    reg [1:0]    inflight;            // MMs started and not done
    reg [WB-1:0] chain_wait;          // counts down from chain_gap at an MM's last read
    reg [WB-1:0] chain_same;          // counts down from G less the bias reads at an MM's last read
    reg          lay_o_brows;         // the layout of that MM's last tile
    reg [RB-1:0] lay_o_rt;
    reg [2:0]    lay_o_g;
    wire [WB-1:0] chain_gap = (t_gap > LAYOUT_GAP[WB-1:0]) ? t_gap : LAYOUT_GAP[WB-1:0];
    wire         front_end;           // the MM's last read (below)
    always @(posedge clk) begin
        if (rst) begin
            inflight <= 2'd0;
            chain_wait <= {WB{1'b0}};
            chain_same <= {WB{1'b0}};
            lay_o_brows <= 1'b0;
            lay_o_rt <= {RB{1'b0}};
            lay_o_g <= 3'd0;
        end else begin
            inflight <= inflight + {1'b0, start} - {1'b0, done};
            if (front_end) chain_wait <= chain_gap;
            else if (chain_wait != {WB{1'b0}}) chain_wait <= chain_wait - {{(WB-1){1'b0}}, 1'b1};
            if (front_end) chain_same <= t_gap - (biasf ? BL[WB-1:0] : {WB{1'b0}});
            else if (chain_same != {WB{1'b0}}) chain_same <= chain_same - {{(WB-1){1'b0}}, 1'b1};
            if (front_end) begin
                lay_o_brows <= brows;
                lay_o_rt <= t_rt;
                lay_o_g <= t_g;
            end
        end
    end
    reg          tile_one;            // the A load or first pass of the MM's first batch tile
    wire         same_layout = (brows == lay_o_brows) && (!brows || ((t_rt == lay_o_rt) && (t_g == lay_o_g)));
    wire         chain_ok = !tile_one || (same_layout ? ({{(11-WB){1'b0}}, chain_same} <= b_reads + 11'd1)
                                                      : (chain_wait <= {{(WB-1){1'b0}}, 1'b1}));
    assign take = (phase == P_IDLE) || ((phase == P_DRAIN) && (inflight == 2'd1));
    assign more = (inflight == 2'd2);

    // the pass's width and where the next one starts
    wire [4:0]  t_cols      = brows ? cols_of(t_g) : N[4:0];
    wire        half_pass   = (HALF != 0) && (t_cols == 5'd2);     // two columns: half an output word
    wire [15:0] next_tile   = tile + (half_pass ? {15'd0, half} : {13'd0, t_cols[4:2]});
    wire        more_passes = (half_pass && !half) || (next_tile < t_end);
    wire        more_tiles  = r_left > N[15:0];

    wire        a_last      = ({1'b0, a_row} == t_rt - 1'b1) && a_rlast;
    reg         in_b;                 // a pass's B read: phase == P_BREAD && cnt < b_reads, kept by the sequencer
    wire        in_bias     = (phase == P_BREAD) && !in_b;
    wire        pass_end    = (phase == P_BREAD) && (cnt == pass_reads_m1);
    wire        last_b      = in_b && (cnt == b_reads_m1);
    assign front_end = pass_end && !more_passes && !more_tiles;

    // the pass's valid columns (bit p: column 4*tile + 2*half + p lies below M and in the window;
    // in the dot form column p is array row p's B row) and valid line words (BROWS)
    function [PC-1:0] cols_valid;
        input [15:0] t;
        input        h;
        input [4:0]  c;               // the pass's columns
        integer p;
        reg [17:0] col;
        reg [15:0] word;
        begin
            for (p = 0; p < PC; p = p + 1) begin
                col = {t, 2'b00} + {16'd0, h, 1'b0} + p[17:0];
                word = col[17:2];
                cols_valid[p] = (p[4:0] < c) && (col < {2'b00, mt}) && (word < t_end);
            end
        end
    endfunction
    function [3:0] words_valid;       // BROWS: the line words a pass reads
        input [15:0] t;
        input [2:0]  g;
        integer j;
        reg [4:0] c;
        begin
            c = cols_of(g);
            for (j = 0; j < 4; j = j + 1)
                words_valid[j] = ((j == 0) || ({j[2:0], 2'b00} < c)) && ((t + j[15:0]) < t_end);
        end
    endfunction
    reg [3:0]    pass_words;
    reg [PC-1:0] pass_cols;

    // the read of this cycle
    wire [PB-1:0]   dot_r   = cnt[PB-1:0];                  // dot form: the array row read
    wire [10-PB:0]  dot_l   = cnt[10:PB];                   // and its round (words DOTW*l ..)
    reg             dot_col;                                // the row's B row is real
    integer xr;
    always @* begin
        dot_col = 1'b0;
        for (xr = 0; xr < N; xr = xr + 1) begin
            if (dot_r == xr[PB-1:0]) dot_col = pass_cols[xr];
        end
    end
    wire            dot_rd  = ({{(4-PB){1'b0}}, dot_r} < N[3:0]) && dot_col;
    wire            dot_w2  = (DOTW > 1) && ({{PB{1'b0}}, dot_l, 1'b1} < {3'b000, kw});  // the read's second word
    wire [3:0]      dot_mask = {2'b00, dot_w2 && dot_rd, dot_rd};
    wire            bias_l1 = (BL > 1) && (cnt != b_reads);  // the pass's second bias line (N = 8)
    wire [AW-1:0]   b_addr  = brows ? b_lread : d_addr;
    wire [AW-1:0]   bias_at = bias_a + {{(AW-3){1'b0}}, bias_l1, 2'b00};
    wire [3:0]      bias_mask = bias_l1 ? pass_cols[(BL > 1 ? 7 : 3) -: 4] : pass_cols[3:0];
    assign rd_mask = (phase == P_AREAD) ? (a_rlast ? a_tmask : 4'b1111) :
                     in_b ? (brows ? pass_words : dot_mask) :
                     in_bias ? bias_mask : 4'd0;
    assign rd_addr = (phase == P_AREAD) ? a_ptr : in_b ? b_addr : bias_at;

    // enter a pass at column tile t (and half h)
    task begin_pass;
        input [15:0] t;
        input        h;
        input [2:0]  g;
        begin
            tile <= t;
            half <= h;
            pass_words <= words_valid(t, g);
            pass_cols <= cols_valid(t, h, brows ? cols_of(g) : N[4:0]);
        end
    endtask

    always @(posedge clk) begin
        if (rst) bias_a <= {AW{1'b0}};
        else bias_a <= qbias_r + {tile[AW-3:0], 2'b00} + {{(AW-2){1'b0}}, half, 1'b0};
    end

    always @(posedge clk) begin
        if (rst) begin
            phase <= P_IDLE;
            fpar <= 1'b0;
            fl <= 4'd0;
            rt_all <= {RB{1'b0}};
            kl <= 16'd0;
            mt <= 16'd0;
            qa_r <= 16'd0;
            b_r <= {AW{1'b0}};
            qbias_r <= {AW{1'b0}};
            qs_r <= 6'd0;
            kw <= 9'd0;
            alines <= 7'd0;
            a_tmask <= 4'd0;
            a_tstep <= 3'd0;
            dot_lines <= 9'd0;
            nkw <= {AW{1'b0}};
            tiles <= {AW{1'b0}};
            t_first <= 16'd0;
            t_end <= 16'd0;
            ostr <= 8'd0;
            r_left <= 16'd0;
            t_out <= {AW{1'b0}};
            t_rt <= {RB{1'b0}};
            t_g <= 3'd0;
            t_w <= {WB{1'b0}};
            cnt <= 11'd0;
            a_row <= {NB{1'b0}};
            a_word <= 9'd0;
            a_rlast <= 1'b0;
            tile_one <= 1'b0;
            a_ptr <= {AW{1'b0}};
            tile <= 16'd0;
            half <= 1'b0;
            b_ptr <= {AW{1'b0}};
            b_first <= {AW{1'b0}};
            b_fofs <= {AW{1'b0}};
            b_lread <= {AW{1'b0}};
            d_line <= {AW{1'b0}};
            d_addr <= {AW{1'b0}};
            tile_start <= 1'b0;
            in_b <= 1'b0;
            pass_words <= 4'd0;
            pass_cols <= {PC{1'b0}};
        end else begin
            case (phase)
                P_IDLE, P_DRAIN: if (start) begin
                    fl <= flags;
                    kl <= k_len;
                    mt <= m_total;
                    qa_r <= qa;
                    qs_r <= qs;
                    t_out <= out_base;
                    ostr <= out_stride;
                    b_r <= b_base;
                    qbias_r <= qbias;
                    a_ptr <= a_base;
                    kw <= k_len[10:2] + {8'd0, k_len[1] | k_len[0]};
                    alines <= k_len[10:4] + {6'd0, |k_len[3:0]};
                    tiles <= m_total[AW+1:2] + {{(AW-1){1'b0}}, m_total[1] | m_total[0]};
                    t_first <= {8'd0, win_first};
                    t_end <= (win_tiles == 4'd0) ? {2'd0, m_total[15:2]} + {15'd0, m_total[1] | m_total[0]}
                                                 : {8'd0, win_first} + {12'd0, win_tiles};
                    r_left <= r_total;
                    rt_all <= rows_of(r_total);
                    fpar <= !fpar;
                    phase <= P_SETUP;
                end else if (phase == P_DRAIN && done && !more) begin
                    phase <= P_IDLE;
                end
                P_SETUP: begin  // cycle 1: the first batch tile, and where the column window starts
                    b_fofs <= brows ? {AW{1'b0}} : t_first[9:0] * {kw, 2'b00};
                    nkw <= {{(AW-9){1'b0}}, kw} << NB;
                    dot_lines <= (DOTW > 1) ? {1'b0, kw[8:1]} + {8'd0, kw[0]} : kw;
                    t_rt <= rt_all;
                    t_g <= groups_of(rt_all);
                    t_w <= slots_of(rt_all, groups_of(rt_all));
                    a_tmask <= (kw[1:0] == 2'd0) ? 4'b1111 : (kw[1:0] == 2'd1) ? 4'b0001
                             : (kw[1:0] == 2'd2) ? 4'b0011 : 4'b0111;
                    a_tstep <= (kw[1:0] == 2'd0) ? 3'd4 : {1'b0, kw[1:0]};
                    a_row <= {NB{1'b0}};
                    a_word <= 9'd0;
                    a_rlast <= (alines == 7'd1);
                    tile_one <= 1'b1;
                    phase <= P_AREAD;
                end
                P_APAD: begin
                    cnt <= cnt - 11'd1;
                    if (cnt == 11'd1) phase <= P_AREAD;
                end
                P_AREAD: begin  // a line of an A row: four words, or the row's last kw mod 4
                    b_first <= b_r + b_fofs;  // first read in P_ATURN, a cycle or more on
                    a_ptr <= a_ptr + {{(AW-3){1'b0}}, a_rlast ? a_tstep : 3'd4};
                    if (a_rlast) begin
                        a_word <= 9'd0;
                        a_row <= a_row + 1'b1;
                        a_rlast <= (alines == 7'd1);
                    end else begin
                        a_word <= a_word + 9'd1;
                        a_rlast <= (a_word + 9'd2 == {2'b00, alines});
                    end
                    if (a_last) phase <= P_ATURN;
                end
                P_ATURN: begin  // the tile's first pass comes next (after the MM before it has left the array)
                    b_ptr <= brows ? b_r : b_first;
                    b_lread <= b_r + t_first[AW-1:0];
                    d_line <= b_first;
                    d_addr <= b_first;
                    begin_pass(t_first, 1'b0, t_g);
                    tile_start <= 1'b1;
                    cnt <= 11'd0;
                    if (chain_ok) begin
                        phase <= P_BREAD;
                        in_b <= 1'b1;
                        tile_one <= 1'b0;
                    end
                end
                P_BPAD: begin
                    cnt <= cnt - 11'd1;
                    if (cnt == 11'd1) begin  // cnt reaches 0, the first read index
                        phase <= P_BREAD;
                        in_b <= 1'b1;
                    end
                end
                P_BREAD: begin
                    cnt <= cnt + 11'd1;
                    if (last_b) in_b <= 1'b0;
                    if (brows && in_b) begin
                        b_ptr <= b_ptr + tiles;
                        b_lread <= b_lread + tiles;
                    end
                    if (!brows && in_b) begin  // the dot form's next read: the next row, or the next round
                        if (dot_r == PER[PB-1:0] - 1'b1) begin
                            d_line <= d_line + DOTW[AW-1:0];
                            d_addr <= d_line + DOTW[AW-1:0];
                        end else begin
                            d_addr <= d_addr + {{(AW-9){1'b0}}, kw};
                        end
                    end
                    if (last_b) tile_start <= 1'b0;
                    if (pass_end) begin
                        if (more_passes) begin
                            if (half_pass && !half) begin_pass(tile, 1'b1, t_g);
                            else begin_pass(next_tile, 1'b0, t_g);
                            // dot form: the next pass's first B row is N rows on
                            b_ptr <= brows ? b_r : (b_ptr + nkw);
                            b_lread <= b_r + ((half_pass && !half) ? tile[AW-1:0] : next_tile[AW-1:0]);
                            d_line <= b_ptr + nkw;
                            d_addr <= b_ptr + nkw;
                            cnt <= (t_pass_pad != {WB{1'b0}}) ? {{(11-WB){1'b0}}, t_pass_pad} : 11'd0;
                            phase <= (t_pass_pad != {WB{1'b0}}) ? P_BPAD : P_BREAD;
                            in_b <= (t_pass_pad == {WB{1'b0}});
                        end else if (more_tiles) begin
                            r_left <= left_after;
                            t_rt <= n_rt;
                            t_g <= groups_of(n_rt);
                            t_w <= slots_of(n_rt, groups_of(n_rt));
                            t_out <= t_out + (row_step << NB);
                            a_row <= {NB{1'b0}};
                            a_word <= 9'd0;
                            a_rlast <= (alines == 7'd1);
                            cnt <= {{(11-WB){1'b0}}, n_aload_pad};
                            phase <= (n_aload_pad != {WB{1'b0}}) ? P_APAD : P_AREAD;
                        end else begin
                            phase <= P_DRAIN;
                        end
                    end
                end
                default: phase <= P_IDLE;
            endcase
        end
    end

    // ------------------------------------------------ the tag of each read, two cycles down
    // Stage 1 (the cycle after a read) reads rowmem for a B step's reduction step; stage 2 (the
    // read's data is here) writes rowmem for an A read and fills the array's edge registers.
    // A B step happens every cycle of a pass's B part, whether or not it reads (N = 2, dot form).
    localparam [1:0] T_NONE = 2'd0, T_A = 2'd1, T_B = 2'd2, T_BIAS = 2'd3;
    reg [1:0]    tg1_kind, tg2_kind;
    reg [NB-1:0] tg1_arow, tg2_arow;
    reg [5:0]    tg1_aword, tg2_aword;  // an A read: its line of the row (< 64)
    reg [3:0]    tg1_amask, tg2_amask;  // and the words it read
    reg [9:0]    tg1_k, tg2_k;        // the step: BROWS the reduction step, dot the cycle of the pass
    reg          tg1_first, tg2_first, tg1_last, tg2_last, tg1_new, tg2_new;
    reg          tg1_bl, tg2_bl;
    reg [PC-1:0] tg1_cols, tg2_cols;
    reg [RB-1:0] tg1_rt, tg2_rt;
    // worked out from the front's parameters in stage 1, when they are still the read's MM's
    reg          tg2_brows, tg2_kin, tg2_dlast;
    reg [2:0]    tg2_g;               // the read's tile's groups (the layout's; BROWS and BIAS are the front's)
    always @(posedge clk) begin
        if (rst) begin
            tg1_kind <= T_NONE;
            tg2_kind <= T_NONE;
            tg1_arow <= {NB{1'b0}};
            tg2_arow <= {NB{1'b0}};
            tg1_aword <= 6'd0;
            tg2_aword <= 6'd0;
            tg1_amask <= 4'd0;
            tg2_amask <= 4'd0;
            tg1_k <= 10'd0;
            tg2_k <= 10'd0;
            tg1_first <= 1'b0;
            tg2_first <= 1'b0;
            tg1_last <= 1'b0;
            tg2_last <= 1'b0;
            tg1_new <= 1'b0;
            tg2_new <= 1'b0;
            tg1_bl <= 1'b0;
            tg2_bl <= 1'b0;
            tg1_cols <= {PC{1'b0}};
            tg2_cols <= {PC{1'b0}};
            tg1_rt <= {RB{1'b0}};
            tg2_rt <= {RB{1'b0}};
            tg2_brows <= 1'b0;
            tg2_g <= 3'd0;
            tg2_kin <= 1'b0;
            tg2_dlast <= 1'b0;
        end else if (run) begin
            tg1_kind <= (phase == P_AREAD) ? T_A : in_b ? T_B : in_bias ? T_BIAS : T_NONE;
            tg1_arow <= a_row;
            tg1_aword <= a_word[5:0];
            tg1_amask <= rd_mask;
            tg1_k <= cnt[9:0];
            tg1_first <= (cnt == 11'd0);
            tg1_last <= last_b;
            tg1_new <= tile_start && (cnt == 11'd0);
            tg1_bl <= bias_l1;
            tg1_cols <= pass_cols;
            tg1_rt <= t_rt;
            tg2_kind <= tg1_kind;
            tg2_arow <= tg1_arow;
            tg2_aword <= tg1_aword;
            tg2_amask <= tg1_amask;
            tg2_k <= tg1_k;
            tg2_first <= tg1_first;
            tg2_last <= tg1_last;
            tg2_new <= tg1_new;
            tg2_bl <= tg1_bl;
            tg2_cols <= tg1_cols;
            tg2_rt <= tg1_rt;
            tg2_brows <= brows;
            tg2_g <= groups_of(tg1_rt);
            tg2_kin <= {6'd0, tg1_k} < kl;
            tg2_dlast <= {{PB{1'b0}}, tg1_k[9:PB]} == {1'b0, dot_lines} - 10'd1;
        end
    end

    // rowmem: the batch tile's A rows, bank r = row r
    wire [N*32-1:0] rm_data;
    rowmem #(.NB(N), .DEPTH(GA2_MM_MAX_K / 4), .AW(8), .BW(NB)) u_rowmem (
        .clk(clk),
        .we(tg2_kind == T_A), .wbank(tg2_arow), .wline(tg2_aword), .wmask(tg2_amask), .wdata(rd_data),
        .re(tg1_kind == T_B), .raddr(tg1_k[9:2]), .rdata(rm_data)
    );

    // ------------------------------------------------------------------- the array's edges
    // A lanes (lane r = A row r): BROWS left edge of the rows that take row r, dot top edge of
    // column r. Lane r is delayed r cycles. B lanes (BROWS): group j, column c takes line lane
    // j*N + c (+ 2 in a second half pass); delayed c cycles. Dot: one shift register per array row
    // holds that row's current B lanes and flags. The next values are wires and each edge register
    // is one vector: few events per cycle.
    localparam integer BE = GMAX * N;  // B lanes of the edge
    wire            step_b   = (tg2_kind == T_B);
    // dot pads K to a multiple of 4*DOTW: A's lanes past K enter as zero, so B's (whatever they
    // hold) add nothing to the sums
    wire            k_in     = tg2_kin;
    wire [PB-1:0]   dot_r2   = tg2_k[PB-1:0];
    wire [9-PB:0]   dot_l2   = tg2_k[9:PB];
    wire [N*8-1:0]     a_next;
    wire [BE*8-1:0]    b_next;
    wire [BE*8-1:0]    b_cols_mask, b_line;
    wire [N*SRB*8-1:0] sr_next;
    wire [N*SRB-1:0]   srf_next, srl_next;
    reg  [N*8-1:0]     a_edge_v;
    reg  [BE*8-1:0]    b_edge_v;
    reg  [N*SRB*8-1:0] sr_v;
    reg  [N*SRB-1:0]   srf_v, srl_v;
    reg                af_edge, al_edge;
    // the read's DOTW words; a second word past the B row is not read, so it enters as zero (its
    // lanes meet A's zero lanes past K, but an unread port lane may hold anything, X in a 4-state
    // simulator, and X times zero is not zero there)
    wire [SRB*8-1:0]   dot_word;
    // The next edges, lane by lane. Each lane's value sits behind the condition that lets any
    // lane of its group be nonzero (the value is the same): a simulator that evaluates every block
    // every cycle then merges the lanes under one test, false while no B step arrives.
    wire a_any = step_b && k_in;           // an A step: lanes below rt carry rowmem's bytes
    wire d_any = step_b && !tg2_brows;     // a dot-form step: one row's B row arrives
    wire b_any = step_b && tg2_brows;      // a BROWS step: the pass's columns carry the line
    assign b_next = b_any ? (b_line & b_cols_mask) : {BE*8{1'b0}};
    genvar ge, gc;
    generate
        for (ge = 0; ge < N; ge = ge + 1) begin : g_edge
            assign a_next[ge*8 +: 8] = (a_any && tg2_rt > ge) ? rm_data[ge*32 + 8*tg2_k[1:0] +: 8] : 8'd0;
            wire load = d_any && dot_r2 == ge;
            assign sr_next[ge*SRB*8 +: SRB*8] = load ? (tg2_cols[ge] ? dot_word : {SRB*8{1'b0}})
                                                        : {8'd0, sr_v[ge*SRB*8 + 8 +: SRB*8-8]};
            assign srf_next[ge*SRB +: SRB] = load ? {{(SRB-1){1'b0}}, dot_l2 == 0}
                                                     : {1'b0, srf_v[ge*SRB + 1 +: SRB-1]};
            assign srl_next[ge*SRB +: SRB] = load ? {tg2_dlast, {(SRB-1){1'b0}}}
                                                     : {1'b0, srl_v[ge*SRB + 1 +: SRB-1]};
        end
        for (gc = 0; gc < BE; gc = gc + 1) begin : g_blane
            // the pass's columns as a byte mask (changes once per pass)
            assign b_cols_mask[gc*8 +: 8] = {8{tg2_cols[gc]}};
        end
    endgenerate
    generate
        if (DOTW > 1) begin : g_dot2
            reg w2_1, w2_2;  // the read of one and two cycles ago had a second word
            always @(posedge clk) begin
                if (rst) begin
                    w2_1 <= 1'b0;
                    w2_2 <= 1'b0;
                end else if (run) begin
                    w2_1 <= dot_w2;
                    w2_2 <= w2_1;
                end
            end
            assign dot_word = {w2_2 ? rd_data[63:32] : 32'd0, rd_data[31:0]};
        end else begin : g_dot1
            assign dot_word = rd_data[31:0];
        end
        // the pass's column gc is line lane gc (N = 2: gc + 2 in a second half pass); one
        // expression over the whole edge, so a simulator evaluates it once per change
        if (HALF != 0) begin : g_bline_half
            assign b_line = g_half_lanes.h2 ? rd_data[BE*8+15:16] : rd_data[BE*8-1:0];
        end else begin : g_bline_whole
            assign b_line = rd_data[BE*8-1:0];
        end
        if (HALF != 0) begin : g_half_lanes
            // N = 2: the pass's column gc is line lane gc, or gc + 2 in a second half pass
            reg h1, h2;  // the half of the read one and two cycles ago
            always @(posedge clk) begin
                if (rst) begin
                    h1 <= 1'b0;
                    h2 <= 1'b0;
                end else if (run) begin
                    h1 <= half;
                    h2 <= h1;
                end
            end
        end
    endgenerate
    always @(posedge clk) begin
        if (rst) begin
            af_edge <= 1'b0;
            al_edge <= 1'b0;
            srf_v <= {N*SRB{1'b0}};
            srl_v <= {N*SRB{1'b0}};
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

    // lane delays: lane i of a_del / b_del is i cycles behind its edge register. One shift register
    // holds the last N-1 cycles' edges; synthesis keeps only the taps used (a triangle of registers).
    localparam integer EW = N * 8 + 2 + BE * 8;  // an edge: A lanes, first, last, B lanes
    wire [EW-1:0]       edge_now = {b_edge_v, al_edge, af_edge, a_edge_v};
    reg  [EW*(N-1)-1:0] edge_past;                 // slice d-1: the edges of d cycles ago
    generate
        if (N > 2) begin : g_past_n
            always @(posedge clk) begin
                if (rst) edge_past <= {EW*(N-1){1'b0}};
                else if (run) edge_past <= {edge_past[EW*(N-2)-1:0], edge_now};
            end
        end else begin : g_past_1
            always @(posedge clk) begin
                if (rst) edge_past <= {EW{1'b0}};
                else if (run) edge_past <= edge_now;
            end
        end
    endgenerate
    wire [7:0] a_del [0:N-1];
    wire       af_del [0:N-1];
    wire       al_del [0:N-1];
    wire [7:0] b_del [0:BE-1];
    genvar gi, gj;
    generate
        for (gi = 0; gi < N; gi = gi + 1) begin : g_adel
            if (gi == 0) begin : g_now
                assign a_del[gi] = a_edge_v[7:0];
                assign af_del[gi] = af_edge;
                assign al_del[gi] = al_edge;
            end else begin : g_late
                assign a_del[gi] = edge_past[EW*(gi-1) + gi*8 +: 8];
                assign af_del[gi] = edge_past[EW*(gi-1) + N*8];
                assign al_del[gi] = edge_past[EW*(gi-1) + N*8 + 1];
            end
        end
        for (gj = 0; gj < BE; gj = gj + 1) begin : g_bdel
            localparam integer D = gj % N;
            if (D == 0) begin : g_now
                assign b_del[gj] = b_edge_v[gj*8 +: 8];
            end else begin : g_late
                assign b_del[gj] = edge_past[EW*(D-1) + N*8 + 2 + gj*8 +: 8];
            end
        end
    endgenerate

    // the array's layout for the batch tile whose operands are arriving. BROWS: array row i < g*rt
    // belongs to group i / rt and takes A row i mod rt, and a group's top row takes B from the
    // line; rows past g*rt take B from above and their sums are never read. Dot: row i takes B row
    // i of the pass from the left, row 0 takes A from the top.
    function [NB+GB:0] place;          // {inject, group, lane} of array row i for rt rows in g groups
        input integer  i;
        input [RB-1:0] rt;
        input [2:0]    g;
        integer x, lane, group;
        begin
            lane = 0;
            group = 0;
            for (x = 0; x < N; x = x + 1) begin
                if (x < i) begin
                    if (lane + 1 == {{(32-RB){1'b0}}, rt}) begin
                        lane = 0;
                        group = group + 1;
                    end else begin
                        lane = lane + 1;
                    end
                end
            end
            if (group < {29'd0, g}) place = {lane == 0, group[GB-1:0], lane[NB-1:0]};
            else place = {(NB+GB+1){1'b0}};
        end
    endfunction
    reg [N*NB-1:0] lay_lane;           // row i at bits NB*i+NB-1:NB*i
    reg [N*GB-1:0] lay_group;          // row i at bits GB*i+GB-1:GB*i
    reg [N-1:0]    lay_inj;
    reg            arr_brows;          // the array's form (BROWS or dot), changed with its layout
    integer i;
    always @(posedge clk) begin
        if (rst) begin
            lay_lane <= {N*NB{1'b0}};
            lay_group <= {N*GB{1'b0}};
            lay_inj <= {N{1'b0}};
            arr_brows <= 1'b0;
        end else if (step_b && tg2_new) begin
            arr_brows <= tg2_brows;
            for (i = 0; i < N; i = i + 1) begin
                if (tg2_brows) begin
                    {lay_inj[i], lay_group[i*GB +: GB], lay_lane[i*NB +: NB]} <= place(i, tg2_rt, tg2_g);
                end else begin
                    lay_lane[i*NB +: NB] <= i[NB-1:0];
                    lay_group[i*GB +: GB] <= {GB{1'b0}};
                    lay_inj[i] <= (i == 0);
                end
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
            always @* a_left[gr*8 +: 8] = arr_brows ? a_del[lay_lane[gr*NB +: NB]] : sr_v[gr*SRB*8 +: 8];
            always @* first_left[gr] = arr_brows ? af_del[lay_lane[gr*NB +: NB]] : srf_v[gr*SRB];
            always @* last_left[gr] = arr_brows ? al_del[lay_lane[gr*NB +: NB]] : srl_v[gr*SRB];
            for (gt = 0; gt < N; gt = gt + 1) begin : g_top
                always @* b_inj[(gr*N+gt)*8 +: 8] = arr_brows ? b_del[{lay_group[gr*GB +: GB], gt[NB-1:0]}] :
                                                 (gr == 0) ? a_del[gt] : 8'd0;
            end
        end
    endgenerate

    systolic #(.N(N)) u_array (
        .clk(clk), .rst(rst), .en(run), .a_left(a_left), .first_left(first_left), .last_left(last_left),
        .b_inj(b_inj), .inj(lay_inj), .res(res)
    );

    // ------------------------------------------------------------------------- bias words
    // one int32 word per column of the pass (BIAS runs one group: N columns), read in BL lines
    reg [31:0] bias_l [0:N-1];
    integer l;
    always @(posedge clk) begin
        if (tg2_kind == T_BIAS) begin
            for (l = 0; l < N; l = l + 1) begin
                if ((l / 4 == 1) == tg2_bl) bias_l[l] <= rd_data[(l % 4)*32 +: 32];
            end
        end
    end

    // ------------------------------------------------------------------------- the writer
    // A pass's job (its tile's output base and layout, its column tile) waits in a small queue
    // until READ_TO_RES cycles after its last B read. Passes are at least G >= N cycles apart, so
    // at most ceil(READ_TO_RES / N) jobs wait at once.
    localparam integer JOBS = 4;
    reg [AW-1:0] jq_out  [0:JOBS-1];
    reg [RB-1:0] jq_rt   [0:JOBS-1];
    reg [WB-1:0] jq_w    [0:JOBS-1];
    reg [15:0]   jq_tile [0:JOBS-1];
    reg          jq_half [0:JOBS-1];
    reg          jq_hp   [0:JOBS-1];
    reg          jq_last [0:JOBS-1];
    reg          jq_par  [0:JOBS-1];  // its MM's parameter bank
    reg          jq_o8   [0:JOBS-1];  // its MM's OUT8 and BROWS (the slot's PEs are worked out as it pops)
    reg          jq_br   [0:JOBS-1];
    reg [1:0]    jq_wp, jq_rp;
    // the parameter banks: the writer's view of the MM in front (bank fpar, written in its setup
    // cycle) and of the MM before it, which may still drain (the other bank)
    reg          bk_relu [0:1];
    reg          bk_bias [0:1];
    reg [15:0]   bk_mt   [0:1];
    reg [15:0]   bk_tend [0:1];
    reg [AW-1:0] bk_step [0:1];
    reg [15:0]   bk_qa   [0:1];
    reg [5:0]    bk_qs   [0:1];
    always @(posedge clk) begin
        if (phase == P_SETUP) begin
            bk_relu[fpar] <= relu;
            bk_bias[fpar] <= biasf;
            bk_mt[fpar] <= mt;
            bk_tend[fpar] <= t_end;
            bk_step[fpar] <= row_step;
            bk_qa[fpar] <= qa_r;
            bk_qs[fpar] <= qs_r;
        end
    end
    reg [READ_TO_RES-1:0] jq_go;      // bit d: a pass ended d+1 cycles ago
    wire         job_push = last_b;
    wire         job_pop  = jq_go[READ_TO_RES-2];

    // slot (w_pw, w_ar): pass word w_pw (OUT8; a half pass has one) or pass column w_pw (int32),
    // of the tile's row w_ar; the rows go fastest
    reg          w_on;
    reg [WB-1:0] w_slot;
    reg [AW-1:0] w_out, w_rowadr;
    reg [15:0]   w_tile;
    reg [RB-1:0] w_rt;
    reg [WB-1:0] w_w;
    reg          w_half, w_hp, w_last;
    reg [NB-1:0] w_ar;
    reg [3:0]    w_pw;
    // the job's MM's parameters, taken as it pops
    reg          w_out8, w_brows, w_relu, w_biasf;
    reg [15:0]   w_mt, w_tend, w_qa;
    reg [AW-1:0] w_step;
    reg [5:0]    w_qs;
    always @(posedge clk) begin
        if (rst) begin
            jq_wp <= 2'd0;
            jq_rp <= 2'd0;
            jq_go <= {READ_TO_RES{1'b0}};
            w_on <= 1'b0;
            w_slot <= {WB{1'b0}};
            w_out <= {AW{1'b0}};
            w_rowadr <= {AW{1'b0}};
            w_tile <= 16'd0;
            w_rt <= {RB{1'b0}};
            w_w <= {WB{1'b0}};
            w_half <= 1'b0;
            w_hp <= 1'b0;
            w_last <= 1'b0;
            w_ar <= {NB{1'b0}};
            w_pw <= 4'd0;
            w_out8 <= 1'b0;
            w_brows <= 1'b0;
            w_relu <= 1'b0;
            w_biasf <= 1'b0;
            w_mt <= 16'd0;
            w_tend <= 16'd0;
            w_qa <= 16'd0;
            w_step <= {AW{1'b0}};
            w_qs <= 6'd0;
        end else if (run) begin
            jq_go <= {jq_go[READ_TO_RES-2:0], job_push};
            if (job_push) begin
                jq_out[jq_wp] <= t_out;
                jq_rt[jq_wp] <= t_rt;
                jq_w[jq_wp] <= t_w;
                jq_tile[jq_wp] <= tile;
                jq_half[jq_wp] <= half;
                jq_hp[jq_wp] <= half_pass;
                jq_last[jq_wp] <= !more_passes && !more_tiles;
                jq_par[jq_wp] <= fpar;
                jq_o8[jq_wp] <= out8;
                jq_br[jq_wp] <= brows;
                jq_wp <= jq_wp + 2'd1;
            end
            if (job_pop) begin
                w_on <= 1'b1;
                w_slot <= {WB{1'b0}};
                w_out <= jq_out[jq_rp];
                w_rowadr <= jq_out[jq_rp];
                w_rt <= jq_rt[jq_rp];
                w_w <= jq_w[jq_rp];
                w_tile <= jq_tile[jq_rp];
                w_half <= jq_half[jq_rp];
                w_hp <= jq_hp[jq_rp];
                w_last <= jq_last[jq_rp];
                w_out8 <= jq_o8[jq_rp];
                w_brows <= jq_br[jq_rp];
                w_relu <= bk_relu[jq_par[jq_rp]];
                w_biasf <= bk_bias[jq_par[jq_rp]];
                w_mt <= bk_mt[jq_par[jq_rp]];
                w_tend <= bk_tend[jq_par[jq_rp]];
                w_qa <= bk_qa[jq_par[jq_rp]];
                w_step <= bk_step[jq_par[jq_rp]];
                w_qs <= bk_qs[jq_par[jq_rp]];
                w_ar <= {NB{1'b0}};
                w_pw <= 4'd0;
                jq_rp <= jq_rp + 2'd1;
            end else if (w_on) begin
                w_slot <= w_slot + 1'b1;
                if (w_slot == w_w - 1'b1) w_on <= 1'b0;
                if ({1'b0, w_ar} == w_rt - 1'b1) begin
                    w_ar <= {NB{1'b0}};
                    w_pw <= w_pw + 4'd1;
                    w_rowadr <= w_out;
                end else begin
                    w_ar <= w_ar + 1'b1;
                    w_rowadr <= w_rowadr + w_step;
                end
            end
        end
    end

    // (the flags are arguments: an always @* that calls a function is sensitive to its arguments
    // only, and the slot stage below must see a new instruction's flags even when `res` is unchanged)
    function [31:0] finish;           // bias, then relu
        input [31:0] raw;
        input [31:0] b;
        input        add_bias;
        input        clamp;
        reg   [31:0] v;
        begin
            v = raw + (add_bias ? b : 32'd0);
            finish = (clamp && v[31]) ? 32'd0 : v;
        end
    endfunction

    // lane q of the slot: its pass column, the PE that holds that column, and whether it is real.
    // BROWS: pass column p is column p mod N of group p / N, whose row for A row ar is
    // (p / N) * rt + ar; dot: array row p, column ar. The PE and the bias word of each lane are
    // worked out a cycle ahead, from the counters' next values, so the slot's cycle only selects
    // and adds.
    wire          w_wrap = w_on && ({1'b0, w_ar} == w_rt - 1'b1);
    wire [NB-1:0] ar_n   = job_pop ? {NB{1'b0}} : !w_on ? w_ar : w_wrap ? {NB{1'b0}} : w_ar + 1'b1;
    wire [3:0]    pw_n   = job_pop ? 4'd0 : w_wrap ? w_pw + 4'd1 : w_pw;
    wire [NB-1:0] rt_n   = job_pop ? jq_rt[jq_rp][NB-1:0] : w_rt[NB-1:0];  // rt = N: one group
    wire          hp_n   = job_pop ? jq_hp[jq_rp] : w_hp;
    wire          o8_n   = job_pop ? jq_o8[jq_rp] : w_out8;
    wire          br_n   = job_pop ? jq_br[jq_rp] : w_brows;
    wire [17:0] s_col0 = {w_tile, 2'b00} + {16'd0, w_half, 1'b0};  // the pass's first column
    wire [17:0] s_col32 = s_col0 + {14'd0, w_pw};                     // int32: the slot's column
    reg  [31:0] lane_val [0:3];
    reg  [3:0]  lane_ok;
    genvar gl;
    generate
        for (gl = 0; gl < 4; gl = gl + 1) begin : g_lane
            // the next slot's PE and bias word of this lane, registered
            wire [5:0]    p_n   = !o8_n ? {2'b00, pw_n} : hp_n ? gl : {1'b0, pw_n[2:0], 2'b00} + gl;
            wire [NB-1:0] grp_n = p_n[NB +: NB];                // below GMAX
            reg  [NB-1:0] pe_r, pe_c, bias_sel;
            always @(posedge clk) begin
                if (run) begin
                    pe_r <= br_n ? times_mod_n(grp_n, rt_n) + ar_n : p_n[NB-1:0];
                    pe_c <= br_n ? p_n[NB-1:0] : ar_n;
                    bias_sel <= p_n[NB-1:0];
                end
            end
            wire [5:0]    p     = !w_out8 ? {2'b00, w_pw} : w_hp ? gl : {1'b0, w_pw[2:0], gl[1:0]};
            wire [17:0]   col   = s_col0 + {12'd0, p};
            // lanes 1..3 carry int8 results only, and a half pass fills two lanes
            wire          used  = (gl == 0) || (w_out8 && !(w_hp && gl >= 2));
            always @* lane_val[gl] = used ? finish(res[{pe_r, pe_c}*32 +: 32], bias_l[bias_sel], w_biasf, w_relu) : 32'd0;
            always @* lane_ok[gl] = used && (col < {2'b00, w_mt});
        end
    endgenerate

    // slot stage: the slot's results (bias added, relu), lanes, address; only a slot's cycle works
    reg [31:0]   w1_val [0:3];
    reg [3:0]    w1_lanes;
    reg          w1_ok, w1_last, w1_h0, w1_h1;
    reg [NB-1:0] w1_ar;
    reg [AW-1:0] w1_addr;
    reg          w1_o8;
    reg [15:0]   w1_qa;
    reg [5:0]    w1_qs;
    integer q;
    always @(posedge clk) begin
        if (rst) begin
            w1_ok <= 1'b0;
            w1_last <= 1'b0;
            w1_h0 <= 1'b0;
            w1_h1 <= 1'b0;
        end else if (run) begin
            // an int8 word inside the window, or an int32 result below M and inside the window
            w1_ok <= w_on && (w_out8 ? ((w_tile + (w_hp ? 16'd0 : {12'd0, w_pw})) < w_tend)
                                     : ((s_col32 < {2'b00, w_mt}) && (s_col32[17:2] < w_tend)));
            w1_last <= w_on && w_last && (w_slot == w_w - 1'b1);
            w1_h0 <= (HALF != 0) && w_out8 && w_hp && !w_half;
            w1_h1 <= (HALF != 0) && w_out8 && w_hp && w_half;
        end
        if (w_on) begin
            for (q = 0; q < 4; q = q + 1) w1_val[q] <= lane_val[q];
            w1_lanes <= lane_ok;
            w1_ar <= w_ar;
            w1_o8 <= w_out8;
            w1_qa <= w_qa;
            w1_qs <= w_qs;
            w1_addr <= w_rowadr + (w_out8 ? w_tile[AW-1:0] + (w_hp ? {AW{1'b0}} : {{(AW-4){1'b0}}, w_pw})
                                        : s_col32[AW-1:0]);
        end
    end

    // requantize the four lanes in the requant bank; the slot's address, lanes and int32 value
    // keep pace in one shift register (RQ stages of value, lanes, address, row, half, ok, last)
    assign rq_acc   = {w1_val[3], w1_val[2], w1_val[1], w1_val[0]};
    assign rq_mult  = w1_qa;
    assign rq_shift = w1_qs;
    localparam integer RQ = WR_LAT - 1;  // requant's latency
    localparam integer DW = 32 + 4 + AW + NB + 4;
    reg  [RQ*DW-1:0] d_v;                // stage s (1..RQ) at bits (s-1)*DW: {last, ok, h1, h0, row, address, lanes, value}
    wire [DW-1:0]    d_in  = {w1_last, w1_ok, w1_h1, w1_h0, w1_ar, w1_addr, w1_lanes, w1_val[0]};
    wire [DW-1:0]    d_out = d_v[(RQ-1)*DW +: DW];
    reg  [RQ-1:0]    d_o8v;              // and the slot's OUT8, stage s at bit s-1
    always @(posedge clk) begin
        if (rst) begin
            d_v <= {RQ*DW{1'b0}};
            d_o8v <= {RQ{1'b0}};
        end else if (run) begin
            d_v <= {d_v[(RQ-1)*DW-1:0], d_in};
            d_o8v <= {d_o8v[RQ-2:0], w1_o8};
        end
    end
    // the requant bank advances while a slot is on its way through it
    reg  [RQ-1:0] d_oks;
    genvar gq;
    generate
        for (gq = 0; gq < RQ; gq = gq + 1) begin : g_ok
            always @* d_oks[gq] = d_v[gq*DW + DW-2];
        end
    endgenerate
    assign rq_busy = w1_ok || (d_oks != {RQ{1'b0}});
    wire [3:0]  d_lanes = d_out[32 +: 4];
    wire        d_h0    = d_out[DW-4];
    wire [31:0] word8   = {d_lanes[3] ? rq_y[31:24] : 8'd0, d_lanes[2] ? rq_y[23:16] : 8'd0,
                           d_lanes[1] ? rq_y[15:8] : 8'd0, d_lanes[0] ? rq_y[7:0] : 8'd0};
    // N = 2: the first half of an int8 word waits for the second (one per row of the tile)
    wire [31:0] word_out;
    generate
        if (HALF != 0) begin : g_half
            reg [15:0] hold [0:N-1];
            wire [NB-1:0] d_row = d_out[36 + AW +: NB];
            always @(posedge clk) begin
                if (run && d_out[DW-2] && d_h0) hold[d_row] <= word8[15:0];
            end
            wire d_h1 = d_out[DW-3];
            assign word_out = d_h1 ? {word8[15:0], hold[d_row]} : word8;
        end else begin : g_whole
            assign word_out = word8;
        end
    endgenerate
    assign we    = d_out[DW-2] && !d_h0;
    assign waddr = d_out[36 +: AW];
    assign wdata = d_o8v[RQ-1] ? word_out : d_out[31:0];
    assign done  = d_out[DW-1];
endmodule
`default_nettype wire
