"""ga2_mm with the scratchpad (tb/cocotb/mm_wrap.v): random matmuls of every flag combination against
numpy matmul plus the machine model's bias / relu / requantize steps, and isa.mm_cycles().

A is R packed int8 rows of K; B is M rows of K (dot form) or, with BROWS, K rows of M; the result is
R rows of M, packed int8 (OUT8) or one int32 word each. Each matmul starts in the cycle after the
previous one's done; the words around the output must be left alone, and the unit may read only its
operands (A, the window's B words and bias words; worked out here from the ISA's definition of MM):
the machine model's rules on bank ports rely on that.
"""

from __future__ import annotations

import cocotb
import numpy as np
from capra import isa
from capra.machine import requantize, wrap32
from cocotb.triggers import FallingEdge

from benches.cocotb_util import (
    Scratchpad,
    pack_int8,
    random_int8,
    run_unit,
    start_unit,
    unpack_int8,
    words_for,
)

MATMULS = 150
WINDOW = 1600  # scratchpad words the test uses, all filled with random data first
MASK32 = 0xFFFFFFFF


def expected_words(a: np.ndarray, b_km: np.ndarray, bias: np.ndarray, flags: int, qa: int, qs: int) -> list[int]:
    acc = wrap32(a @ b_km)
    if flags & isa.MM_BIAS:
        acc = wrap32(acc + bias[None, :])
    if flags & isa.MM_RELU:
        acc = np.maximum(acc, 0)
    if flags & isa.MM_OUT8:
        return [w for row in requantize(acc, qa, qs) for w in pack_int8(row)]
    return [int(v) & MASK32 for v in acc.reshape(-1)]


def random_window(r, m: int) -> tuple[int, int]:
    """A column window (first tile, tiles; 0 = to the last) for a third of the matmuls."""
    tiles = words_for(m)
    if tiles < 2 or r.random() < 0.67:
        return 0, 0
    first = r.randrange(tiles)
    return first, r.choice((0, r.randint(1, min(15, tiles - first))))


def window_words(words: list[int], rows: int, m: int, flags: int, first: int, tiles: int, stride: int = 0):
    """(offset, word) of the output words a column window writes, from the full result's words
    (packed rows); output row i starts stride words after row i - 1 (0: right after it)."""
    _, end = isa.mm_window(m, first, tiles)
    row_words = words_for(m) if flags & isa.MM_OUT8 else m
    step = stride or row_words
    for row in range(rows):
        if flags & isa.MM_OUT8:
            for t in range(first, end):
                yield row * step + t, words[row * row_words + t]
        else:
            for col in range(4 * first, min(4 * end, m)):
                yield row * step + col, words[row * row_words + col]


def random_shape(r, index: int) -> tuple[int, int, int]:
    """R = 1..9 rows (one, two and three batch tiles), K including 1 and K not a multiple of 4, M = 1."""
    if index == 0:
        return 1, 1, 1
    if index == 1:
        return 2, isa.MM_MAX_K, 3  # the longest reduction the rowmem holds (dot form: flags 0001)
    if index == 9:
        return 1, isa.MM_MAX_K, 4  # and with BROWS (flags 1001)
    return (r.choice((1, 2, 3, 4, 5, 8, 9, r.randint(1, 9))), r.choice((1, 2, 4, 5, 7, 16, r.randint(1, 40))),
            r.choice((1, 3, 4, 6, 16, 17, r.randint(1, 24))))


def words_read(a_base: int, b_base: int, bias_base: int, rows: int, k: int, m: int, flags: int, first: int,
               tiles: int) -> set[int]:
    """The scratchpad words an MM reads: its A rows, the B words of its column window, and with BIAS
    the window's bias words."""
    kw, mw = words_for(k), words_for(m)
    _, end = isa.mm_window(m, first, tiles)
    cols = range(4 * first, min(4 * end, m))
    words = set(range(a_base, a_base + rows * kw))
    if flags & isa.MM_BROWS:
        words |= {b_base + row * mw + t for row in range(k) for t in range(first, end)}
    else:
        words |= {b_base + col * kw + w for col in cols for w in range(kw)}
    if flags & isa.MM_BIAS:
        words |= {bias_base + col for col in cols}
    return words


