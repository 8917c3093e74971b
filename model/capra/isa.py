"""The GA2 instruction set: the single source of truth for encodings, sizes and timing constants.

Everything else reads this module: the assembler, the machine model, the compiler, the docs table,
and the Verilog (``tests/test_isa_sync.py`` checks ``rtl/ga2_defs.vh`` against these numbers).

An instruction is four 32-bit words::

    w0: op[31:28] flags[27:24] sub[23:20] cnt[15:0]
    w1: a[15:0]  b[31:16]
    w2: c[15:0]  d[31:16]
    w3: e[31:0]

Data words are 32 bits. An int8 row of n elements is packed four to a word, lane 0 in bits 7:0,
in ceil(n/4) words; lanes past n are zero when GA2 writes them and ignored when it reads them.
An int32 value takes one word.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import config as _config

# The constants marked "config" (N, SRAM_WORDS, SRAM_GROUP_WORDS, DMA_QUEUE, EXT_LATENCY, EXT_WORDS,
# EXT_MEMORY and the matmul engine's MM_READ_TO_RES, MM_DOT_WORDS, MM_DOT_PERIOD, MM_BIAS_LINES) are
# not stored here: each read of ``isa.N`` works it out from the active configuration (capra/config.py:
# the environment, or ``with capra.config.use(cfg)``), so they can never disagree with it. The
# others are fixed.

# --- hardware parameters --------------------------------------------------------------------
LANES = 4  # int8 values per 32-bit word
LINE_WORDS = 4  # the scratchpad's line port: four consecutive words (16 int8 lanes) per cycle
SRAM_GROUPS = 4  # the scratchpad's banks: SRAM_GROUPS groups (high address bits) x LANES lanes (low bits)
SRAM_RD_LAT = 2  # a scratchpad read issued in cycle t returns its data in cycle t + 2
IMEM_INSTRS = 1024  # instruction memory, in instructions (4 words each)
WORDS_PER_INSTR = 4
MM_MAX_K = 1024  # rowmem depth (MM_MAX_K / 4 words per row): the longest reduction a matmul can do
MAX_SHIFT = 47  # requantization shifts above this would overflow the 50-bit rounding datapath

# --- timing constants (cycles) -----------------------------------------------------------------
DMA_PENDING = _config.DMA_PENDING  # 32 requests sent and not yet answered: latencies up to DMA_PENDING - 2

# why the chip halted (rtl/ga2.v's status output, tb/ga2_tb.v's FAIL line)
ST_OK, ST_ILLEGAL, ST_EXT_ADDR, ST_EXT_RESP, ST_EXT_PROTOCOL = range(5)
STATUS_NAMES = {ST_OK: "OK", ST_ILLEGAL: "ILLEGAL", ST_EXT_ADDR: "EXT_ADDR", ST_EXT_RESP: "EXT_RESP",
                ST_EXT_PROTOCOL: "EXT_PROTOCOL"}
DIV_CYCLES = 32  # the iterative divider: one quotient bit per cycle

# the matmul engine's pipeline (rtl/ga2_mm.v); the N-dependent ones follow the configuration
MM_WRITE_LAT = 6  # a result read from the array -> written to the scratchpad (bias, relu, requant)


def _mm_constants(n: int) -> tuple[int, int, int, int]:
    """(READ_TO_RES, DOT_WORDS, DOT_PERIOD, BIAS_LINES) of an n x n array.

    READ_TO_RES: a pass's last B read -> its results are read from the array (3 to reach it, 3 in a
    PE, n - 1 of skew). Dot form: a read brings DOT_WORDS consecutive words of one B row (n int8
    lanes for n = 8, one word otherwise), and array row i is read every DOT_PERIOD cycles, which is
    how long its shift register takes to pass those lanes on. BIAS_LINES: line reads of a pass's
    int32 bias words (one per column: n of them)."""
    dot_words = max(1, n // LANES)
    return 3 + 3 + n - 1, dot_words, LANES * dot_words, -(-n // LINE_WORDS)



# The configured constants: name -> how it follows from the active configuration.
_CONFIGURED = {
    "N": lambda c: c.n,  # the systolic array is N x N int8 MACs (2, 4 or 8; default 4)
    "SRAM_WORDS": lambda c: c.sram_words,  # on-chip scratchpad, 32-bit words (default 4096)
    "SRAM_GROUP_WORDS": lambda c: c.sram_words // SRAM_GROUPS,  # a group is a quarter of the address space
    "DMA_QUEUE": lambda c: c.dma_queue,  # transfers issued and not yet finished (the queue's depth; default 4)
    "EXT_LATENCY": lambda c: c.ext_latency,  # external read latency (cycles from request to response; default 4)
    "EXT_WORDS": lambda c: c.ext_words,  # words a DMA beat moves (consecutive words of one row; default 1)
    "EXT_MEMORY": lambda c: c.ext_memory,  # the external memory, words (default 8192)
    "MM_READ_TO_RES": lambda c: _mm_constants(c.n)[0],
    "MM_DOT_WORDS": lambda c: _mm_constants(c.n)[1],
    "MM_DOT_PERIOD": lambda c: _mm_constants(c.n)[2],
    "MM_BIAS_LINES": lambda c: _mm_constants(c.n)[3],
}


def __getattr__(name: str):
    """``isa.N``, ``isa.SRAM_WORDS``, ...: the configured constants, from the active configuration."""
    derive = _CONFIGURED.get(name)
    if derive is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return derive(_config.active())


# --- softmax fixed-point scheme ---------------------------------------------------------------
SM_IN_FRAC = 4  # the exponent table steps by 1/16: entry d is exp(-d/16)
SM_EXP_BITS = 15  # exp table entries are round(2**15 * exp(-d/16)), d in 0..255
SM_SCALE_SHIFT = 10  # d = min(255, ((max - x) * smul + 2**9) >> 10): smul = 2**14 * input scale
SM_SCALE_ONE = 1 << SM_SCALE_SHIFT  # smul = 2**14 * (1/16): inputs whose scale is already the table's step
SM_RECIP_BITS = 31  # R = floor(2**31 / sum)
SM_OUT_SHIFT = 24  # p = min(127, (E * R + 2**23) >> 24): probabilities with scale 1/128
SM_OUT_MAX = 127

# --- the chip's integer arithmetic ----------------------------------------------------------------
# What the units compute, in Python integers (exact): the machine model runs it, the RTL must equal it.

INT8_MIN, INT8_MAX = -128, 127


def exp_table() -> list[int]:
    """The softmax exponent table: entry d is round(2**15 * exp(-d / 16)) for d in 0..255, where d is
    max - x expressed in steps of 1/16 (``table_index``)."""
    d = np.arange(256, dtype=np.float64)
    return [int(v) for v in np.floor(np.exp(-d / (1 << SM_IN_FRAC)) * (1 << SM_EXP_BITS) + 0.5)]


EXP_TABLE = np.array(exp_table(), dtype=np.int64)


def wrap32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap to int32, as the hardware's 32-bit accumulators do."""
    return ((np.asarray(x, dtype=np.int64) + (1 << 31)) % (1 << 32)) - (1 << 31)


def requantize(acc: np.ndarray, mult: int, shift: int) -> np.ndarray:
    """int32 -> int8: multiply by an unsigned 16-bit multiplier, shift right rounding half up, saturate.

    Python integers are exact, so this is the reference the RTL's requant block must equal.
    """
    p = np.asarray(acc, dtype=object) * int(mult)
    if shift > 0:
        p = (p + (1 << (shift - 1))) >> shift
    return np.clip(p.astype(np.int64), INT8_MIN, INT8_MAX)


