"""rowmem (NB banks of DEPTH 32-bit words, four ram_1r1w each) against a Python dict model.

Contract (rtl/rowmem.v header): we in cycle t puts word j of wdata in bank wbank, word 4*wline + j,
for each j with wmask[j], readable from cycle t + 1; re in cycle t gives word raddr of every bank in
cycle t + 1 (bank b in bits 32b+31:32b), held while re is low. Every cycle the test writes a line
under a random mask and reads at random (most addresses from a small hot set, so reads find written
words and writes overwrite them) and checks, one cycle after each read and in the cycles after it
while no other read comes, every bank whose word was written before the read; unwritten RAM reads X
in Icarus. A read never targets a word written in the same cycle: GA2 never does that, and block
RAMs disagree on what it returns.
"""

from __future__ import annotations

import cocotb

from benches.cocotb_util import rng, show, start_clock, words32

CYCLES = 8000


@cocotb.test()
async def test_rowmem_random_writes_and_reads(dut):
    nb = len(dut.rdata) // 32
    depth = 1 << len(dut.raddr)
    for name in ("we", "wbank", "wline", "wmask", "wdata", "re", "raddr"):
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    r = rng()
    model: dict[tuple[int, int], int] = {}  # (bank, word) -> data
    lines = 1 << len(dut.wline)
    hot = sorted({0, lines - 1} | {r.randrange(lines) for _ in range(6)})
    pending_read = None  # (word, {bank: expected data}) of the last read: rdata holds it until the next
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
        wline = r.choice(hot) if r.random() < 0.8 else r.randrange(lines)
        wmask = r.randrange(1, 16)
        wdata = r.getrandbits(128)
        read = r.random() < 0.7
        raddr = 4 * (r.choice(hot) if r.random() < 0.9 else r.randrange(lines)) + r.randrange(4)
        if read and write and raddr // 4 == wline and wmask >> (raddr % 4) & 1:
            read = False  # not a word being written in this cycle
        dut.we.value = int(write)
        dut.wbank.value = bank
        dut.wline.value = wline
        dut.wmask.value = wmask
        dut.wdata.value = wdata
        dut.re.value = int(read)
        dut.raddr.value = raddr
        if read:
            pending_read = (raddr, {b: model[(b, raddr)] for b in range(nb) if (b, raddr) in model})
        if write:
            for j in range(4):
                if wmask >> j & 1:
                    model[(bank, 4 * wline + j)] = (wdata >> (32 * j)) & 0xFFFFFFFF
                    writes += 1
        await cycles.next()
    dut._log.info("rowmem NB=%d DEPTH=%d: %d cycles, %d writes, %d bank reads checked", nb, depth, CYCLES, writes,
                  reads_checked)
