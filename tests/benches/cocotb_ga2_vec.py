"""ga2_vec with the scratchpad (tb/cocotb/vec_wrap.v): random element-wise operations against the
numerics of the model (capra.isa.VEC_OPS, the one definition of each sub-op) and the cycle count
isa.vec_cycles(n, sub, a, b, rows). A quarter of them run over several packed rows (ARGMAX: one
index word per row).

Each operation starts in the cycle after the previous one's done, as the sequencer would issue it.
Operand rows carry garbage in the lanes past n (the unit must ignore them); results must have zero
there, and the words around the destination must be left alone.
"""

from __future__ import annotations

import cocotb
import numpy as np
from capra import isa

from benches.cocotb_util import (
    pack_int8,
    random_int8,
    run_unit,
    start_unit,
    unpack_int8,
    words_for,
)

OPERATIONS = 400
WINDOW = 512  # scratchpad words the test uses, all filled with random data first
MAX_N = 40
TWO_OPERANDS = tuple(code for code, op in isa.VEC_OPS.items() if op.reads_b)


class Quant:
    """The QCFG registers a VEC reads."""

    def __init__(self, qa: int, qb: int, qs: int) -> None:
        self.qa, self.qb, self.qs = qa, qb, qs


def expected(sub: int, x: np.ndarray, y: np.ndarray, qa: int, qb: int, qs: int) -> list[int]:
    """The words VEC writes for one row: the machine model's definition of the sub-op (capra.isa.VEC_OPS)."""
    op = isa.VEC_OPS[sub]
    z = op.compute(x, y, Quant(qa, qb, qs))
    return [int(z)] if op.writes_index else pack_int8(z)


def random_quant(r) -> tuple[int, int, int]:
    qa = r.choice((0, 1, 65535, r.randint(0, 65535), r.randint(1, 300), r.randint(1, 300)))
    qb = r.choice((0, 1, 65535, r.randint(0, 65535), r.randint(1, 300), r.randint(1, 300)))
    qs = r.choice((0, 1, isa.MAX_SHIFT, r.randint(0, isa.MAX_SHIFT), r.randint(4, 16), r.randint(4, 16)))
    return qa, qb, qs


def overlaps(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n


@cocotb.test()
async def test_ga2_vec_random_operations(dut):
    inputs = ("start", "sub", "n", "rows", "src_a", "src_b", "dst", "qa", "qb", "qs")
    cycles, sram, r = await start_unit(dut, inputs, WINDOW)
    counts = dict.fromkeys(isa.VEC_NAMES.values(), 0)
    for op in range(OPERATIONS):
        sub = op % len(isa.VEC_NAMES) if op < 12 else r.choice(list(isa.VEC_NAMES))
        n = r.choice((1, 3, 4, 5, MAX_N, r.randint(1, MAX_N), r.randint(1, MAX_N)))
        rows = 1 if r.random() < 0.75 else r.randint(2, 6)
        rw = words_for(n)  # words of a row
        nw = rows * rw
        out_words = rows if isa.VEC_OPS[sub].writes_index else nw
        sa = r.randrange(1, WINDOW - nw - 1)
        sb = sa if r.random() < 0.1 else r.randrange(1, WINDOW - nw - 1)
        sources = [(sa, nw)] + ([(sb, nw)] if sub in TWO_OPERANDS else [])
        if not isa.VEC_OPS[sub].writes_index and r.random() < 0.2:
            dst = sa  # in place
        else:
            dst = r.randrange(1, WINDOW - out_words - 1)
            while any(overlaps(dst, out_words, s, w) for s, w in sources):
                dst = r.randrange(1, WINDOW - out_words - 1)
        await sram.write(sa, pack_int8(random_int8(r, 4 * nw)))
        if sb != sa:
            await sram.write(sb, pack_int8(random_int8(r, 4 * nw)))
        qa, qb, qs = random_quant(r)
        # each row's result from its own words, one row after another in both operands and the output
        words: list[int] = []
        for row in range(rows):
            x = np.array(unpack_int8([sram.mirror[sa + row * rw + i] for i in range(rw)], n), dtype=np.int64)
            y = np.array(unpack_int8([sram.mirror[sb + row * rw + i] for i in range(rw)], n), dtype=np.int64)
            words += expected(sub, x, y, qa, qb, qs)
        name = isa.VEC_NAMES[sub]
        what = f"vec.{name} n={n} rows={rows} a={sa} b={sb} dst={dst} qa={qa} qb={qb} qs={qs}"
        await run_unit(dut, cycles, isa.vec_cycles(n, sub, sa, sb, rows), what,
                       dict(sub=sub, n=n, rows=rows, src_a=sa, src_b=sb, dst=dst, qa=qa, qb=qb, qs=qs))
        for i, word in enumerate(words):
            sram.mirror[dst + i] = word
        await sram.check(dst - 1, out_words + 2, what)
        counts[name] += 1
    dut._log.info("ga2_vec: %d random operations %s", OPERATIONS, counts)
