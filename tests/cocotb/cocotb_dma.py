"""dma: random strided transfers between a Python-modelled external memory and the scratchpad.

Contract (rtl/dma.v header, model/capra/isa.py:dma_cycles): started in cycle t, busy is high in cycles
t+1 .. t+D, D = DMA_SETUP + rows*cols; word j (row-major) moves in cycle t+1+DMA_SETUP+j; row r uses
ext[ext_base + r*ext_stride + c] and sram[sram_base + r*sram_stride + c]. The test is the external
memory: every cycle it answers ext_addr from a dict and records ext_we / ext_wdata.
"""

from __future__ import annotations

import cocotb
from capra import isa
from cocotb_util import Scratchpad, reset, rng, start_clock

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
            assert int(dut.full.value) == 0, f"{what}: full high in cycle t+{rel} with nothing waiting"
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


# --- the descriptor queue -----------------------------------------------------------------------
# Contract (rtl/dma.v header, model/capra/machine.py:_dma_transfer, isa.DMA_SETUP / DMA_QUEUE): a
# transfer started in cycle t begins in cycle b = max(t+1, e) where e is the end of the transfer ahead
# of it (0 when none), and ends in e' = b + D (exclusive). busy is high in b .. e'-1, its word j moves
# in cycle b + DMA_SETUP + j, and `full` is high in t+1 .. b-1 (while the descriptor waits). The test
# starts a transfer only in a cycle where `full` is low, as the sequencer does.

QUEUE_TRANSFERS = 400


class QueueModel:
    """The contract above, cycle by cycle, plus the memories as the transfers leave them (in order)."""

    def __init__(self) -> None:
        self.queue: list[dict] = []  # started transfers that have not ended, oldest first

    def retire(self, cycle: int) -> None:
        self.queue = [q for q in self.queue if q["end"] > cycle]

    def busy(self, cycle: int) -> bool:
        return any(q["begin"] <= cycle < q["end"] for q in self.queue)

    def full(self, cycle: int) -> bool:
        return any(q["start"] < cycle < q["begin"] for q in self.queue)

    def word(self, cycle: int):
        """The (transfer, word index) that moves in this cycle, or None."""
        for q in self.queue:
            j = cycle - q["begin"] - isa.DMA_SETUP
            if 0 <= j < len(q["moves"]):
                return q, j
        return None

    def last_end(self) -> int:
        return self.queue[-1]["end"] if self.queue else 0

    def start(self, cycle: int, q: dict) -> None:
        assert len(self.queue) < isa.DMA_QUEUE, "model: start while the queue is full"
        q["start"] = cycle
        q["begin"] = max(cycle + 1, self.last_end())
        q["end"] = q["begin"] + isa.dma_cycles(q["t"]["rows"], q["t"]["cols"])
        self.queue.append(q)


def derived_transfer(r, load: bool, src: dict[str, int]) -> dict[str, int]:
    """A transfer whose source is a sub-block of what an earlier transfer `src` wrote (the sram side of a
    LOAD for a STORE, the ext side of a STORE for a LOAD); the destination is fresh and random."""
    side = "sram" if not load else "ext"  # the side this transfer reads
    r0, c0 = r.randrange(src["rows"]), r.randrange(src["cols"])
    rows, cols = r.randint(1, src["rows"] - r0), r.randint(1, src["cols"] - c0)
    stride = src[f"{side}_stride"]
    base = src[f"{side}_base"] + r0 * stride + c0
    dst = "ext" if side == "sram" else "sram"
    dst_words = EXT_WORDS if dst == "ext" else SRAM_WORDS
    dst_stride = cols + r.choice((0, 0, 1, 5))
    span = (rows - 1) * dst_stride + cols
    dst_base = r.choice((0, dst_words - span, r.randrange(dst_words - span + 1)))
    return {"rows": rows, "cols": cols, f"{side}_base": base, f"{side}_stride": stride,
            f"{dst}_base": dst_base, f"{dst}_stride": dst_stride}


