"""divu (32-bit unsigned restoring divider) against Python's // and %, and against its timing contract.

Contract (rtl/divu.v header): start in cycle s loads the operands; quotient and remainder are valid
from cycle s+33 on, and done is high from then until the next start; done is low while running.
A zero divisor gives quotient 0xffffffff and remainder = dividend.
"""

from __future__ import annotations

import itertools

import cocotb
from capra import isa

from benches.cocotb_util import Cycles, reset, rng, start_clock

MASK32 = 0xFFFFFFFF
RESULT_CYCLE = isa.DIV_CYCLES + 1  # results valid from cycle s + 33
EXTREMES = (0, 1, 2, 3, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, MASK32)
TIMED_VECTORS = 300
BULK_VECTORS = 4000


def model(dividend: int, divisor: int) -> tuple[int, int]:
    if divisor == 0:
        return MASK32, dividend
    return dividend // divisor, dividend % divisor


def random_operands(r, n: int):
    for _ in range(n):
        dividend = r.getrandbits(32) >> r.choice((0, 0, 0, 8, 16, 24, 31))
        divisor = r.getrandbits(32) >> r.randint(0, 32)
        if r.random() < 0.05:
            divisor = r.choice(EXTREMES)
        if r.random() < 0.05:
            dividend = r.choice(EXTREMES)
        yield dividend, divisor


def check_result(dut, dividend: int, divisor: int, when: str) -> None:
    want_q, want_r = model(dividend, divisor)
    got_q, got_r = int(dut.quotient.value), int(dut.remainder.value)
    assert (got_q, got_r) == (want_q, want_r), (
        f"divu {dividend:#x} / {divisor:#x} {when}: got q={got_q:#x} r={got_r:#x}, "
        f"expected q={want_q:#x} r={want_r:#x}")


async def setup(dut) -> Cycles:
    dut.start.value = 0
    dut.dividend.value = 0
    dut.divisor.value = 0
    cycles = await start_clock(dut)
    await reset(dut, cycles)
    return cycles


@cocotb.test()
async def test_divu_timing_contract(dut):
    """Checked every cycle: done low in s+1..s+32, results and done in s+33, held until the next start."""
    cycles = await setup(dut)
    r = rng()
    vectors = list(itertools.product(EXTREMES, EXTREMES)) + list(random_operands(r, TIMED_VECTORS))
    for dividend, divisor in vectors:
        dut.dividend.value = dividend
        dut.divisor.value = divisor
        dut.start.value = 1
        s = cycles.now
        await cycles.next()
        dut.start.value = 0
        dut.dividend.value = r.getrandbits(32)  # operands are only sampled with start
        dut.divisor.value = r.getrandbits(32)
        while cycles.now - s < RESULT_CYCLE:
            assert int(dut.done.value) == 0, f"divu {dividend:#x}/{divisor:#x}: done high in s+{cycles.now - s}"
            await cycles.next()
        for hold in range(r.choice((1, 1, 2, 5))):  # idle cycles before the next start
            if hold:
                await cycles.next()
            assert int(dut.done.value) == 1, f"divu: done low in cycle s+{RESULT_CYCLE + hold}"
            check_result(dut, dividend, divisor, f"in cycle s+{RESULT_CYCLE + hold}")
    dut._log.info("divu: %d divisions checked cycle by cycle", len(vectors))


@cocotb.test()
async def test_divu_random_operands_back_to_back(dut):
    """Many divisions, each started in the cycle its predecessor's result becomes valid."""
    cycles = await setup(dut)
    r = rng()
    vectors = list(random_operands(r, BULK_VECTORS))
    previous = None
    for dividend, divisor in vectors:
        if previous is not None:
            assert int(dut.done.value) == 1, f"divu {previous}: done low in cycle s+{RESULT_CYCLE}"
            check_result(dut, *previous, f"in cycle s+{RESULT_CYCLE}, back to back")
        dut.dividend.value = dividend
        dut.divisor.value = divisor
        dut.start.value = 1
        await cycles.next()
        dut.start.value = 0
        await cycles.next(RESULT_CYCLE - 1)
        previous = (dividend, divisor)
    check_result(dut, *previous, "last")
    dut._log.info("divu: %d back-to-back divisions", len(vectors))
