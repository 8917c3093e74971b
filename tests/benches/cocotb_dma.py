"""dma with the scratchpad (tb/cocotb/dma_wrap.v): random strided LOADs and STOREs against a Python AXI4 slave
memory, a dict model of both memories, and (with an always-ready memory) the header's timeline, cycle by cycle.

The external port is an AXI4 master on the one-word bus (32 data bits, byte addresses: a word's is 4 * its word
address); every request is one beat of ID 0 and answers come in order. Contract (rtl/dma.v header), for a
memory that is always ready and answers a request L + 1 cycles after taking it. A transfer issued in cycle t
takes its descriptor ("setup") in
    s = max(t + 1, the engine is free, one cycle after every earlier transfer of the other kind has ended)
(a STORE waits for the LOADs before it, a LOAD for the STOREs before it: AXI orders nothing between reads and
writes) and with n = rows * cols beats (row r, column c: ext[ext_base + r*ext_stride + c], sram[sram_base +
r*sram_stride + c], row-major):
    LOAD   beat b: AR valid (and taken) in s+1+b; R valid in s+2+L+b and written to the scratchpad in that same
           cycle (sram_we/waddr/wdata follow the R channel); ends at s+n+L+2; the engine is free for the next
           setup at s+n+1
    STORE  beat b read from the scratchpad in s+1+b, AW and W valid in s+4+b; B in s+5+L+b; ends at s+n+L+5;
           free at s+n+2
`inflight` counts transfers issued and not ended (issued in t: counted from t+1, not in the end cycle); `busy`
is high from a setup cycle until its transfer's end; `quiet` is high when nothing is on its way: no beat made
(put in the AR register, or read from the scratchpad) and not yet answered, i.e. low from the cycle after a
LOAD beat is made (s+1+b) through its R cycle, and from the cycle after a STORE beat is read (s+2+b) through its
B cycle. The test is the sequencer: it issues a transfer only in a cycle where inflight < QUEUE.

Timeline (written here from the header, independent of capra.dma) drives every cycle's expectation: inflight,
busy, quiet, the AR request (valid, address), the AW and W requests (valid, address, data, strobe), the scratchpad
read (re, addr) and write (we, addr, data). Afterwards each transfer's setup and end are compared with
capra.dma.DmaTimeline. With a memory that holds its readies low at random and answers after random latencies,
what moves is checked (requests in order, the AXI rules, the read/write order, the outstanding limit, the
scratchpad writes in order, `quiet` against what the bench sees on its way, the memories after each episode).
A third test makes each fault of the header happen: err, err_code, err_pc; after it no beat made (no new AR, no
scratchpad read) while the STORE beats already read still go out, and `quiet` once nothing is on its way.
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
PENDING = isa.DMA_PENDING
EXT_WORDS = 1 << 30  # the most words ext_limit allows (32-bit byte addresses); the memory keeps only what is written
SRAM_WORDS = isa.SRAM_WORDS
PC_BITS = 10
TIMED_TRANSFERS = 200  # per latency
BACKPRESSURE_TRANSFERS = 300
WATCHDOG = 5000  # cycles per episode
FAULT_WATCHDOG = 2000  # cycles per fault case for err to rise
AFTER_FAULT = 40  # cycles a fault case runs on after err rose (and its answers are out)
OPERANDS = ("rows", "cols", "ext_base", "ext_stride", "sram_base", "sram_stride", "pc")
OKAY, SLVERR, DECERR = 0, 2, 3  # AXI responses
RESP_NAMES = {OKAY: "OKAY", SLVERR: "SLVERR", DECERR: "DECERR"}
ERR_ADDR, ERR_RESP, ERR_PROTOCOL = 1, 2, 3  # rtl/dma.v err_code
# the fields rtl/dma.v ties (every request one beat, INCR, full width of the one-word bus, ID 0; every answer
# taken at once)
AXI_CONSTANTS = {"arid": 0, "arlen": 0, "arsize": 2, "arburst": 1, "awid": 0, "awlen": 0, "awsize": 2,
                 "awburst": 1, "wlast": 1, "rready": 1, "bready": 1}
STROBE = 0xF  # a beat of one word writes all four bytes


@dataclass
class Transfer:
    load: bool
    rows: int
    cols: int
    ext_base: int
    ext_stride: int
    sram_base: int
    sram_stride: int
    pc: int = 0
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
        return (f"transfer {self.number} ({self.kind} pc {self.pc} {self.rows}x{self.cols} "
                f"ext {self.ext_base}+{self.ext_stride}r sram {self.sram_base}+{self.sram_stride}r, "
                f"issued {self.issue}, setup {self.setup})")


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
    return place(r, Transfer(load, rows, cols, 0, ext_stride, 0, sram_stride, pc=r.getrandbits(PC_BITS)))


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
    pc = r.getrandbits(PC_BITS)
    if load:
        base = src.ext_base + r0 * src.ext_stride + c0
        t = Transfer(True, rows, cols, base, src.ext_stride, 0, dst_stride, pc=pc)
    else:
        base = src.sram_base + r0 * src.sram_stride + c0
        t = Transfer(False, rows, cols, 0, dst_stride, base, src.sram_stride, pc=pc)
    return place(r, t)


def random_episode(r, stats: dict[str, int], big: float = 0.05) -> list[Transfer]:
    """Two to nine transfers; half of them read what an earlier one of the other kind wrote (a LOAD of what
    a STORE before it wrote must wait for that STORE's write responses: the ordering rule)."""
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
    (a STORE waits for the LOADs before it to end, a LOAD for the STOREs before it)."""

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


# --- the AXI4 slave memory ---------------------------------------------------------------------------------

@dataclass
class Requests:
    """What the engine offers on AR, AW and W in a cycle (registered outputs, read in the middle of the cycle):
    the payload, or None when valid is low."""

    ar: int | str | None  # araddr
    aw: int | str | None  # awaddr
    w: tuple[int | str, int | str] | None  # (wdata, wstrb)

    def get(self, ch: str):
        return getattr(self, ch)


CHANNELS = ("ar", "aw", "w")


def read_requests(dut) -> Requests:
    return Requests(value(dut.m_axi_araddr) if value(dut.m_axi_arvalid) == 1 else None,
                    value(dut.m_axi_awaddr) if value(dut.m_axi_awvalid) == 1 else None,
                    (value(dut.m_axi_wdata), value(dut.m_axi_wstrb)) if value(dut.m_axi_wvalid) == 1 else None)


class AxiMemory:
    """The external memory as an AXI4 slave, in Python. A request is taken in a cycle where its valid and ready
    are both high (ready is the bench's choice, per channel). A read taken in cycle t is answered with rvalid in
    max(t + 1 + latency, the answer before + 1) with the word as it was when taken. A write is taken when both
    its AW and its W are (in either order, in the same or different cycles: the slave keeps the one that comes
    first until the other does, in order); its word lands then and B answers it in max(t + 1 + latency, the B
    before + 1). rready and bready are always high (rtl/dma.v), so each answer is valid for one cycle. Outside
    an answer the R and B fields carry garbage the engine must ignore. `faults` changes the fields of the i-th
    R or B answer (("r", i) or ("b", i) -> {field: value}) to make the engine see an error or protocol fault.

    It also checks the AXI rule a master keeps: a valid that was not taken stays high, its payload unchanged,
    until it is taken (`observe`)."""

    def __init__(self, dut, models: Models, r, what: str = "") -> None:
        self.dut = dut
        self.models = models
        self.r = r
        self.what = what
        self.words: dict[int, int] = {}  # what the engine wrote
        self.r_answers: deque[tuple[int, int]] = deque()  # (cycle, word)
        self.b_answers: deque[int] = deque()  # cycles
        self.aw_wait: deque[int] = deque()  # word addresses of AWs taken before their W
        self.w_wait: deque[int] = deque()  # data of Ws taken before their AW
        self.last_r = self.last_b = -1
        self.waiting: dict[str, object] = {}  # the payloads offered last cycle and not taken
        self.taken = dict.fromkeys(CHANNELS, 0)
        self.r_given = self.b_given = 0
        self.sram_reads = 0  # STORE beats the engine read from the scratchpad (the bench counts sram_re)
        self.faults: dict[tuple[str, int], dict[str, int]] = {}
        for name in ("arready", "awready", "wready", "rvalid", "bvalid"):
            getattr(dut, f"m_axi_{name}").value = 0
        self.garbage_r()
        self.garbage_b()

    def word(self, addr: int) -> int:
        return self.words[addr] if addr in self.words else self.models.initial_word(addr)

    def reads_out(self) -> int:
        """Reads taken and not answered."""
        return self.taken["ar"] - self.r_given

    def writes_out(self) -> int:
        """Writes of which AW or W was taken and which are not answered."""
        return max(self.taken["aw"], self.taken["w"]) - self.b_given

    def on_its_way(self, req: Requests) -> str:
        """What the engine has on its way at the start of a cycle (the engine's registers, the memory's counts up
        to the cycle before), as text; empty when nothing is: then `quiet` must be high."""
        offered = max(self.taken["aw"] + (req.aw is not None), self.taken["w"] + (req.w is not None))
        parts = [f"{ch.upper()} valid" for ch in CHANNELS if req.get(ch) is not None]
        parts += [f"{n} {what} unanswered" for n, what in ((self.reads_out(), "reads"), (self.writes_out(), "writes"))
                  if n]
        if self.sram_reads != offered:
            parts.append(f"{self.sram_reads - offered} STORE beats read from the scratchpad, not yet on AW and W")
        return ", ".join(parts)

    def check_quiet(self, c: int, req: Requests, quiet: int | str) -> None:
        busy = self.on_its_way(req)
        assert quiet == int(not busy), (f"{self.what}cycle {c}: quiet = {quiet}, but "
                                        f"{busy or 'nothing is on its way'}")

    def observe(self, c: int) -> tuple[Requests, set[str]]:
        """Cycle c's requests, checked against last cycle's waiting ones (the AXI rule); returns them and the
        channels whose request is new this cycle (not one that waited)."""
        req = read_requests(self.dut)
        for ch, held in self.waiting.items():
            got = req.get(ch)
            assert got is not None, (
                f"{self.what}cycle {c}: m_axi_{ch}valid dropped before {ch}ready took its request {held} "
                f"(AXI: a valid stays high until taken)")
            assert got == held, (
                f"{self.what}cycle {c}: the {ch.upper()} payload changed while it waited for {ch}ready: "
                f"{held} then {got} (AXI: it stays unchanged until taken)")
        return req, {ch for ch in CHANNELS if req.get(ch) is not None and ch not in self.waiting}

    def take(self, c: int, req: Requests, ready: dict[str, bool], latency: int, jitter: int = 0) -> dict[str, bool]:
        """Drive cycle c's readies and take what they let through; each answer's latency is `latency` plus 0 to
        `jitter` at random. Returns per channel whether a request was taken."""

        def lat() -> int:
            return latency + (self.r.randint(0, jitter) if jitter else 0)

        dut = self.dut
        dut.m_axi_arready.value = int(ready["ar"])
        dut.m_axi_awready.value = int(ready["aw"])
        dut.m_axi_wready.value = int(ready["w"])
        taken = {ch: req.get(ch) is not None and ready[ch] for ch in CHANNELS}
        for ch in CHANNELS:
            got = req.get(ch)
            assert not taken[ch] or "x" not in str(got).lower() and "z" not in str(got).lower(), (
                f"{self.what}cycle {c}: {ch.upper()} request {got} taken with X or Z bits")
        self.waiting = {ch: req.get(ch) for ch in CHANNELS if req.get(ch) is not None and not taken[ch]}
        for ch in CHANNELS:
            self.taken[ch] += taken[ch]
        if taken["ar"]:
            self.last_r = max(c + 1 + lat(), self.last_r + 1)
            self.r_answers.append((self.last_r, self.word(req.ar // 4)))
        if taken["aw"]:
            self.aw_wait.append(req.aw // 4)
        if taken["w"]:
            self.w_wait.append(req.w[0])
        while self.aw_wait and self.w_wait:  # a whole write: it lands, B answers it
            self.words[self.aw_wait.popleft()] = self.w_wait.popleft()
            self.last_b = max(c + 1 + lat(), self.last_b + 1)
            self.b_answers.append(self.last_b)
        return taken

    def garbage_r(self) -> None:
        dut, r = self.dut, self.r
        dut.m_axi_rdata.value = r.getrandbits(32)
        dut.m_axi_rresp.value = r.getrandbits(2)
        dut.m_axi_rid.value = r.getrandbits(1)
        dut.m_axi_rlast.value = r.getrandbits(1)

    def garbage_b(self) -> None:
        self.dut.m_axi_bresp.value = self.r.getrandbits(2)
        self.dut.m_axi_bid.value = self.r.getrandbits(1)

    def answer(self, c: int, extra_r: bool = False, extra_b: bool = False) -> tuple[bool, bool]:
        """Drive cycle c's R and B channels: the answers due now, or (extra_r, extra_b) one nobody asked for.
        Returns whether an R and a B answer went out (counted as answers only when they were due)."""
        dut = self.dut
        r_due = bool(self.r_answers) and self.r_answers[0][0] == c
        if r_due or extra_r:
            fields = {"rdata": self.r_answers.popleft()[1] if r_due else self.r.getrandbits(32),
                      "rresp": OKAY, "rid": 0, "rlast": 1}
            if r_due:
                fields.update(self.faults.get(("r", self.r_given), {}))
                self.r_given += 1
            for name, v in fields.items():
                getattr(dut, f"m_axi_{name}").value = v
            dut.m_axi_rvalid.value = 1
        else:
            dut.m_axi_rvalid.value = 0
            self.garbage_r()
        b_due = bool(self.b_answers) and self.b_answers[0] == c
        if b_due or extra_b:
            fields = {"bresp": OKAY, "bid": 0}
            if b_due:
                self.b_answers.popleft()
                fields.update(self.faults.get(("b", self.b_given), {}))
                self.b_given += 1
            for name, v in fields.items():
                getattr(dut, f"m_axi_{name}").value = v
            dut.m_axi_bvalid.value = 1
        else:
            dut.m_axi_bvalid.value = 0
            self.garbage_b()
        return r_due, b_due

    def idle(self) -> bool:
        return not (self.r_answers or self.b_answers or self.aw_wait or self.w_wait)

    def quiet(self) -> None:
        """No answer and no ready from now on (an answer driven in the last cycle must not stay valid)."""
        for name in ("arready", "awready", "wready", "rvalid", "bvalid"):
            getattr(self.dut, f"m_axi_{name}").value = 0


def check_axi_constants(dut, what: str) -> None:
    for name, want in AXI_CONSTANTS.items():
        got = value(getattr(dut, f"m_axi_{name}"))
        assert got == want, f"{what}: m_axi_{name} = {got}, rtl/dma.v ties it to {want}"


def check_no_fault(dut, c: int, what: str) -> None:
    err = value(dut.err)
    assert err == 0, (f"{what}cycle {c}: err = {err} (err_code {value(dut.err_code)}, err_pc {value(dut.err_pc)}) "
                      f"with every request inside ext_limit and every answer OKAY")


# --- the header's timeline -------------------------------------------------------------------------------

class Timeline:
    """rtl/dma.v's timing for an always-ready memory answering L + 1 cycles after taking a request, and every
    cycle's expected events (each with a label naming the transfer and beat, for failure messages)."""

    def __init__(self, latency: int) -> None:
        self.latency = latency
        self.engine_free = 0  # the first cycle the engine can spend on a setup
        self.last_end = {True: 0, False: 0}  # the end of the last LOAD (True) and of the last STORE (False)
        self.transfers: list[Transfer] = []
        self.ar: dict[int, tuple[int, str]] = {}  # cycle -> (byte address, label)
        self.aw: dict[int, tuple[int, int, str]] = {}  # cycle -> (byte address, data, label): AW and W together
        self.sram_rd: dict[int, tuple[int, str]] = {}  # cycle -> (addr, label)
        self.sram_wr: dict[int, tuple[int, int, str]] = {}  # cycle -> (addr, data, label)
        self.on_its_way: set[int] = set()  # the cycles in which some beat is on its way (quiet low)

    def setup_cycle(self, t: int, load: bool) -> int:
        """Both ordering rules: a LOAD one cycle after the last STORE's end, a STORE after the last LOAD's."""
        return max(t + 1, self.engine_free, self.last_end[not load] + 1)

    def waits_for_other_kind(self, t: int, load: bool) -> bool:
        return self.setup_cycle(t, load) > max(t + 1, self.engine_free)

    def issue(self, t: int, x: Transfer) -> None:
        n, L = x.rows * x.cols, self.latency
        s = self.setup_cycle(t, x.load)
        x.issue, x.setup = t, s
        for b, ((e, a), d) in enumerate(zip(x.words(), x.data, strict=True)):
            label = f"beat {b} of {x}"
            if x.load:
                self._event(self.ar, s + 1 + b, (4 * e, label))
                self._event(self.sram_wr, s + 2 + L + b, (a, d, label))
                self.on_its_way.update(range(s + 1 + b, s + 2 + L + b + 1))
            else:
                self._event(self.sram_rd, s + 1 + b, (a, label))
                self._event(self.aw, s + 4 + b, (4 * e, d, label))
                self.on_its_way.update(range(s + 2 + b, s + 5 + L + b + 1))
        if x.load:
            x.end = s + n + L + 2
            self.engine_free = s + n + 1
        else:
            x.end = s + n + L + 5
            self.engine_free = s + n + 2
        self.last_end[x.load] = x.end
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


def check_requests(timeline: Timeline, c: int, req: Requests) -> None:
    """Cycle c's AR, AW and W against the timeline."""
    want = timeline.ar.get(c)
    if want is None:
        assert req.ar is None, f"cycle {c}: AR request of byte address {req.ar}, the timeline expects none"
    else:
        assert req.ar == want[0], (f"cycle {c}: AR request {'none' if req.ar is None else req.ar} (araddr), "
                                   f"the timeline expects araddr {want[0]} for {want[1]}")
    want = timeline.aw.get(c)
    if want is None:
        assert req.aw is None and req.w is None, (
            f"cycle {c}: AW request {req.aw} (awaddr), W request {req.w} (wdata, wstrb), the timeline expects none")
    else:
        addr, data, label = want
        assert (req.aw, req.w) == (addr, (data, STROBE)), (
            f"cycle {c}: AW request {req.aw} (awaddr), W request {req.w} (wdata, wstrb), the timeline expects "
            f"awaddr {addr}, W ({data:#010x}, {STROBE:#x}) for {label}")


def check_engine(dut, timeline: Timeline, c: int) -> None:
    """Cycle c's inflight, busy, quiet and scratchpad ports against the timeline (after the cycle's inputs settled:
    the scratchpad write follows the R channel)."""
    inflight, busy = value(dut.inflight), value(dut.busy)
    want_inflight = timeline.inflight(c)
    assert inflight == want_inflight, (
        f"cycle {c}: inflight = {inflight}, the timeline says {want_inflight} (transfers issued before and not ended: "
        f"{[str(x) for x in timeline.transfers if x.issue < c < x.end]})")
    assert busy == timeline.busy(c), f"cycle {c}: busy = {busy}, the timeline says {int(timeline.busy(c))}"
    quiet, want_quiet = value(dut.quiet), int(c not in timeline.on_its_way)
    assert quiet == want_quiet, (f"cycle {c}: quiet = {quiet}, the timeline says {want_quiet} (a beat is on its way "
                                 f"from the cycle after it is made or read until its answer)")
    re, want = value(dut.sram_re), timeline.sram_rd.get(c)
    if want is None:
        assert re == 0, f"cycle {c}: scratchpad read of word {value(dut.sram_raddr)}, the timeline expects none"
    else:
        got = value(dut.sram_raddr) if re == 1 else None
        assert got == want[0], f"cycle {c}: scratchpad read of word {got}, the timeline expects {want[0]} for {want[1]}"
    we, want = value(dut.sram_we), timeline.sram_wr.get(c)
    if want is None:
        assert we == 0, f"cycle {c}: scratchpad write to word {value(dut.sram_waddr)}, the timeline expects none"
    else:
        got = (value(dut.sram_waddr), value(dut.sram_wdata)) if we == 1 else None
        assert got == want[:2], (f"cycle {c}: scratchpad write (word, data) {got}, the timeline expects {want[:2]} "
                                 f"for {want[2]}")


# --- what moves, in order ----------------------------------------------------------------------------------

@dataclass
class Beat:
    transfer: Transfer
    index: int
    bad: str = ""  # why this beat must never be requested (the fault tests)

    def __str__(self) -> str:
        return f"beat {self.index} of {self.transfer}"


class Flow:
    """The requests the dict models expect, in the order the engine must send them (reads on AR, writes on AW
    and W), the scratchpad writes in order, and each transfer's beats not answered yet, for the ordering rule:
    no AR of a LOAD before every write of the STOREs issued before it is answered, no AW or W of a STORE
    before every read of the LOADs issued before it is."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.ar: deque[tuple[int, Beat]] = deque()  # (byte address, beat)
        self.aw: deque[tuple[int, Beat]] = deque()
        self.w: deque[tuple[tuple[int, int], Beat]] = deque()  # ((data, strobe), beat)
        self.sram_wr: deque[tuple[tuple[int, int], Beat]] = deque()  # ((word, data), beat)
        self.reads: deque[Beat] = deque()  # AR taken, not answered, in order
        self.writes: deque[Beat] = deque()  # AW taken, not answered, in order
        self.unanswered: dict[int, int] = {}  # transfer number -> its beats not answered
        self.transfers: list[Transfer] = []
        self.gone: dict[int, int] = {}  # transfer number -> its requests taken (AR, or AW)

    def add(self, x: Transfer, bad: list[str] | None = None) -> None:
        self.transfers.append(x)
        self.unanswered[x.number] = x.rows * x.cols
        self.gone[x.number] = 0
        for i, ((e, a), d) in enumerate(zip(x.words(), x.data, strict=True)):
            beat = Beat(x, i, bad[i] if bad else "")
            if x.load:
                self.ar.append((4 * e, beat))
                self.sram_wr.append(((a, d), beat))
            else:
                self.aw.append((4 * e, beat))
                self.w.append(((d, STROBE), beat))

    def _order(self, c: int, ch: str, beat: Beat) -> None:
        x = beat.transfer
        assert not beat.bad, f"{self.what}cycle {c}: {ch.upper()} request taken for {beat}: {beat.bad}"
        early = [y for y in self.transfers if y.number < x.number and y.load != x.load and self.unanswered[y.number]]
        assert not early, (
            f"{self.what}cycle {c}: {ch.upper()} request taken for {beat} while {early[0]} issued before it has "
            f"{self.unanswered[early[0].number]} beats not answered (rtl/dma.v: a {x.kind} waits for every earlier "
            f"{early[0].kind} to end)")

    def took(self, c: int, ch: str, got) -> None:
        """A request taken on channel ch: the next one the models expect there."""
        queue = getattr(self, ch)
        assert queue, f"{self.what}cycle {c}: {ch.upper()} request {got} taken, the models expect none"
        want, beat = queue.popleft()
        self._order(c, ch, beat)
        assert got == want, f"{self.what}cycle {c}: {ch.upper()} request {got} taken, expected {want} for {beat}"
        if ch == "ar":
            self.reads.append(beat)
        elif ch == "aw":
            self.writes.append(beat)
        if ch != "w":
            self.gone[beat.transfer.number] += 1

    def answered(self, c: int, ch: str) -> Beat:
        waiting = self.reads if ch == "r" else self.writes
        assert waiting, f"{self.what}cycle {c}: the bench's memory answers on {ch.upper()} with nothing taken"
        beat = waiting.popleft()
        self.unanswered[beat.transfer.number] -= 1
        return beat

    def sram_write(self, c: int, got: tuple[int, int]) -> None:
        assert self.sram_wr, f"{self.what}cycle {c}: scratchpad write (word, data) {got}, none expected"
        want, beat = self.sram_wr.popleft()
        assert got == want, f"{self.what}cycle {c}: scratchpad write (word, data) {got}, expected {want} for {beat}"

    def left(self) -> int:
        return len(self.ar) + len(self.aw) + len(self.w) + len(self.sram_wr)


# --- the bench ---------------------------------------------------------------------------------------------

async def setup_bench(dut, ext_limit: int = EXT_WORDS) -> tuple[Cycles, Scratchpad]:
    dut.start.value = 0
    dut.is_store.value = 0
    for name in OPERANDS:
        getattr(dut, name).value = 0
    dut.ext_limit.value = ext_limit  # sampled while rst is high
    for name in ("arready", "awready", "wready", "rvalid", "bvalid", "rdata", "rresp", "rid", "rlast", "bresp",
                 "bid"):
        getattr(dut, f"m_axi_{name}").value = 0
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
        getattr(dut, name).value = r.getrandbits(10)


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


async def check_memories(sram: Scratchpad, memory: AxiMemory, models: Models, loaded: set[int], stored: set[int],
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
    stats["last_ext_word"] += t.ext_base + (t.rows - 1) * t.ext_stride + t.cols == EXT_WORDS


def always(_c: int) -> dict[str, bool]:
    return dict.fromkeys(CHANNELS, True)


@cocotb.test()
@cocotb.parametrize(latency=(0, 1, 4, 16))
async def test_dma_timeline_with_an_always_ready_memory(dut, latency: int):
    """Random episodes of LOADs and STOREs issued back to back, after gaps, late, or once the engine is idle;
    every cycle's inflight, busy, AR, AW and W requests and scratchpad port use against Timeline; the memories
    after every episode; each transfer's setup and end against capra.dma.DmaTimeline at the end. ext_limit is
    the whole 2^30 words: transfers ending on the last word never fault."""
    cycles, sram = await setup_bench(dut)
    check_axi_constants(dut, f"L={latency}")
    r = rng()
    models = Models(r, sram)
    memory = AxiMemory(dut, models, r, f"L={latency} ")
    timeline = Timeline(latency)
    stats = dict.fromkeys(("transfers", "words", "episodes", "queue_full_waits", "issued_while_busy",
                           "store_waited_for_load", "load_waited_for_store", "store_after_load", "load_after_store",
                           "ext_stride_0", "single_word", "last_ext_word"), 0)
    while stats["transfers"] < TIMED_TRANSFERS:
        plan = random_episode(r, stats)
        await models.fill_store_sources(sram, plan)
        first = cycles.now
        wanted, k = first, 0
        loaded: set[int] = set()
        stored: set[int] = set()
        while k < len(plan) or cycles.now <= timeline.idle_from():
            c = cycles.now
            assert c - first < WATCHDOG, (
                f"L={latency} episode {stats['episodes']}: still running after {WATCHDOG} cycles")
            req, _ = memory.observe(c)
            check_requests(timeline, c, req)
            memory.take(c, req, always(c), latency)
            memory.answer(c)
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
                    if timeline.waits_for_other_kind(c, x.load):
                        stats["store_waited_for_load" if not x.load else "load_waited_for_store"] += 1
                    timeline.issue(c, x)
                    count_kinds(x, stats)
                    (loaded if x.load else stored).update(w[1] if x.load else w[0] for w in x.words())
                    drive_start(dut, x)
                    k += 1
                    if k < len(plan):
                        wanted = next_wanted(r, plan[k], c)
            else:
                drive_no_start(dut, r)
            await cycles.settle()
            check_engine(dut, timeline, c)
            check_no_fault(dut, c, f"L={latency} ")
            await cycles.next()
        drive_no_start(dut, r)
        memory.quiet()
        await check_memories(sram, memory, models, loaded, stored, f"L={latency} episode {stats['episodes']}")
        stats["episodes"] += 1
    reference = DmaTimeline(latency, 1)  # this bench drives the one-word bus
    for x in timeline.transfers:
        y = reference.issue(x.issue, x.load, np.array([s for _, s in x.words()], dtype=np.int64), x.cols, pc=x.pc)
        assert (x.setup, x.end) == (y.setup, y.end), (
            f"L={latency} {x}: this bench's timeline says setup {x.setup}, end {x.end}; capra.dma.DmaTimeline says "
            f"setup {y.setup}, end {y.end}")
    dut._log.info("dma L=%d: %s", latency, ", ".join(f"{key} {count}" for key, count in stats.items()))
    for key, count in stats.items():
        assert count > 0, f"L={latency}: nothing of kind {key} was exercised: {stats}"


class Ready:
    """A channel's ready in a stalling memory: low with chance p in a cycle, now and then for a burst."""

    def __init__(self, r, p: float) -> None:
        self.r = r
        self.p = p
        self.burst = 0

    def next(self) -> bool:
        if self.burst == 0 and self.r.random() < 0.02:
            self.burst = self.r.randint(5, 20)
        if self.burst:
            self.burst -= 1
            return False
        return self.r.random() >= self.p


@cocotb.test()
async def test_dma_moves_every_word_with_a_memory_that_stalls(dut):
    """Random episodes against a memory that holds arready, awready and wready low at random (each channel on
    its own, also in bursts, so AW and W are often taken in different cycles) and answers R and B after random
    latencies (up to 60 and beyond DMA_PENDING): the requests taken in the models' order, a valid never dropped
    nor its payload changed before it is taken, no AR of a LOAD before the STOREs issued before it are answered
    and no AW or W of a STORE before the LOADs before it are, never more than DMA_PENDING reads or writes
    waiting for their answers, the scratchpad writes in order, `quiet` in every cycle (high exactly when no valid
    is up, nothing is unanswered and every STORE beat read from the scratchpad has been offered on AW and W),
    and the memories after every episode."""
    cycles, sram = await setup_bench(dut)
    r = rng()
    models = Models(r, sram)
    memory = AxiMemory(dut, models, r)  # one for the whole test: later episodes read what earlier ones wrote
    stats = dict.fromkeys(("transfers", "words", "episodes", "ar_refused", "aw_refused", "w_refused", "aw_before_w",
                           "w_before_aw", "store_after_load", "load_after_store", "ext_stride_0", "single_word",
                           "last_ext_word", "reads_at_limit", "writes_at_limit"), 0)
    while stats["transfers"] < BACKPRESSURE_TRANSFERS:
        plan = random_episode(r, stats, big=0.2)
        latency = r.choice((0, 1, 2, 4, 16, 31, 40, 60))
        jitter = r.choice((0, 0, 3))
        not_ready = {ch: r.choice((0.0, 0.1, 0.3, 0.6)) for ch in CHANNELS}
        if stats["episodes"] == 0:  # surely more than DMA_PENDING reads and writes unanswered, had the engine
            # not held back: a memory that takes at once and answers after 2 * DMA_PENDING cycles
            plan[:0] = [place(r, Transfer(True, 2, 40, 0, 40, 0, 40, pc=1)),
                        place(r, Transfer(False, 2, 40, 0, 40, 0, 40, pc=2))]
            latency, jitter, not_ready = 2 * PENDING, 0, dict.fromkeys(CHANNELS, 0.0)
        await models.fill_store_sources(sram, plan)
        what = (f"episode {stats['episodes']} (latency {latency}+{jitter}, ready low "
                f"{', '.join(f'{ch} {p:.0%}' for ch, p in not_ready.items())}), ")
        memory.what = what
        flow = Flow(what)
        ready = {ch: Ready(r, p) for ch, p in not_ready.items()}
        loaded: set[int] = set()
        stored: set[int] = set()
        first = cycles.now
        wanted, k = first, 0
        while True:
            c = cycles.now
            inflight, busy = value(dut.inflight), value(dut.busy)
            assert isinstance(inflight, int) and inflight <= QUEUE, (
                f"{what}cycle {c}: inflight = {inflight}, more than QUEUE = {QUEUE}")
            if k == len(plan) and inflight == 0 and not busy:
                break
            assert c - first < WATCHDOG, f"{what}still running after {WATCHDOG} cycles (inflight {inflight})"
            check_no_fault(dut, c, what)
            req, _ = memory.observe(c)
            memory.check_quiet(c, req, value(dut.quiet))
            memory.sram_reads += value(dut.sram_re) == 1
            stats["reads_at_limit"] += memory.reads_out() == PENDING
            stats["writes_at_limit"] += memory.writes_out() == PENDING
            aw_early, w_early = len(memory.aw_wait), len(memory.w_wait)
            taken = memory.take(c, req, {ch: ready[ch].next() for ch in CHANNELS}, latency, jitter)
            for ch in CHANNELS:
                stats[f"{ch}_refused"] += req.get(ch) is not None and not taken[ch]
                if taken[ch]:
                    flow.took(c, ch, req.get(ch))
            stats["aw_before_w"] += aw_early > len(memory.aw_wait)
            stats["w_before_aw"] += w_early > len(memory.w_wait)
            assert memory.reads_out() <= PENDING and memory.writes_out() <= PENDING, (
                f"{what}cycle {c}: {memory.reads_out()} reads and {memory.writes_out()} writes wait for their "
                f"answers, the engine allows DMA_PENDING = {PENDING} of each")
            r_given, b_given = memory.answer(c)
            if r_given:
                flow.answered(c, "r")
            if b_given:
                flow.answered(c, "b")
            if k < len(plan) and inflight < QUEUE and wants(plan[k], c, wanted, inflight, busy):
                x = plan[k]
                x.number = stats["transfers"]
                x.issue = c
                models.apply(x)
                flow.add(x)
                count_kinds(x, stats)
                (loaded if x.load else stored).update(w[1] if x.load else w[0] for w in x.words())
                drive_start(dut, x)
                k += 1
                if k < len(plan):
                    wanted = next_wanted(r, plan[k], c)
            else:
                drive_no_start(dut, r)
            await cycles.settle()
            if value(dut.sram_we) != 0:
                flow.sram_write(c, (value(dut.sram_waddr), value(dut.sram_wdata)))
            await cycles.next()
        drive_no_start(dut, r)
        memory.quiet()
        assert not flow.left() and memory.idle(), (
            f"{what}the engine is idle with {len(flow.ar)} AR, {len(flow.aw)} AW, {len(flow.w)} W requests and "
            f"{len(flow.sram_wr)} scratchpad writes missing")
        await check_memories(sram, memory, models, loaded, stored, what)
        stats["episodes"] += 1
    dut._log.info("dma with stalls: %s", ", ".join(f"{key} {count}" for key, count in stats.items()))
    for key, count in stats.items():
        assert count > 0, f"nothing of kind {key} was exercised: {stats}"


# --- faults ------------------------------------------------------------------------------------------------

@dataclass
class FaultCase:
    """One fault: the transfers issued (back to back, from the first cycle after reset), ext_limit, how the
    memory answers, and the err_code and err_pc the header gives for it."""

    name: str
    kind: str  # "addr", "resp" or "protocol" (the stats)
    limit: int
    plan: list[Transfer]
    code: int
    pc: int | None  # None: no transfer to name (an answer nobody asked for)
    latency: int = 2
    faults: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)  # AxiMemory.faults
    extra: str = ""  # "r" or "b": an answer nobody asked for, in the first cycle `when` holds
    when: object = None  # (flow, memory, every transfer issued) -> bool
    whole: tuple[int, ...] = ()  # plan indexes whose requests must all go out (they come before the fault)


def fault_cases(r) -> list[FaultCase]:
    """Each fault of the header: a beat reaching ext_limit (LOAD and STORE; a transfer ending on the last word
    before it runs first and must not fault, one after it must never start), an error answer on R and B, and
    answers that break the protocol (nobody asked, ID 1, RLAST low)."""
    def pcs(n: int) -> list[int]:
        return r.sample(range(1 << PC_BITS), n)

    def sram() -> int:
        return r.randrange(SRAM_WORDS - 64)

    cases = []
    for load in (True, False):
        for limit in (r.randrange(1 << 10, 1 << 24), EXT_WORDS):
            a, b, c = pcs(3)
            good = Transfer(load, 2, 5, limit - 10, 5, sram(), 5, pc=a)  # ends on word limit - 1
            stride = r.choice((4, 6))
            bad = Transfer(load, 3, 4, limit - r.randint(0, 2 * stride + 3), stride, sram(), 4, pc=b)
            after = Transfer(load, 1, 3, r.randrange(limit - 3), 1, sram(), 3, pc=c)
            # a latency that keeps `good` in flight (waiting for its answers) when the bad beat comes: err_pc
            # must name the transfer reaching the limit, not the oldest one in flight
            cases.append(FaultCase(f"{bad.kind} reaching ext_limit {limit}", "addr", limit, [good, bad, after],
                                   ERR_ADDR, b, latency=r.randint(16, 24), whole=(0,)))
        pc = pcs(1)[0]
        cases.append(FaultCase(f"{'LOAD' if load else 'STORE'} with ext_limit 0", "addr", 0,
                               [Transfer(load, 1, 2, 0, 2, sram(), 2, pc=pc)], ERR_ADDR, pc))

    def three(load: bool, n: int) -> list[Transfer]:
        """1 x n, then 2 x 3 (the one whose answer is bad), then 2 x 3: with a latency of 8 or more the engine
        is on the third when the second's answers come, so err_pc must be the pc of the answer's transfer,
        neither the oldest in flight (the first has ended) nor the one requesting."""
        a, b, c = pcs(3)
        return [place(r, Transfer(load, 1, n, 0, n, 0, n, pc=a)), place(r, Transfer(load, 2, 3, 0, 3, 0, 3, pc=b)),
                place(r, Transfer(load, 2, 3, 0, 3, 0, 3, pc=c))]

    for resp in (SLVERR, DECERR):
        plan = three(True, 4)
        cases.append(FaultCase(f"RRESP {RESP_NAMES[resp]} on a beat of the second LOAD", "resp", EXT_WORDS, plan,
                               ERR_RESP, plan[1].pc, latency=r.randint(8, 16),
                               faults={("r", 4 + r.randrange(6)): {"rresp": resp}}))
    plan = three(False, 4)
    cases.append(FaultCase("BRESP SLVERR on a beat of the second STORE", "resp", EXT_WORDS, plan, ERR_RESP, plan[1].pc,
                           latency=r.randint(8, 16), faults={("b", 4 + r.randrange(6)): {"bresp": SLVERR}}))
    for name, ch, fault in (("RID 1", "r", {"rid": 1}), ("RLAST low", "r", {"rlast": 0}), ("BID 1", "b", {"bid": 1})):
        plan = three(ch == "r", 3)
        cases.append(FaultCase(f"{name} on a beat of the second {plan[1].kind}", "protocol", EXT_WORDS, plan,
                               ERR_PROTOCOL, plan[1].pc, latency=r.randint(8, 16),
                               faults={(ch, 3 + r.randrange(6)): fault}))

    def ended(flow: Flow, memory: AxiMemory, issued: bool) -> bool:
        return (issued and not (flow.ar or flow.aw or flow.w) and all(n == 0 for n in flow.unanswered.values())
                and memory.idle())

    def writes_waiting(flow: Flow, memory: AxiMemory, issued: bool) -> bool:
        return memory.writes_out() > 0 and memory.reads_out() == 0

    def reads_waiting(flow: Flow, memory: AxiMemory, issued: bool) -> bool:
        return memory.reads_out() > 0 and memory.writes_out() == 0

    for extra, load, when, while_ in (("r", True, ended, "after a LOAD ended"),
                                      ("r", False, writes_waiting, "while a STORE waits for B"),
                                      ("b", False, ended, "after a STORE ended"),
                                      ("b", True, reads_waiting, "while a LOAD waits for R")):
        plan = [place(r, Transfer(load, 1, 6, 0, 6, 0, 6, pc=pcs(1)[0]))]
        cases.append(FaultCase(f"{extra.upper()} answer nobody asked for, {while_}", "protocol", EXT_WORDS, plan,
                               ERR_PROTOCOL, None, latency=8, extra=extra, when=when))
    return cases


async def run_fault_case(dut, cycles: Cycles, sram: Scratchpad, r, case: FaultCase, stats: dict[str, int]) -> None:
    """Reset with the case's ext_limit, issue its transfers back to back against an always-ready memory, and
    check: err rises and stays, with the case's err_code and err_pc, unchanged, until the end; no request of a
    beat past ext_limit nor of a transfer after a faulting one is taken; a transfer ending on the word before
    ext_limit sends all its requests, and the faulting one all its beats before the bad one; after err no beat
    is made (no new AR, no scratchpad read) but every STORE beat already read goes out (AW and W requests
    taken = scratchpad reads); `quiet` in every cycle against what is on its way, and high at the end; the
    requests that do go out are the models' ones, in order."""
    what = f"fault case '{case.name}' (ext_limit {case.limit}, latency {case.latency}), "
    drive_no_start(dut, r)
    dut.ext_limit.value = case.limit  # sampled while rst is high
    await reset(dut, cycles)
    sram.mirror.clear()  # a LOAD cut short by a fault leaves scratchpad words the mirror does not know
    models = Models(r, sram)
    await models.fill_store_sources(sram, case.plan)
    memory = AxiMemory(dut, models, r, what)
    memory.faults = case.faults
    flow = Flow(what)
    bad_from = None  # (plan index, beat) of the first beat at or past ext_limit
    for i, x in enumerate(case.plan):
        x.number = i
        models.apply(x)
        over = [b for b, (e, _) in enumerate(x.words()) if e >= case.limit]
        if bad_from is None and over:
            bad_from = (i, over[0])
    # why each beat must never be requested: at or past ext_limit, after such a beat, or of a later transfer
    reasons: list[list[str]] = []
    for i, x in enumerate(case.plan):
        reasons.append([])
        for b, (e, _) in enumerate(x.words()):
            if bad_from is None or (i, b) < bad_from:
                reasons[i].append("")
            elif i == bad_from[0]:
                reasons[i].append(f"word {e} is at or past ext_limit {case.limit}" if e >= case.limit
                                  else "a beat after the first one at or past ext_limit")
            else:
                reasons[i].append(f"a transfer after {case.plan[bad_from[0]]}, which faulted")
    first = cycles.now
    k = 0
    err_at = None
    extra_done = False
    before = 0  # write requests taken before err rose
    while True:
        c = cycles.now
        assert c - first < FAULT_WATCHDOG, (
            f"{what}{'err not high' if err_at is None else 'quiet not high'} after {FAULT_WATCHDOG} cycles")
        err, quiet = value(dut.err), value(dut.quiet)
        if err_at is None:
            assert err in (0, 1), f"{what}cycle {c}: err = {err}"
            if c == first:
                assert err == 0, f"{what}cycle {c}: err = 1 right out of reset"
            elif err:
                err_at = c
                before = memory.taken["aw"]
                got = (value(dut.err_code), value(dut.err_pc))
                assert got[0] == case.code, (
                    f"{what}cycle {c}: err rose with err_code {got[0]}, expected {case.code}")
                if case.pc is not None:
                    assert got[1] == case.pc, (f"{what}cycle {c}: err rose with err_pc {got[1]}, expected {case.pc} "
                                               f"(the pc given with the transfer at fault)")
        else:
            now = (err, value(dut.err_code), value(dut.err_pc))
            assert now == (1, *got), (f"{what}cycle {c}: (err, err_code, err_pc) = {now}, since cycle {err_at} "
                                      f"{(1, *got)} (err stays until reset; the first fault is kept)")
        req, new = memory.observe(c)
        memory.check_quiet(c, req, quiet)
        if err_at is not None and c >= err_at + AFTER_FAULT and memory.idle() and quiet == 1:
            break
        # a beat made in the cycle the fault came may show in the cycle err rises; none after
        assert err_at is None or c == err_at or "ar" not in new, (
            f"{what}cycle {c}: a new AR request {req.ar} (a beat made) after err rose in cycle {err_at}")
        if value(dut.sram_re) != 0:
            assert err == 0, (f"{what}cycle {c}: scratchpad read of word {value(dut.sram_raddr)} (a STORE beat made) "
                              f"with err high since cycle {err_at}")
            memory.sram_reads += 1
        taken = memory.take(c, req, always(c), case.latency)
        for ch in CHANNELS:
            if taken[ch]:
                flow.took(c, ch, req.get(ch))
        extra = case.extra if case.extra and not extra_done and case.when(flow, memory, k == len(case.plan)) else ""
        extra_done = extra_done or bool(extra)
        r_given, b_given = memory.answer(c, extra_r=extra == "r", extra_b=extra == "b")
        if r_given:
            flow.answered(c, "r")
        if b_given:
            flow.answered(c, "b")
        if k < len(case.plan) and value(dut.inflight) < QUEUE:
            x = case.plan[k]
            x.issue = c
            flow.add(x, reasons[k])
            drive_start(dut, x)
            k += 1
        else:
            drive_no_start(dut, r)
        await cycles.next()
    drive_no_start(dut, r)
    memory.quiet()
    assert memory.taken["aw"] == memory.taken["w"] == memory.sram_reads, (
        f"{what}{memory.sram_reads} STORE beats read from the scratchpad, {memory.taken['aw']} AW and "
        f"{memory.taken['w']} W requests taken: every beat read goes out, after a fault too")
    for i in case.whole:
        x = case.plan[i]
        assert flow.gone[x.number] == x.rows * x.cols, (
            f"{what}{x} sent {flow.gone[x.number]} of its {x.rows * x.cols} requests: it lies inside ext_limit and "
            f"comes before the faulting transfer")
    if bad_from is not None:  # a faulting transfer stops at its first bad beat: the ones before it go out
        x = case.plan[bad_from[0]]
        assert flow.gone[x.number] == bad_from[1], (
            f"{what}{x} sent {flow.gone[x.number]} requests, expected the {bad_from[1]} before its first beat at or "
            f"past ext_limit")
    stats["store_beats_after_err"] += memory.taken["aw"] - before
    stats["cases"] += 1
    stats[case.kind] += 1
    stats["requests"] += sum(flow.gone.values())


@cocotb.test()
async def test_dma_faults(dut):
    """Every fault of the header, each after a reset (with ext_limit set before it: the engine samples it in
    reset): a LOAD and a STORE reaching a word at or past ext_limit (ERR_ADDR, err_pc the pc given with that
    transfer, not with the one before it still in flight; no request for the bad beat; the one after never
    starts), an error answer on R (SLVERR, DECERR) and B (ERR_RESP, err_pc of the transfer the answer belongs
    to), and answers breaking the protocol: an R or B answer with no request waiting, RID or BID 1, RLAST low
    (ERR_PROTOCOL). After err no beat is made, the STORE beats already read go out, `quiet` rises once nothing
    is on its way, and err stays with its code and pc until reset."""
    cycles, sram = await setup_bench(dut)
    r = rng()
    stats = dict.fromkeys(("cases", "addr", "resp", "protocol", "requests", "store_beats_after_err"), 0)
    for case in fault_cases(r):
        await run_fault_case(dut, cycles, sram, r, case, stats)
    dut.ext_limit.value = EXT_WORDS
    await reset(dut, cycles)
    await cycles.next()
    assert value(dut.err) == 0, f"err = {value(dut.err)} after a reset"
    dut._log.info("dma faults: %s", ", ".join(f"{key} {count}" for key, count in stats.items()))
    for key, count in stats.items():
        assert count > 0, f"nothing of kind {key} was exercised: {stats}"
