`timescale 1ns/1ps
`default_nettype none
`include "ga2_cfg.vh"
// ga2: the top. Instruction fetch and decode, dispatch to the units, the DMA engine, the five
// cycle counters, halt.
// Instruction memory: four banks (word 0..3 of every instruction), each IMEM_INSTRS x 32 with a
// synchronous read, so one whole instruction is read per cycle. The sequencer presents the address
// of the instruction it will decode next cycle: the one it decodes now, or the next one when this
// one goes ahead. Per instruction:
//   LOAD/STORE  hand the transfer to the DMA engine and go on (stall first while QUEUE are in flight)
//   WAIT keep   stall until at most `keep` transfers are in flight; HALT until none is
//   QCFG        set the quantization registers qa, qb, qs and the bias address
//   MM/VEC/SMAX start the unit in the decode cycle and wait for its done cycle
// An illegal instruction, or running past the last instruction of the memory, halts with `illegal`
// set. Illegal: an unknown opcode, a reserved bit set, WAIT keeping QUEUE or more, and the fields
// that would run a unit without end or over a whole memory: a LOAD/STORE of zero rows or columns,
// an MM without rows, reduction or columns, a reduction past
// GA2_MM_MAX_K or a column window outside the matrix, a VEC of an unknown sub-op, a VEC or SMAX of
// no elements, a QCFG shift past GA2_MAX_SHIFT. The machine model refuses the same instructions.
// Counters: c0 total cycles, c1 DMA busy, c2 MM busy, c3 VEC+SMAX busy, c4 cycles stalled on the DMA.
// The external port is the DMA engine's (see rtl/dma.v): requests with valid/ready, read answers
// in order with rsp_valid; GA2_EXT_WORDS words wide (a request moves the words ext_req_addr + j
// that ext_req_mask names), 32-bit word addresses. A LOAD/STORE's external address is {w3[31:16], b}
// and its SRAM stride w3[15:0].
module ga2 (
    input  wire        clk,
    input  wire        rst,
    // instruction memory load port (used while rst is high): word imem_addr[1:0] of instruction
    // imem_addr[11:2]. In reset the sequencer reads instruction 0 every cycle, so rst must stay high
    // for at least one cycle after the last write (a block RAM's read of a word being written is
    // undefined; the testbenches hold it two)
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
    output wire        ext_req_valid,
    input  wire        ext_req_ready,
    output wire        ext_req_we,
    output wire [`GA2_EXT_WORDS_D-1:0]    ext_req_mask,
    output wire [31:0] ext_req_addr,
    output wire [32*`GA2_EXT_WORDS_D-1:0] ext_req_wdata,
    input  wire        ext_rsp_valid,
    input  wire [32*`GA2_EXT_WORDS_D-1:0] ext_rsp_rdata
);
    `include "ga2_defs.vh"
    localparam integer IAW = GA2_IMEM_AW;
    localparam integer SAW = GA2_SRAM_AW;    // scratchpad address bits (12 at the default)
    localparam integer QW  = GA2_DMA_QW;     // bits of a count of transfers 0..QUEUE
    localparam integer EW  = GA2_EXT_WORDS;  // words of a DMA beat

    reg            executing;
    reg [3:0]      cur_op;
    reg [IAW-1:0]  pc;
    reg [15:0]     qa, qb;
    reg [SAW-1:0]  qbias;
    reg [5:0]      qs;

    // ---- instruction memory and decode ----
    wire [IAW-1:0] fetch_addr;
    wire [31:0]    iword [0:3];
    genvar j;
    generate
        for (j = 0; j < 4; j = j + 1) begin : g_imem
            ram_1r1w #(.WIDTH(32), .DEPTH(GA2_IMEM_INSTRS), .AW(IAW)) u_ram (
                .clk(clk), .we(imem_we && imem_addr[1:0] == j), .waddr(imem_addr[IAW+1:2]), .wdata(imem_wdata),
                .re(advance || rst), .raddr(fetch_addr), .rdata(iword[j])
            );
        end
    endgenerate
    wire [31:0] w0 = iword[0];
    wire [31:0] w1 = iword[1];
    wire [31:0] w2 = iword[2];
    wire [31:0] w3 = iword[3];  // bits 31:24 are reserved by every instruction but LOAD and STORE
    wire [3:0]  op    = w0[31:28];
    wire [3:0]  flags = w0[27:24];
    wire [3:0]  sub   = w0[23:20];
    wire [15:0] cnt   = w0[15:0];
    wire [3:0]  reserved = w0[19:16];  // must be zero: an instruction using them is illegal
    wire [15:0] fa = w1[15:0];
    wire [15:0] fb = w1[31:16];
    wire [15:0] fc = w2[15:0];
    wire [15:0] fd = w2[31:16];

    wire       running  = !halted;
    wire       fetching = running && !executing;
    wire [QW-1:0] inflight;
    wire       dma_busy;
    wire       is_dma  = (op == OP_LOAD) || (op == OP_STORE);
    wire       compute = (op == OP_MM) || (op == OP_VEC) || (op == OP_SMAX);
    // WAIT and HALT wait for transfers to finish; LOAD/STORE for room in the queue
    wire       stall = fetching && ((is_dma && inflight == GA2_DMA_QUEUE[QW-1:0])
                                    || (op == OP_WAIT && {{(16-QW){1'b0}}, inflight} > cnt)
                                    || (op == OP_HALT && inflight != {QW{1'b0}}));
    wire       go    = !rst && fetching && !stall;
    // the fields each opcode must have (see the header); 17 bits so that M = 0xFFFF cannot wrap
    localparam [16:0] LANES17 = GA2_LANES[16:0];
    wire [16:0] mm_tiles = ({1'b0, w3[15:0]} + LANES17 - 17'd1) / LANES17;  // column tiles of M
    wire [16:0] mm_end   = (sub == 4'd0) ? mm_tiles : {9'd0, w3[23:16]} + {13'd0, sub};
    wire       mm_ok    = (cnt != 16'd0) && (fd != 16'd0) && (fd <= GA2_MM_MAX_K[15:0]) && (w3[15:0] != 16'd0)
                          && ({9'd0, w3[23:16]} < mm_end) && (mm_end <= mm_tiles);
    wire       fields_ok = is_dma         ? (cnt != 16'd0) && (fc != 16'd0)
                         : (op == OP_MM)   ? mm_ok
                         : (op == OP_VEC)  ? (cnt != 16'd0) && (sub <= VEC_LAST)
                         : (op == OP_SMAX) ? (cnt != 16'd0)
                         : (op == OP_QCFG) ? (fc <= GA2_MAX_SHIFT[15:0])
                         : (op == OP_WAIT) ? (cnt < GA2_DMA_QUEUE[15:0])
                         : 1'b1;
    wire       known_op = (op <= OP_SMAX) && (reserved == 4'd0) && (is_dma || w3[31:24] == 8'd0) && fields_ok;
    wire       legal_go = go && known_op;
    wire       unit_done;
    // the instruction after this one is decoded next cycle
    wire       advance  = !rst && ((legal_go && op != OP_HALT && !compute) || (executing && unit_done));
    wire       pc_last  = (pc == {IAW{1'b1}});
    assign fetch_addr = advance ? pc + 1'b1 : pc;

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

    dma #(.QUEUE(GA2_DMA_QUEUE), .PENDING(GA2_DMA_PENDING), .AW(SAW), .EW(EW), .QW(QW)) u_dma (
        .clk(clk), .rst(rst), .start(start_dma), .is_store(op == OP_STORE), .rows(cnt), .cols(fc),
        .ext_base({w3[31:16], fb}), .ext_stride(fd), .sram_base(fa[SAW-1:0]), .sram_stride(w3[SAW-1:0]),
        .inflight(inflight), .busy(dma_busy),
        .ext_req_valid(ext_req_valid), .ext_req_ready(ext_req_ready), .ext_req_we(ext_req_we),
        .ext_req_mask(ext_req_mask), .ext_req_addr(ext_req_addr), .ext_req_wdata(ext_req_wdata), .ext_rsp_valid(ext_rsp_valid),
        .ext_rsp_rdata(ext_rsp_rdata),
        .sram_re(dma_sre), .sram_raddr(dma_sra), .sram_rdata(dma_srd),
        .sram_we(dma_swe), .sram_waddr(dma_swa), .sram_wdata(dma_swd)
    );

    // Each unit sees read data only while it runs: an idle unit's datapath then stays still,
    // which costs nothing in hardware and keeps event-driven simulation fast.
    wire is_mm  = (cur_op == OP_MM);
    wire is_vec = (cur_op == OP_VEC);
    wire is_sm  = (cur_op == OP_SMAX);
    wire [127:0] mm_rd  = is_mm ? p0_data : 128'd0;
    wire [31:0]  vec_a  = is_vec ? p0_data[31:0] : 32'd0;
    wire [31:0]  vec_b  = is_vec ? p1_data : 32'd0;
    wire [31:0]  sm_rd  = is_sm ? p0_data[31:0] : 32'd0;

    wire [127:0] mm_rq_acc, vec_rq_acc;
    wire [15:0]  mm_rq_mult, vec_rq_mult;
    wire [5:0]   mm_rq_shift, vec_rq_shift;
    wire         mm_rq_busy, vec_rq_busy;
    wire [31:0]  rq_y;

    ga2_mm #(.AW(SAW)) u_mm (
        .clk(clk), .rst(rst), .start(start_mm), .flags(flags), .r_total(cnt), .k_len(fd), .m_total(w3[15:0]),
        .win_first(w3[23:16]), .win_tiles(sub), .a_base(fa[SAW-1:0]), .b_base(fb[SAW-1:0]), .out_base(fc[SAW-1:0]), .qa(qa), .qs(qs), .qbias(qbias),
        .rd_mask(mm_mask), .rd_addr(mm_ra), .rd_data(mm_rd), .we(mm_we), .waddr(mm_wa), .wdata(mm_wd),
        .done(mm_done), .rq_acc(mm_rq_acc), .rq_mult(mm_rq_mult), .rq_shift(mm_rq_shift), .rq_busy(mm_rq_busy), .rq_y(rq_y)
    );

    ga2_vec #(.AW(SAW)) u_vec (
        .clk(clk), .rst(rst), .start(start_vec), .sub(sub), .n(cnt), .src_a(fa[SAW-1:0]), .src_b(fb[SAW-1:0]),
        .dst(fc[SAW-1:0]), .qa(qa), .qb(qb), .qs(qs), .ra_en(vec_rae), .ra_addr(vec_ra), .ra_data(vec_a),
        .rb_en(vec_rbe), .rb_addr(vec_rb), .rb_data(vec_b), .we(vec_we), .waddr(vec_wa), .wdata(vec_wd),
        .done(vec_done), .rq_acc(vec_rq_acc), .rq_mult(vec_rq_mult), .rq_shift(vec_rq_shift), .rq_busy(vec_rq_busy), .rq_y(rq_y)
    );

    // the requant bank, shared by the matmul engine and the vector unit; it advances while the
    // running unit has a value in it
    requant_bank #(.LANES(4)) u_rq (
        .clk(clk), .en(executing && (is_mm ? mm_rq_busy : is_vec && vec_rq_busy)),
        .acc(is_mm ? mm_rq_acc : vec_rq_acc), .mult(is_mm ? mm_rq_mult : vec_rq_mult),
        .shift(is_mm ? mm_rq_shift : vec_rq_shift), .y(rq_y)
    );

    ga2_sm #(.AW(SAW)) u_sm (
        .clk(clk), .rst(rst), .start(start_sm), .sink_en(flags[0]), .sink(w3[7:0]), .smul(w3[23:8]), .n(cnt),
        .src(fa[SAW-1:0]), .dst(fc[SAW-1:0]), .re(sm_re), .rd_addr(sm_ra), .rd_data(sm_rd), .we(sm_we),
        .waddr(sm_wa), .wdata(sm_wd), .done(sm_done)
    );

    // ---- scratchpad: the compute ports go to the unit that runs, the DMA ports to the DMA ----
    wire [3:0]  p0_mask = is_mm ? mm_mask : is_vec ? {3'd0, vec_rae} : is_sm ? {3'd0, sm_re} : 4'd0;
    wire [SAW-1:0] p0_addr = is_mm ? mm_ra : is_vec ? vec_ra : sm_ra;
    wire        wc_en   = is_mm ? mm_we : is_vec ? vec_we : is_sm && sm_we;
    wire [SAW-1:0] wc_addr = is_mm ? mm_wa : is_vec ? vec_wa : sm_wa;
    wire [31:0] wc_data = is_mm ? mm_wd : is_vec ? vec_wd : sm_wd;

    sram #(.WORDS(GA2_SRAM_WORDS), .AW(SAW), .EW(EW)) u_sram (
        .clk(clk),
        .p0_mask(executing ? p0_mask : 4'd0), .p0_addr(p0_addr), .p0_data(p0_data),
        .p1_en(executing && is_vec && vec_rbe), .p1_addr(vec_rb), .p1_data(p1_data),
        .dr_en(dma_sre), .dr_addr(dma_sra), .dr_data(dma_srd),
        .wc_en(executing && wc_en), .wc_addr(wc_addr), .wc_data(wc_data),
        .wd_en(dma_swe), .wd_addr(dma_swa), .wd_data(dma_swd)
    );

    assign unit_done = is_mm ? mm_done : is_vec ? vec_done : sm_done;

    // ---- sequencer and counters ----
    always @(posedge clk) begin
        if (rst) begin
            halted <= 1'b0;
            illegal <= 1'b0;
            executing <= 1'b0;
            cur_op <= OP_HALT;
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
        end else if (running) begin
            c0 <= c0 + 32'd1;
            if (dma_busy) c1 <= c1 + 32'd1;
            if (executing && is_mm) c2 <= c2 + 32'd1;
            if (executing && !is_mm) c3 <= c3 + 32'd1;
            if (stall) c4 <= c4 + 32'd1;
            if (advance) begin
                pc <= pc + 1'b1;
                if (pc_last) begin  // there is no instruction after the last one
                    illegal <= 1'b1;
                    halted <= 1'b1;
                end
            end
            if (executing) begin
                if (unit_done) executing <= 1'b0;
            end else if (go) begin
                if (!known_op) begin
                    illegal <= 1'b1;
                    halted <= 1'b1;
                end else if (op == OP_HALT) begin
                    halted <= 1'b1;
                end else if (compute) begin
                    executing <= 1'b1;
                    cur_op <= op;
                end else if (op == OP_QCFG) begin
                    qa <= fa;
                    qb <= fb;
                    qs <= fc[5:0];
                    qbias <= fd[SAW-1:0];
                end
            end
        end
    end
endmodule
`default_nettype wire
