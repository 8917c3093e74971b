"""requant (a 5-stage int32 -> int8 pipeline) against tests/int_reference.py:requantize_ref.

Contract (rtl/requant.v header): acc, mult and shift presented in cycle t give
y = sat8((acc * mult + 2^(shift-1)) >> shift) in cycle t + 5, one result per cycle, counting only cycles
with en high (the pipeline holds while en is low). Every test streams its vectors back to back, a new
input every enabled cycle, and checks y in every cycle against the vector presented five enabled cycles
earlier, so a result one cycle early or late fails as well as a wrong value.
"""

from __future__ import annotations

import itertools

import cocotb
from capra import isa
from int_reference import requantize_ref

from benches.cocotb_util import rng, s8, start_clock

LATENCY = 5  # y in cycle t + 5
ACC_EXTREMES = (-(1 << 31), (1 << 31) - 1, 0, 1, -1, -2, 2, 127, 128, -128, -129)
MULT_EXTREMES = (0, 1, 2, 255, 256, 32767, 32768, 65534, 65535)
SHIFT_EXTREMES = (0, 1, 2, 7, 8, 15, 16, 23, 31, 32, 33, 40, 46, isa.MAX_SHIFT)
RANDOM_VECTORS = 10000
HALF_WAY_VECTORS = 1500


async def stream(dut, vectors, hold=None) -> int:
    """Present one vector per enabled cycle; in every cycle check y against the vector presented five
    enabled cycles before. `hold`, a random generator, lowers en in about a third of the cycles."""
    dut.en.value = 1
    cycles = await start_clock(dut)
    vectors = list(vectors)
    presented: list[tuple[int, int, int, int]] = []  # (cycle, acc, mult, shift) of every enabled cycle
    enabled = 0
    c = 0
    while enabled < len(vectors) + LATENCY:
        en = hold is None or hold.random() < 0.67
        dut.en.value = int(en)
        if enabled < len(vectors):
            acc, mult, shift = vectors[enabled]
        else:
            acc, mult, shift = 0, 0, 0
        dut.acc.value = acc & 0xFFFFFFFF
        dut.mult.value = mult
        dut.shift.value = shift
        if len(presented) >= LATENCY and presented[-LATENCY][0] < len(vectors):
            index, acc0, mult0, shift0 = presented[-LATENCY]
            want = requantize_ref(acc0, mult0, shift0)
            got = s8(int(dut.y.value))
            assert got == want, (f"requant(acc={acc0}, mult={mult0}, shift={shift0}), vector {index}: y = {got} "
                                 f"in cycle {c}, reference says {want}")
        if en:
            presented.append((enabled, acc, mult, shift))
            enabled += 1
        await cycles.next()
        c += 1
    return len(vectors)


@cocotb.test()
async def test_requant_extremes_cross_product(dut):
    """Every combination of extreme accumulators, multipliers and shifts (-2^31, 2^31-1, 0, +-1; mult 0, 1,
    65535; shift 0, 1, 47 ...), streamed back to back."""
    n = await stream(dut, itertools.product(ACC_EXTREMES, MULT_EXTREMES, SHIFT_EXTREMES))
    dut._log.info("requant: %d extreme vectors", n)


@cocotb.test()
async def test_requant_random_operands_back_to_back(dut):
    """Uniform 32-bit accumulators with random multipliers and shifts, one per cycle."""
    r = rng()
    vectors = []
    for _ in range(RANDOM_VECTORS):
        acc = r.randint(-(1 << 31), (1 << 31) - 1)
        if r.random() < 0.3:
            acc >>= r.randint(0, 31)  # small magnitudes too, so the output is not always saturated
        mult = r.choice(MULT_EXTREMES) if r.random() < 0.1 else r.randint(0, 65535)
        shift = r.randint(0, isa.MAX_SHIFT)
        vectors.append((acc, mult, shift))
    n = await stream(dut, vectors)
    dut._log.info("requant: %d random vectors", n)


@cocotb.test()
async def test_requant_rounds_half_up_near_saturation(dut):
    """Products exactly half-way between two outputs (and one below and above), around -128 and 127:
    rounding is half up, and saturation follows the rounding."""
    r = rng()
    vectors = []
    while len(vectors) < HALF_WAY_VECTORS:
        shift = r.randint(1, 31)
        q = r.randint(-131, 130)
        acc = q * (1 << shift) + (1 << (shift - 1)) + r.choice((0, 1, -1))
        if -(1 << 31) <= acc < (1 << 31):
            vectors.append((acc, 1, shift))
    n = await stream(dut, vectors)
    dut._log.info("requant: %d half-way vectors", n)


@cocotb.test()
async def test_requant_holds_while_enable_is_low(dut):
    """Random vectors with en low in about a third of the cycles: a result comes five enabled cycles
    after its vector, and a held pipeline changes nothing."""
    r = rng()
    vectors = [(r.randint(-(1 << 31), (1 << 31) - 1), r.randrange(1 << 16), r.randint(0, isa.MAX_SHIFT))
               for _ in range(2000)]
    n = await stream(dut, vectors, hold=r)
    dut._log.info("requant: %d vectors with the enable toggling", n)