@cocotb.test()
async def test_dma_queue(dut):
    """Random episodes of strided LOADs and STOREs started while a transfer moves (only when `full` is low):
    back-to-back starts, starts in the last cycle of the moving transfer, in its setup cycles, after it; STOREs
    that read what an earlier queued LOAD wrote and LOADs that read what an earlier STORE wrote. Every cycle
    busy, full, the word that moves (addresses, write enables, stored data) are checked against QueueModel; after
    each episode the scratchpad words the LOADs wrote and the external words the STOREs wrote."""
    operands = ("rows", "cols", "sram_base", "ext_base", "ext_stride", "sram_stride")
    dut.start.value = 0
    dut.is_store.value = 0
    for name in operands + ("ext_rdata",):
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    sram = Scratchpad(dut, cycles)
    await reset(dut, cycles)
    r = rng()
    ext_init: dict[int, int] = {}  # external words before any store, made up on first use

    def initial(addr: int) -> int:
        return ext_init.setdefault(addr, r.getrandbits(32))

    ext_mem: dict[int, int] = {}  # the external memory the engine sees (its writes land here)
    model_ext: dict[int, int] = {}  # what the contract says the external memory holds
    model = QueueModel()
    stats = dict(transfers=0, words=0, episodes=0, in_flight=0, waited=0, at_finish=0, back_to_back=0,
                 setup=0, store_after_load=0, load_after_store=0)
    while stats["transfers"] < QUEUE_TRANSFERS:
        # --- an episode: the transfers, their operands fixed up front -----------------------------------
        plan = []
        for _ in range(r.randint(2, 8)):
            load = r.random() < 0.5
            earlier = [p for p in plan if p["load"] != load]
            if earlier and r.random() < 0.5:
                t = derived_transfer(r, load, r.choice(earlier)["t"])
                stats["store_after_load" if not load else "load_after_store"] += 1
            else:
                t = random_transfer(r, load)
            plan.append(dict(t=t, load=load, moves=word_addresses(t), when=r.choice(
                ("b2b", "b2b", "finish", "finish", "setup", "idle", "any", "any"))))
        # scratchpad words a STORE reads that neither the mirror nor an earlier LOAD of the episode defines
        known = set(sram.mirror)
        for p in plan:
            for _, s in p["moves"]:
                if p["load"]:
                    known.add(s)
                elif s not in known:
                    await sram.write(s, [r.getrandbits(32)])
                    known.add(s)
        loaded: set[int] = set()
        stored: set[int] = set()
        assert int(dut.busy.value) == 0 and int(dut.full.value) == 0, "engine not idle before an episode"
        k = 0
        want_at = cycles.now  # the first transfer starts in the first cycle, the engine idle
        while k < len(plan) or model.queue:
            now = cycles.now
            model.retire(now)
            where = f"episode {stats['episodes']}, cycle {now}"
            busy, full = int(dut.busy.value), int(dut.full.value)
            assert busy == model.busy(now), f"{where}: busy={busy}, model {int(model.busy(now))}"
            assert full == model.full(now), f"{where}: full={full}, model {int(model.full(now))}"
            # --- the word that moves in this cycle --------------------------------------------------
            ext_addr = int(dut.ext_addr.value)
            ext_we, sram_we = int(dut.ext_we.value), int(dut.sram_we.value)
            moving = model.word(now)
            if moving is None:
                assert ext_we == 0 and sram_we == 0, (
                    f"{where}: ext_we={ext_we} sram_we={sram_we} with no word due to move")
            else:
                q, j = moving
                what = (f"{where}: word {j} of transfer {q['n']} ({'LOAD' if q['load'] else 'STORE'} {q['t']}, "
                        f"started {q['start']}, begins {q['begin']})")
                want_ext, want_sram = q["moves"][j]
                assert ext_addr == want_ext, f"{what}: ext_addr={ext_addr}, expected {want_ext}"
                if q["load"]:
                    assert (ext_we, sram_we) == (0, 1), f"{what}: ext_we={ext_we} sram_we={sram_we}, expected 0 1"
                    waddr = int(dut.sram_waddr.value)
                    assert waddr == want_sram, f"{what}: sram_waddr={waddr}, expected {want_sram}"
                else:
                    assert (ext_we, sram_we) == (1, 0), f"{what}: ext_we={ext_we} sram_we={sram_we}, expected 1 0"
                    data, want = int(dut.ext_wdata.value), q["data"][j]
                    assert data == want, f"{what}: stores {data:#010x}, model says sram[{want_sram}] = {want:#010x}"
                stats["words"] += 1
            # the external memory answers this cycle's address; a write lands at the edge ending the cycle
            dut.ext_rdata.value = ext_mem.get(ext_addr, initial(ext_addr))
            if ext_we:
                ext_mem[ext_addr] = int(dut.ext_wdata.value)
            # --- start the next transfer, as the sequencer would: only while full is low -------------
            start = k < len(plan) and now >= want_at and not model.full(now)
            if start:
                p = plan[k]
                p["n"] = stats["transfers"]
                in_flight = model.busy(now)
                ending = [q for q in model.queue if q["end"] == now + 1]
                if in_flight:
                    stats["in_flight"] += 1
                    if ending:
                        stats["at_finish"] += 1
                    elif any(q["begin"] <= now < q["begin"] + isa.DMA_SETUP for q in model.queue):
                        stats["setup"] += 1
                if k and plan[k - 1]["start"] == now - 1:
                    stats["back_to_back"] += 1
                model.start(now, p)
                if p["begin"] > now + 1:
                    stats["waited"] += 1
                # the memories as the contract leaves them, word by word in order
                p["data"] = []
                for e, s in p["moves"]:
                    if p["load"]:
                        sram.mirror[s] = model_ext.get(e, initial(e))
                        loaded.add(s)
                    else:
                        p["data"].append(sram.mirror[s])
                        model_ext[e] = sram.mirror[s]
                        stored.add(e)
                for name, value in p["t"].items():
                    getattr(dut, name).value = value
                dut.is_store.value = int(not p["load"])
                dut.start.value = 1
                stats["transfers"] += 1
                k += 1
                if k < len(plan):  # when the next one asks to start (it may then have to wait for full)
                    nxt = plan[k]["when"]
                    if nxt == "b2b":
                        want_at = now + 1
                    elif nxt == "finish":  # the last cycle of the transfer just started (then moving)
                        want_at = p["end"] - 1
                    elif nxt == "setup":
                        want_at = p["begin"] + r.randrange(isa.DMA_SETUP)
                    elif nxt == "idle":
                        want_at = p["end"] + r.randint(0, 2)
                    else:
                        want_at = r.randint(now + 1, p["end"] + 1)
            else:
                dut.start.value = 0
                dut.is_store.value = r.getrandbits(1)
                for name in operands:  # the engine must have latched its operands
                    getattr(dut, name).value = r.getrandbits(12)
            await cycles.next()
        dut.start.value = 0
        # one more idle cycle: nothing moves after the last transfer ends
        assert int(dut.busy.value) == 0 and int(dut.full.value) == 0, f"episode {stats['episodes']}: not idle"
        assert int(dut.ext_we.value) == 0 and int(dut.sram_we.value) == 0
        what = f"episode {stats['episodes']} ({len(plan)} transfers)"
        for s in sorted(loaded):
            await sram.check(s, 1, what)
        for e in sorted(stored):
            assert ext_mem.get(e) == model_ext[e], (
                f"{what}: ext[{e}] = {ext_mem.get(e)}, model says {model_ext[e]:#010x}")
        stats["episodes"] += 1
        await cycles.next(r.randint(1, 3))
    dut._log.info("dma queue: %s", ", ".join(f"{key} {value}" for key, value in stats.items()))
    for key in ("in_flight", "waited", "at_finish", "back_to_back", "setup", "store_after_load", "load_after_store"):
        assert stats[key] > 0, f"no transfer of kind {key} was exercised: {stats}"
