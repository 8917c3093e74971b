"""ga2_sm with the scratchpad (tb/cocotb/sm_wrap.v): random rows and input scales (smul) against
model/capra/machine.py:softmax_int8 (bit-exact) and the cycle count isa.smax_cycles(n).

Each softmax starts in the cycle after the previous one's done, as the sequencer would issue it.
Source rows carry garbage in the lanes past n; results must have zero there, and the words around
the destination must be left alone.
"""

from __future__ import annotations

import cocotb
import numpy as np
from capra import isa
from capra.machine import softmax_int8

from benches.cocotb_util import (
    pack_int8,
    random_int8,
    run_unit,
    start_unit,
    unpack_int8,
    words_for,
)

ROWS = 250
WINDOW = 512
MAX_N = 48
# input scales: 1/16 (the table's own step), the extremes, and a few in between
SMUL_CHOICES = (isa.SM_SCALE_ONE, isa.SM_SCALE_ONE // 16, 0, 1, 65535, isa.SM_SCALE_ONE // 2,
                3 * isa.SM_SCALE_ONE // 16)


def random_logits(r, count: int) -> list[int]:
    """Rows of several shapes: uniform, extremes, a narrow band (many equal), one dominant logit."""
    shape = r.choice(("uniform", "extremes", "band", "peak"))
    if shape == "uniform":
        return [r.randint(-128, 127) for _ in range(count)]
    if shape == "extremes":
        return random_int8(r, count)
    if shape == "band":
        centre = r.randint(-120, 120)
        return [max(-128, min(127, centre + r.randint(-3, 3))) for _ in range(count)]
    values = [r.randint(-128, 0) for _ in range(count)]
    values[r.randrange(count)] = r.randint(64, 127)
    return values


def overlaps(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n


@cocotb.test()
async def test_ga2_sm_random_rows(dut):
    inputs = ("start", "sink_en", "sink", "smul", "n", "src", "dst", "mode", "st")
    cycles, sram, r = await start_unit(dut, inputs, WINDOW)
    with_sink = 0
    for row in range(ROWS):
        n = r.choice((1, 2, 4, 5, MAX_N, 200, r.randint(1, MAX_N), r.randint(1, MAX_N))) if row else 1
        nw = words_for(n)
        src = r.randrange(1, WINDOW - nw - 1)
        if r.random() < 0.25:
            dst = src  # in place
        else:
            dst = r.randrange(1, WINDOW - nw - 1)
            while overlaps(dst, nw, src, nw):
                dst = r.randrange(1, WINDOW - nw - 1)
        logits = random_logits(r, 4 * nw)  # lanes past n are garbage the unit must ignore
        await sram.write(src, pack_int8(logits))
        x = np.array(unpack_int8([sram.mirror[src + i] for i in range(nw)], n), dtype=np.int64)
        sink = r.choice((-128, 127, 0, r.randint(-128, 127), int(x.max()))) if r.random() < 0.4 else None
        with_sink += sink is not None
        smul = r.choice(SMUL_CHOICES + (r.randint(0, 65535), r.randint(1, 4 * isa.SM_SCALE_ONE)))
        what = f"smax n={n} src={src} dst={dst} sink={sink} smul={smul} x={x.tolist()}"
        await run_unit(dut, cycles, isa.smax_cycles(n), what,
                       dict(sink_en=int(sink is not None), sink=(sink or 0) & 0xFF, smul=smul, n=n, src=src,
                            dst=dst, mode=isa.SM_SOFTMAX, st=0))
        for i, word in enumerate(pack_int8(softmax_int8(x, sink, smul))):
            sram.mirror[dst + i] = word
        await sram.check(dst - 1, nw + 2, what)
    dut._log.info("ga2_sm: %d random rows (%d with a sink logit)", ROWS, with_sink)
