`timescale 1ns/1ps
`default_nettype none
`include "ga2_cfg.vh"
// ga2: the top. Instruction fetch and decode, issue to the units, the DMA engine, the counters, halt.
// Instruction memory: four banks (word 0..3 of every instruction), each IMEM_INSTRS x 32 with a
// synchronous read, so one whole instruction is read per cycle. It is read two instructions ahead
// (the memory's output, then a fetch register) and the sequencer issues from an instruction
// register whose field checks were worked out on the way in, so an instruction goes ahead in the
// cycle it reaches the register and decoding costs no cycle (see "fetch and decode" below). Two
// compute engines run side by side, one instruction each: the matmul engine with the vector unit
// (they share the requant bank) and the softmax unit. Per instruction:
//   LOAD/STORE  hand the transfer to the DMA engine and go on (stall first while QUEUE are in flight)
//   WAIT keep   stall until at most `keep` transfers are in flight; HALT until none is and both
//               engines are idle
//   QCFG        set the quantization registers qa, qb, qs and the bias address (a unit copies them
//               when it starts, so a QCFG never waits for one)
//   MM/VEC/SMAX wait until the engine has finished its last instruction, start the unit in the
//               issue cycle and go on; an MM with CHAIN (w0 bit 17) after an MM waits only until
//               the matmul engine's front end is free (the MM before it has made its last read)
//   LOAD, STORE, MM, VEC and SMAX first wait until every other engine is idle, unless they have
//   OVERLAP (w0 bit 16): then they may start beside it.
// Holding an instruction is counted: c4 while the DMA queue is full (or WAIT / HALT wait for
// transfers), else h_unit while its own engine is busy, else h_sync while it waits for the others.
// `status` says why the chip halted and `status_pc` names the instruction at fault:
//   ST_OK            HALT (or still running)
//   ST_ILLEGAL       an illegal instruction, or running past the last instruction of the memory
//                    (`illegal` is set too)
//   ST_EXT_ADDR      a LOAD/STORE reaching a word at or past ext_limit (the words the memory has)
//   ST_EXT_RESP      the memory answered with an error (RRESP/BRESP SLVERR or DECERR)
//   ST_EXT_PROTOCOL  an answer that breaks the AXI protocol as the DMA uses it (rtl/dma.v)
// Illegal: an unknown opcode, a reserved bit set, CHAIN on anything but MM, WAIT keeping QUEUE or more, a
// LOAD/STORE with flags or sub but a LOAD's GATHER flag (its sub: the page shift), and the fields that
// would run a unit without end or over a whole memory: a LOAD/STORE of zero rows or columns, an MM
// without rows, reduction or columns, a reduction past GA2_MM_MAX_K or a column window outside the
// matrix, a VEC of an unknown sub-op, a VEC or SMAX of no elements, a QCFG shift past GA2_MAX_SHIFT.
// The machine model refuses the same instructions, and a program reaching past the memory.
// Counters: c0 total cycles, c1 DMA busy, c2 MM busy, c3 VEC+SMAX busy (+2 in a cycle both run),
// c4 cycles stalled on the DMA, h_unit and h_sync cycles held for an engine (above).
// The external port is the DMA engine's AXI4 master (see rtl/dma.v), 32 * GA2_EXT_WORDS data bits,
// byte addresses. A LOAD/STORE's external word address is {w3[31:16], b} and its SRAM stride w3[15:0];
// a gather's first row is w3[31:16], its block table b, its page offset w3[15:0] (rtl/dma.v).
module ga2 (
    input  wire        clk,
    input  wire        rst,
    // instruction memory load port (used while rst is high): word imem_addr[1:0] of instruction
    // imem_addr[11:2]. In reset the sequencer reads instructions 0, 1 and 2 ahead after the last
    // write, so rst must stay high for at least three cycles after it (a block RAM's read of a word
    // being written is undefined)
    input  wire        imem_we,
    input  wire [11:0] imem_addr,
    input  wire [31:0] imem_wdata,
    output reg         halted,
    output reg         illegal,
    output reg  [31:0] c0,
    output reg  [31:0] c1,
    output reg  [31:0] c2,
    output reg  [31:0] c3,
    output reg  [31:0] c4,
    output reg  [31:0] h_unit,
    output reg  [31:0] h_sync,
    output reg  [2:0]  status,       // why it halted: ST_DONE, or the fault (see the header)
    output reg  [9:0]  status_pc,    // the instruction at fault
    input  wire [31:0] ext_limit,    // words of external memory (held steady from reset on)
    // the external memory: AXI4 (rtl/dma.v)
    output wire        m_axi_arid,
    output wire [31:0] m_axi_araddr,
    output wire [7:0]  m_axi_arlen,
    output wire [2:0]  m_axi_arsize,
    output wire [1:0]  m_axi_arburst,
    output wire        m_axi_arlock,
    output wire [3:0]  m_axi_arcache,
    output wire [2:0]  m_axi_arprot,
    output wire        m_axi_arvalid,
    input  wire        m_axi_arready,
    input  wire        m_axi_rid,
    input  wire [32*`GA2_EXT_WORDS_D-1:0] m_axi_rdata,
    input  wire [1:0]  m_axi_rresp,
    input  wire        m_axi_rlast,
    input  wire        m_axi_rvalid,
    output wire        m_axi_rready,
    output wire        m_axi_awid,
    output wire [31:0] m_axi_awaddr,
    output wire [7:0]  m_axi_awlen,
    output wire [2:0]  m_axi_awsize,
    output wire [1:0]  m_axi_awburst,
    output wire        m_axi_awlock,
    output wire [3:0]  m_axi_awcache,
    output wire [2:0]  m_axi_awprot,
    output wire        m_axi_awvalid,
    input  wire        m_axi_awready,
    output wire [32*`GA2_EXT_WORDS_D-1:0] m_axi_wdata,
    output wire [4*`GA2_EXT_WORDS_D-1:0]  m_axi_wstrb,
    output wire        m_axi_wlast,
    output wire        m_axi_wvalid,
    input  wire        m_axi_wready,
    input  wire        m_axi_bid,
    input  wire [1:0]  m_axi_bresp,
    input  wire        m_axi_bvalid,
    output wire        m_axi_bready
);
    `include "ga2_defs.vh"
    localparam integer IAW = GA2_IMEM_AW;
    localparam integer SAW = GA2_SRAM_AW;    // scratchpad address bits (12 at the default)
    localparam integer QW  = GA2_DMA_QW;     // bits of a count of transfers 0..QUEUE
    localparam integer EW  = GA2_EXT_WORDS;  // words of a DMA beat

    reg            mv_busy, mv_is_mm;  // the matmul/vector engine runs an instruction; an MM
    reg            sm_busy;            // the softmax engine runs one
    /* verilator lint_off UNUSEDSIGNAL */
    reg [IAW-1:0]  mv_pc, sm_pc;       // the instruction each engine runs: the testbench's timeline reads them
    reg [IAW-1:0]  mv_pc_old;          // the MM draining in the matmul engine behind mv_pc's CHAIN MM
    /* verilator lint_on UNUSEDSIGNAL */
    reg [IAW-1:0]  pc;
    reg [15:0]     qa, qb;
    reg [SAW-1:0]  qbias;
    reg [5:0]      qs;

    // ---- instruction memory, fetch and decode ----
    // Three instructions are in flight, each a stage further on: the instruction register (w0..w3,
    // the instruction at pc) that the sequencer issues from, the fetch register (f0..f3, pc + 1)
    // and the memory's read port (pc + 2), read ahead. When an instruction goes ahead each moves up
    // a stage and the memory reads pc + 3; the fetch register's field checks are worked out on the
    // way into the instruction register (ir_legal). So the issue logic starts from registers, no
    // logic follows the block RAM's read (it lands in the fetch register), no path runs from it back
    // to its own address, and decoding costs no cycle.
    // Filling in reset: quietK says the last K cycles were reset cycles without a write to the
    // memory. The memory reads instructions 0, 1 and 2 in the first three such cycles while the
    // registers take them up, then holds all three. Hence rst must stay high three cycles after the
    // last write (and the memory must have been written before the first run).
    reg            quiet1, quiet2, quiet3;
    wire           fill_read = rst && !quiet3;                  // the reset cycles that read ahead
    wire           f_load    = advance || (rst && quiet1 && !quiet3);
    wire           ir_load   = advance || (rst && quiet2 && !quiet3);
    wire [IAW-1:0] fetch_addr = rst ? {{(IAW-2){1'b0}}, quiet2, quiet1 && !quiet2}
                                    : pc + {{(IAW-2){1'b0}}, 2'd3};
    wire [31:0]    iword [0:3];
    genvar j;
    generate
        for (j = 0; j < 4; j = j + 1) begin : g_imem
            ram_1r1w #(.WIDTH(32), .DEPTH(GA2_IMEM_INSTRS), .AW(IAW)) u_ram (
                .clk(clk), .we(imem_we && imem_addr[1:0] == j), .waddr(imem_addr[IAW+1:2]), .wdata(imem_wdata),
                .re(advance || fill_read), .raddr(fetch_addr), .rdata(iword[j])
            );
        end
    endgenerate
    reg  [31:0] f0, f1, f2, f3;
    always @(posedge clk) begin
        quiet1 <= rst && !imem_we;
        quiet2 <= quiet1 && rst && !imem_we;
        quiet3 <= quiet2 && rst && !imem_we;
        if (f_load) begin
            f0 <= iword[0];
            f1 <= iword[1];
            f2 <= iword[2];
            f3 <= iword[3];
        end
    end

    // the field checks of the instruction in the fetch register (n_: next). Illegal: an unknown
    // opcode, a reserved bit set, and the fields each opcode must have (see the header).
    wire [3:0]  n_op  = f0[31:28];
    wire [3:0]  n_sub = f0[23:20];
    wire [15:0] n_cnt = f0[15:0];
    wire [15:0] n_fc  = f2[15:0];
    wire [15:0] n_fd  = f2[31:16];
    wire [15:0] n_m   = f3[15:0];  // an MM's columns M
    wire [7:0]  n_first = f3[23:16];  // its window's first column tile
    wire        n_dma = (n_op == OP_LOAD) || (n_op == OP_STORE);
    wire        n_compute = (n_op == OP_MM) || (n_op == OP_VEC) || (n_op == OP_SMAX);
    // An MM's column window, tiles first .. first + sub - 1 (sub = 0: to the last tile of M), lies
    // inside the matrix when its last tile starts inside M: last * LANES < M. (The same test as
    // first < end <= ceil(M / LANES) with end = first + sub, or ceil(M / LANES) for sub = 0, without
    // the division and the adders in series.)
    wire [8:0]  n_last_tile = {1'b0, n_first} + {5'd0, n_sub} - {8'd0, n_sub != 4'd0};
    wire        n_window_ok = ({8'd0, n_last_tile} * GA2_LANES[16:0]) < {1'b0, n_m};
    wire        n_mm_ok = (n_cnt != 16'd0) && (n_fd != 16'd0) && (n_fd <= GA2_MM_MAX_K[15:0]) && (n_m != 16'd0)
                          && n_window_ok;
    // a transfer's flags and sub: none, but a LOAD's GATHER flag, whose sub is its page shift
    wire        n_dma_form = (n_op == OP_LOAD && f0[27:24] == LD_GATHER[3:0]) || (f0[27:24] == 4'd0 && n_sub == 4'd0);
    wire        n_fields_ok = n_dma               ? (n_cnt != 16'd0) && (n_fc != 16'd0) && n_dma_form
                            : (n_op == OP_MM)     ? n_mm_ok
                            : (n_op == OP_VEC)    ? (n_cnt != 16'd0) && (n_sub <= VEC_LAST)
                            : (n_op == OP_SMAX)   ? (n_cnt != 16'd0) && (n_sub <= SM_LAST)
                                                    && (n_sub == 4'd0 || f0[27:24] == 4'd0)
                            : (n_op == OP_QCFG)   ? (n_fc <= GA2_MAX_SHIFT[15:0])
                            : (n_op == OP_WAIT)   ? (n_cnt < GA2_DMA_QUEUE[15:0])
                            : 1'b1;
    wire        n_legal = (n_op <= OP_SMAX) && (f0[19:18] == 2'd0) && (n_dma || n_op == OP_MM || f3[31:24] == 8'd0)
                          && n_fields_ok && (!f0[16] || n_dma || n_compute) && (!f0[17] || n_op == OP_MM);

    // the instruction register
    /* verilator lint_off UNUSEDSIGNAL */
    reg  [31:0] w0;              // bits 19:17 are reserved: checked on the way in (n_legal) only
    /* verilator lint_on UNUSEDSIGNAL */
    reg  [31:0] w1, w2, w3;      // w3 bits 31:24 are reserved by every instruction but LOAD, STORE and MM
    reg         ir_legal;
    reg         wait_big;        // a count with a bit above the queue's QW bits: inflight never exceeds it
    always @(posedge clk) begin
        if (ir_load) begin
            w0 <= f0;
            wait_big <= |n_cnt[15:QW];
            w1 <= f1;
            w2 <= f2;
            w3 <= f3;
            ir_legal <= n_legal;
        end
    end
    wire [3:0]  op    = w0[31:28];
    wire [3:0]  flags = w0[27:24];
    wire [3:0]  sub   = w0[23:20];
    wire [15:0] cnt   = w0[15:0];
    wire        overlap = w0[16];
    wire        chain   = w0[17];  // an MM that the matmul engine may take while the MM before it drains
    wire [15:0] fa = w1[15:0];
    wire [15:0] fb = w1[31:16];
    wire [15:0] fc = w2[15:0];
    wire [15:0] fd = w2[31:16];

    wire       running  = !halted;
    wire       fetching = running;
    wire [QW-1:0] inflight;
    wire       dma_busy;
    wire       dma_err, dma_quiet;  // a fault of the memory port; nothing on its way any more
    wire       is_dma  = (op == OP_LOAD) || (op == OP_STORE);
    wire       compute = (op == OP_MM) || (op == OP_VEC) || (op == OP_SMAX);
    wire       on_sm   = (op == OP_SMAX);
    // WAIT and HALT wait for transfers to finish; LOAD/STORE for room in the queue
    wire       stall = fetching && ((is_dma && inflight == GA2_DMA_QUEUE[QW-1:0])
                                    || (op == OP_WAIT && !wait_big && inflight > cnt[QW-1:0])  // inflight > cnt
                                    || (op == OP_HALT && inflight != {QW{1'b0}}));
    // a compute instruction waits for its engine; without OVERLAP for the others (a transfer: both), HALT for both
    // (a CHAIN MM: until the matmul engine's front end is free, if its last instruction is an MM)
    wire       mm_take, mm_more;
    wire       own_busy   = on_sm ? sm_busy : (op == OP_MM && chain && mv_is_mm) ? (mv_busy && !mm_take) : mv_busy;
    wire       other_busy = !compute ? (mv_busy || sm_busy) : on_sm ? mv_busy : sm_busy;
    wire       hold_u = fetching && compute && own_busy;
    wire       hold_s = fetching && (((is_dma || compute) && !overlap && other_busy)
                                     || (op == OP_HALT && (mv_busy || sm_busy)));
    wire       go    = !rst && fetching && !stall && !hold_u && !hold_s && !dma_err;  // nothing new after a fault
    wire       known_op = ir_legal;
    wire       legal_go = go && known_op;
    // the instruction after this one is decoded next cycle
    wire       advance  = !rst && legal_go && op != OP_HALT;
    wire       pc_last  = (pc == {IAW{1'b1}});

    wire start_mm  = legal_go && (op == OP_MM);
    wire start_vec = legal_go && (op == OP_VEC);
    wire start_sm  = legal_go && (op == OP_SMAX);
    wire start_dma = legal_go && is_dma;

    // ---- units ----
    wire [3:0]   mm_mask;
    wire [SAW-1:0] mm_ra, mm_wa, vec_ra, vec_rb, vec_wa, sm_ra, sm_wa, dma_sra, dma_swa;
    wire [127:0] p0_data;
    wire [31:0]  p1_data, mm_wd, vec_wd, sm_wd;
    wire [32*EW-1:0] dma_srd, dma_swd;
    wire [EW-1:0]    dma_swe, dma_sre;
    wire         mm_we, vec_we, sm_we, vec_rae, vec_rbe, sm_re;
    wire         mm_done, vec_done, sm_done;

    wire [1:0]   dma_err_code;
    wire [IAW-1:0] dma_err_pc;
    dma #(.QUEUE(GA2_DMA_QUEUE), .PENDING(GA2_DMA_PENDING), .AW(SAW), .EW(EW), .IAW(IAW), .QW(QW)) u_dma (
        .clk(clk), .rst(rst), .start(start_dma), .is_store(op == OP_STORE), .rows(cnt), .cols(fc),
        .ext_base({w3[31:16], fb}), .ext_stride(fd), .sram_base(fa[SAW-1:0]), .sram_stride(w3[SAW-1:0]),
        .gather(op == OP_LOAD && flags == LD_GATHER[3:0]), .page_shift(sub), .page_off(w3[15:0]),
        .pc(pc), .ext_limit(ext_limit), .inflight(inflight), .busy(dma_busy),
        .err(dma_err), .err_code(dma_err_code), .err_pc(dma_err_pc), .quiet(dma_quiet),
        .m_axi_arid(m_axi_arid), .m_axi_araddr(m_axi_araddr), .m_axi_arlen(m_axi_arlen), .m_axi_arsize(m_axi_arsize),
        .m_axi_arburst(m_axi_arburst), .m_axi_arlock(m_axi_arlock), .m_axi_arcache(m_axi_arcache),
        .m_axi_arprot(m_axi_arprot), .m_axi_arvalid(m_axi_arvalid), .m_axi_arready(m_axi_arready),
        .m_axi_rid(m_axi_rid), .m_axi_rdata(m_axi_rdata), .m_axi_rresp(m_axi_rresp), .m_axi_rlast(m_axi_rlast),
        .m_axi_rvalid(m_axi_rvalid), .m_axi_rready(m_axi_rready),
        .m_axi_awid(m_axi_awid), .m_axi_awaddr(m_axi_awaddr), .m_axi_awlen(m_axi_awlen), .m_axi_awsize(m_axi_awsize),
        .m_axi_awburst(m_axi_awburst), .m_axi_awlock(m_axi_awlock), .m_axi_awcache(m_axi_awcache),
        .m_axi_awprot(m_axi_awprot), .m_axi_awvalid(m_axi_awvalid), .m_axi_awready(m_axi_awready),
        .m_axi_wdata(m_axi_wdata), .m_axi_wstrb(m_axi_wstrb), .m_axi_wlast(m_axi_wlast), .m_axi_wvalid(m_axi_wvalid),
        .m_axi_wready(m_axi_wready), .m_axi_bid(m_axi_bid), .m_axi_bresp(m_axi_bresp), .m_axi_bvalid(m_axi_bvalid),
        .m_axi_bready(m_axi_bready),
        .sram_re(dma_sre), .sram_raddr(dma_sra), .sram_rdata(dma_srd),
        .sram_we(dma_swe), .sram_waddr(dma_swa), .sram_wdata(dma_swd)
    );

    // Each unit sees read data only while it is the one its engine last started: an idle unit's
    // datapath then stays still, which costs nothing in hardware and keeps event-driven simulation fast.
    wire is_mm  = mv_is_mm;
    wire is_vec = !mv_is_mm;
    wire [127:0] mm_rd  = is_mm ? p0_data : 128'd0;
    wire [31:0]  vec_a  = is_vec ? p0_data[31:0] : 32'd0;
    wire [31:0]  vec_b  = is_vec ? p1_data : 32'd0;
    wire [31:0]  sm_rd;

    wire [127:0] mm_rq_acc, vec_rq_acc;
    wire [15:0]  mm_rq_mult, vec_rq_mult;
    wire [5:0]   mm_rq_shift, vec_rq_shift;
    wire         mm_rq_busy, vec_rq_busy;
    wire [31:0]  rq_y;

    ga2_mm #(.AW(SAW)) u_mm (
        .clk(clk), .rst(rst), .start(start_mm), .flags(flags), .r_total(cnt), .k_len(fd), .m_total(w3[15:0]),
        .win_first(w3[23:16]), .win_tiles(sub), .a_base(fa[SAW-1:0]), .b_base(fb[SAW-1:0]), .out_base(fc[SAW-1:0]),
        .out_stride(w3[31:24]), .qa(qa), .qs(qs), .qbias(qbias),
        .rd_mask(mm_mask), .rd_addr(mm_ra), .rd_data(mm_rd), .we(mm_we), .waddr(mm_wa), .wdata(mm_wd),
        .done(mm_done), .take(mm_take), .more(mm_more),
        .rq_acc(mm_rq_acc), .rq_mult(mm_rq_mult), .rq_shift(mm_rq_shift), .rq_busy(mm_rq_busy), .rq_y(rq_y)
    );

    ga2_vec #(.AW(SAW)) u_vec (
        .clk(clk), .rst(rst), .start(start_vec), .sub(sub), .n(cnt), .rows(fd), .src_a(fa[SAW-1:0]), .src_b(fb[SAW-1:0]),
        .dst(fc[SAW-1:0]), .qa(qa), .qb(qb), .qs(qs), .ra_en(vec_rae), .ra_addr(vec_ra), .ra_data(vec_a),
        .rb_en(vec_rbe), .rb_addr(vec_rb), .rb_data(vec_b), .we(vec_we), .waddr(vec_wa), .wdata(vec_wd),
        .done(vec_done), .rq_acc(vec_rq_acc), .rq_mult(vec_rq_mult), .rq_shift(vec_rq_shift), .rq_busy(vec_rq_busy), .rq_y(rq_y)
    );

    // the requant bank, shared by the matmul engine and the vector unit; it advances while the
    // running unit has a value in it
    requant_bank #(.LANES(4)) u_rq (
        .clk(clk), .en(mv_busy && (is_mm ? mm_rq_busy : vec_rq_busy)),
        .acc(is_mm ? mm_rq_acc : vec_rq_acc), .mult(is_mm ? mm_rq_mult : vec_rq_mult),
        .shift(is_mm ? mm_rq_shift : vec_rq_shift), .y(rq_y)
    );

    ga2_sm #(.AW(SAW)) u_sm (
        .clk(clk), .rst(rst), .start(start_sm), .sink_en(flags[0]), .mode(w0[21:20]),
        .st(fb[SAW-1:0]), .sink(w3[7:0]), .smul(w3[23:8]), .n(cnt),
        .src(fa[SAW-1:0]), .dst(fc[SAW-1:0]), .re(sm_re), .rd_addr(sm_ra), .rd_data(sm_rd), .we(sm_we),
        .waddr(sm_wa), .wdata(sm_wd), .done(sm_done)
    );

    // ---- scratchpad: the matmul/vector engine's ports (p0, p1, wc), the softmax unit's (p2, w2),
    // the DMA's (dr, wd); an engine's ports are on only while it runs ----
    wire [3:0]  p0_mask = is_mm ? mm_mask : {3'd0, vec_rae};
    wire [SAW-1:0] p0_addr = is_mm ? mm_ra : vec_ra;
    wire        wc_en   = is_mm ? mm_we : vec_we;
    wire [SAW-1:0] wc_addr = is_mm ? mm_wa : vec_wa;
    wire [31:0] wc_data = is_mm ? mm_wd : vec_wd;

    sram #(.WORDS(GA2_SRAM_WORDS), .AW(SAW), .EW(EW)) u_sram (
        .clk(clk),
        .p0_mask(mv_busy ? p0_mask : 4'd0), .p0_addr(p0_addr), .p0_data(p0_data),
        .p1_en(mv_busy && is_vec && vec_rbe), .p1_addr(vec_rb), .p1_data(p1_data),
        .p2_en(sm_busy && sm_re), .p2_addr(sm_ra), .p2_data(sm_rd),
        .dr_en(dma_sre), .dr_addr(dma_sra), .dr_data(dma_srd),
        .wc_en(mv_busy && wc_en), .wc_addr(wc_addr), .wc_data(wc_data),
        .w2_en(sm_busy && sm_we), .w2_addr(sm_wa), .w2_data(sm_wd),
        .wd_en(dma_swe), .wd_addr(dma_swa), .wd_data(dma_swd)
    );

    wire mv_done = is_mm ? mm_done : vec_done;  // an instruction's last execute cycle
    // the engine's last one: a done of an MM with a CHAIN MM behind it leaves the engine busy
    wire mv_last = mv_done && !(is_mm && mm_more);
    // the instruction whose last execute cycle this is: the testbench's timeline reads it
    /* verilator lint_off UNUSEDSIGNAL */
    wire [IAW-1:0] mv_done_pc = (is_mm && mm_more) ? mv_pc_old : mv_pc;
    /* verilator lint_on UNUSEDSIGNAL */

    // ---- sequencer and counters ----
    always @(posedge clk) begin
        if (rst) begin
            halted <= 1'b0;
            illegal <= 1'b0;
            status <= ST_OK;
            status_pc <= {IAW{1'b0}};
            mv_busy <= 1'b0;
            mv_is_mm <= 1'b0;
            sm_busy <= 1'b0;
            mv_pc <= {IAW{1'b0}};
            mv_pc_old <= {IAW{1'b0}};
            sm_pc <= {IAW{1'b0}};
            pc <= {IAW{1'b0}};
            qa <= 16'd0;
            qb <= 16'd0;
            qs <= 6'd0;
            qbias <= {SAW{1'b0}};
            c0 <= 32'd0;
            c1 <= 32'd0;
            c2 <= 32'd0;
            c3 <= 32'd0;
            c4 <= 32'd0;
            h_unit <= 32'd0;
            h_sync <= 32'd0;
        end else if (running) begin
            c0 <= c0 + 32'd1;
            if (dma_busy) c1 <= c1 + 32'd1;
            if (mv_busy && is_mm) c2 <= c2 + 32'd1;
            c3 <= c3 + {31'd0, mv_busy && is_vec} + {31'd0, sm_busy};
            if (stall) c4 <= c4 + 32'd1;
            else if (hold_u) h_unit <= h_unit + 32'd1;
            else if (hold_s) h_sync <= h_sync + 32'd1;
            if (advance) begin
                pc <= pc + 1'b1;
                if (pc_last) begin  // there is no instruction after the last one
                    illegal <= 1'b1;
                    halted <= 1'b1;
                    status <= ST_ILLEGAL;
                    status_pc <= pc;
                end
            end
            if (mv_busy && mv_last) mv_busy <= 1'b0;
            if (sm_busy && sm_done) sm_busy <= 1'b0;
            if (go) begin
                if (!known_op) begin
                    illegal <= 1'b1;
                    halted <= 1'b1;
                    status <= ST_ILLEGAL;
                    status_pc <= pc;
                end else if (op == OP_HALT) begin
                    halted <= 1'b1;
                end else if (on_sm) begin
                    sm_busy <= 1'b1;
                    sm_pc <= pc;
                end else if (compute) begin
                    mv_busy <= 1'b1;
                    mv_is_mm <= (op == OP_MM);
                    mv_pc <= pc;
                    mv_pc_old <= mv_pc;
                end else if (op == OP_QCFG) begin
                    qa <= fa;
                    qb <= fb;
                    qs <= fc[5:0];
                    qbias <= fd[SAW-1:0];
                end
            end
            if (dma_err && dma_quiet && !mv_busy && !sm_busy) begin  // a memory fault halts once the bus is quiet
                halted <= 1'b1;
                status <= {1'b0, dma_err_code} + 3'd1;
                status_pc <= dma_err_pc;
            end
        end
    end
endmodule
`default_nettype wire
