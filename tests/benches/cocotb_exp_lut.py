"""exp_lut (a synchronous 256 x 16 ROM) holds exactly model/capra/machine.py:exp_table(), all 256 entries.

Contract (rtl/exp_lut.v header): d in cycle t gives e = table[d] in cycle t + 1. The tests read back
to back, a new index every cycle, and check e in every cycle against the index of the cycle before.
"""

from __future__ import annotations

import cocotb
from capra.machine import exp_table

from benches.cocotb_util import rng, start_clock

LATENCY = 1  # e in cycle t + 1
RANDOM_READS = 1000


async def read_back_to_back(dut, indexes: list[int], table: list[int]) -> list[str]:
    """One index per cycle; the mismatches of every cycle's e against the index one cycle before."""
    cycles = await start_clock(dut)
    mismatches = []
    for c in range(len(indexes) + LATENCY):
        if c < len(indexes):
            dut.d.value = indexes[c]
        if c >= LATENCY:
            d = indexes[c - LATENCY]
            got = int(dut.e.value)
            if got != table[d]:
                mismatches.append(f"d={d} in cycle {c - LATENCY}: e = {got} in cycle {c}, exp_table says {table[d]}")
        await cycles.next()
    return mismatches


@cocotb.test()
async def test_exp_lut_every_entry_matches_exp_table(dut):
    """All 256 entries in order, then in reverse (the first 150 entries all differ from their neighbours,
    so an e one cycle late or early is caught)."""
    table = exp_table()
    assert len(table) == 256
    mismatches = await read_back_to_back(dut, list(range(256)) + list(range(255, -1, -1)), table)
    assert not mismatches, "; ".join(mismatches[:8])


@cocotb.test()
async def test_exp_lut_random_indexes_back_to_back(dut):
    """Random indexes, repeats included, one per cycle."""
    table = exp_table()
    r = rng()
    indexes = [r.choice((0, 1, 255, r.randrange(256))) for _ in range(RANDOM_READS)]
    mismatches = await read_back_to_back(dut, indexes, table)
    assert not mismatches, "; ".join(mismatches[:8])
    dut._log.info("exp_lut: %d random reads", RANDOM_READS)
