"""Shared pieces of the GA2 block tests: the clock, a cycle counter, int8 packing, the scratchpad host port.

Cycle convention used by every clocked test: cycle c is the interval between rising edge c and
rising edge c+1. `Cycles.next()` returns at the falling edge in the middle of the cycle, when the
registers have their new values; inputs written then are sampled at the edge that ends the cycle,
and `settle()` (10 ps, at most SETTLES_PER_CYCLE of them per cycle) lets the combinational outputs
follow inputs written in the same cycle (one trigger a cycle, the cheapest a Python step can be).
A block's "start in cycle s" means start is high between the edges that begin and end cycle s.
The clock is the simulator-side (GPI) one: a Python clock costs three times the run time.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, Timer

CLOCK_NS = 10
SETTLES_PER_CYCLE = 200  # 200 x 10 ps = 2 ns, well inside the half period before the next rising edge
LANES = 4
SRAM_RD_LAT = 2  # a scratchpad read issued in cycle t answers in cycle t + 2


def rng() -> random.Random:
    """A generator seeded from COCOTB_RANDOM_SEED, so a failing run can be replayed exactly."""
    seed = int(os.environ.get("COCOTB_RANDOM_SEED", cocotb.RANDOM_SEED))
    return random.Random(seed)


class Cycles:
    """Steps a clocked bench; `now` is the index of the current cycle (see the module docstring)."""

    def __init__(self, clk) -> None:
        self.clk = clk
        self.now = 0
        self.settles_left = SETTLES_PER_CYCLE
        self._middle = FallingEdge(clk)
        self._settle = Timer(10, unit="ps")

    async def next(self, n: int = 1) -> None:
        if n > 1:
            await ClockCycles(self.clk, n, rising=False)
        else:
            await self._middle
        self.now += n
        self.settles_left = SETTLES_PER_CYCLE

    async def settle(self) -> None:
        assert self.settles_left > 0, f"more than {SETTLES_PER_CYCLE} settles in cycle {self.now}"
        self.settles_left -= 1
        await self._settle


async def start_clock(dut) -> Cycles:
    Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi").start(start_high=False)
    cycles = Cycles(dut.clk)
    await cycles.next()
    return cycles


async def reset(dut, cycles: Cycles, n: int = 2) -> None:
    dut.rst.value = 1
    await cycles.next(n)
    dut.rst.value = 0


def s8(x: int) -> int:
    x &= 0xFF
    return x - 0x100 if x & 0x80 else x


def s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def value(handle) -> int | str:
    """A signal's value as an int, or its bits as a string when some are X or Z (which then never match)."""
    v = handle.value
    return int(v) if v.is_resolvable else str(v)


