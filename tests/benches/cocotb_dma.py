"""dma with the scratchpad (tb/cocotb/dma_wrap.v): random strided LOADs and STOREs against a Python external
memory, a dict model of both memories, and (with an always-ready memory) the header's timeline, cycle by cycle.

Contract (rtl/dma.v header), for a memory that is always ready and answers a read L cycles after taking
it. A transfer issued in cycle t takes its descriptor ("setup") in
    s = max(t + 1, the engine is free, STORE: one cycle after every earlier LOAD has ended)
and with n = rows * cols words (row r, column c: ext[ext_base + r*ext_stride + c], sram[sram_base +
r*sram_stride + c], row-major):
    LOAD   word i requested in s+1+i, written to the scratchpad in s+2+L+i; ends at s+n+L+2;
           the engine is free for the next setup at s+n+1
    STORE  word i read from the scratchpad in s+1+i, sent in s+3+i; ends at s+n+3; free at s+n+2
`inflight` counts transfers issued and not ended (issued in t: counted from t+1, not in the end
cycle); `busy` is high from a setup cycle until its transfer's end. The test is the sequencer: it issues
a transfer only in a cycle where inflight < QUEUE.

Timeline (written here from the header, independent of capra.dma) drives every cycle's expectation:
inflight, busy, the external request (valid, we, addr, wdata), the scratchpad read (re, addr) and write
(we, addr, data). Afterwards each transfer's setup and end are compared with capra.dma.DmaTimeline.
With a memory that drops ready at random and answers after random latencies, only what moves is
checked: the requests in order, the scratchpad writes in order, and the memories after each episode.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import cocotb
import numpy as np
from capra import isa
from capra.dma import DmaTimeline

from benches.cocotb_util import Cycles, Scratchpad, reset, rng, start_clock, value

QUEUE = isa.DMA_QUEUE
EXT_WORDS = 1 << 32  # the whole 32-bit address space (the bench's memory keeps only what is written)
SRAM_WORDS = isa.SRAM_WORDS
TIMED_TRANSFERS = 200  # per latency
BACKPRESSURE_TRANSFERS = 300
WATCHDOG = 5000  # cycles per episode
OPERANDS = ("rows", "cols", "ext_base", "ext_stride", "sram_base", "sram_stride")


@dataclass
class Transfer:
    load: bool
    rows: int
    cols: int
    ext_base: int
    ext_stride: int
    sram_base: int
    sram_stride: int
    when: str = "b2b"  # when the sequencer wants to issue it, relative to the transfer before
    number: int = -1
    issue: int = -1
    setup: int = -1
    end: int = -1
    data: list[int] = field(default_factory=list)  # word i's value, from the dict model

    @property
    def kind(self) -> str:
        return "LOAD" if self.load else "STORE"

    def words(self) -> list[tuple[int, int]]:
        """(ext address, sram address) of every word, in the order the transfer moves them."""
        return [(self.ext_base + r * self.ext_stride + c, self.sram_base + r * self.sram_stride + c)
                for r in range(self.rows) for c in range(self.cols)]

    def operands(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in OPERANDS}

    def __str__(self) -> str:
        return (f"transfer {self.number} ({self.kind} {self.rows}x{self.cols} ext {self.ext_base}+{self.ext_stride}r "
                f"sram {self.sram_base}+{self.sram_stride}r, issued {self.issue}, setup {self.setup})")


# --- random transfers ------------------------------------------------------------------------------------

def random_transfer(r, load: bool, big: float) -> Transfer:
    """Mostly small transfers; with probability `big` one of more than DMA_PENDING words."""
    rows = r.choice((1, 1, 2, 3, 4, 6))
    cols = r.choice((1, 2, 3, 4, 5, 8, 11, 16))
    if r.random() < big:
        rows, cols = r.choice(((1, 40), (2, 30), (3, 17), (1, 64)))
    dst_stride = cols + r.choice((0, 0, 1, 3, 17))
    src_stride = r.choice((0, 1, cols, cols + 2, r.randint(0, 40)))
    ext_stride, sram_stride = (src_stride, dst_stride) if load else (dst_stride, src_stride)
    if not load and r.random() < 0.05:
        ext_stride = 0  # every row stored over the same words: the last row stays
    return place(r, Transfer(load, rows, cols, 0, ext_stride, 0, sram_stride))


def place(r, t: Transfer) -> Transfer:
    """Random bases (the ends of both memories included) that keep the transfer inside them."""
    ext_span = (t.rows - 1) * t.ext_stride + t.cols
    sram_span = (t.rows - 1) * t.sram_stride + t.cols
    if t.ext_base == 0:
        t.ext_base = r.choice((0, EXT_WORDS - ext_span, r.randrange(EXT_WORDS - ext_span + 1)))
    if t.sram_base == 0:
        t.sram_base = r.choice((0, SRAM_WORDS - sram_span, r.randrange(SRAM_WORDS - sram_span + 1)))
    return t


def derived_transfer(r, load: bool, src: Transfer) -> Transfer:
    """A transfer that reads a sub-block of what an earlier transfer `src` wrote (its sram side for a STORE,
    its ext side for a LOAD); the destination is fresh and random."""
    r0, c0 = r.randrange(src.rows), r.randrange(src.cols)
    rows, cols = r.randint(1, src.rows - r0), r.randint(1, src.cols - c0)
    dst_stride = cols + r.choice((0, 0, 1, 5))
    if load:
        base = src.ext_base + r0 * src.ext_stride + c0
        t = Transfer(True, rows, cols, base, src.ext_stride, 0, dst_stride)
    else:
        base = src.sram_base + r0 * src.sram_stride + c0
        t = Transfer(False, rows, cols, 0, dst_stride, base, src.sram_stride)
    return place(r, t)


def random_episode(r, stats: dict[str, int], big: float = 0.05) -> list[Transfer]:
    """Two to nine transfers; half of them read what an earlier one of the other kind wrote."""
    plan: list[Transfer] = []
    for _ in range(r.randint(2, 9)):
        load = r.random() < 0.5
        earlier = [p for p in plan if p.load != load]
        if earlier and r.random() < 0.5:
            t = derived_transfer(r, load, r.choice(earlier))
            stats["load_after_store" if load else "store_after_load"] += 1
        else:
            t = random_transfer(r, load, big)
        t.when = r.choice(("b2b", "b2b", "b2b", "gap", "late", "idle"))
        plan.append(t)
    return plan


class Models:
    """The dict models of both memories. Transfers take effect in issue order: the engine keeps that order
    (a STORE waits for the LOADs before it; a LOAD's requests follow the words of a STORE before it)."""

    def __init__(self, r, sram: Scratchpad) -> None:
        self.r = r
        self.sram = sram.mirror
        self.ext: dict[int, int] = {}  # external words the model's STOREs wrote
        self.initial: dict[int, int] = {}  # external words before any store, made up on first use

    def initial_word(self, addr: int) -> int:
        return self.initial.setdefault(addr, self.r.getrandbits(32))

    def apply(self, t: Transfer) -> None:
        """Fill t.data with the words t moves and update the models."""
        t.data = []
        for e, s in t.words():
            if t.load:
                t.data.append(self.ext[e] if e in self.ext else self.initial_word(e))
                self.sram[s] = t.data[-1]
            else:
                t.data.append(self.sram[s])
                self.ext[e] = t.data[-1]

    async def fill_store_sources(self, sram: Scratchpad, plan: list[Transfer]) -> None:
        """Scratchpad words a STORE of the plan reads that neither the mirror nor an earlier LOAD of the plan
        defines get random data through the host port (unwritten RAM reads X)."""
        known = set(self.sram)
        for t in plan:
            for _, s in t.words():
                if t.load:
                    known.add(s)
                elif s not in known:
                    await sram.write(s, [self.r.getrandbits(32)])
                    known.add(s)


class ExtMemory:
    """The external memory, in Python. A request is taken in a cycle where valid and ready are both high: a
    write lands at that cycle's edge; a read is answered `latency` cycles later (0: in the same cycle) with
    the word as it was when taken, in order, at most one answer per cycle."""

    def __init__(self, dut, models: Models, r) -> None:
        self.dut = dut
        self.models = models
        self.r = r
        self.words: dict[int, int] = {}  # what the engine wrote
        self.answers: deque[tuple[int, int]] = deque()  # (cycle, word)
        self.last_answer = -1
        dut.ext_req_ready.value = 0
        dut.ext_rsp_valid.value = 0
        dut.ext_rsp_rdata.value = 0

    def word(self, addr: int) -> int:
        return self.words[addr] if addr in self.words else self.models.initial_word(addr)

    def request(self) -> tuple[int, int, int | None] | None:
        """This cycle's request (we, addr, wdata or None for a read), read just after the edge: the port's
        outputs follow the engine's registers only."""
        dut = self.dut
        if not int(dut.ext_req_valid.value):
            return None
        we = value(dut.ext_req_we)
        return we, value(dut.ext_req_addr), value(dut.ext_req_wdata) if we else None

    def cycle(self, c: int, request, ready: bool, latency: int) -> bool:
        """Drive cycle c's ready and answer; returns whether `request` was taken."""
        dut = self.dut
        dut.ext_req_ready.value = int(ready)
        taken = request is not None and ready
        if taken:
            we, addr, wdata = request
            if we:
                self.words[addr] = wdata
            else:
                self.last_answer = max(c + latency, self.last_answer + 1)
                self.answers.append((self.last_answer, self.word(addr)))
        if self.answers and self.answers[0][0] == c:
            dut.ext_rsp_valid.value = 1
            dut.ext_rsp_rdata.value = self.answers.popleft()[1]
        else:
            dut.ext_rsp_valid.value = 0
            dut.ext_rsp_rdata.value = self.r.getrandbits(32)  # must be ignored without rsp_valid
        return taken


# --- the header's timeline -------------------------------------------------------------------------------

class Timeline:
    """rtl/dma.v's timing for an always-ready memory with read latency L, and every cycle's expected events
    (each with a label naming the transfer and word, for failure messages)."""

    def __init__(self, latency: int) -> None:
        self.latency = latency
        self.engine_free = 0  # the first cycle the engine can spend on a setup
        self.last_load_end = 0
        self.transfers: list[Transfer] = []
        self.ext_req: dict[int, tuple[int, int, int | None, str]] = {}  # cycle -> (we, addr, wdata, label)
        self.sram_rd: dict[int, tuple[int, str]] = {}  # cycle -> (addr, label)
        self.sram_wr: dict[int, tuple[int, int, str]] = {}  # cycle -> (addr, data, label)

    def setup_cycle(self, t: int, load: bool) -> int:
        s = max(t + 1, self.engine_free)
        return s if load else max(s, self.last_load_end + 1)

    def issue(self, t: int, x: Transfer) -> None:
        n = x.rows * x.cols
        s = self.setup_cycle(t, x.load)
        x.issue, x.setup = t, s
        for i, ((e, a), d) in enumerate(zip(x.words(), x.data, strict=True)):
            label = f"word {i} of {x}"
            if x.load:
                self._event(self.ext_req, s + 1 + i, (0, e, None, label))
                self._event(self.sram_wr, s + 2 + self.latency + i, (a, d, label))
            else:
                self._event(self.sram_rd, s + 1 + i, (a, label))
                self._event(self.ext_req, s + 3 + i, (1, e, d, label))
        if x.load:
            x.end = s + n + self.latency + 2
            self.engine_free = s + n + 1
            self.last_load_end = x.end
        else:
            x.end = s + n + 3
            self.engine_free = s + n + 2
        self.transfers.append(x)

    @staticmethod
    def _event(events: dict, cycle: int, what) -> None:
        assert cycle not in events, f"the bench's timeline puts two events in cycle {cycle}: {events[cycle]}, {what}"
        events[cycle] = what

    def inflight(self, c: int) -> int:
        return sum(1 for x in self.transfers if x.issue < c < x.end)

    def busy(self, c: int) -> bool:
        return any(x.setup <= c < x.end for x in self.transfers)

    def idle_from(self) -> int:
        return max((x.end for x in self.transfers), default=0)


def check_cycle(dut, timeline: Timeline, c: int, request) -> None:
    """inflight, busy, the external request and the scratchpad ports in cycle c against the timeline."""
    inflight, busy = value(dut.inflight), value(dut.busy)
    want_inflight = timeline.inflight(c)
    assert inflight == want_inflight, (
        f"cycle {c}: inflight = {inflight}, the timeline says {want_inflight} (transfers issued before and not ended: "
        f"{[str(x) for x in timeline.transfers if x.issue < c < x.end]})")
    assert busy == timeline.busy(c), f"cycle {c}: busy = {busy}, the timeline says {int(timeline.busy(c))}"
    want = timeline.ext_req.get(c)
    if want is None:
        assert request is None, f"cycle {c}: external request {request} (we, addr, wdata), the timeline expects none"
    else:
        we, addr, wdata, label = want
        assert request == (we, addr, wdata), (
            f"cycle {c}: external request {request} (we, addr, wdata), the timeline expects {(we, addr, wdata)} "
            f"for {label}")
    re, want = value(dut.sram_re), timeline.sram_rd.get(c)
    if want is None:
        assert re == 0, f"cycle {c}: scratchpad read of word {value(dut.sram_raddr)}, the timeline expects none"
    else:
        got = value(dut.sram_raddr) if re else None
        assert got == want[0], f"cycle {c}: scratchpad read of word {got}, the timeline expects {want[0]} for {want[1]}"
    we, want = value(dut.sram_we), timeline.sram_wr.get(c)
    if want is None:
        assert we == 0, f"cycle {c}: scratchpad write to word {value(dut.sram_waddr)}, the timeline expects none"
    else:
        got = (value(dut.sram_waddr), value(dut.sram_wdata)) if we else None
        assert got == want[:2], (f"cycle {c}: scratchpad write (word, data) {got}, the timeline expects {want[:2]} "
                                 f"for {want[2]}")


# --- the bench ---------------------------------------------------------------------------------------------

async def setup_bench(dut) -> tuple[Cycles, Scratchpad]:
    dut.start.value = 0
    dut.is_store.value = 0
    for name in OPERANDS:
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    sram = Scratchpad(dut, cycles)
    await reset(dut, cycles)
    return cycles, sram


def drive_start(dut, t: Transfer) -> None:
    for name, operand in t.operands().items():
        getattr(dut, name).value = operand
    dut.is_store.value = int(not t.load)
    dut.start.value = 1


def drive_no_start(dut, r) -> None:
    """No transfer this cycle; garbage operands (the engine must have latched its own)."""
    dut.start.value = 0
    dut.is_store.value = r.getrandbits(1)
    for name in OPERANDS:
        getattr(dut, name).value = r.getrandbits(12)


def next_wanted(r, t: Transfer, now: int) -> int:
    """The first cycle the sequencer asks to issue t, after a transfer issued in `now` (idle: see wants)."""
    if t.when == "b2b":
        return now + 1
    if t.when == "gap":
        return now + r.randint(2, 5)
    return now + r.randint(1, 40)  # late, idle


def wants(t: Transfer, c: int, wanted: int, inflight: int, busy: int) -> bool:
    """Whether the sequencer asks to issue t in cycle c ("idle": once nothing is in flight)."""
    if t.when == "idle":
        return inflight == 0 and not busy
    return c >= wanted


async def check_memories(sram: Scratchpad, memory: ExtMemory, models: Models, loaded: set[int], stored: set[int],
                         what: str) -> None:
    """The scratchpad words the LOADs wrote (through the host port) and the external words the STOREs wrote."""
    for e in sorted(stored):
        got = memory.words.get(e)
        assert got == models.ext[e], f"{what}: ext[{e}] = {got}, model says {models.ext[e]:#010x}"
    words = sorted(loaded)
    while words:
        n = 1
        while n < len(words) and words[n] == words[0] + n:
            n += 1
        await sram.check(words[0], n, what)
        words = words[n:]


def count_kinds(t: Transfer, stats: dict[str, int]) -> None:
    stats["transfers"] += 1
    stats["words"] += t.rows * t.cols
    stats["ext_stride_0"] += t.rows > 1 and t.ext_stride == 0
    stats["single_word"] += t.rows == 1 and t.cols == 1


@cocotb.test()
@cocotb.parametrize(latency=(0, 1, 4, 16))
async def test_dma_timeline_with_an_always_ready_memory(dut, latency: int):
    """Random episodes of LOADs and STOREs issued back to back, after gaps, late, or once the engine is idle;
    every cycle's inflight, busy, external request and scratchpad port use against Timeline; the memories
    after every episode; each transfer's setup and end against capra.dma.DmaTimeline at the end."""
    cycles, sram = await setup_bench(dut)
    r = rng()
    models = Models(r, sram)
    memory = ExtMemory(dut, models, r)
    timeline = Timeline(latency)
    stats = dict.fromkeys(("transfers", "words", "episodes", "queue_full_waits", "issued_while_busy",
                           "store_waited_for_load", "store_after_load", "load_after_store", "ext_stride_0",
                           "single_word"), 0)
    while stats["transfers"] < TIMED_TRANSFERS:
        plan = random_episode(r, stats)
        await models.fill_store_sources(sram, plan)
        first = cycles.now
        wanted, k = first, 0
        loaded: set[int] = set()
        stored: set[int] = set()
        while k < len(plan) or cycles.now <= timeline.idle_from():
            c = cycles.now
            assert c - first < WATCHDOG, f"episode {stats['episodes']}: still running after {WATCHDOG} cycles"
            request = memory.request()
            check_cycle(dut, timeline, c, request)
            memory.cycle(c, request, ready=True, latency=latency)
            inflight = timeline.inflight(c)
            if k < len(plan) and wants(plan[k], c, wanted, inflight, timeline.busy(c)):
                if inflight >= QUEUE:
                    stats["queue_full_waits"] += 1
                    drive_no_start(dut, r)
                else:  # the sequencer's rule: issue only while inflight < QUEUE
                    x = plan[k]
                    x.number = stats["transfers"]
                    models.apply(x)
                    stats["issued_while_busy"] += timeline.busy(c)
                    stats["store_waited_for_load"] += (not x.load and timeline.setup_cycle(c, x.load)
                                                       > max(c + 1, timeline.engine_free))
                    timeline.issue(c, x)
                    count_kinds(x, stats)
                    (loaded if x.load else stored).update(w[1] if x.load else w[0] for w in x.words())
                    drive_start(dut, x)
                    k += 1
                    if k < len(plan):
                        wanted = next_wanted(r, plan[k], c)
            else:
                drive_no_start(dut, r)
            await cycles.next()
        drive_no_start(dut, r)
        await check_memories(sram, memory, models, loaded, stored, f"L={latency} episode {stats['episodes']}")
        stats["episodes"] += 1
    reference = DmaTimeline(latency, 1)  # this bench drives the one-word interface
    for x in timeline.transfers:
        y = reference.issue(x.issue, x.load, np.array([s for _, s in x.words()], dtype=np.int64), x.cols)
        assert (x.setup, x.end) == (y.setup, y.end), (
            f"L={latency} {x}: this bench's timeline says setup {x.setup}, end {x.end}; capra.dma.DmaTimeline says "
            f"setup {y.setup}, end {y.end}")
    dut._log.info("dma L=%d: %s", latency, ", ".join(f"{key} {count}" for key, count in stats.items()))
    for key, count in stats.items():
        assert count > 0, f"L={latency}: nothing of kind {key} was exercised: {stats}"


@cocotb.test()
async def test_dma_moves_every_word_with_a_memory_that_stalls(dut):
    """Random episodes against a memory that holds ready low at random cycles (and in bursts) and answers after
    random latencies (0 to 64, also beyond DMA_PENDING): the requests in the model's order, a request refused
    by ready offered again unchanged, never more than DMA_PENDING reads waiting for their answers, the
    scratchpad writes in order, and the memories after every episode."""
    cycles, sram = await setup_bench(dut)
    r = rng()
    models = Models(r, sram)
    memory = ExtMemory(dut, models, r)
    stats = dict.fromkeys(("transfers", "words", "episodes", "refused", "store_after_load", "load_after_store",
                           "ext_stride_0", "single_word", "pending_limit"), 0)
    while stats["transfers"] < BACKPRESSURE_TRANSFERS:
        plan = random_episode(r, stats, big=0.2)
        latency = r.choice((0, 1, 2, 4, 16, 31, 40, 60))
        jitter = r.choice((0, 0, 3))
        not_ready = r.choice((0.0, 0.1, 0.3, 0.6))
        if stats["episodes"] == 0:  # surely more reads than DMA_PENDING unanswered, had the engine not held back
            plan.insert(0, place(r, Transfer(True, 2, 40, 0, 40, 0, 40)))
            latency, jitter, not_ready = 2 * isa.DMA_PENDING, 0, 0.0
        await models.fill_store_sources(sram, plan)
        what = f"episode {stats['episodes']} (latency {latency}+{jitter}, ready low {not_ready:.0%})"
        requests: deque[tuple[tuple[int, int, int | None], str]] = deque()  # (we, addr, wdata), label
        writes: deque[tuple[tuple[int, int], str]] = deque()  # (addr, data), label
        loaded: set[int] = set()
        stored: set[int] = set()
        first = cycles.now
        wanted, k, refused, stall = first, 0, None, 0
        while True:
            c = cycles.now
            inflight, busy = value(dut.inflight), value(dut.busy)
            assert isinstance(inflight, int) and inflight <= QUEUE, (
                f"{what}, cycle {c}: inflight = {inflight}, more than QUEUE = {QUEUE}")
            if k == len(plan) and inflight == 0 and not busy:
                break
            assert c - first < WATCHDOG, f"{what}: still running after {WATCHDOG} cycles (inflight {inflight})"
            request = memory.request()
            assert refused is None or request == refused, (
                f"{what}, cycle {c}: request {refused} was refused last cycle, now the engine offers {request}")
            if stall == 0 and r.random() < 0.02:
                stall = r.randint(5, 20)  # a burst of cycles without ready
            stall = max(0, stall - 1)
            ready = stall == 0 and r.random() >= not_ready
            waiting = len(memory.answers)  # reads taken and not answered before this cycle
            taken = memory.cycle(c, request, ready, latency + r.randint(0, jitter))
            assert len(memory.answers) <= isa.DMA_PENDING, (
                f"{what}, cycle {c}: {len(memory.answers)} reads wait for their answers, the engine allows "
                f"DMA_PENDING = {isa.DMA_PENDING}")
            if taken:
                assert requests, f"{what}, cycle {c}: request {request} taken, none expected"
                want, label = requests.popleft()
                assert request == want, f"{what}, cycle {c}: request {request} taken, expected {want} for {label}"
            refused = request if request is not None and not taken else None
            stats["refused"] += refused is not None
            stats["pending_limit"] += request is None and waiting == isa.DMA_PENDING  # the engine holds back
            if value(dut.sram_we) != 0:
                got = (value(dut.sram_waddr), value(dut.sram_wdata))
                assert writes, f"{what}, cycle {c}: scratchpad write (word, data) {got}, none expected"
                want, label = writes.popleft()
                assert got == want, (f"{what}, cycle {c}: scratchpad write (word, data) {got}, expected {want} "
                                     f"for {label}")
            if k < len(plan) and inflight < QUEUE and wants(plan[k], c, wanted, inflight, busy):
                x = plan[k]
                x.number = stats["transfers"]
                x.issue = c
                models.apply(x)
                for i, ((e, a), d) in enumerate(zip(x.words(), x.data, strict=True)):
                    label = f"word {i} of {x}"
                    requests.append(((0, e, None) if x.load else (1, e, d), label))
                    if x.load:
                        writes.append(((a, d), label))
                count_kinds(x, stats)
                (loaded if x.load else stored).update(w[1] if x.load else w[0] for w in x.words())
                drive_start(dut, x)
                k += 1
                if k < len(plan):
                    wanted = next_wanted(r, plan[k], c)
            else:
                drive_no_start(dut, r)
            await cycles.next()
        drive_no_start(dut, r)
        assert not requests and not writes, (
            f"{what}: the engine is idle with {len(requests)} requests and {len(writes)} scratchpad writes missing")
        await check_memories(sram, memory, models, loaded, stored, what)
        stats["episodes"] += 1
    dut._log.info("dma with stalls: %s", ", ".join(f"{key} {count}" for key, count in stats.items()))
    for key, count in stats.items():
        assert count > 0, f"nothing of kind {key} was exercised: {stats}"
