"""The DMA engine's timeline: when each transfer starts, when each of its words touches the
scratchpad, and when it ends (rtl/dma.v, docs/isa.md). The machine model and the compiler's
scheduler both keep time with it, so they cannot disagree.

A transfer is issued by the sequencer in cycle t and takes its descriptor ("setup") in cycle

    s = max(t + 1, the engine is free, one cycle after every earlier transfer of the other kind has ended)

(a STORE waits for the LOADs before it, a LOAD for the STOREs before it: the AXI4 port orders
nothing between reads and writes, so this is what makes each see the other's words).

A transfer moves in *beats*, one AXI request each: with a one-word bus (E = EXT_WORDS = 1) a beat
is a word; with a two-word bus (E = 2) a beat is the words of a row that lie in one aligned pair
of external words, so a row starting at an odd address begins with a one-word beat. With n beats
and a memory that is always ready and answers a request L + 1 cycles after taking it:

    LOAD   beat b requested in s+1+b, written to the scratchpad in s+2+L+b; ends at s+n+L+2;
           the engine is free for the next setup at s+n+1 (answers overlap the next requests)
    STORE  beat b read from the scratchpad in s+1+b, sent in s+4+b, answered in s+5+L+b; ends at
           s+n+L+5 (when its last write is answered); free at s+n+2

The words of a beat are consecutive addresses, so they lie in different scratchpad lanes (banks)
and are written or read in the same cycle.

A memory that stalls (``StallSchedule``: each channel not ready, or holding its answer back, in
cycles a seeded hash picks) moves these times; the timeline then follows the engine beat by beat,
as rtl/dma.v does, and stays exact.

A transfer is *in flight* from its issue until its end (a full queue, WAIT and HALT count these);
the engine is *busy* (counter c1) while a transfer that has taken its descriptor has not ended.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from . import isa
from .config import SEED_MAX, STALL_MAX

# the AXI4 channels a stall schedule holds back: the memory's ready on AR, AW and W, its valid on R and B
AR, R, AW, W, B = range(5)
CHANNELS = ("AR", "R", "AW", "W", "B")
SKID = 4  # STORE beats between the scratchpad read and the output registers (rtl/dma.v SKID)


def stall_hash(seed: int, channel: int, cycle: int) -> int:
    """A 32-bit hash of (seed, channel, cycle), the same in tb/extmem_rw.v: which cycles stall."""
    x = (cycle * 0x9E3779B1 + seed * 0x85EBCA6B + channel * 0xC2B2AE35) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


@dataclass(frozen=True)
class StallSchedule:
    """A memory that is not always ready: in cycle c (counted from reset, as counter c0 counts)
    channel ch stalls when stall_hash(seed, ch, c) % 100 < percent. A stalled AR, AW or W channel
    has its ready low; a stalled R or B channel holds back the answer that is due (answers stay in
    order). tb/extmem_rw.v applies the same schedule (+STALL=percent, +SEED=seed), so the machine
    model predicts every cycle counter under it."""

    percent: int
    seed: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.percent <= STALL_MAX:
            raise ValueError(f"stall rate {self.percent}%: it must be in 0..{STALL_MAX} (a memory stalled in "
                             "every cycle would never answer)")
        if not 0 <= self.seed <= SEED_MAX:
            raise ValueError(f"stall seed {self.seed}: it must be in 0..{SEED_MAX}")

    def stalled(self, channel: int, cycle: int) -> bool:
        return self.percent > 0 and stall_hash(self.seed, channel, cycle) % 100 < self.percent

    def first_ready(self, channel: int, cycle: int) -> int:
        """The first cycle >= cycle in which the channel does not stall."""
        while self.stalled(channel, cycle):
            cycle += 1
        return cycle


@dataclass(eq=False)
class Transfer:
    """One transfer: its words in the order they move, the banks they lie in, and its timing."""

    pc: int
    is_load: bool
    issue: int
    setup: int
    end: int
    sram_words: np.ndarray
    beats: int  # its beats: AXI requests
    # a gather's descriptors: the scratchpad words it reads (through the DMA's read port) besides
    # the words it writes
    read_words: np.ndarray | None = None
    words: frozenset[int] = field(init=False)
    banks: frozenset[int] = field(init=False)  # the scratchpad banks it touches
    table_words: frozenset[int] = field(init=False)
    table_banks: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        self.words = frozenset(self.sram_words.tolist())
        self.banks = frozenset(np.unique(isa.bank_of(self.sram_words)).tolist())
        table = self.read_words if self.read_words is not None else np.zeros(0, dtype=np.int64)
        self.table_words = frozenset(table.tolist())
        self.table_banks = frozenset(np.unique(isa.bank_of(table)).tolist()) if len(table) else frozenset()

    @property
    def kind(self) -> str:
        return ("GATHER" if self.read_words is not None else "LOAD") if self.is_load else "STORE"


class DmaTimeline:
    """The engine's state: unfinished transfers (oldest first), when it is next free, busy cycles."""

    def __init__(self, latency: int | None = None, ext_words: int | None = None,
                 stall: StallSchedule | None = None) -> None:
        if latency is None:  # the active configuration's (capra/config.py)
            latency = isa.EXT_LATENCY
        if ext_words is None:
            ext_words = isa.EXT_WORDS
        if ext_words not in (1, 2):
            raise ValueError(f"external interface of {ext_words} words per beat: it must be 1 or 2")
        if not 0 <= latency <= isa.DMA_PENDING - 2:
            raise ValueError(f"external memory latency {latency} is outside 0..{isa.DMA_PENDING - 2} "
                             f"(the DMA keeps at most {isa.DMA_PENDING} requests waiting for their answers)")
        self.latency = latency
        self.ext_words = ext_words
        self.transfers: list[Transfer] = []
        self.engine_free = 0
        self.last_load_end = 0
        self.last_store_end = 0
        self.busy_until = 0
        self.busy_cycles = 0
        # with a stall schedule the engine is followed beat by beat (_load_beats, _store_beats)
        self.stall = stall
        self.ar_free = 0  # the AR register can take a beat from this cycle on
        self.r_answers: list[int] = []  # when each read still counted is answered (in order)
        self.o_free = 0  # the AW/W output registers can take a beat from this cycle on
        self.b_answers: list[int] = []  # when each write still counted is answered (in order)
        self.st_beats: list[tuple[int, int]] = []  # (read from the scratchpad, into the output registers)

    def copy(self) -> DmaTimeline:
        """An independent copy: the transfers themselves are never changed once made, so the copy
        shares them and owns only its list."""
        twin = copy.copy(self)
        twin.transfers = list(self.transfers)
        twin.r_answers = list(self.r_answers)
        twin.b_answers = list(self.b_answers)
        twin.st_beats = list(self.st_beats)
        return twin

    def in_flight(self, t: int) -> list[Transfer]:
        """Transfers issued and not ended in cycle t, oldest first. Transfers end in the order they
        were issued (each starts after the one before has freed the engine, a STORE after every
        LOAD has ended), so the ended ones are always at the front."""
        ended = 0
        while ended < len(self.transfers) and self.transfers[ended].end <= t:
            ended += 1
        del self.transfers[:ended]
        return self.transfers

    def room_at(self, t: int) -> int:
        """The first cycle >= t in which a transfer can be issued (fewer than DMA_QUEUE in flight)."""
        flying = self.in_flight(t)
        if len(flying) < isa.DMA_QUEUE:
            return t
        return flying[len(flying) - isa.DMA_QUEUE].end

    def drained_at(self, t: int, keep: int = 0) -> int:
        """The first cycle >= t in which at most `keep` transfers are in flight."""
        flying = self.in_flight(t)
        if len(flying) <= keep:
            return t
        return flying[len(flying) - keep - 1].end

    def issue(self, t: int, is_load: bool, sram_words: np.ndarray, cols: int, pc: int = -1,
              ext_words: np.ndarray | None = None, page_starts: np.ndarray | None = None,
              table_words: np.ndarray | None = None) -> Transfer:
        """A transfer issued in cycle t (the queue must have room) moving `sram_words` to or from the
        external words `ext_words` (needed with a two-word bus: they decide the beats), in rows of
        `cols` words; returns it with its timing. A gather gives `page_starts`, the indices of the
        words that begin a page (the engine reads a descriptor, GATHER_DESC_CYCLES, before each:
        with an always-ready memory it is timed as a LOAD of that many more beats), and
        `table_words`, the descriptors it reads."""
        if cols < 1 or len(sram_words) % cols:
            raise ValueError(f"a transfer of {len(sram_words)} words in rows of {cols}")
        if self.ext_words == 1:
            beats = np.arange(len(sram_words))
        else:
            if ext_words is None or len(ext_words) != len(sram_words):
                raise ValueError("a two-word bus needs the external address of every word of a transfer")
            beats = isa.dma_beat_index(ext_words, cols, self.ext_words)
        n = beats_n = int(beats[-1]) + 1
        firsts = frozenset() if page_starts is None else frozenset(beats[np.asarray(page_starts)].tolist())
        setup = max(t + 1, self.engine_free, (self.last_store_end if is_load else self.last_load_end) + 1)
        if self.stall is not None:
            end, self.engine_free = self._load_beats(setup, n, firsts) if is_load else self._store_beats(setup, n)
        elif is_load:
            n += isa.GATHER_DESC_CYCLES * len(firsts)  # a gather: timed as a LOAD of that many more beats
            end = setup + n + self.latency + 2
            self.engine_free = setup + n + 1
        else:
            end = setup + n + self.latency + 5
            self.engine_free = setup + n + 2
        if is_load:
            self.last_load_end = end
        else:
            self.last_store_end = end
        x = Transfer(pc, is_load, t, setup, end, sram_words, beats_n, table_words)
        self.transfers.append(x)
        self.busy_cycles += max(0, end - max(setup, self.busy_until))
        self.busy_until = max(self.busy_until, end)
        return x


    # ---- beat by beat, under a stall schedule: rtl/dma.v's engine, cycle for cycle ----------------
    def _load_beats(self, setup: int, n: int, firsts: frozenset[int] = frozenset()) -> tuple[int, int]:
        """A LOAD's n beats: each is made (into the AR register) in a cycle the register is free
        and fewer than DMA_PENDING reads are unanswered (or one is answered in it), offered from the
        next cycle until the memory takes it, and answered 1 + latency cycles after that or later
        (stalls), in order. A gather's beat that begins a page (in `firsts`) comes no sooner than
        GATHER_DESC_CYCLES + 1 cycles after the beat before it is made (for the first beat: than
        GATHER_DESC_CYCLES after the setup): its descriptor is read from the scratchpad in between.
        Returns (end, when the engine is free)."""
        stall, pending = self.stall, isa.DMA_PENDING
        made = setup  # the first beat is made in the setup cycle
        taken = setup
        c = setup - 1  # the cycle the last beat was made
        for b in range(n):
            if b in firsts:
                made = max(made, c + 1 + isa.GATHER_DESC_CYCLES)
            c = max(made, self.ar_free)
            answers = self.r_answers = [a for a in self.r_answers if a >= c]
            while len(answers) >= pending and answers[0] != c:
                c += 1
                answers = self.r_answers = [a for a in answers if a >= c]
            taken = stall.first_ready(AR, c + 1)
            last = self.r_answers[-1] if self.r_answers else -1
            answer = stall.first_ready(R, max(taken + 1 + self.latency, last + 1))
            self.r_answers.append(answer)
            self.ar_free = made = taken
        return self.r_answers[-1] + 1, taken + 1

    def _store_beats(self, setup: int, n: int) -> tuple[int, int]:
        """A STORE's n beats: each is read from the scratchpad (from the cycle after the setup, one
        a cycle, while fewer than SKID beats wait between that read and the output registers), here
        two cycles later, put into the output registers once they are free and fewer than
        DMA_PENDING writes are unanswered, offered on AW and W until each channel takes it, done
        when both have, and answered 1 + latency cycles after that or later (stalls), in order.
        Returns (end, when the engine is free)."""
        stall, pending = self.stall, isa.DMA_PENDING
        read = setup  # the cycle before the first read
        for _ in range(n):
            c = read + 1
            while sum(1 for r, o in self.st_beats if r <= c - 1 and o >= c) >= SKID:
                c += 1
            read = c
            o = max(read + 2, self.o_free)
            answers = self.b_answers = [a for a in self.b_answers if a >= o]
            while len(answers) >= pending and answers[0] != o:
                o += 1
                answers = self.b_answers = [a for a in answers if a >= o]
            self.st_beats = [(r, oo) for r, oo in self.st_beats if oo >= read] + [(read, o)]
            done = max(stall.first_ready(AW, o + 1), stall.first_ready(W, o + 1))
            self.o_free = done
            last = self.b_answers[-1] if self.b_answers else -1
            self.b_answers.append(stall.first_ready(B, max(done + 1 + self.latency, last + 1)))
        return self.b_answers[-1] + 1, read + 2