class Reads:
    """Every word the unit reads on its line port (rd_mask, rd_addr), sampled after each clock edge."""

    def __init__(self, dut) -> None:
        self.words: set[int] = set()
        cocotb.start_soon(self._watch(dut))

    async def _watch(self, dut) -> None:
        middle = FallingEdge(dut.clk)  # the middle of each cycle: the port shows that cycle's read
        while True:
            await middle
            mask = int(dut.rd_mask.value)
            if mask:
                base = int(dut.rd_addr.value)
                self.words |= {(base + j) % isa.SRAM_WORDS for j in range(4) if mask >> j & 1}


class Layout:
    """Places operand blocks one after another with random gaps inside the window."""

    def __init__(self, r) -> None:
        self.r = r
        self.cursor = r.randint(1, 64)

    def take(self, words: int) -> int:
        base = self.cursor
        self.cursor += words + self.r.randint(1, 8)
        assert self.cursor < WINDOW, "operands do not fit the test window"
        return base


async def write_int8_rows(sram: Scratchpad, r, base: int, rows: int, n: int) -> np.ndarray:
    """Random packed int8 rows (garbage past n) at base; returns the rows x n values as the unit reads them."""
    w = words_for(n)
    words = pack_int8(random_int8(r, rows * w * 4))
    await sram.write(base, words)
    return np.array([unpack_int8(words[i * w : (i + 1) * w], n) for i in range(rows)], dtype=np.int64)


INPUTS = ("start", "flags", "r_total", "k_len", "m_total", "win_first", "win_tiles", "a_base", "b_base",
          "out_base", "out_stride", "qa", "qs", "qbias")


class Matmul:
    """One random matmul laid out in the scratchpad: its operands, the words it must write (the
    model's), what it may read, and its timing (isa.mm_timing)."""

    @classmethod
    async def make(cls, sram: Scratchpad, r, index: int, place: Layout) -> Matmul:
        self = cls()
        rows, k, m = random_shape(r, index)
        flags = index % 16 if index < 32 else r.randrange(16)
        brows = bool(flags & isa.MM_BROWS)
        a_base = place.take(rows * words_for(k))
        b_base = place.take(k * words_for(m) if brows else m * words_for(k))
        bias_base = place.take(m)
        row_words = words_for(m) if flags & isa.MM_OUT8 else m
        # a fifth of the matmuls write their rows apart (the words between them must stay as they were)
        stride = r.randint(row_words + 1, min(255, 3 * row_words + 2)) if row_words < 255 and r.random() < 0.2 else 0
        self.out_words = (rows - 1) * (stride or row_words) + row_words
        self.out_base = out_base = place.take(self.out_words)
        a = await write_int8_rows(sram, r, a_base, rows, k)
        if brows:
            b_km = await write_int8_rows(sram, r, b_base, k, m)
        else:
            b_km = (await write_int8_rows(sram, r, b_base, m, k)).T
        bias_words = [r.choice((r.getrandbits(32), r.getrandbits(12), (-r.getrandbits(12)) & MASK32))
                      for _ in range(m)]
        await sram.write(bias_base, bias_words)
        bias = np.array([v - (1 << 32) if v >> 31 else v for v in bias_words], dtype=np.int64)
        qa = r.choice((1, 65535, r.randint(1, 65535), r.randint(1, 255)))
        qs = r.choice((0, isa.MAX_SHIFT, r.randint(6, 22), r.randint(6, 22)))
        first, tiles = random_window(r, m)
        self.what = (f"mm R={rows} K={k} M={m} window={first}+{tiles} flags={flags:04b} A={a_base} B={b_base} "
                     f"out={out_base} stride={stride} bias={bias_base} qa={qa} qs={qs}")
        self.timing = isa.mm_timing(rows, k, m, flags, first, tiles)
        self.operands = dict(flags=flags, r_total=rows, k_len=k, m_total=m, win_first=first, win_tiles=tiles,
                             a_base=a_base, b_base=b_base, out_base=out_base, out_stride=stride, qa=qa, qs=qs,
                             qbias=bias_base)
        words = expected_words(a, b_km, bias, flags, qa, qs)
        self.writes = [(out_base + i, word) for i, word in window_words(words, rows, m, flags, first, tiles, stride)]
        self.may_read = words_read(a_base, b_base, bias_base, rows, k, m, flags, first, tiles)
        self.macs = rows * k * m
        return self

    async def check(self, sram: Scratchpad) -> None:
        """Only the window's output words change: the whole output area is checked."""
        for addr, word in self.writes:
            sram.mirror[addr] = word
        await sram.check(self.out_base - 1, self.out_words + 2, self.what)


