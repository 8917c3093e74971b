"""sram: three asynchronous read ports, two synchronous write ports, against a Python dict.

Reads see the value before this cycle's writes; the two write ports never target the same word
(programs guarantee it), so the test never makes them collide.
"""

from __future__ import annotations

import cocotb
from cocotb_util import rng, start_clock

CYCLES = 2000
READ_PORTS = ("ra", "rb", "rd")


@cocotb.test()
async def test_sram_random_reads_and_writes(dut):
    words = 1 << len(dut.ra_addr)
    for port in READ_PORTS:
        getattr(dut, f"{port}_addr").value = 0
    for port in ("wc", "wd"):
        getattr(dut, f"{port}_en").value = 0
        getattr(dut, f"{port}_addr").value = 0
        getattr(dut, f"{port}_data").value = 0
    cycles = await start_clock(dut)
    r = rng()
    model: dict[int, int] = {}
    hot = [0, words - 1] + [r.randrange(words) for _ in range(30)]
    reads = 0
    for _ in range(CYCLES):
        targets = r.sample(hot, 2) if r.random() < 0.8 else [r.randrange(words), r.randrange(words)]
        writes = {}
        for port, addr in zip(("wc", "wd"), targets, strict=True):
            enable = r.random() < 0.6 and addr not in writes
            value = r.getrandbits(32)
            getattr(dut, f"{port}_en").value = int(enable)
            getattr(dut, f"{port}_addr").value = addr
            getattr(dut, f"{port}_data").value = value
            if enable:
                writes[addr] = value
        known = list(model) or [0]
        for port in READ_PORTS:
            getattr(dut, f"{port}_addr").value = r.choice(known + targets)
        await cycles.settle()
        for port in READ_PORTS:
            addr = int(getattr(dut, f"{port}_addr").value)
            if addr in model:
                got = int(getattr(dut, f"{port}_data").value)
                assert got == model[addr], (
                    f"sram port {port} word {addr}: got {got:#010x}, model {model[addr]:#010x}")
                reads += 1
        await cycles.next()
        model.update(writes)
    dut._log.info("sram: %d random cycles, %d reads checked", CYCLES, reads)