def table_index(diff, smul: int):
    """Exponent-table index of a difference max - x (in input units): rescaled to steps of 1/16."""
    half = 1 << (SM_SCALE_SHIFT - 1)
    return np.minimum(255, (np.asarray(diff, dtype=np.int64) * smul + half) >> SM_SCALE_SHIFT)


def softmax_int8(x: np.ndarray, sink: int | None, smul: int = SM_SCALE_ONE) -> np.ndarray:
    """GA2's integer softmax of one int8 row to probabilities with scale 1/128.

    smul = 2**14 * (the input's scale) turns a difference of inputs into table steps of 1/16.
    """
    x = np.asarray(x, dtype=np.int64)
    m = int(x.max()) if sink is None else max(int(x.max()), sink)
    e = EXP_TABLE[table_index(m - x, smul)]
    total = int(e.sum()) + (int(EXP_TABLE[table_index(m - sink, smul)]) if sink is not None else 0)
    recip = (1 << SM_RECIP_BITS) // total
    return np.minimum(SM_OUT_MAX, (e * recip + (1 << (SM_OUT_SHIFT - 1))) >> SM_OUT_SHIFT)


# --- online softmax: attention tiled over the context ------------------------------------------
# SMAX's sub field picks its mode. A global layer's attention streams K and V in tiles; per query
# row a three-word *state* (the running maximum m, the running sum l, the last rescale factor
# alpha) at the instruction's b address carries what the tiles before have seen:
#   STEP  one tile's logits -> unnormalised weights p = exp(x - m) (scale 1/128, relative to the
#         running maximum), and the state: m = max(m, tile), alpha = exp(m_old - m) (Q15),
#         l = l * alpha + sum p
#   ACC   the running output O (int32) = O * alpha + T, T the tile's int32 p @ V
#   NORM  the output row: O / l as int8 (one division per row, as SMAX does)
SM_SOFTMAX, SM_STEP, SM_ACC, SM_NORM = 0, 1, 2, 3
SM_LAST = SM_NORM  # the last mode: the decoder refuses any above it
SM_MODE_NAMES = {SM_SOFTMAX: "smax", SM_STEP: "smax.step", SM_ACC: "smax.acc", SM_NORM: "smax.norm"}
SM_STATE_WORDS = 3  # m (an int8, sign-extended), l (uint32), alpha (Q15)
SM_ALPHA_BITS = 15  # alpha = E[d(m - m_old)], the table's own Q15 scale
SM_STEP_SHIFT = 8  # p = min(127, (E + 2^7) >> 8): the table's 2^15 at the maximum becomes 127
SM_NORM_SHIFT = 31  # out = clamp((O * floor(2^31 / l) + 2^30) >> 31)


def _int8(word: int) -> int:
    return ((int(word) & 0xFF) ^ 0x80) - 0x80


def softmax_step(x: np.ndarray, m_word: int, l_word: int, smul: int = SM_SCALE_ONE
                 ) -> tuple[np.ndarray, int, int, int]:
    """One tile of the online softmax (SMAX mode STEP): the tile's unnormalised weights and the new
    (m, l, alpha) state words. m_word's low byte is the running maximum (an int8, -128 before the
    first tile), l_word the running sum (uint32) of the weights of the tiles before."""
    x = np.asarray(x, dtype=np.int64)
    m_old = _int8(m_word)
    m = max(m_old, int(x.max()))
    e = EXP_TABLE[table_index(m - x, smul)]
    p = np.minimum(SM_OUT_MAX, (e + (1 << (SM_STEP_SHIFT - 1))) >> SM_STEP_SHIFT)
    alpha = int(EXP_TABLE[int(table_index(m - m_old, smul))])
    l_new = ((((int(l_word) & 0xFFFFFFFF) * alpha + (1 << (SM_ALPHA_BITS - 1))) >> SM_ALPHA_BITS)
             + int(p.sum())) & 0xFFFFFFFF
    return p, m & 0xFFFFFFFF, l_new, alpha


def softmax_acc(o: np.ndarray, t: np.ndarray, alpha_word: int) -> np.ndarray:
    """SMAX mode ACC: the running output rescaled by alpha (the state's third word, low 16 bits,
    Q15) plus the tile's int32 result: wrap32(((O * alpha + 2^14) >> 15) + T), O and T int32."""
    alpha = int(alpha_word) & 0xFFFF
    o = np.asarray(o, dtype=np.int64)
    return wrap32(((o * alpha + (1 << (SM_ALPHA_BITS - 1))) >> SM_ALPHA_BITS) + np.asarray(t, dtype=np.int64))


def softmax_norm(o: np.ndarray, l_word: int, k: int = 0) -> np.ndarray:
    """SMAX mode NORM: the int32 output row divided by the running sum, as int8 with scale 2^-k
    of O's: clamp((O * R + 2^(30-k)) >> (31-k)) with R = floor(2^31 / l) (l = 0: R = 2^32 - 1, the
    divider's); k = e[3:0], 0..15."""
    lw = int(l_word) & 0xFFFFFFFF
    recip = (1 << SM_RECIP_BITS) // lw if lw else 0xFFFFFFFF
    prod = np.asarray(o, dtype=object) * recip
    sh = SM_NORM_SHIFT - (int(k) & 0xF)
    out = (prod + (1 << (sh - 1))) >> sh
    return np.clip(out.astype(object), INT8_MIN, INT8_MAX).astype(np.int64)


# --- opcodes -------------------------------------------------------------------------------
OP_HALT = 0
OP_LOAD = 1
OP_STORE = 2
OP_WAIT = 3
OP_QCFG = 4
OP_MM = 5
OP_VEC = 6
OP_SMAX = 7

OP_NAMES = {
    OP_HALT: "halt",
    OP_LOAD: "load",
    OP_STORE: "store",
    OP_WAIT: "wait",
    OP_QCFG: "qcfg",
    OP_MM: "mm",
    OP_VEC: "vec",
    OP_SMAX: "smax",
}

# OVERLAP (w0 bit 16): the instruction may start while the other compute engine still runs.
# Without it, a LOAD, STORE, MM, VEC or SMAX first waits until every compute engine but its own is
# idle, so a program that never sets it runs its instructions one after another. A program sets it
# only where the two cannot touch the same scratchpad words or bank ports (docs/isa.md, "Two
# engines"; the machine model refuses a program that sets it where they could).
OVERLAP_OPS = (OP_LOAD, OP_STORE, OP_MM, OP_VEC, OP_SMAX)
OVERLAP_BIT = 1 << 16  # in w0

# CHAIN (w0 bit 17, MM only): the MM may start while the MM before it in the matmul engine drains
# (its last reads done, its results still on their way through the array, the requant bank and the
# writer). Without it an MM waits until the engine has finished its last instruction. A program
# sets it only where the MM does not read a word the one before it writes (read after write; the
# engine's in-order writer and its ports make every other order safe: docs/isa.md, "Two engines";
# the machine model refuses CHAIN where the MM before it writes a word it reads).
CHAIN_BIT = 1 << 17  # in w0

# MM flags (and its column window: the first column tile in e[23:16], the number of tiles in `sub`,
# 0 meaning to the last tile; and its output row stride in e[31:24], 0 meaning rows packed one after
# another)
MM_OUT8 = 1  # requantize the int32 results to packed int8 (else one int32 per word)
MM_RELU = 2  # clamp negative results to zero (before requantization)
MM_BIAS = 4  # add an int32 bias per output column, read from the QCFG bias address
MM_BROWS = 8  # B is given as K rows of M (x @ W); else as M rows of K (a @ b.T, dot products)

