"""dma: random strided transfers between a Python-modelled external memory and the scratchpad.

Contract (rtl/dma.v header, model/capra/isa.py:dma_cycles): started in cycle t, busy is high in cycles
t+1 .. t+D, D = DMA_SETUP + rows*cols; word j (row-major) moves in cycle t+1+DMA_SETUP+j; row r uses
ext[ext_base + r*ext_stride + c] and sram[sram_base + r*sram_stride + c]. The test is the external
memory: every cycle it answers ext_addr from a dict and records ext_we / ext_wdata.
"""

from __future__ import annotations

import cocotb
from bench import Scratchpad, reset, rng, start_clock
from capra import isa

TRANSFERS = 150
EXT_WORDS = 1 << 16
SRAM_WORDS = isa.SRAM_WORDS


def random_transfer(r, load: bool) -> dict[str, int]:
    rows = r.choice((1, 1, 2, 3, 4, 6))
    cols = r.choice((1, 2, 3, 4, 5, 8, 11))
    # the side being written gets stride >= cols (no word written twice); the other any stride, even 0
    dst_stride = cols + r.choice((0, 0, 1, 3, 17))
    src_stride = r.choice((0, 1, cols, cols + 2, r.randint(0, 40)))
    ext_stride, sram_stride = (src_stride, dst_stride) if load else (dst_stride, src_stride)
    ext_span = (rows - 1) * ext_stride + cols
    sram_span = (rows - 1) * sram_stride + cols
    ext_base = r.choice((0, EXT_WORDS - ext_span, r.randrange(EXT_WORDS - ext_span + 1)))
    sram_base = r.choice((0, SRAM_WORDS - sram_span, r.randrange(SRAM_WORDS - sram_span + 1)))
    return dict(rows=rows, cols=cols, ext_base=ext_base, ext_stride=ext_stride, sram_base=sram_base,
                sram_stride=sram_stride)


def word_addresses(t: dict[str, int]) -> list[tuple[int, int]]:
    """(ext address, sram address) of every word, in the order the transfer moves them."""
    return [(t["ext_base"] + row * t["ext_stride"] + c, t["sram_base"] + row * t["sram_stride"] + c)
            for row in range(t["rows"]) for c in range(t["cols"])]


@cocotb.test()
async def test_dma_random_strided_transfers(dut):
    dut.start.value = 0
    dut.is_store.value = 0
    for name in ("rows", "cols", "sram_base", "ext_base", "ext_stride", "sram_stride", "ext_rdata"):
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    sram = Scratchpad(dut, cycles)
    await reset(dut, cycles)
    r = rng()
    ext: dict[int, int] = {}

    def ext_word(addr: int) -> int:
        return ext.setdefault(addr, r.getrandbits(32))

    words_moved = 0
    for n in range(TRANSFERS):
        load = r.random() < 0.5
        t = random_transfer(r, load)
        moves = word_addresses(t)
        if not load:  # give the words a STORE reads known values
            for _, s in moves:
                if s not in sram.mirror:
                    await sram.write(s, [r.getrandbits(32)])
        busy_cycles = isa.dma_cycles(t["rows"], t["cols"])
        what = f"transfer {n} ({'LOAD' if load else 'STORE'} {t})"
        assert int(dut.busy.value) == 0, f"{what}: busy before start"
        for name, value in t.items():
            getattr(dut, name).value = value
        dut.is_store.value = int(not load)
        dut.start.value = 1
        start = cycles.now
        dut.ext_rdata.value = ext_word(int(dut.ext_addr.value))
        await cycles.next()
        dut.start.value = 0
        for name in t:  # the engine must have latched its operands
            getattr(dut, name).value = r.getrandbits(12)
        stores: dict[int, int] = {}
        while cycles.now <= start + busy_cycles + 1:
            rel = cycles.now - start
            busy = int(dut.busy.value)
            assert busy == int(1 <= rel <= busy_cycles), (
                f"{what}: busy={busy} in cycle t+{rel}, expected high in t+1 .. t+{busy_cycles}")
            j = rel - 1 - isa.DMA_SETUP
            ext_addr = int(dut.ext_addr.value)
            ext_we, sram_we = int(dut.ext_we.value), int(dut.sram_we.value)
            moving = 0 <= j < len(moves)
            if moving:
                want_ext, want_sram = moves[j]
                assert ext_addr == want_ext, f"{what}: word {j} at ext {ext_addr}, expected {want_ext}"
            if load:
                assert ext_we == 0, f"{what}: external write during a LOAD (cycle t+{rel})"
                assert sram_we == int(moving), f"{what}: sram_we={sram_we} in cycle t+{rel}"
                if moving:
                    waddr = int(dut.sram_waddr.value)
                    assert waddr == want_sram, f"{what}: word {j} written to sram {waddr}, expected {want_sram}"
                    sram.mirror[want_sram] = ext_word(want_ext)
            else:
                assert sram_we == 0, f"{what}: scratchpad write during a STORE (cycle t+{rel})"
                assert ext_we == int(moving), f"{what}: ext_we={ext_we} in cycle t+{rel}"
                if moving:
                    data = int(dut.ext_wdata.value)
                    assert data == sram.mirror[want_sram], (
                        f"{what}: word {j} stores {data:#010x}, sram[{want_sram}] holds "
                        f"{sram.mirror[want_sram]:#010x}")
                    stores[ext_addr] = data
            dut.ext_rdata.value = ext_word(ext_addr)
            await cycles.next()
        ext.update(stores)
        words_moved += len(moves)
        if load:
            for _, s in moves:
                await sram.check(s, 1, what)
            for guard in (moves[0][1] - 1, moves[-1][1] + 1):
                if guard in sram.mirror:
                    await sram.check(guard, 1, f"{what}: word beside the transfer")
        else:
            assert stores == {e: sram.mirror[s] for e, s in moves}, f"{what}: external words written differ"
        if r.random() < 0.5:  # otherwise the next transfer starts in the first idle cycle
            await cycles.next(r.randint(1, 3))
    dut._log.info("dma: %d random transfers, %d words", TRANSFERS, words_moved)
