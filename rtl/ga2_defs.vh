// GA2 shared constants. model/capra/isa.py is the source of truth; tests/test_isa_sync.py checks
// that every value here equals the Python one. Included inside module bodies; each module uses
// only some of these names, hence the UNUSEDPARAM waiver around them (see rtl/lint.vlt).
// The configurable sizes (model/capra/config.py) come from rtl/ga2_cfg.vh's defines.
`include "ga2_cfg.vh"
/* verilator lint_off UNUSEDPARAM */
localparam integer GA2_N           = `GA2_N_D;  // systolic array is N x N (2, 4, 8)
localparam integer GA2_LANES       = 4;     // int8 lanes per 32-bit word
localparam integer GA2_SRAM_WORDS  = `GA2_SRAM_WORDS_D;        // a power of two, 2048..16384
localparam integer GA2_SRAM_AW     = $clog2(`GA2_SRAM_WORDS_D); // address bits (12 at the default)
localparam integer GA2_SRAM_GROUPS = 4;     // banks: SRAM_GROUPS groups (address bits AW-1:AW-2) x 4 lanes (bits 1:0)
localparam integer GA2_SRAM_RD_LAT = 2;     // a read issued in cycle t returns its data in cycle t + 2
localparam integer GA2_IMEM_INSTRS = 1024;
localparam integer GA2_IMEM_AW     = 10;
localparam integer GA2_MM_MAX_K    = 1024;  // longest reduction: rowmem holds MM_MAX_K / 4 words per row
localparam integer GA2_DMA_QUEUE   = `GA2_DMA_QUEUE_D;  // transfers issued and not finished (1..16)
localparam integer GA2_DMA_QW      = $clog2(`GA2_DMA_QUEUE_D + 1);  // bits of a count 0..QUEUE
localparam integer GA2_DMA_PENDING = 32;    // reads (and writes) sent and not yet answered (latency bound)
localparam integer GA2_EXT_WORDS   = `GA2_EXT_WORDS_D;  // words of a DMA beat: the external interface's width (1, 2)
localparam integer GA2_DIV_CYCLES  = 32;
localparam integer GA2_MAX_SHIFT   = 47;
localparam integer GA2_SM_SCALE_SHIFT = 10;   // table index = ((max - x) * smul + 2^9) >> 10
localparam integer GA2_SM_RECIP_BITS  = 31;   // R = floor(2^31 / sum)
localparam integer GA2_SM_OUT_SHIFT   = 24;   // p = min(127, (E * R + 2^23) >> 24)
localparam integer GA2_SM_OUT_MAX     = 127;

localparam [3:0] OP_HALT  = 4'd0;
localparam [3:0] OP_LOAD  = 4'd1;
localparam [3:0] OP_STORE = 4'd2;
localparam [3:0] OP_WAIT  = 4'd3;
localparam [3:0] OP_QCFG  = 4'd4;
localparam [3:0] OP_MM    = 4'd5;
localparam [3:0] OP_VEC   = 4'd6;
localparam [3:0] OP_SMAX  = 4'd7;

localparam integer LD_GATHER = 1;  // LOAD flag: a gather through a block table (rtl/dma.v)
localparam integer GA2_GATHER_DESC_CYCLES = 3;  // a gather's cycles per page: the descriptor's read and its latency

localparam integer MM_OUT8  = 1;
localparam integer MM_RELU  = 2;
localparam integer MM_BIAS  = 4;
localparam integer MM_BROWS = 8;

localparam [3:0] VEC_COPY   = 4'd0;
localparam [3:0] VEC_ADD    = 4'd1;
localparam [3:0] VEC_MUL    = 4'd2;
localparam [3:0] VEC_MAX    = 4'd3;
localparam [3:0] VEC_RELU   = 4'd4;
localparam [3:0] VEC_ARGMAX = 4'd5;
localparam [3:0] VEC_LAST   = 4'd5;  // the last sub-op: the decoder refuses any above it

localparam integer SM_SINK = 1;
localparam integer SM_SOFTMAX = 0;  // SMAX modes (the sub field)
localparam integer SM_STEP    = 1;
localparam integer SM_ACC     = 2;
localparam integer SM_NORM    = 3;
localparam [3:0]   SM_LAST    = 4'd3;  // the last mode: the decoder refuses any above it
localparam integer GA2_SM_ALPHA_BITS = 15;  // alpha = E[d(m - m_old)], Q15
localparam integer GA2_SM_NORM_SHIFT = 31;  // NORM: clamp((O * floor(2^31 / l) + 2^30) >> 31)

// why the chip halted (ga2's status output)
localparam [2:0] ST_OK           = 3'd0;
localparam [2:0] ST_ILLEGAL      = 3'd1;
localparam [2:0] ST_EXT_ADDR     = 3'd2;
localparam [2:0] ST_EXT_RESP     = 3'd3;
localparam [2:0] ST_EXT_PROTOCOL = 3'd4;
/* verilator lint_on UNUSEDPARAM */