# LOAD flags
LD_GATHER = 1  # a gather: the rows come from pages named by a block table in the scratchpad (docs/isa.md)
GATHER_DESC_CYCLES = 3  # per page a gather touches: its descriptor's read, two cycles of read latency
GATHER_MAX_SHIFT = 15  # sub: log2 of the rows of a page

# SMAX flags
SM_SINK = 1  # include one extra logit (the sink, an int8 immediate) in the max and the sum
# SMAX e field: [7:0] the sink logit (int8, in the input's scale), [23:8] smul (the input scale)

# VEC sub-operations: the table below is their one definition. The machine model computes and times
# a VEC from it, the assembler, the disassembler and the random programs take their names and
# codes from it, docs/isa.md's table is generated from it (tools/gen_exp_lut.py), and
# tests/test_isa_sync.py checks rtl/ga2_defs.vh's VEC_<NAME> codes and VEC_LAST against it. Adding
# a sub-op: a row here, its code in rtl/ga2_defs.vh, its datapath in rtl/ga2_vec.v, and a test
# (docs/architecture.md walks through it).
VEC_COPY = 0
VEC_ADD = 1
VEC_MUL = 2
VEC_MAX = 3
VEC_RELU = 4
VEC_ARGMAX = 5


class VecOp(NamedTuple):
    """One VEC sub-operation on a row of n int8 elements `a` and `b` (with the QCFG registers
    q.qa, q.qb, q.qs); a VEC of several rows does it to each (its field d: the rows, packed)."""

    name: str
    reads_b: bool  # reads b beside a, word by word (two words in one bank cost a cycle more)
    writes_index: bool  # writes one int32 word (an index), not an int8 row of n elements
    meaning: str  # its line in docs/isa.md's table
    compute: Callable  # (a, b, q) -> the int8 row (or the index) it writes


VEC_OPS: dict[int, VecOp] = {
    VEC_COPY: VecOp("copy", False, False, "`a`", lambda a, b, q: a),
    VEC_ADD: VecOp("add", True, False, "`requant(a*qa + b*qb, 1, qs)`: a residual of two tensors with their own "
                   "scales", lambda a, b, q: requantize(a * q.qa + b * q.qb, 1, q.qs)),
    VEC_MUL: VecOp("mul", True, False, "`requant(a*b, qa, qs)`: element-wise products (rotary positions, gates)",
                   lambda a, b, q: requantize(a * b, q.qa, q.qs)),
    VEC_MAX: VecOp("max", True, False, "`max(a, b)`", lambda a, b, q: np.maximum(a, b)),
    VEC_RELU: VecOp("relu", False, False, "`max(a, 0)`", lambda a, b, q: np.maximum(a, 0)),
    VEC_ARGMAX: VecOp("argmax", False, True, "at `dst + row`: the index of the first maximum of the row's "
                      "`a[0:n]`", lambda a, b, q: int(np.argmax(a))),
}
VEC_NAMES = {code: op.name for code, op in VEC_OPS.items()}
VEC_LAST = max(VEC_OPS)  # the decoder refuses a sub-op above it

FIELD_MASK16 = 0xFFFF
EXT_ADDRESS_BITS = 32  # a LOAD or STORE's external address: b (bits 15..0) and e's bits 31..16


@dataclass(frozen=True)
class Instr:
    """One decoded instruction: the raw fields, named as in the encoding."""

    op: int
    flags: int = 0
    sub: int = 0
    cnt: int = 0
    reserved: int = 0  # w0 bits 19:18: must be zero
    chain: int = 0  # w0 bit 17: an MM that may start while the MM before it drains (CHAIN)
    overlap: int = 0  # w0 bit 16: may start while the other compute engine runs (OVERLAP)
    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0
    e: int = 0

    def encode(self) -> list[int]:
        for name, value, bits in (
            ("op", self.op, 4),
            ("flags", self.flags, 4),
            ("sub", self.sub, 4),
            ("reserved", self.reserved, 2),
            ("chain", self.chain, 1),
            ("overlap", self.overlap, 1),
            ("cnt", self.cnt, 16),
            ("a", self.a, 16),
            ("b", self.b, 16),
            ("c", self.c, 16),
            ("d", self.d, 16),
            ("e", self.e, 32),
        ):
            if not 0 <= value < (1 << bits):
                raise ValueError(f"field {name}={value} does not fit in {bits} bits ({self})")
        w0 = ((self.op << 28) | (self.flags << 24) | (self.sub << 20) | (self.reserved << 18) | (self.chain << 17)
              | (self.overlap << 16)
              | self.cnt)
        w1 = self.a | (self.b << 16)
        w2 = self.c | (self.d << 16)
        return [w0, w1, w2, self.e]

    @staticmethod
    def decode(words: list[int] | tuple[int, ...]) -> Instr:
        w0, w1, w2, w3 = (int(w) & 0xFFFFFFFF for w in words)
        return Instr(
            op=(w0 >> 28) & 0xF,
            flags=(w0 >> 24) & 0xF,
            sub=(w0 >> 20) & 0xF,
            reserved=(w0 >> 18) & 0x3,
            chain=(w0 >> 17) & 1,
            overlap=(w0 >> 16) & 1,
            cnt=w0 & FIELD_MASK16,
            a=w1 & FIELD_MASK16,
            b=(w1 >> 16) & FIELD_MASK16,
            c=w2 & FIELD_MASK16,
            d=(w2 >> 16) & FIELD_MASK16,
            e=w3,
        )


class MmFields(NamedTuple):
    """An MM's word-3 fields."""

    m: int  # columns M (15..0)
    first: int  # its column window's first tile (23..16)
    stride: int  # output row stride in words, 0: rows packed (31..24)


MM_STRIDE_MAX = 255  # the output row stride's 8 bits


def mm_fields(ins: Instr) -> MmFields:
    return MmFields(ins.e & FIELD_MASK16, (ins.e >> 16) & 0xFF, ins.e >> 24)


class DmaFields(NamedTuple):
    """A LOAD or STORE's operands, put together from the encoding's fields."""

    rows: int
    sram: int
    ext: int  # 32 bits: b holds bits 15..0, e bits 31..16
    cols: int
    ext_stride: int
    sram_stride: int  # e bits 15..0


def dma_fields(ins: Instr) -> DmaFields:
    """The operands of the LOAD or STORE `ins`."""
    return DmaFields(ins.cnt, ins.a, ins.b | (ins.e >> 16) << 16, ins.c, ins.d, ins.e & FIELD_MASK16)


def dma_instr(op: int, sram: int, ext: int, rows: int, cols: int, ext_stride: int, sram_stride: int) -> Instr:
    """The LOAD or STORE (`op`) of these operands; ValueError naming one that does not fit its field."""
    if not 0 <= ext < 1 << EXT_ADDRESS_BITS:
        raise ValueError(f"ext={ext} does not fit in {EXT_ADDRESS_BITS} bits")
    if not 0 <= sram_stride <= FIELD_MASK16:
        raise ValueError(f"sram_stride={sram_stride} does not fit in 16 bits")
    return Instr(op, cnt=rows, a=sram, b=ext & FIELD_MASK16, c=cols, d=ext_stride,
                 e=(ext >> 16) << 16 | sram_stride)


