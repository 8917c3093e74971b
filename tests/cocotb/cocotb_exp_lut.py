"""exp_lut (combinational) holds exactly model/capra/machine.py:exp_table(), all 256 entries."""

from __future__ import annotations

import cocotb
from capra.machine import exp_table
from cocotb.triggers import Timer


@cocotb.test()
async def test_exp_lut_every_entry_matches_exp_table(dut):
    table = exp_table()
    assert len(table) == 256
    settle = Timer(1, unit="ns")
    mismatches = []
    for d in range(256):
        dut.d.value = d
        await settle
        got = int(dut.e.value)
        if got != table[d]:
            mismatches.append(f"d={d}: got {got}, exp_table says {table[d]}")
    assert not mismatches, "; ".join(mismatches)
