"""A small assembler: one function per instruction, each returning its four encoded words.

Programs are plain lists of words, so they can be built, concatenated and inspected with ordinary
Python. ``listing(code)`` prints each instruction's words beside its disassembly.
"""

from __future__ import annotations

from . import isa
from .isa import Instr
from .machine import disassemble


def halt() -> list[int]:
    return Instr(isa.OP_HALT).encode()


def load(sram: int, ext: int, rows: int = 1, cols: int = 1, ext_stride: int | None = None,
         sram_stride: int | None = None) -> list[int]:
    """Copy rows x cols words from external memory to the scratchpad (background DMA). Strides
    default to cols (packed rows); a stride of 0 repeats one row."""
    return isa.dma_instr(isa.OP_LOAD, sram, ext, rows, cols, cols if ext_stride is None else ext_stride,
                         cols if sram_stride is None else sram_stride).encode()


def store(sram: int, ext: int, rows: int = 1, cols: int = 1, ext_stride: int | None = None,
          sram_stride: int | None = None) -> list[int]:
    """Copy rows x cols words from the scratchpad to external memory (background DMA)."""
    return isa.dma_instr(isa.OP_STORE, sram, ext, rows, cols, cols if ext_stride is None else ext_stride,
                         cols if sram_stride is None else sram_stride).encode()


def gather(sram: int, table: int, rows: int, cols: int, first: int = 0, page_shift: int = 4,
           ext_stride: int | None = None, offset: int = 0) -> list[int]:
    """Copy rows first .. first + rows - 1 of a paged tensor into the scratchpad from `sram`, rows
    packed (background DMA): row L lies in page L >> page_shift, whose base address is the
    scratchpad word table + (L >> page_shift), at base + offset + (L mod 2^page_shift) * ext_stride
    (default cols)."""
    return isa.gather_instr(sram, table, rows, cols, first, page_shift, ext_stride, offset).encode()


def wait(keep: int = 0) -> list[int]:
    """Stall until at most `keep` DMA transfers are unfinished (0: all done)."""
    return Instr(isa.OP_WAIT, cnt=keep).encode()


def qcfg(qa: int = 0, qb: int = 0, shift: int = 0, bias: int = 0) -> list[int]:
    return Instr(isa.OP_QCFG, a=qa, b=qb, c=shift, d=bias).encode()


def mm(a: int, b: int, out: int, r: int, k: int, m: int, *, out8: bool = False, relu: bool = False,
       bias: bool = False, brows: bool = False, first_tile: int = 0, tiles: int = 0, stride: int = 0) -> list[int]:
    """out = A (r x k) times B (k x m): B is k rows of m with brows, else m rows of k. A column
    window computes only column tiles first_tile .. first_tile + tiles - 1 (4 columns each;
    tiles = 0: to the last). Output row i starts at out + i * stride (stride = 0: the rows one after
    another), so one MM can write each row into a different region."""
    flags = ((isa.MM_OUT8 if out8 else 0) | (isa.MM_RELU if relu else 0) | (isa.MM_BIAS if bias else 0)
             | (isa.MM_BROWS if brows else 0))
    if not 0 <= first_tile < 256 or not 0 <= tiles < 16:
        raise ValueError(f"mm: column window {first_tile}+{tiles} does not fit its fields (8 and 4 bits)")
    if not 0 <= stride <= isa.MM_STRIDE_MAX:
        raise ValueError(f"mm: output row stride {stride} does not fit its field (0..{isa.MM_STRIDE_MAX})")
    return Instr(isa.OP_MM, flags=flags, sub=tiles, cnt=r, a=a, b=b, c=out, d=k,
                 e=m | (first_tile << 16) | (stride << 24)).encode()


def vec(sub: int, a: int, dst: int, n: int, b: int = 0, rows: int = 1) -> list[int]:
    """VEC sub-op `sub` over `rows` packed rows of n int8 elements (ARGMAX: one index per row)."""
    if not 1 <= rows <= 0xFFFF:
        raise ValueError(f"vec: {rows} rows do not fit the 16-bit field")
    return Instr(isa.OP_VEC, sub=sub, cnt=n, a=a, b=b, c=dst, d=rows if rows > 1 else 0).encode()


def smax(src: int, dst: int, n: int, sink: int | None = None, smul: int = isa.SM_SCALE_ONE) -> list[int]:
    """Softmax of n int8 values; smul = 2**14 * input scale (the default means a scale of 1/16)."""
    flags = isa.SM_SINK if sink is not None else 0
    if sink is not None and not -128 <= sink <= 127:
        raise ValueError(f"smax: sink {sink} is not an int8")
    return Instr(isa.OP_SMAX, flags=flags, cnt=n, a=src, c=dst, e=((sink or 0) & 0xFF) | (smul << 8)).encode()


def smax_step(src: int, state: int, dst: int, n: int, smul: int = isa.SM_SCALE_ONE) -> list[int]:
    """One tile of an online softmax: n int8 logits at src to unnormalised weights at dst (scale
    1/128 of the running maximum), updating the row's state (m, l, alpha) at `state`."""
    return Instr(isa.OP_SMAX, sub=isa.SM_STEP, cnt=n, a=src, b=state, c=dst, e=smul << 8).encode()


def smax_acc(src: int, state: int, dst: int, n: int) -> list[int]:
    """The running output: n int32 words at dst become dst * alpha + src (alpha: the state's third word)."""
    return Instr(isa.OP_SMAX, sub=isa.SM_ACC, cnt=n, a=src, b=state, c=dst).encode()


def smax_norm(src: int, state: int, dst: int, n: int, shift: int = 0) -> list[int]:
    """The output row: n int32 words at src divided by the state's l, as n packed int8 at dst with
    scale 2^-shift of the words' (shift 0..15)."""
    if not 0 <= shift <= 15:
        raise ValueError(f"smax_norm: shift {shift} is not in 0..15")
    return Instr(isa.OP_SMAX, sub=isa.SM_NORM, cnt=n, a=src, b=state, c=dst, e=shift).encode()


def listing(code: list[int]) -> str:
    """The program, one instruction per line: index, the four words in hex, the disassembly."""
    lines = []
    for i in range(0, len(code), isa.WORDS_PER_INSTR):
        words = code[i : i + 4]
        text = disassemble(Instr.decode(words))
        lines.append(f"{i // 4:4d}  {' '.join(f'{w:08x}' for w in words)}  {text}")
    return "\n".join(lines)


def overlap(words: list[int]) -> list[int]:
    """The same instruction with OVERLAP: it may start while the other compute engine runs (LOAD,
    STORE, MM, VEC and SMAX take it; docs/isa.md says when a program may set it)."""
    ins = Instr.decode(words)
    if ins.op not in isa.OVERLAP_OPS:
        raise ValueError(f"overlap: {isa.OP_NAMES.get(ins.op, ins.op)} does not take OVERLAP")
    return [words[0] | isa.OVERLAP_BIT, *words[1:]]


def chain(words: list[int]) -> list[int]:
    """The same MM with CHAIN: it may start while the MM before it in the matmul engine drains
    (docs/isa.md says when a program may set it: when it reads no word that MM writes)."""
    ins = Instr.decode(words)
    if ins.op != isa.OP_MM:
        raise ValueError(f"chain: {isa.OP_NAMES.get(ins.op, ins.op)} does not take CHAIN")
    return [words[0] | isa.CHAIN_BIT, *words[1:]]
