"""requant (combinational int32 -> int8) is bit-exact against model/capra/machine.py:requantize."""

from __future__ import annotations

import itertools

import cocotb
from capra import isa
from capra.machine import requantize
from cocotb.triggers import Timer
from cocotb_util import rng, s8

ACC_EXTREMES = (-(1 << 31), (1 << 31) - 1, 0, 1, -1, -2, 2, 127, 128, -128, -129)
MULT_EXTREMES = (0, 1, 2, 255, 256, 32767, 32768, 65534, 65535)
SHIFT_EXTREMES = (0, 1, 2, 7, 8, 15, 16, 23, 31, 32, 33, 40, 46, isa.MAX_SHIFT)
RANDOM_VECTORS = 4000
HALF_WAY_VECTORS = 1500


def model(acc: int, mult: int, shift: int) -> int:
    return int(requantize([acc], mult, shift)[0])


async def check_all(dut, vectors) -> int:
    settle = Timer(1, unit="ns")
    count = 0
    for acc, mult, shift in vectors:
        dut.acc.value = acc & 0xFFFFFFFF
        dut.mult.value = mult
        dut.shift.value = shift
        await settle
        got = s8(int(dut.y.value))
        want = model(acc, mult, shift)
        assert got == want, f"requant(acc={acc}, mult={mult}, shift={shift}) = {got}, model says {want}"
        count += 1
    return count


@cocotb.test()
async def test_requant_extremes_cross_product(dut):
    """Every combination of extreme accumulators, multipliers and shifts."""
    n = await check_all(dut, itertools.product(ACC_EXTREMES, MULT_EXTREMES, SHIFT_EXTREMES))
    dut._log.info("requant: %d extreme vectors", n)


@cocotb.test()
async def test_requant_random_operands(dut):
    """Uniform 32-bit accumulators with random multipliers and shifts (mostly in the useful range)."""
    r = rng()

    def vectors():
        for _ in range(RANDOM_VECTORS):
            acc = r.randint(-(1 << 31), (1 << 31) - 1)
            if r.random() < 0.3:
                acc >>= r.randint(0, 31)  # small magnitudes too, so the output is not always saturated
            mult = r.choice(MULT_EXTREMES) if r.random() < 0.1 else r.randint(0, 65535)
            shift = r.randint(0, isa.MAX_SHIFT)
            yield acc, mult, shift

    n = await check_all(dut, vectors())
    dut._log.info("requant: %d random vectors", n)


@cocotb.test()
async def test_requant_rounds_half_up_near_saturation(dut):
    """Products exactly half-way between two outputs, around -128 and 127: rounding is half up."""
    r = rng()

    def vectors():
        for _ in range(HALF_WAY_VECTORS):
            shift = r.randint(1, 31)
            q = r.randint(-131, 130)
            offset = r.choice((0, 1, -1)) + (1 << (shift - 1))
            acc = q * (1 << shift) + offset
            if -(1 << 31) <= acc < (1 << 31):
                yield acc, 1, shift

    n = await check_all(dut, vectors())
    dut._log.info("requant: %d half-way vectors", n)
