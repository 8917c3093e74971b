`timescale 1ns/1ps
`default_nettype none
// dma: moves rows x cols words between external memory and the scratchpad, from a queue of up to
// QUEUE transfers (issued and not finished). Row r uses ext[ext_base + r*ext_stride + c] and
// sram[sram_base + r*sram_stride + c]; external addresses are 32-bit word addresses.
//
// External port: an AXI4 master (read address AR, read data R, write address AW, write data W,
// write response B), 32 * EW data bits, byte addresses (a word's is 4 * its word address). Every
// request is one beat (arlen = awlen = 0, INCR, full width, ID 0), so answers come in order; up to
// PENDING reads and PENDING writes wait for their answers at once. Every AXI output comes from a
// register; rready and bready are always high.
//
// Words move in beats. With EW = 1 a beat is one word. With EW = 2 (a 64-bit bus) a beat is the
// words of a row that lie in one aligned pair of words: a row starting at an odd word address
// begins with a one-word beat in the upper lane (an unaligned address, as AXI defines it), then
// pairs. A beat is one external request and one scratchpad line access (its words are consecutive
// scratchpad addresses).
//
// Order. A STORE takes its descriptor only after every earlier LOAD has ended, and a LOAD only after
// every earlier STORE has ended (AXI orders nothing between reads and writes: this is what makes a
// LOAD see the words a STORE before it wrote). Transfers in flight together are therefore of one
// kind and end in the order they were issued.
//
// Faults. A beat reaching a word at or past ext_limit (the words the memory has), an error answer
// (RRESP or BRESP not OKAY), or an answer that breaks the protocol (no request waiting for it, an
// ID other than 0, RLAST low) stops the engine: `err` rises and stays until reset, with err_code
// and err_pc (the instruction of the transfer; for an answer nobody asked for, of the last transfer
// taken). No further beat is made or read from the scratchpad (a faulting transfer stops at its
// first bad beat); the STORE beats already read go out, and answers are still taken, so the memory
// ends as the transfers before the fault left it.
// `quiet` says when nothing is on its way any more: GA2 halts on a fault then (rtl/ga2.v).
//
// Timing with a memory that is always ready and answers a request L + 1 cycles after taking it
// (L = 0: the next cycle). A transfer issued in cycle t takes its descriptor in cycle s (its one
// "setup" cycle): s = max(t + 1, when the engine is free, one cycle after every transfer of the
// other kind before it has ended). With n beats:
//   LOAD   requests beat b in cycle s+1+b; its answer is written to the scratchpad in s+2+L+b; the
//          transfer ends (stops counting as in flight) at s+n+L+2; the engine is free for the next
//          transfer's setup at s+n+1 (answers overlap the next requests)
//   STORE  reads beat b from the scratchpad in s+1+b and sends it in s+4+b; its response comes in
//          s+5+L+b; the transfer ends at s+n+L+5 (HALT and WAIT count it until every write is
//          answered); the engine is free at s+n+2
// (L <= PENDING - 2 keeps the engine from ever waiting on its answer bookkeeping.)
//
// Gather (a LOAD with `gather` high): rows r = 0 .. rows-1 are the logical rows L = r0 + r of a paged
// tensor (r0 = ext_base[31:16]); row L lies in page P = L >> page_shift, whose base address is the
// descriptor word at scratchpad address T + P (T = ext_base[15:0], the block table), at
// base + page_off + (L mod 2^page_shift) * ext_stride. The rows go to the scratchpad packed
// (sram_stride is cols). Before the first row of each page the engine reads that page's descriptor
// on its scratchpad read port (free: a LOAD never uses it) and waits for it: R_DESC (the read),
// R_DW1, R_DW2 (the word arrives: the page's first row address), so each page adds
// GATHER_DESC = 3 cycles to the LOAD timing above: with n beats over p pages a gather is timed as a
// LOAD of n + 3p beats, its setup cycle being the first descriptor read. Only the first page starts
// inside a page (at row r0 mod 2^page_shift: one multiply, registered in R_DESC and added to page_off
// in R_DW1); every later one starts at its row 0.
// `inflight` counts transfers issued and not ended; `busy` is high while a transfer that has taken
// its descriptor has not ended.
module dma #(
    parameter integer QUEUE   = 4,   // 1..16
    parameter integer PENDING = 32,  // a power of two
    parameter integer AW      = 12,  // scratchpad address bits
    parameter integer EW      = 1,   // words per beat: the external bus is 32 * EW bits (EW = 1 or 2)
    parameter integer IAW     = 10,  // program counter bits
    parameter integer QW      = $clog2(QUEUE + 1)  // bits of a count 0..QUEUE (inflight)
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire        is_store,
    input  wire [15:0] rows,
    input  wire [15:0] cols,
    input  wire [31:0] ext_base,
    input  wire [15:0] ext_stride,
    input  wire [AW-1:0] sram_base,
    input  wire [AW-1:0] sram_stride,
    input  wire        gather,          // a LOAD through a block table (above)
    input  wire [3:0]  page_shift,      // a gather's page holds 2^page_shift rows
    input  wire [15:0] page_off,        // a gather adds it to every descriptor
    input  wire [IAW-1:0] pc,           // the instruction issuing the transfer (named by a fault)
    input  wire [31:0] ext_limit,       // words of external memory (at most 2^30)
    output reg  [QW-1:0] inflight,
    output wire        busy,
    output wire        quiet,           // nothing is on its way: no request waiting, none unanswered
    output reg         err,
    output reg  [1:0]  err_code,        // ERR_ADDR, ERR_RESP, ERR_PROTOCOL
    output reg  [IAW-1:0] err_pc,
    // AXI4 master
    output wire        m_axi_arid,
    output reg  [31:0] m_axi_araddr,
    output wire [7:0]  m_axi_arlen,
    output wire [2:0]  m_axi_arsize,
    output wire [1:0]  m_axi_arburst,
    output wire        m_axi_arlock,
    output wire [3:0]  m_axi_arcache,
    output wire [2:0]  m_axi_arprot,
    output reg         m_axi_arvalid,
    input  wire        m_axi_arready,
    input  wire        m_axi_rid,
    input  wire [32*EW-1:0] m_axi_rdata,
    input  wire [1:0]  m_axi_rresp,
    input  wire        m_axi_rlast,
    input  wire        m_axi_rvalid,
    output wire        m_axi_rready,
    output wire        m_axi_awid,
    output reg  [31:0] m_axi_awaddr,
    output wire [7:0]  m_axi_awlen,
    output wire [2:0]  m_axi_awsize,
    output wire [1:0]  m_axi_awburst,
    output wire        m_axi_awlock,
    output wire [3:0]  m_axi_awcache,
    output wire [2:0]  m_axi_awprot,
    output reg         m_axi_awvalid,
    input  wire        m_axi_awready,
    output reg  [32*EW-1:0] m_axi_wdata,
    output reg  [4*EW-1:0]  m_axi_wstrb,
    output wire        m_axi_wlast,
    output reg         m_axi_wvalid,
    input  wire        m_axi_wready,
    input  wire        m_axi_bid,
    input  wire [1:0]  m_axi_bresp,
    input  wire        m_axi_bvalid,
    output wire        m_axi_bready,
    // the scratchpad
    output wire [EW-1:0] sram_re,        // a line of the beat's words from sram_raddr
    output wire [AW-1:0] sram_raddr,
    input  wire [32*EW-1:0] sram_rdata,
    output wire [EW-1:0] sram_we,        // a line of the beat's words to sram_waddr
    output wire [AW-1:0] sram_waddr,
    output wire [32*EW-1:0] sram_wdata
);
    localparam [1:0] ERR_ADDR = 2'd1, ERR_RESP = 2'd2, ERR_PROTOCOL = 2'd3;
    localparam integer DW  = 1 + 16 + 16 + 32 + 16 + AW + AW + IAW;  // a descriptor
    localparam integer PW  = $clog2(PENDING);
    localparam integer QPW = (QUEUE > 1) ? $clog2(QUEUE) : 1;  // a queue pointer (wraps at QUEUE - 1)
    localparam integer QUEUE_M1 = QUEUE - 1;
    localparam integer ONE      = 1;
    localparam [QPW-1:0] Q_LAST = QUEUE_M1[QPW-1:0];
    localparam [QW-1:0]  Q_ONE  = ONE[QW-1:0];
    localparam [PW:0]    P_FULL = PENDING[PW:0];
    localparam integer   SIZE   = (EW == 2) ? 3 : 2;  // log2 of the bytes of a beat

    assign m_axi_arid    = 1'b0;
    assign m_axi_arlen   = 8'd0;
    assign m_axi_arsize  = SIZE[2:0];
    assign m_axi_arburst = 2'b01;     // INCR
    assign m_axi_arlock  = 1'b0;
    assign m_axi_arcache = 4'b0011;   // normal, non-cacheable, bufferable
    assign m_axi_arprot  = 3'b000;
    assign m_axi_rready  = 1'b1;
    assign m_axi_awid    = 1'b0;
    assign m_axi_awlen   = 8'd0;
    assign m_axi_awsize  = SIZE[2:0];
    assign m_axi_awburst = 2'b01;
    assign m_axi_awlock  = 1'b0;
    assign m_axi_awcache = 4'b0011;
    assign m_axi_awprot  = 3'b000;
    assign m_axi_wlast   = 1'b1;
    assign m_axi_bready  = 1'b1;

    // ------------------------------------------------------------------ descriptors waiting
    reg [DW-1:0] dq [0:QUEUE-1];
    localparam integer GW = 1 + 4 + 16;  // a descriptor's gather fields {gather, page_shift, page_off}
    reg [GW-1:0] gq [0:QUEUE-1];
    reg [QPW-1:0] dq_rp, dq_wp;
    reg [QW-1:0]  dq_count;
    // (a descriptor is {is_store, rows, cols, ext_base, ext_stride, sram_base, sram_stride, pc}; the
    // fields are picked where a transfer takes them, so a simulator works out these wide values only then)

    // the instructions of the transfers that took their descriptor and have not ended, oldest first
    // (they end in that order: see the header), for a fault's err_pc
    reg [IAW-1:0] pcq [0:QUEUE-1];
    reg [QPW-1:0] pcq_rp, pcq_wp;

    // ------------------------------------------------------------------ the request engine
    localparam [2:0] R_IDLE = 3'd0, R_SETUP = 3'd1, R_REQ = 3'd2, R_LAST = 3'd3,
                     R_DESC = 3'd4, R_DW1 = 3'd5, R_DW2 = 3'd6;  // a gather's descriptor read and its wait
    reg [2:0]  state;
    reg        store;
    reg [15:0] rows_m1, cols_m1, r, c, e_stride;
    reg [31:0] e_row, e_addr;          // the row's first external word, the beat's
    reg        e_over;                 // an address passed 2^32: every later beat is a fault
    reg [AW-1:0] s_row, s_stride;
    reg [IAW-1:0] cur_pc;
    reg [QW-1:0] active;               // transfers that took their descriptor and have not ended
    reg [QW-1:0] loads_out, stores_out;  // of those, LOADs and STOREs
    reg [31:0] lim_m1;                 // ext_limit - 1 (ext_limit is held steady from reset on)
    reg        e_gt, e_ge;             // e_addr > lim_m1, e_addr >= lim_m1: set with e_addr, so the
                                       // beat's fault check has no comparator before the scratchpad
    reg        no_mem;                 // ext_limit = 0
    // a gather: its block table, the current page (its index) and row in it, the page's size
    reg        g_on, g_first;          // a gather; its first page (which may start inside the page)
    reg [3:0]  g_sh;
    reg [15:0] g_off, g_pg, g_i;
    reg [AW-1:0] g_tbl;
    reg [31:0] g_prod;                 // R_DESC registers g_i * stride (first page) or 0, R_DW1 adds page_off
    reg [31:0] g_add;                  // what the page's descriptor is added to: page_off (+ g_i * stride, first page)
    wire [15:0] g_mask   = (16'd1 << g_sh) - 16'd1;
    wire        page_end = g_on && (g_i == g_mask);
    wire        desc_rd  = (state == R_DESC);
    wire [32:0] g_base   = {1'b0, sram_rdata[31:0]} + {1'b0, g_add};
    wire [31:0] g_in     = {16'd0, g_i} * {16'd0, e_stride};  // g_i < 2^15
    wire [AW-1:0] s_addr = s_row + c[AW-1:0];
    // the beat: its words c .. that lie in the row (and, with EW = 2, in one aligned pair), and
    // whether it ends the row. c never passes cols_m1: equalities decide both.
    wire [EW-1:0] bmask;               // the beat's words relative to its first
    wire        odd;                   // EW = 2: the beat starts in the upper lane
    wire        row_end;
    wire        at_last = (c == cols_m1);
    generate
        if (EW == 1) begin : g_beat1
            assign bmask   = 1'b1;
            assign odd     = 1'b0;
            assign row_end = at_last;
        end else begin : g_beat2
            assign odd     = e_addr[0];
            assign bmask   = {!at_last && !odd, 1'b1};
            assign row_end = at_last || (!odd && (c + 16'd1 == cols_m1));
        end
    endgenerate
    wire [15:0] c_step  = (EW == 2 && bmask[EW-1]) ? 16'd2 : 16'd1;
    // the next beat's address: the next row's first word, or this row's next word
    wire [32:0] e_next_row = {1'b0, e_row} + {17'd0, e_stride};
    wire [32:0] e_next_in  = {1'b0, e_addr} + {17'd0, c_step};
    wire        last_wd = (r == rows_m1) && row_end;
    // a beat past the memory: its last word at or past ext_limit, or an address of 2^30 words or more
    wire        beat_two = (EW == 2) && bmask[EW-1];
    wire        beat_bad = e_over || (e_addr[31:30] != 2'b00) || no_mem
                         || (beat_two ? e_ge : e_gt);
    wire        in_req  = (state == R_SETUP) || (state == R_REQ);
    wire        addr_fault = in_req && !err && beat_bad && (store ? (state == R_REQ) : 1'b1);

    // ------------------------------------------------------------------ reads (AR, R)
    // the beats requested and not answered: the scratchpad line each goes to ({last, odd, mask,
    // address}); the beat in the AR register waits beside it in ar_info
    localparam integer PQW = 1 + 1 + EW + AW;
    reg [PQW-1:0] pq [0:PENDING-1];
    reg [PW-1:0] pq_rp, pq_wp;
    reg [PW:0]   pq_count;
    reg [PW:0]   reads_out;            // beats produced (in the AR register or sent) and not answered
    reg [PQW-1:0] ar_info;
    wire        ar_fire = m_axi_arvalid && m_axi_arready;
    wire        r_fire  = m_axi_rvalid;  // rready is always high
    wire        ar_free = !m_axi_arvalid || ar_fire;
    wire        rd_room = (reads_out != P_FULL) || r_fire;
    wire        ld_prod = in_req && !store && ar_free && rd_room && !err && !beat_bad;

    // ------------------------------------------------------------------ writes (AW, W, B)
    // STORE beats on their way: read from the scratchpad (st1), its data here (st2, arr), waiting
    // in a small skid buffer when the output registers are full, then in the output registers
    localparam integer SKID = 4;
    localparam integer SW   = 1 + EW + 32 + 32 * EW;  // {last, mask, ext word address, data}
    reg        st1_v, st2_v, st1_last, st2_last;
    reg [31:0] st1_addr, st2_addr;
    reg [EW-1:0] st1_mask, st2_mask;
    reg [SW-1:0] sk [0:SKID-1];
    reg [1:0]  sk_rp, sk_wp;
    reg [2:0]  sk_count;
    reg [PENDING-1:0] bq;              // per write sent and not answered: whether it ends its STORE
    reg [PW-1:0] bq_rp, bq_wp;
    reg [PW:0]   writes_out;           // beats in the output registers or sent, not answered
    wire        arr_v    = st2_v;
    wire [SW-1:0] arr    = {st2_last, st2_mask, st2_addr, sram_rdata};
    wire        b_fire   = m_axi_bvalid;  // bready is always high
    wire        aw_fire  = m_axi_awvalid && m_axi_awready;
    wire        w_fire   = m_axi_wvalid && m_axi_wready;
    // the output beat has gone on both channels by this edge (or there is none)
    wire        o_free   = (!m_axi_awvalid || aw_fire) && (!m_axi_wvalid || w_fire);
    wire        wr_room  = (writes_out != P_FULL) || b_fire;
    wire        o_take   = o_free && wr_room && (sk_count != 3'd0 || arr_v);
    wire [SW-1:0] o_next = (sk_count != 3'd0) ? sk[sk_rp] : arr;
    wire        arr_skid = arr_v && !(o_take && sk_count == 3'd0);
    wire [3:0]  st_held  = {1'b0, sk_count} + {3'd0, st1_v} + {3'd0, st2_v};
    wire        st_room  = st_held < SKID[3:0];
    wire        st_rd    = (state == R_REQ) && store && st_room && !err && !beat_bad;
    assign sram_re    = st_rd ? bmask : desc_rd ? {{(EW-1){1'b0}}, 1'b1} : {EW{1'b0}};
    assign sram_raddr = desc_rd ? g_tbl + g_pg[AW-1:0] : s_addr;

    wire advance  = ld_prod || st_rd;  // the current transfer's beat went on its way
    wire req_done = advance && last_wd;
    // the engine can take a descriptor this cycle
    wire free     = (state == R_IDLE) || (state == R_LAST && ar_fire);
    wire have_q   = (dq_count != {QW{1'b0}});
    wire take_st  = have_q ? dq[dq_rp][DW-1] : is_store;
    wire [GW-1:0] take_g = have_q ? gq[dq_rp] : {gather, page_shift, page_off};
    wire [31:0]   take_ext = have_q ? dq[dq_rp][DW-34 -: 32] : ext_base;  // the transfer's first address
    wire [15:0] take_r0  = have_q ? dq[dq_rp][DW-34 -: 16] : ext_base[31:16];
    wire take     = free && (have_q || start) && !err
                    && (take_st ? (loads_out == {QW{1'b0}}) : (stores_out == {QW{1'b0}}));
    wire bypass   = take && !have_q;   // the descriptor issued this cycle starts at once

    // ------------------------------------------------------------------ answers
    wire [PQW-1:0] pq_head = pq[pq_rp];
    wire        r_bad   = r_fire && (pq_count == {(PW+1){1'b0}} || m_axi_rid || !m_axi_rlast);
    wire        b_bad   = b_fire && (writes_out == {(PW+1){1'b0}} || m_axi_bid);
    wire        r_ok    = r_fire && !r_bad && (m_axi_rresp == 2'b00);
    wire        ld_end  = r_ok && pq_head[PQW-1];
    wire        st_end  = b_fire && !b_bad && (m_axi_bresp == 2'b00) && bq[bq_rp];
    wire        ends    = ld_end || st_end;
    assign busy = (active != {QW{1'b0}});
    assign quiet = (reads_out == {(PW+1){1'b0}}) && (writes_out == {(PW+1){1'b0}}) && !st1_v && !st2_v
                   && (sk_count == 3'd0);
    generate
        if (EW == 1) begin : g_rd1
            assign sram_wdata = m_axi_rdata;
        end else begin : g_rd2  // a beat in the upper lane goes to its first scratchpad word
            assign sram_wdata = pq_head[PQW-2] ? {32'd0, m_axi_rdata[63:32]} : m_axi_rdata;
        end
    endgenerate
    assign sram_we    = r_ok ? pq_head[AW +: EW] : {EW{1'b0}};
    assign sram_waddr = pq_head[AW-1:0];

    // ------------------------------------------------------------------ descriptors, engine, faults
    always @(posedge clk) begin
        if (rst) begin
            dq_rp <= {QPW{1'b0}};
            dq_wp <= {QPW{1'b0}};
            dq_count <= {QW{1'b0}};
            pcq_rp <= {QPW{1'b0}};
            pcq_wp <= {QPW{1'b0}};
            state <= R_IDLE;
            store <= 1'b0;
            rows_m1 <= 16'd0;
            cols_m1 <= 16'd0;
            r <= 16'd0;
            c <= 16'd0;
            e_row <= 32'd0;
            e_addr <= 32'd0;
            e_gt <= 1'b0;
            e_ge <= (ext_limit == 32'd1);
            e_over <= 1'b0;
            e_stride <= 16'd0;
            s_row <= {AW{1'b0}};
            s_stride <= {AW{1'b0}};
            cur_pc <= {IAW{1'b0}};
            g_on <= 1'b0;
            g_first <= 1'b0;
            g_sh <= 4'd0;
            g_off <= 16'd0;
            g_pg <= 16'd0;
            g_i <= 16'd0;
            g_tbl <= {AW{1'b0}};
            g_add <= 32'd0;
            g_prod <= 32'd0;
            active <= {QW{1'b0}};
            loads_out <= {QW{1'b0}};
            stores_out <= {QW{1'b0}};
            inflight <= {QW{1'b0}};
            err <= 1'b0;
            err_code <= 2'd0;
            err_pc <= {IAW{1'b0}};
            lim_m1 <= ext_limit - 32'd1;
            no_mem <= (ext_limit == 32'd0);
        end else begin
            // faults: the first one is kept
            if (!err && (addr_fault || r_bad || b_bad || (r_fire && m_axi_rresp != 2'b00)
                         || (b_fire && m_axi_bresp != 2'b00))) begin
                err <= 1'b1;
                err_code <= addr_fault ? ERR_ADDR : (r_bad || b_bad) ? ERR_PROTOCOL : ERR_RESP;
                err_pc <= (addr_fault || active == {QW{1'b0}}) ? cur_pc : pcq[pcq_rp];
            end
            if (start || take || ends || state != R_IDLE) begin  // idle otherwise
                // the queue of descriptors
                if (start && !bypass) begin
                    dq[dq_wp] <= {is_store, rows, cols, ext_base, ext_stride, sram_base, sram_stride, pc};
                    gq[dq_wp] <= {gather, page_shift, page_off};
                    dq_wp <= (dq_wp == Q_LAST) ? {QPW{1'b0}} : dq_wp + 1'b1;
                end
                if (take && have_q) dq_rp <= (dq_rp == Q_LAST) ? {QPW{1'b0}} : dq_rp + 1'b1;
                if (take) begin
                    pcq[pcq_wp] <= have_q ? dq[dq_rp][IAW-1:0] : pc;
                    pcq_wp <= (pcq_wp == Q_LAST) ? {QPW{1'b0}} : pcq_wp + 1'b1;
                end
                if (ends) pcq_rp <= (pcq_rp == Q_LAST) ? {QPW{1'b0}} : pcq_rp + 1'b1;
                if (start || take || ends) begin  // the counts change only then (a streaming cycle skips them)
                    dq_count <= dq_count + ((start && !bypass) ? Q_ONE : {QW{1'b0}}) - ((take && have_q) ? Q_ONE : {QW{1'b0}});
                    inflight <= inflight + (start ? Q_ONE : {QW{1'b0}}) - (ends ? Q_ONE : {QW{1'b0}});
                    active <= active + (take ? Q_ONE : {QW{1'b0}}) - (ends ? Q_ONE : {QW{1'b0}});
                    loads_out <= loads_out + ((take && !take_st) ? Q_ONE : {QW{1'b0}}) - (ld_end ? Q_ONE : {QW{1'b0}});
                    stores_out <= stores_out + ((take && take_st) ? Q_ONE : {QW{1'b0}}) - (st_end ? Q_ONE : {QW{1'b0}});
                end

                // the request engine
                if (advance) begin
                    if (row_end) begin
                        c <= 16'd0;
                        r <= r + 16'd1;
                        g_i <= page_end ? 16'd0 : g_i + 16'd1;
                        if (page_end) begin
                            g_pg <= g_pg + 16'd1;
                            g_first <= 1'b0;
                        end
                        e_row <= e_next_row[31:0];
                        e_addr <= e_next_row[31:0];
                        e_gt <= (e_next_row[31:0] > lim_m1);
                        e_ge <= (e_next_row[31:0] >= lim_m1);
                        e_over <= e_over || e_next_row[32];
                        s_row <= s_row + s_stride;
                    end else begin
                        c <= c + c_step;
                        e_addr <= e_next_in[31:0];
                        e_gt <= (e_next_in[31:0] > lim_m1);
                        e_ge <= (e_next_in[31:0] >= lim_m1);
                        e_over <= e_over || e_next_in[32];
                    end
                end
                case (state)
                    R_SETUP: state <= (ld_prod && last_wd) ? R_LAST : R_REQ;
                    R_REQ: if (req_done) state <= store ? R_IDLE : R_LAST;
                           else if (advance && row_end && page_end) state <= R_DESC;
                    R_LAST: if (ar_fire) state <= R_IDLE;
                    R_DESC: begin
                        state <= R_DW1;
                        g_prod <= g_first ? g_in : 32'd0;
                    end
                    R_DW1: begin
                        state <= R_DW2;
                        g_add <= {16'd0, g_off} + g_prod;
                    end
                    R_DW2: begin  // the descriptor is here: the page's first row
                        state <= R_REQ;
                        e_row <= g_base[31:0];
                        e_addr <= g_base[31:0];
                        e_gt <= (g_base[31:0] > lim_m1);
                        e_ge <= (g_base[31:0] >= lim_m1);
                        e_over <= g_base[32];
                    end
                    default: state <= R_IDLE;
                endcase
                if (take) begin
                    state <= take_g[GW-1] ? R_DESC : R_SETUP;
                    store <= take_st;
                    g_on <= take_g[GW-1];
                    g_sh <= take_g[19:16];
                    g_off <= take_g[15:0];
                    g_pg <= take_r0 >> take_g[19:16];
                    g_i <= take_r0 & ((16'd1 << take_g[19:16]) - 16'd1);
                    g_first <= 1'b1;
                    g_tbl <= have_q ? dq[dq_rp][DW-66+AW -: AW] : ext_base[AW-1:0];
                    rows_m1 <= (have_q ? dq[dq_rp][DW-2 -: 16] : rows) - 16'd1;
                    cols_m1 <= (have_q ? dq[dq_rp][DW-18 -: 16] : cols) - 16'd1;
                    e_row <= have_q ? dq[dq_rp][DW-34 -: 32] : ext_base;
                    e_addr <= take_ext;
                    e_gt <= (take_ext > lim_m1);
                    e_ge <= (take_ext >= lim_m1);
                    e_over <= 1'b0;
                    e_stride <= have_q ? dq[dq_rp][DW-66 -: 16] : ext_stride;
                    s_row <= have_q ? dq[dq_rp][2*AW+IAW-1 -: AW] : sram_base;
                    s_stride <= take_g[GW-1] ? (have_q ? dq[dq_rp][DW-34+AW -: AW] : cols[AW-1:0])
                                             : have_q ? dq[dq_rp][AW+IAW-1 -: AW] : sram_stride;
                    cur_pc <= have_q ? dq[dq_rp][IAW-1:0] : pc;
                    r <= 16'd0;
                    c <= 16'd0;
                end
            end
        end
    end

    // ------------------------------------------------------------------- reads
    always @(posedge clk) begin
        if (rst) begin
            m_axi_arvalid <= 1'b0;
            pq_rp <= {PW{1'b0}};
            pq_wp <= {PW{1'b0}};
            pq_count <= {(PW+1){1'b0}};
            reads_out <= {(PW+1){1'b0}};
        end else if (ld_prod || m_axi_arvalid || r_fire) begin  // idle otherwise
            if (ld_prod) begin
                m_axi_arvalid <= 1'b1;
                m_axi_araddr <= {e_addr[29:0], 2'b00};
                ar_info <= {last_wd, odd, bmask, s_addr};
            end else if (ar_fire) begin
                m_axi_arvalid <= 1'b0;
            end
            if (ar_fire) begin
                pq[pq_wp] <= ar_info;
                pq_wp <= pq_wp + 1'b1;
            end
            if (r_fire && pq_count != {(PW+1){1'b0}}) pq_rp <= pq_rp + 1'b1;
            pq_count <= pq_count + {{PW{1'b0}}, ar_fire} - {{PW{1'b0}}, r_fire && pq_count != {(PW+1){1'b0}}};
            reads_out <= reads_out + {{PW{1'b0}}, ld_prod} - {{PW{1'b0}}, r_fire && reads_out != {(PW+1){1'b0}}};
        end
    end

    // ------------------------------------------------------------------- writes
    // a beat into the output registers: its words in their byte lanes (EW = 2: a beat at an odd
    // word address is the upper lane alone)
    wire [32*EW-1:0] o_data;
    wire [4*EW-1:0]  o_strb;
    generate
        if (EW == 1) begin : g_wr1
            assign o_data = o_next[31:0];
            assign o_strb = 4'hF;
        end else begin : g_wr2
            wire o_odd = o_next[32*EW];  // the beat's first word address is odd
            // a lane the beat does not write carries zeros, not what the scratchpad line held there
            assign o_data = o_odd ? {o_next[31:0], 32'd0} : {o_next[SW-2] ? o_next[63:32] : 32'd0, o_next[31:0]};
            assign o_strb = o_odd ? 8'hF0 : {{4{o_next[SW-2]}}, 4'hF};
        end
    endgenerate
    always @(posedge clk) begin
        if (rst) begin
            st1_v <= 1'b0;
            st2_v <= 1'b0;
            st1_last <= 1'b0;
            st2_last <= 1'b0;
            st1_addr <= 32'd0;
            st2_addr <= 32'd0;
            st1_mask <= {EW{1'b0}};
            st2_mask <= {EW{1'b0}};
            sk_rp <= 2'd0;
            sk_wp <= 2'd0;
            sk_count <= 3'd0;
            m_axi_awvalid <= 1'b0;
            m_axi_wvalid <= 1'b0;
            bq_rp <= {PW{1'b0}};
            bq_wp <= {PW{1'b0}};
            writes_out <= {(PW+1){1'b0}};
        end else if (st_rd || st1_v || st2_v || sk_count != 3'd0 || m_axi_awvalid || m_axi_wvalid
                     || b_fire) begin  // idle otherwise
            st1_v <= st_rd;
            st1_last <= st_rd && last_wd;
            if (st_rd) begin
                st1_addr <= e_addr;
                st1_mask <= bmask;
            end
            st2_v <= st1_v;
            st2_last <= st1_last;
            st2_addr <= st1_addr;
            st2_mask <= st1_mask;
            // the arriving beat waits in the skid buffer unless it goes to the output registers at once
            if (arr_skid) begin
                sk[sk_wp] <= arr;
                sk_wp <= sk_wp + 2'd1;
            end
            if (o_take && sk_count != 3'd0) sk_rp <= sk_rp + 2'd1;
            sk_count <= sk_count + {2'd0, arr_skid} - {2'd0, o_take && sk_count != 3'd0};
            // the output registers: both channels carry the beat until each has taken it
            if (o_take) begin
                m_axi_awvalid <= 1'b1;
                m_axi_wvalid <= 1'b1;
                m_axi_awaddr <= {o_next[32*EW+29 -: 30], 2'b00};
                m_axi_wdata <= o_data;
                m_axi_wstrb <= o_strb;
                bq[bq_wp] <= o_next[SW-1];
                bq_wp <= bq_wp + 1'b1;
            end else begin
                if (aw_fire) m_axi_awvalid <= 1'b0;
                if (w_fire) m_axi_wvalid <= 1'b0;
            end
            if (b_fire && writes_out != {(PW+1){1'b0}}) bq_rp <= bq_rp + 1'b1;
            writes_out <= writes_out + {{PW{1'b0}}, o_take} - {{PW{1'b0}}, b_fire && writes_out != {(PW+1){1'b0}}};
        end
    end
endmodule
`default_nettype wire