@cocotb.test()
async def test_ga2_mm_random_matmuls(dut):
    cycles, sram, r = await start_unit(dut, INPUTS, WINDOW)
    reads = Reads(dut)
    macs = 0
    for index in range(MATMULS):
        mm = await Matmul.make(sram, r, index, Layout(r))
        reads.words.clear()
        await run_unit(dut, cycles, mm.timing.cycles, mm.what, mm.operands)
        await mm.check(sram)
        stray = reads.words - mm.may_read
        assert not stray, f"{mm.what}: read words it has no business reading, e.g. {sorted(stray)[:8]}"
        macs += mm.macs
    dut._log.info("ga2_mm: %d random matmuls, %d MACs", MATMULS, macs)


PAIRS = 60


@cocotb.test()
async def test_ga2_mm_takes_the_next_matmul_while_one_drains(dut):
    """Pairs of random matmuls of any two forms, the second started in the first cycle the engine
    takes it (`take`: the first has made its last read): `take` must rise in cycle s + front + 1
    of the first, each `done` must come in the cycle isa.mm_timing and isa.mm_chain_pad say (the
    second's waits for the first's operands to leave the array), and both must write their own
    results with their own flags, scale, bias and destination."""
    cycles, sram, r = await start_unit(dut, INPUTS, WINDOW)
    for _pair in range(PAIRS):
        place = Layout(r)
        small = [i for i in range(MATMULS) if i not in (1, 9)]  # (1 and 9: K = 1024, too big for two)
        one = await Matmul.make(sram, r, r.choice(small), place)
        two = await Matmul.make(sram, r, r.choice(small), place)
        for name, v in one.operands.items():
            getattr(dut, name).value = v
        dut.start.value = 1
        s1 = cycles.now
        await cycles.next()
        dut.start.value = 0
        dones = []
        while not int(dut.take.value):
            dones += [cycles.now] if int(dut.done.value) else []
            await cycles.next()
        s2 = cycles.now
        what = f"{one.what}, then {two.what}"
        assert s2 == s1 + one.timing.front + 1, f"{what}: takes the next in s+{s2 - s1}, not s+{one.timing.front + 1}"
        for name, v in two.operands.items():
            getattr(dut, name).value = v
        dut.start.value = 1
        await cycles.next()
        dut.start.value = 0
        pad = isa.mm_chain_pad(two.timing, s2, s1 + one.timing.front, one.timing)
        end = s2 + two.timing.cycles + pad
        while cycles.now <= end:
            dones += [cycles.now] if int(dut.done.value) else []
            await cycles.next()
        assert dones == [s1 + one.timing.cycles, end], (
            f"{what}: done in cycles {[d - s1 for d in dones]} after the first start, "
            f"the formulas say {[one.timing.cycles, end - s1]}")
        await one.check(sram)
        await two.check(sram)
    dut._log.info("ga2_mm: %d pairs of matmuls back to back", PAIRS)