def conflict(x: Transfer, reads: frozenset[int], writes: frozenset[int]) -> str | None:
    """Why a compute instruction reading and writing these scratchpad words may not run while
    transfer x may still be in flight, whatever the memory's timing; None when it may.

    Words: not the words a LOAD writes (read after write, write after write), nor, writing, the
    words a STORE reads (write after read). Ports: each bank has one read and one write port, so
    not writing a bank a LOAD writes, nor reading a bank a STORE reads. No cycle enters the rule:
    a program that keeps it gives the same results on any memory (docs/isa.md).
    """
    if x.is_load:
        touched = (reads | writes) & x.words
        if touched:
            return f"touches SRAM word {min(touched)} that the {x.kind} of instruction {x.pc} writes"
        if x.table_words:  # a gather also reads its descriptors, on the DMA's read port
            touched = writes & x.table_words
            if touched:
                return f"writes SRAM word {min(touched)}, a descriptor the GATHER of instruction {x.pc} reads"
            shared = x.table_banks & isa.banks_of(reads) if reads else set()
            if shared:
                return (f"needs the read port of scratchpad bank {min(shared)} that the GATHER of instruction "
                        f"{x.pc} uses")
        port_words, port = writes, "write"
    else:
        touched = writes & x.words
        if touched:
            return f"writes SRAM word {min(touched)} that the STORE of instruction {x.pc} reads"
        port_words, port = reads, "read"
    shared = x.banks & isa.banks_of(port_words) if port_words else set()
    if shared:
        return f"needs the {port} port of scratchpad bank {min(shared)} that the {x.kind} of instruction {x.pc} uses"
    return None
