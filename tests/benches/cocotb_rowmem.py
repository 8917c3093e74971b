"""rowmem (NB banks of DEPTH 32-bit words, a ram_1r1w each) against a Python dict model.

Contract (rtl/rowmem.v header): we in cycle t puts wdata in bank wbank, word waddr, readable from
cycle t + 1; re in cycle t gives word raddr of every bank in cycle t + 1 (bank b in bits 32b+31:32b).
Every cycle the test writes and reads at random (most addresses from a small hot set, so reads find
written words and writes overwrite them) and checks, one cycle after each read, every bank whose word
was written before the read; unwritten RAM reads X in Icarus. A read never targets the word written in
the same cycle: GA2 never does that, and block RAMs disagree on what it returns.
"""

from __future__ import annotations

import cocotb

from benches.cocotb_util import rng, show, start_clock, words32

CYCLES = 8000


@cocotb.test()
async def test_rowmem_random_writes_and_reads(dut):
    nb = len(dut.rdata) // 32
    depth = 1 << len(dut.raddr)
    for name in ("we", "wbank", "waddr", "wdata", "re", "raddr"):
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    r = rng()
    model: dict[tuple[int, int], int] = {}  # (bank, word) -> data
    hot = sorted({0, depth - 1} | {r.randrange(depth) for _ in range(20)})
    pending_read = None  # (word, {bank: expected data}) of the read issued last cycle
    reads_checked = writes = 0
    for c in range(CYCLES):
        if pending_read is not None:  # the answer to last cycle's read
            word, want = pending_read
            data = words32(dut.rdata.value)
            for bank, value in want.items():
                assert data[bank] == value, (f"rowmem read of word {word} in cycle {c - 1}: bank {bank} = "
                                             f"{show(data[bank])} in cycle {c}, model {value:#010x}")
                reads_checked += 1
        write = r.random() < 0.7
        bank = r.randrange(nb)
        waddr = r.choice(hot) if r.random() < 0.8 else r.randrange(depth)
        wdata = r.getrandbits(32)
        read = r.random() < 0.7
        raddr = r.choice(hot) if r.random() < 0.9 else r.randrange(depth)
        if read and write and raddr == waddr:
            read = False  # not the word being written in this cycle
        dut.we.value = int(write)
        dut.wbank.value = bank
        dut.waddr.value = waddr
        dut.wdata.value = wdata
        dut.re.value = int(read)
        dut.raddr.value = raddr
        pending_read = (raddr, {b: model[(b, raddr)] for b in range(nb) if (b, raddr) in model}) if read else None
        if write:
            model[(bank, waddr)] = wdata
            writes += 1
        await cycles.next()
    dut._log.info("rowmem NB=%d DEPTH=%d: %d cycles, %d writes, %d bank reads checked", nb, depth, CYCLES, writes,
                  reads_checked)