def words32(bus) -> list[int | None]:
    """A bus value of 32-bit words (word 0 in the low bits) as ints, None for a word with an X or Z bit."""
    bits = str(bus)
    out: list[int | None] = []
    for w in range(len(bits) // 32):
        field = bits[len(bits) - 32 * (w + 1) : len(bits) - 32 * w]
        out.append(int(field, 2) if set(field) <= {"0", "1"} else None)
    return out


def show(word: int | str | None) -> str:
    """A 32-bit word for a failure message: hex, its bits when some are X or Z, or X."""
    if word is None:
        return "X"
    return word if isinstance(word, str) else f"{word:#010x}"


def words_for(n: int) -> int:
    return -(-n // LANES)


def pack_int8(values) -> list[int]:
    """A packed int8 row: four lanes per word, lane 0 in bits 7:0, lanes past the end zero."""
    values = [int(v) for v in values]
    words = []
    for w in range(words_for(len(values))):
        word = 0
        for lane, v in enumerate(values[w * LANES : (w + 1) * LANES]):
            word |= (v & 0xFF) << (8 * lane)
        words.append(word)
    return words


def unpack_int8(words: list[int], n: int) -> list[int]:
    return [s8(words[i // LANES] >> (8 * (i % LANES))) for i in range(n)]


def random_int8(r: random.Random, n: int) -> list[int]:
    """Random int8 values with the extremes -128 and 127 over-represented."""
    return [r.choice((-128, 127, -1, 0)) if r.random() < 0.1 else r.randint(-128, 127) for _ in range(n)]


class Scratchpad:
    """The host port a wrapper bench puts on a pair of scratchpad ports the block under test leaves free
    (the DMA side, wd write and dr read, in the unit benches; the compute side, wc write and p1 read, in
    the DMA bench), mirrored by a Python dict of the words the test knows. Reads answer two cycles later."""

    def __init__(self, dut, cycles: Cycles) -> None:
        self.dut = dut
        self.cycles = cycles
        self.mirror: dict[int, int] = {}
        dut.host_we.value = 0
        dut.host_waddr.value = 0
        dut.host_wdata.value = 0
        dut.host_re.value = 0
        dut.host_raddr.value = 0

    async def write(self, base: int, words: list[int]) -> None:
        """One word per cycle."""
        for i, word in enumerate(words):
            self.dut.host_we.value = 1
            self.dut.host_waddr.value = base + i
            self.dut.host_wdata.value = word & 0xFFFFFFFF
            await self.cycles.next()
            self.mirror[base + i] = word & 0xFFFFFFFF
        self.dut.host_we.value = 0

    async def read(self, base: int, n: int) -> list[int | str]:
        """One read request per cycle; each answers two cycles later."""
        out: list[int | str] = []
        for i in range(n + SRAM_RD_LAT):
            self.dut.host_re.value = int(i < n)
            self.dut.host_raddr.value = base + min(i, n - 1)
            if i >= SRAM_RD_LAT:
                out.append(value(self.dut.host_rdata))  # the answer to request i - 2
            await self.cycles.next()
        self.dut.host_re.value = 0
        return out

    async def check(self, base: int, n: int, what: str) -> None:
        """The n words at base must equal the mirror (which the test updated with the model's results)."""
        got = await self.read(base, n)
        for i, g in enumerate(got):
            want = self.mirror[base + i]
            assert g == want, f"{what}: sram[{base + i}] = {show(g)}, model says {want:#010x}"


async def start_unit(dut, inputs: tuple[str, ...], window: int) -> tuple[Cycles, Scratchpad, random.Random]:
    """Common start of a unit bench: inputs idle, clock running, reset, and the first `window`
    scratchpad words filled with random data. Returns the cycle counter, the scratchpad port and
    the test's random generator."""
    for name in inputs:
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    sram = Scratchpad(dut, cycles)
    await reset(dut, cycles)
    r = rng()
    await sram.write(0, [r.getrandbits(32) for _ in range(window)])
    return cycles, sram, r


async def run_unit(dut, cycles: Cycles, expected_cycles: int, what: str, operands: dict[str, int]) -> None:
    """Start a unit in the current cycle s, then check `done` is low in s+1 .. s+C-1, high in s+C, low after.

    Writes (`unit_we`) must stay inside the execute window s+1 .. s+C, as the top only lets them through
    while the unit is executing.
    """
    for name, value in operands.items():
        getattr(dut, name).value = value
    dut.start.value = 1
    s = cycles.now
    await cycles.next()
    dut.start.value = 0
    while True:
        done = int(dut.done.value)
        assert cycles.now - s <= expected_cycles, (
            f"{what}: done not seen by cycle s+{expected_cycles} (isa formula)")
        if done:
            break
        await cycles.next()
    took = cycles.now - s
    assert took == expected_cycles, f"{what}: done in cycle s+{took}, isa formula says s+{expected_cycles}"
    await cycles.next()
    assert int(dut.done.value) == 0, f"{what}: done still high in cycle s+{expected_cycles + 1}"
    assert int(dut.unit_we.value) == 0, f"{what}: write in cycle s+{expected_cycles + 1}, after done"