class GatherFields(NamedTuple):
    """A gather's operands (a LOAD with flag LD_GATHER), put together from the encoding's fields."""

    rows: int  # cnt
    sram: int  # a: the first destination word; row r at sram + r * cols (packed)
    table: int  # b: the scratchpad word of descriptor 0 (the block table: one page base address a word)
    cols: int  # c: words per row
    ext_stride: int  # d: external words between two rows of one page
    offset: int  # e 15..0: words added to every descriptor (which part of a page: K, V, a head)
    first: int  # e 31..16: the first logical row r0
    page_shift: int  # sub: a page holds 2^page_shift rows


def gather_fields(ins: Instr) -> GatherFields:
    """The operands of the gather `ins`."""
    return GatherFields(ins.cnt, ins.a, ins.b, ins.c, ins.d, ins.e & FIELD_MASK16, ins.e >> 16, ins.sub)


def gather_instr(sram: int, table: int, rows: int, cols: int, first: int = 0, page_shift: int = 4,
                 ext_stride: int | None = None, offset: int = 0) -> Instr:
    """The gather of rows `first .. first + rows - 1` (rows of `cols` words; a page holds 2^page_shift
    rows, `ext_stride` words apart, default cols) through the block table at scratchpad word `table`,
    into the scratchpad from `sram`, rows packed; ValueError naming an operand that does not fit."""
    stride = cols if ext_stride is None else ext_stride
    for name, value in (("rows", rows), ("sram", sram), ("table", table), ("cols", cols), ("first", first),
                        ("ext_stride", stride), ("offset", offset)):
        if not 0 <= value <= FIELD_MASK16:
            raise ValueError(f"{name}={value} does not fit in 16 bits")
    if not 0 <= page_shift <= GATHER_MAX_SHIFT:
        raise ValueError(f"page_shift={page_shift} is outside 0..{GATHER_MAX_SHIFT}")
    return Instr(OP_LOAD, flags=LD_GATHER, sub=page_shift, cnt=rows, a=sram, b=table, c=cols, d=stride,
                 e=first << 16 | offset)


def gather_pages(f: GatherFields) -> np.ndarray:
    """The page index (into the block table) of each of the gather's rows, in order."""
    return (f.first + np.arange(f.rows, dtype=np.int64)) >> f.page_shift


def gather_rows(f: GatherFields, table: np.ndarray) -> np.ndarray:
    """The external address of each row's first word: descriptor + offset + (row in page) * stride,
    given the block table's words `table` (descriptor p in table[p]). The one definition of where a
    gather reads; rtl/dma.v walks the same addresses."""
    logical = f.first + np.arange(f.rows, dtype=np.int64)
    desc = np.asarray(table, dtype=np.int64)[logical >> f.page_shift] & 0xFFFFFFFF
    return desc + f.offset + (logical & ((1 << f.page_shift) - 1)) * f.ext_stride


def dma_beat_index(ext_words: np.ndarray, cols: int, bus_words: int | None = None) -> np.ndarray:
    """The beat of each word of a DMA transfer (rows of `cols` words, row-major), given each word's
    external address: a beat is one AXI request, one word on a one-word bus; on a two-word bus the
    words of a row that lie in one aligned pair of addresses (a row starting at an odd address
    begins with a one-word beat in the upper lane). The one definition of a beat (rtl/dma.v)."""
    if bus_words is None:
        bus_words = _config.active().ext_words
    ext_words = np.asarray(ext_words, dtype=np.int64)
    if bus_words == 1:
        return np.arange(len(ext_words))
    pair = ext_words.reshape(-1, cols) // 2
    in_row = pair - pair[:, :1]  # the beat of each word within its row
    per_row = in_row[:, -1] + 1
    first = np.concatenate(([0], np.cumsum(per_row)[:-1]))
    return (in_row + first[:, None]).reshape(-1)


def dma_beats(rows: int, cols: int, ext: int = 0, ext_stride: int = 0, bus_words: int | None = None) -> int:
    """Beats of a DMA transfer of rows x cols words from external word `ext` (rows `ext_stride` apart)."""
    if bus_words is None:
        bus_words = _config.active().ext_words
    if bus_words == 1:
        return rows * cols
    e_idx = (ext + ext_stride * np.arange(rows, dtype=np.int64)[:, None] + np.arange(cols, dtype=np.int64)).reshape(-1)
    return int(dma_beat_index(e_idx, cols, bus_words)[-1]) + 1


