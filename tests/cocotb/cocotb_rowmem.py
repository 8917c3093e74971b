"""rowmem (NB byte buffers, one word write per cycle in two shapes) against a Python dict model.

scatter = 0: the word's four lanes go to buffer `sel`, elements 4*idx .. 4*idx+3 (a packed row);
scatter = 1: lane l goes to buffer l, element idx (a column of a transpose). Every buffer has an
asynchronous read port; a read sees the value before this cycle's write.
"""

from __future__ import annotations

import cocotb
from cocotb_util import LANES, rng, start_clock

CYCLES = 3000


def params(dut) -> tuple[int, int, int]:
    """NB, DEPTH and the index width, from the port widths (DEPTH = 2^IW)."""
    nb = len(dut.rd_data) // 8
    iw = len(dut.idx)
    return nb, 1 << iw, iw


@cocotb.test()
async def test_rowmem_random_writes_both_shapes(dut):
    nb, depth, iw = params(dut)
    assert nb == LANES, f"the test models NB = {LANES} buffers (one per lane), the build has {nb}"
    dut.we.value = 0
    dut.scatter.value = 0
    dut.sel.value = 0
    dut.idx.value = 0
    dut.wdata.value = 0
    dut.rd_idx.value = 0
    cycles = await start_clock(dut)
    r = rng()
    model: dict[tuple[int, int], int] = {}  # (buffer, element) -> byte
    # Concentrate on a few hot rows so writes overwrite each other and reads hit written bytes,
    # and sweep the ends of the buffers too.
    hot = sorted({0, depth - 1, depth - LANES} | {r.randrange(depth) for _ in range(24)})
    reads_checked = writes = 0
    for _ in range(CYCLES):
        # reads first: they see the state before this cycle's write
        ports = []
        for q in range(nb):
            written = [e for (b, e) in model if b == q]
            ports.append(r.choice(written) if written and r.random() < 0.9 else r.randrange(depth))
        dut.rd_idx.value = sum(e << (q * iw) for q, e in enumerate(ports))
        write = r.random() < 0.8
        scatter = r.random() < 0.5
        sel = r.randrange(nb)
        element = r.choice(hot) if r.random() < 0.7 else r.randrange(depth)
        idx = element if scatter else element // LANES
        word = r.getrandbits(32)
        dut.we.value = int(write)
        dut.scatter.value = int(scatter)
        dut.sel.value = sel
        dut.idx.value = idx
        dut.wdata.value = word
        await cycles.settle()
        data = dut.rd_data.value  # bytes never written read as X in Icarus: only known ones are checked
        for q, e in enumerate(ports):
            if (q, e) in model:
                got = int(data[q * 8 + 7 : q * 8])
                assert got == model[(q, e)], (
                    f"rowmem read port {q} element {e}: got {got:#04x}, model {model[(q, e)]:#04x}")
                reads_checked += 1
        await cycles.next()
        if write:
            writes += 1
            for lane in range(LANES):
                byte = (word >> (8 * lane)) & 0xFF
                if scatter:
                    model[(lane, idx)] = byte
                else:
                    model[(sel, LANES * idx + lane)] = byte
    dut.we.value = 0
    dut._log.info("rowmem: %d cycles, %d random writes, %d byte reads checked", CYCLES, writes, reads_checked)