def words_for(n_int8: int) -> int:
    """Words that hold a packed int8 row of n elements."""
    return -(-n_int8 // LANES)


def pack_int8_rows(values) -> np.ndarray:
    """An int8 matrix as its packed words (uint32, row after row): lane 0 of a word in its low byte,
    lanes past a row's end zero. The one definition of the layout; unpack_int8_rows is its inverse."""
    values = np.asarray(values, dtype=np.int64)
    rows, cols = values.shape
    lanes = np.zeros((rows, words_for(cols) * LANES), dtype=np.int8)
    lanes[:, :cols] = values
    return lanes.reshape(-1).view(np.uint32)


def unpack_int8_rows(words, rows: int, cols: int) -> np.ndarray:
    """The rows x cols int8 matrix (as int64) that `words` pack; lanes past a row's end are ignored."""
    words = np.asarray(words, dtype=np.int64).astype(np.uint32)
    return words.view(np.int8).reshape(rows, words_for(cols) * LANES)[:, :cols].astype(np.int64)


# --- timing: the cycle cost of each instruction, shared by the model and the docs --------------


class MmTile(NamedTuple):
    """One batch tile of an MM, as the matmul engine lays it on the array (``mm_geometry``)."""

    rt: int  # A rows in the tile: min(N, rows left)
    g: int  # groups: the array runs g groups of rt rows side by side, each on N columns (BROWS)
    cols: int  # output columns a pass computes: g * N (BROWS) or N (dot form)
    w: int  # writer slots of a pass: one per output word (OUT8) or per int32 result
    gap: int  # G: the fewest cycles a pass may follow the one before it (its results read in time)


def mm_geometry(r: int, flags: int) -> list[MmTile]:
    """The batch tiles of an MM with R rows.

    rt = min(N, rows left). With BROWS and no BIAS the array splits into g groups of rt rows, g the
    largest power of two with g * rt <= N whose g * N columns the line port can feed (g * N <= 16
    int8 lanes: four words); else g = 1. A pass computes `cols` output columns of each of the rt
    rows: W = rt * (cols / 4 words, at least one) slots with OUT8 (a pass of two columns, N = 2,
    fills half of each output word: two such passes make it), rt * cols for int32 output.
    G = W + N - 1, plus 2 with BIAS: the spacing that lets the writer take a pass's results (and
    its bias words) out of the array before the next pass's arrive.
    """
    brows, bias, out8 = bool(flags & MM_BROWS), bool(flags & MM_BIAS), bool(flags & MM_OUT8)
    n = _config.active().n
    tiles = []
    for r0 in range(0, r, n):
        rt = min(n, r - r0)
        g = 1
        if brows and not bias:
            while 2 * g * rt <= n and 2 * g * n <= LINE_WORDS * LANES:
                g *= 2
        cols = g * n if brows else n
        w = rt * (max(1, cols // LANES) if out8 else cols)
        tiles.append(MmTile(rt, g, cols, w, w + n - 1 + (2 if bias else 0)))
    return tiles


def mm_window(m: int, first: int = 0, tiles: int = 0) -> tuple[int, int]:
    """An MM's column window as (first column tile, the tile after the last); tiles = 0: to the end."""
    end = words_for(m) if tiles == 0 else first + tiles
    return first, end


def mm_pass_reads(k: int, flags: int) -> int:
    """Cycles of one MM pass: its B reads (BROWS: one line per reduction step; dot form: every array
    row's B row in reads of MM_DOT_WORDS words, one row per cycle, MM_DOT_PERIOD cycles a round) and,
    with BIAS, the line reads of its bias words."""
    _read_to_res, dot_words, dot_period, bias_lines = _mm_constants(_config.active().n)
    kw = words_for(k)
    b = k if flags & MM_BROWS else dot_period * -(-kw // dot_words)
    return b + (bias_lines if flags & MM_BIAS else 0)


class MmTiming(NamedTuple):
    """An MM's timing on its own and what a CHAIN MM after it waits for (``mm_timing``), in execute
    cycles counted from its issue cycle (0)."""

    cycles: int  # execute cycles: its last write is in cycle `cycles`
    first_read: int  # its first B read: 3 + rt * ceil(kw/4) (the setup cycle, the first tile's A load, one turn)
    front: int  # its last read (bias reads included): the engine takes a CHAIN MM from the next cycle
    gap: int  # a CHAIN MM after it that changes the array's layout reads B no sooner than gap + 1 cycles after `front`
    first_layout: tuple[int, int, int]  # the array's layout for its first batch tile (``mm_layout``)
    last_layout: tuple[int, int, int]  # and for its last
    last_g: int  # its last tile's G less the bias reads of a pass: its last B read to the next pass's
    pass_b: int  # the B reads of one of its passes (bias reads not counted)


def mm_layout(tile: MmTile, flags: int) -> tuple[int, int, int]:
    """The array's layout for a batch tile: (BROWS, rt, g); the dot form's is one whatever rt."""
    return (1, tile.rt, tile.g) if flags & MM_BROWS else (0, 0, 1)


def mm_layout_gap(last_tile_gap: int) -> int:
    """The fewest cycles between an MM's last read and the first B read of a CHAIN MM after it,
    minus one: the last pass's G (its results and bias words leave the array and the bias
    registers before the next pass's arrive), and at least 2N, so that the operands of its last
    reduction step have left the array's edge delays and rows (N - 1 cycles of skew, N - 1 rows
    down a group, a dot-form shift register of up to 4 * MM_DOT_WORDS bytes) before the array's
    layout and form change to the next MM's."""
    return max(last_tile_gap, 2 * _config.active().n)


def mm_a_lines(k: int) -> int:
    """Line reads that copy one A row of K int8 into rowmem: up to LINE_WORDS of its ceil(K/4)
    words a read, the row's words 4i .. 4i+3 in read i."""
    return -(-words_for(k) // LINE_WORDS)


def mm_timing(r: int, k: int, m: int, flags: int, first: int = 0, tiles: int = 0) -> MmTiming:
    """Execute cycles of MM (after the fetch cycle); docs/isa.md derives it, rtl/ga2_mm.v runs it.

    One cycle works out the first batch tile. Per batch tile: an A load step (rt * ceil(kw / 4) line
    reads, ``mm_a_lines``, and one cycle for the last rowmem write; after the first tile at least G
    of the tile before), then its
    passes, ceil(4 * window tiles / cols) of them, each ``mm_pass_reads`` cycles, every pass after a
    tile's first taking max(that, G). The writer finishes MM_READ_TO_RES + MM_WRITE_LAT + W - 1
    cycles after the last pass's last B read (its bias reads come after it).
    """
    al = mm_a_lines(k)
    start, end = mm_window(m, first, tiles)
    columns = LANES * (end - start)
    reads = mm_pass_reads(k, flags)
    total = 1
    gap_before = 0
    geometry = mm_geometry(r, flags)
    for tile in geometry:
        total += max(tile.rt * al + 1, gap_before)
        passes = -(-columns // tile.cols)
        total += reads + (passes - 1) * max(reads, tile.gap)
        gap_before = tile.gap
        last_w = tile.w
    read_to_res, _dot_words, _dot_period, bias_lines = _mm_constants(_config.active().n)
    bias_reads = bias_lines if flags & MM_BIAS else 0
    cycles = total - bias_reads + read_to_res + MM_WRITE_LAT + last_w - 1
    return MmTiming(cycles, 3 + geometry[0].rt * al, total, mm_layout_gap(gap_before),
                    mm_layout(geometry[0], flags), mm_layout(geometry[-1], flags), gap_before - bias_reads,
                    reads - bias_reads)


def mm_chain_gap(earlier: MmTiming, later: MmTiming) -> int:
    """The fewest cycles between an MM's last read and the first B read of a CHAIN MM after it,
    minus one. On the array's layout of the earlier one's last tile, the later one's passes follow
    like the passes of one MM: its first pass's last B read comes G (the earlier one's last tile's)
    or more cycles after the earlier one's last B read, so that the earlier one's results and bias
    words have left the array and the bias registers first. A change of layout waits
    ``mm_layout_gap`` after the last read, so that the operands have left the array too."""
    if earlier.last_layout == later.first_layout:
        return max(0, earlier.last_g - later.pass_b)
    return earlier.gap


def mm_cycles(r: int, k: int, m: int, flags: int, first: int = 0, tiles: int = 0) -> int:
    """Execute cycles of MM on its own (``mm_timing``)."""
    return mm_timing(r, k, m, flags, first, tiles).cycles


def mm_chain_pad(later: MmTiming, issue: int, earlier_front: int, earlier: MmTiming) -> int:
    """Cycles a CHAIN MM issued in cycle `issue` waits before its first B read (after its A load),
    when the MM before it (`earlier`) made its last read in cycle `earlier_front` (absolute
    cycles): its first B read comes no sooner than earlier_front + ``mm_chain_gap`` + 1. Its
    execute cycles are ``later.cycles`` plus this pad."""
    return max(0, earlier_front + mm_chain_gap(earlier, later) + 1 - (issue + later.first_read))


def _group_words() -> int:
    """Words in one bank group of the active configuration's scratchpad."""
    return _config.active().sram_words // SRAM_GROUPS


def bank_of(addr):
    """The scratchpad bank of a word: its group (high address bits) and lane (low two bits). An int,
    or a numpy array of addresses (their banks, computed together)."""
    return (addr // _group_words()) * LANES + (addr % LANES)


def banks_of(words) -> set[int]:
    """The banks some scratchpad words lie in: bank_of of all of them at once (the hazard rule and
    the compiler ask this for whole operands, every instruction; a range of words, a whole tensor,
    is worked out once per process)."""
    if isinstance(words, range):
        return set(_run_banks(words.start, words.stop, words.step, _group_words()))
    if isinstance(words, frozenset):  # an instruction's read or write set (Effects): asked again and again
        return set(_set_banks(words, _group_words()))
    if not isinstance(words, np.ndarray):
        words = np.fromiter(words, dtype=np.int64)
    return set(bank_of(words.astype(np.int64, copy=False)).tolist())


@functools.lru_cache(maxsize=1 << 12)
def _set_banks(words: frozenset[int], _group: int) -> frozenset[int]:
    """banks_of a frozen set of words (the group size is part of the key, as below)."""
    return frozenset(bank_of(np.fromiter(words, dtype=np.int64, count=len(words))).tolist())


@functools.lru_cache(maxsize=1 << 14)
def _run_banks(start: int, stop: int, step: int, _group: int) -> frozenset[int]:
    """banks_of a range (the group size is part of the key: it follows the configuration)."""
    return frozenset(bank_of(np.arange(start, stop, step, dtype=np.int64)).tolist())


VEC_LATENCY = 8  # a VEC word's operands are here -> it is written (products, sum, the requant bank, the write)


def vec_clashes(n: int, a: int, b: int, rows: int = 1) -> int:
    """Words w < rows * ceil(n/4) whose operands a + w and b + w lie in the same bank (read one
    after the other)."""
    w = np.arange(rows * words_for(n), dtype=np.int64)
    return int(np.count_nonzero(bank_of(a + w) == bank_of(b + w)))


def vec_cycles(n: int, sub: int = VEC_COPY, a: int = 0, b: int = 0, rows: int = 1) -> int:
    """Execute cycles of VEC over `rows` rows of n elements: a setup cycle, one cycle per word
    read (two for a word whose two operands share a bank), the operands' read latency and the
    pipeline to the last write."""
    clashes = vec_clashes(n, a, b, rows) if VEC_OPS[sub].reads_b else 0
    return 1 + rows * words_for(n) + clashes + SRAM_RD_LAT + VEC_LATENCY


SMAX_LATENCY = 18  # the softmax pipeline's fixed cycles beyond its three passes and the division


def smax_cycles(n: int) -> int:
    """Execute cycles of SMAX: a setup cycle, a max pass and an exp-and-sum pass back to back, the
    sink's slot, the division once the sum is final, then the normalize pass after divu's done."""
    nw = words_for(n)
    return 3 * nw + DIV_CYCLES + SMAX_LATENCY


SM_STEP_LATENCY = 14  # STEP: setup, two state reads, the gap, the alpha slot, pipeline, two writes after the last p
SM_ACC_LATENCY = 7  # ACC: setup, the alpha read, the read latency, O and its two products registered, the write stage
SM_NORM_LATENCY = 14  # NORM: setup, the l read and its latency, divu's start, the pass's six-stage pipeline


def smax_mode_cycles(mode: int, n: int) -> int:
    """Execute cycles of an SMAX in `mode` over n elements (int8 logits for SOFTMAX and STEP, int32
    words for ACC and NORM); rtl/ga2_sm.v's header derives them."""
    if mode == SM_SOFTMAX:
        return smax_cycles(n)
    if mode == SM_STEP:  # a max pass and a write pass, no division
        return 2 * words_for(n) + SM_STEP_LATENCY
    if mode == SM_ACC:  # T[i] and O[i] in turn on the one read port
        return 2 * n + SM_ACC_LATENCY
    if mode == SM_NORM:  # one division, then one word read a cycle
        return n + DIV_CYCLES + SM_NORM_LATENCY
    raise ValueError(f"SMAX mode {mode}")


# --- what an instruction does: the one definition --------------------------------------------


class ProgramError(ValueError):
    """The program is not valid GA2 code (a bad opcode, a field out of range, overlapping operands)."""


UNITS = ("seq", "dma", "mm", "vec", "smax")  # "seq": HALT, WAIT and QCFG, done by the sequencer itself
# The compute engines, each running one instruction at a time, side by side: the matmul engine and
# the vector unit share the requant bank, so they form one engine; the softmax unit is the other.
ENGINES = ("mmvec", "smax")
ENGINE_OF = {"mm": "mmvec", "vec": "mmvec", "smax": "smax"}


@dataclass(frozen=True, eq=False)
class Effects:
    """What one instruction touches and how long it keeps its unit: everything about it but the
    values it computes.

    ``effects`` is the one place that works this out from the fields; the machine model checks
    races and unwritten reads with it, the compiler decides where a WAIT goes with it, and the
    tests check it against what the model's arithmetic actually reads and writes. Word lists are
    numpy arrays of addresses; a transfer's are in the order its words move (row by row), so the
    DMA timeline can time each word.
    """

    unit: str  # one of UNITS
    reads: np.ndarray  # scratchpad words read
    writes: np.ndarray  # scratchpad words written
    ext_reads: np.ndarray  # external words read (a STORE writes them, a LOAD reads them)
    ext_writes: np.ndarray
    cycles: int  # compute units: execute cycles after the decode cycle; dma: beats; seq: 0
    cols: int = 0  # dma: words per row of the transfer
    mm: MmTiming | None = None  # an MM's timing (what a CHAIN MM after it waits for)
    # a gather: the indices (into its words, in order) of the words that begin a page; it reads a
    # descriptor before each (its reads are those descriptors)
    page_starts: np.ndarray | None = None

    @functools.cached_property
    def read_set(self) -> frozenset[int]:
        return frozenset(self.reads.tolist())

    @functools.cached_property
    def write_set(self) -> frozenset[int]:
        return frozenset(self.writes.tolist())

    @functools.cached_property
    def read_banks(self) -> frozenset[int]:
        return frozenset(bank_of(self.reads).tolist()) if len(self.reads) else frozenset()

    @functools.cached_property
    def write_banks(self) -> frozenset[int]:
        return frozenset(bank_of(self.writes).tolist()) if len(self.writes) else frozenset()


def engine_conflict(later: Effects, earlier: Effects) -> str | None:
    """Why an instruction with effects `later` may not run beside `earlier`, an instruction of the
    other compute engine that may still be running (OVERLAP would let it); None when it may.

    Words: not reading what `earlier` writes (read after write), nor writing what it reads (write
    after read) or writes (write after write). Ports: each bank has one read and one write port,
    so not reading a bank `earlier` reads, nor writing a bank it writes. The kind comes first in
    the answer ("RAW", "WAR", "WAW", "read port", "write port"), so tools can count them."""
    checks = (("RAW", later.read_set & earlier.write_set, "reads scratchpad word", "it writes"),
              ("WAR", later.write_set & earlier.read_set, "writes scratchpad word", "it reads"),
              ("WAW", later.write_set & earlier.write_set, "writes scratchpad word", "it writes too"),
              ("read port", later.read_banks & earlier.read_banks, "reads scratchpad bank", "it reads"),
              ("write port", later.write_banks & earlier.write_banks, "writes scratchpad bank", "it writes"))
    for kind, common, what, theirs in checks:
        if common:
            return f"{kind}: {what} {min(common)}, which {theirs}"
    return None


def chain_conflict(later: Effects, earlier: Effects) -> str | None:
    """Why an MM with effects `later` may not start while `earlier`, the MM before it in the
    matmul engine, drains (CHAIN would let it); None when it may.

    Only read after write: `later` may not read a word `earlier` writes. Everything else is safe
    by the engine's construction, whatever the timing: `earlier` has made all its reads before
    `later` starts (no write after read, no read port shared); both write through the engine's
    one writer, in order (write after write lands in program order, one write port); and a VEC,
    which shares the requant bank, never chains."""
    clash = later.read_set & earlier.write_set
    if clash:
        return f"RAW: reads scratchpad word {min(clash)}, which it writes"
    return None


_NONE = np.zeros(0, dtype=np.int64)


def _words(addr: int, n: int) -> np.ndarray:
    return np.arange(addr, addr + n, dtype=np.int64)


def effects(ins: Instr, *, qbias: int = 0, extw: int | None = None, pc: int | None = None,
            sram: np.ndarray | None = None) -> Effects:
    """The effects of `ins`, after checking that its fields are legal GA2 code.

    qbias is the bias address of the last QCFG (an MM with BIAS reads its words); extw the external
    memory's size in words (default: the configuration's); pc only names the instruction in the
    ProgramError raised for illegal fields, operands outside a memory or overlapping operands.
    sram, the scratchpad's words when the instruction runs, is what a gather's external reads
    depend on (its descriptors); without it a gather's ``ext_reads`` are left empty and its cycles
    are those of a one-word bus.
    """
    where = f"instruction {pc}: " if pc is not None else ""
    cfg = _config.active()
    if extw is None:
        extw = cfg.ext_memory
    sram_words = cfg.sram_words

    def fail(why: str):
        raise ProgramError(where + why)

    def inside(what: str, addr: int, n: int) -> np.ndarray:
        if n < 0 or addr < 0 or addr + n > sram_words:
            fail(f"{what} words {addr}..{addr + n - 1} outside SRAM (0..{sram_words - 1})")
        return _words(addr, n)

    op = ins.op
    high = 0 if op in (OP_LOAD, OP_STORE, OP_MM) else ins.e >> 24  # a transfer's and an MM's w3 is all fields
    if ins.reserved or high:
        fail(f"reserved bits are set (w0 19:18 = {ins.reserved}, w3 31:24 = {high}); "
             f"GA2 halts on it as illegal")
    if ins.overlap and op not in OVERLAP_OPS:
        fail(f"OVERLAP is set on {OP_NAMES.get(op, op)}: only LOAD, STORE, MM, VEC and SMAX take it "
             f"(GA2 halts on it as illegal)")
    if ins.chain and op != OP_MM:
        fail(f"CHAIN is set on {OP_NAMES.get(op, op)}: only MM takes it (GA2 halts on it as illegal)")
    if op == OP_HALT:
        return Effects("seq", _NONE, _NONE, _NONE, _NONE, 0)
    if op == OP_WAIT:
        if ins.cnt >= cfg.dma_queue:
            fail(f"WAIT may leave at most {cfg.dma_queue - 1} transfers in flight, not {ins.cnt}")
        return Effects("seq", _NONE, _NONE, _NONE, _NONE, 0)
    if op == OP_QCFG:
        if ins.c > MAX_SHIFT:
            fail(f"QCFG shift {ins.c} > {MAX_SHIFT}")
        return Effects("seq", _NONE, _NONE, _NONE, _NONE, 0)
    if op in (OP_LOAD, OP_STORE) and (ins.flags > (LD_GATHER if op == OP_LOAD else 0)
                                      or (ins.sub and ins.flags != LD_GATHER)):
        fail(f"{OP_NAMES[op].upper()} with flags {ins.flags} and sub {ins.sub} (only a LOAD takes a flag, "
             f"{LD_GATHER}: GATHER, and only a gather a sub: its page shift)")
    if op == OP_LOAD and ins.flags == LD_GATHER:
        return _gather_effects(ins, extw, sram_words, cfg.ext_words, fail, sram)
    if op in (OP_LOAD, OP_STORE):
        return _dma_effects(ins, op == OP_LOAD, extw, sram_words, cfg.ext_words, fail)
    if op == OP_MM:
        return _mm_effects(ins, qbias, inside, fail)
    if op == OP_VEC:
        return _vec_effects(ins, inside, fail)
    if op == OP_SMAX:
        n, src, dst = ins.cnt, ins.a, ins.c
        if n < 1:
            fail(f"SMAX of {n} elements")
        if ins.sub > SM_LAST:
            fail(f"SMAX mode {ins.sub} (the last is {SM_LAST})")
        if ins.sub != SM_SOFTMAX:
            return _smax_mode_effects(ins, inside, fail)
        nw = words_for(n)
        reads, writes = inside("SMAX src", src, nw), inside("SMAX dst", dst, nw)
        if src != dst and abs(src - dst) < nw:
            fail("SMAX destination partly overlaps its source")
        return Effects("smax", reads, writes, _NONE, _NONE, smax_cycles(n))
    fail(f"unknown opcode {op}")


# The machine model runs the same few hundred instructions again and again (each decode step, every
# test), and the compiler emits the same instructions in each schedule it tries: what an
# instruction is and what it touches is worked out once per process. The effects of an instruction
# depend on its fields, the QCFG bias address, the memory's size and the configuration, and
# nothing else but for a gather (its reads follow the descriptors in the scratchpad): a gather's
# are worked out every time. A kept Effects' word arrays are made read-only, so nothing can change
# what the next caller is handed.
_MEMO_LIMIT = 1 << 16
_DECODED: dict[tuple[int, ...], Instr] = {}
_EFFECTS: dict[tuple, Effects] = {}


def decoded(words: tuple[int, ...]) -> Instr:
    """``Instr.decode(words)``, kept for the next time (above)."""
    ins = _DECODED.get(words)
    if ins is None:
        if len(_DECODED) >= _MEMO_LIMIT:
            _DECODED.clear()
        ins = _DECODED[words] = Instr.decode(words)
    return ins


def kept_effects(ins: Instr, *, qbias: int = 0, extw: int | None = None, pc: int | None = None,
                 sram: np.ndarray | None = None) -> Effects:
    """``effects(ins, ...)``, kept for the next time it is asked for (above)."""
    if ins.op == OP_LOAD and ins.flags == LD_GATHER:
        return effects(ins, qbias=qbias, extw=extw, pc=pc, sram=sram)
    cfg = _config.active()
    key = (ins, qbias, cfg.ext_memory if extw is None else extw, cfg)
    eff = _EFFECTS.get(key)
    if eff is None:
        eff = effects(ins, qbias=qbias, extw=extw, pc=pc, sram=sram)  # an illegal one raises: kept never
        for words in (eff.reads, eff.writes, eff.ext_reads, eff.ext_writes, eff.page_starts):
            if words is not None:
                words.flags.writeable = False
        if len(_EFFECTS) >= _MEMO_LIMIT:
            _EFFECTS.clear()
        _EFFECTS[key] = eff
    return eff


def _smax_mode_effects(ins: Instr, inside, fail) -> Effects:
    """STEP, ACC and NORM: the row's data, and the state words at b each reads and writes."""
    mode, n, src, dst, st = ins.sub, ins.cnt, ins.a, ins.c, ins.b
    name = SM_MODE_NAMES[mode]
    if ins.flags:
        fail(f"{name} takes no flags (flags = {ins.flags})")
    state = inside(f"{name} state", st, SM_STATE_WORDS)

    def apart(what: str, a: np.ndarray, b: np.ndarray) -> None:
        if np.intersect1d(a, b).size:
            fail(f"{name}: {what} overlap")

    if mode == SM_STEP:
        nw = words_for(n)
        reads, writes = inside(f"{name} src", src, nw), inside(f"{name} dst", dst, nw)
        if src != dst and abs(src - dst) < nw:
            fail(f"{name} destination partly overlaps its source")
        apart("the state and the source", state, reads)
        apart("the state and the destination", state, writes)
        return Effects("smax", np.concatenate([reads, state[:2]]), np.concatenate([writes, state]),
                       _NONE, _NONE, smax_mode_cycles(mode, n))
    if mode == SM_ACC:
        t, o = inside(f"{name} src", src, n), inside(f"{name} dst", dst, n)
        apart("the source and the destination", t, o)
        apart("the state's alpha and the destination", state[2:], o)
        return Effects("smax", np.union1d(np.union1d(t, o), state[2:]), o, _NONE, _NONE,
                       smax_mode_cycles(mode, n))
    o, out = inside(f"{name} src", src, n), inside(f"{name} dst", dst, words_for(n))
    apart("the source and the destination", o, out)
    apart("the state's l and the destination", state[1:2], out)
    return Effects("smax", np.union1d(o, state[1:2]), out, _NONE, _NONE, smax_mode_cycles(mode, n))


def _dma_effects(ins: Instr, load: bool, extw: int, sram_words: int, ext_words: int, fail) -> Effects:
    rows, sram, ext, cols, est, sst = dma_fields(ins)
    if rows < 1 or cols < 1:
        fail(f"DMA of {rows} x {cols} words")
    # bounds first, by arithmetic: a huge transfer is an error, not a huge allocation
    s_last = sram + (rows - 1) * sst + cols - 1
    e_last = ext + (rows - 1) * est + cols - 1
    if s_last >= sram_words or (rows > 1 and sst >= sram_words):
        fail(f"DMA reaches SRAM word {s_last} (size {sram_words})")
    if e_last >= extw:
        fail(f"DMA reaches external word {e_last} (EXTW={extw})")
    if rows == 1:  # the common case, without the row arithmetic
        s_idx, e_idx = _words(sram, cols), _words(ext, cols)
    else:
        r = np.arange(rows, dtype=np.int64)[:, None]
        c = np.arange(cols, dtype=np.int64)[None, :]
        s_idx = (sram + r * sst + c).reshape(-1)
        e_idx = (ext + r * est + c).reshape(-1)
    beats = int(dma_beat_index(e_idx, cols, ext_words)[-1]) + 1
    if load:
        return Effects("dma", _NONE, s_idx, e_idx, _NONE, beats, cols)
    return Effects("dma", s_idx, _NONE, _NONE, e_idx, beats, cols)


def _gather_effects(ins: Instr, extw: int, sram_words: int, ext_words: int, fail,
                    sram: np.ndarray | None) -> Effects:
    """A gather: it writes its rows packed from `sram` (like a LOAD) and reads the descriptors of the
    pages its rows lie in from the scratchpad (like a STORE reads its words); its external words
    follow from those descriptors' values, so they are known only with the scratchpad's words."""
    f = gather_fields(ins)
    if f.rows < 1 or f.cols < 1:
        fail(f"gather of {f.rows} x {f.cols} words")
    pages = gather_pages(f)
    p_first, p_last = int(pages[0]), int(pages[-1])
    if f.sram + f.rows * f.cols > sram_words:
        fail(f"gather reaches SRAM word {f.sram + f.rows * f.cols - 1} (size {sram_words})")
    if f.table + p_last >= sram_words:
        fail(f"gather's block table reaches SRAM word {f.table + p_last} (size {sram_words})")
    writes = _words(f.sram, f.rows * f.cols)
    table_words = _words(f.table + p_first, p_last - p_first + 1)
    if np.intersect1d(writes, table_words).size:
        fail("gather writes over its own block table")
    # a row starts a page when it is the first row or its logical row is a multiple of the page
    starts = np.flatnonzero(np.diff(pages, prepend=-1)) * f.cols  # word indices where a page begins
    n_pages = len(starts)
    if sram is None:
        return Effects("dma", table_words, writes, _NONE, _NONE,
                       f.rows * f.cols + GATHER_DESC_CYCLES * n_pages, f.cols, page_starts=starts)
    table = np.zeros(p_last + 1, dtype=np.int64)
    table[p_first:] = np.asarray(sram[f.table + p_first : f.table + p_last + 1], dtype=np.int64) & 0xFFFFFFFF
    row_ext = gather_rows(f, table)
    e_last = int(row_ext.max()) + f.cols - 1
    if e_last >= extw:
        fail(f"gather reaches external word {e_last} (EXTW={extw}) through its block table")
    e_idx = (row_ext[:, None] + np.arange(f.cols, dtype=np.int64)[None, :]).reshape(-1)
    beats = int(dma_beat_index(e_idx, f.cols, ext_words)[-1]) + 1
    return Effects("dma", table_words, writes, e_idx, _NONE, beats + GATHER_DESC_CYCLES * n_pages, f.cols,
                   page_starts=starts)


def _mm_effects(ins: Instr, qbias: int, inside, fail) -> Effects:
    r, a, b, out, k, flags = ins.cnt, ins.a, ins.b, ins.c, ins.d, ins.flags
    m, first, stride = mm_fields(ins)
    if r < 1 or k < 1 or m < 1 or k > MM_MAX_K:
        fail(f"MM needs R, M >= 1 and 1 <= K <= {MM_MAX_K} (got R={r}, K={k}, M={m})")
    brows = bool(flags & MM_BROWS)
    kw, mw = words_for(k), words_for(m)
    start, end = mm_window(m, first, ins.sub)
    if not start < end <= mw:
        fail(f"MM column window (tiles {start}..{end - 1}) is not inside the {mw} column tiles of M={m}")
    cols = np.arange(LANES * start, min(LANES * end, m), dtype=np.int64)
    tiles = np.arange(start, end, dtype=np.int64)
    a_read = inside("MM A", a, r * kw)
    inside("MM B", b, k * mw if brows else m * kw)
    row = mw if flags & MM_OUT8 else m  # words of an output row
    if stride and stride < row:
        fail(f"MM output rows overlap: a row stride of {stride} words for rows of {row}")
    step = stride or row
    inside("MM out", out, (r - 1) * step + row)
    if brows:  # the window's words of every B row
        b_read = (b + np.arange(k, dtype=np.int64)[:, None] * mw + tiles[None, :]).reshape(-1)
    else:  # the window's B rows
        b_read = (b + cols[:, None] * kw + np.arange(kw, dtype=np.int64)[None, :]).reshape(-1)
    rows = np.arange(r, dtype=np.int64)[:, None]
    if flags & MM_OUT8:  # the window's words of every output row
        writes = (out + rows * step + tiles[None, :]).reshape(-1)
    else:  # one int32 word per result
        writes = (out + rows * step + cols[None, :]).reshape(-1)
    reads = [a_read, b_read]
    if flags & MM_BIAS:
        inside("MM bias", qbias, m)
        reads.append(qbias + cols)
    reads = np.unique(np.concatenate(reads))
    clash = np.intersect1d(reads, writes)
    if len(clash):
        fail(f"MM output overlaps its inputs (word {int(clash[0])})")
    timing = mm_timing(r, k, m, flags, start, end - start)
    return Effects("mm", reads, writes, _NONE, _NONE, timing.cycles, mm=timing)


def _vec_effects(ins: Instr, inside, fail) -> Effects:
    n, sa, sb, dst, rows = ins.cnt, ins.a, ins.b, ins.c, vec_rows(ins)
    op = VEC_OPS.get(ins.sub)
    if n < 1 or op is None:
        fail(f"VEC sub-op {ins.sub} with n={n}")
    nw = rows * words_for(n)  # the rows are packed: row r's words follow row r - 1's
    a_read = inside("VEC a", sa, nw)
    b_read = inside("VEC b", sb, nw) if op.reads_b else _NONE
    writes = inside("VEC dst", dst, rows if op.writes_index else nw)
    if not op.writes_index:
        for src in (sa, sb) if op.reads_b else (sa,):
            if src != dst and abs(src - dst) < nw:
                fail("VEC destination partly overlaps a source")
    elif rows > 1 and dst < sa + nw and sa < dst + rows:  # row r's index would overwrite a later row
        fail("VEC argmax of several rows writes over its source")
    if not op.reads_b or sb == sa:
        reads = a_read
    elif abs(sb - sa) < nw:  # two overlapping runs of words: one run
        reads = _words(min(sa, sb), abs(sb - sa) + nw)
    else:
        reads = np.concatenate((a_read, b_read) if sa < sb else (b_read, a_read))
    return Effects("vec", reads, writes, _NONE, _NONE, vec_cycles(n, ins.sub, sa, sb, rows))


def vec_rows(ins: Instr) -> int:
    """A VEC's rows of n elements (field d; 0 means one)."""
    return max(1, ins.d)
