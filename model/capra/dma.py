"""The DMA engine's timeline: when each transfer starts, when each of its words touches the
scratchpad, and when it ends (rtl/dma.v, docs/isa.md). The machine model and the compiler's
scheduler both keep time with it, so they cannot disagree.

A transfer is issued by the sequencer in cycle t and takes its descriptor ("setup") in cycle

    s = max(t + 1, the engine is free, STORE: one cycle after every earlier LOAD has ended)

With n = rows * cols words and an external memory that answers a read L cycles after taking it:

    LOAD   word i requested in s+1+i, written to the scratchpad in s+2+L+i; ends at s+n+L+2;
           the engine is free for the next setup at s+n+1 (answers overlap the next requests)
    STORE  word i read from the scratchpad in s+1+i, sent in s+3+i; ends at s+n+3; free at s+n+2

A transfer is *in flight* from its issue until its end (a full queue, WAIT and HALT count these);
the engine is *busy* (counter c1) while a transfer that has taken its descriptor has not ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import isa


@dataclass(eq=False)
class Transfer:
    """One transfer: its words in the order they move, and when it touches each scratchpad bank."""

    pc: int
    is_load: bool
    issue: int
    setup: int
    end: int
    sram_words: np.ndarray
    first_touch: int  # the cycle word 0 touches the scratchpad; word i touches it in first_touch + i
    words: frozenset[int] = field(init=False)
    bank_windows: dict[int, tuple[int, int]] = field(init=False)  # bank -> first, last cycle

    def __post_init__(self) -> None:
        self.words = frozenset(self.sram_words.tolist())
        self.bank_windows = bank_windows(self.sram_words, self.first_touch)

    @property
    def kind(self) -> str:
        return "LOAD" if self.is_load else "STORE"

    @property
    def last_touch(self) -> int:
        return self.first_touch + len(self.sram_words) - 1


def bank_windows(words: np.ndarray, first_cycle: int) -> dict[int, tuple[int, int]]:
    """Word i touches its bank in cycle first_cycle + i: the first and last such cycle per bank."""
    windows: dict[int, tuple[int, int]] = {}
    for i, bank in enumerate(isa.bank_of(words).tolist()):
        lo = windows[bank][0] if bank in windows else first_cycle + i
        windows[bank] = (lo, first_cycle + i)
    return windows


class DmaTimeline:
    """The engine's state: unfinished transfers (oldest first), when it is next free, busy cycles."""

    def __init__(self, latency: int | None = None) -> None:
        if latency is None:  # the active configuration's (capra/config.py)
            latency = isa.EXT_LATENCY
        if not 0 <= latency < isa.DMA_PENDING:
            raise ValueError(f"external read latency {latency} is outside 0..{isa.DMA_PENDING - 1} "
                             f"(the DMA keeps at most {isa.DMA_PENDING} reads waiting for their answers)")
        self.latency = latency
        self.transfers: list[Transfer] = []
        self.engine_free = 0
        self.last_load_end = 0
        self.busy_until = 0
        self.busy_cycles = 0

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

    def issue(self, t: int, is_load: bool, sram_words: np.ndarray, pc: int = -1) -> Transfer:
        """A transfer issued in cycle t (the queue must have room); returns it with its timing."""
        n = len(sram_words)
        setup = max(t + 1, self.engine_free)
        if not is_load:
            setup = max(setup, self.last_load_end + 1)
        if is_load:
            end = setup + n + self.latency + 2
            first_touch = setup + 2 + self.latency
            self.engine_free = setup + n + 1
            self.last_load_end = end
        else:
            end = setup + n + 3
            first_touch = setup + 1
            self.engine_free = setup + n + 2
        x = Transfer(pc, is_load, t, setup, end, sram_words, first_touch)
        self.transfers.append(x)
        self.busy_cycles += max(0, end - max(setup, self.busy_until))
        self.busy_until = max(self.busy_until, end)
        return x


def race(x: Transfer, reads: set[int], writes: set[int], first: int, last: int) -> str | None:
    """Why a compute instruction executing in cycles first..last, reading and writing these
    scratchpad words, may not run beside transfer x; None when it may.

    Words: it may not touch words a LOAD in flight writes, nor write words a STORE in flight reads.
    Ports: each bank has one read and one write port, so it may not write a bank in a cycle range
    where a LOAD writes it, nor read a bank where a STORE reads it.
    """
    if x.end <= first:
        return None
    mine = writes if x.is_load else reads  # the words whose port the transfer shares
    if x.words.isdisjoint(writes) and (not x.is_load or x.words.isdisjoint(reads)):
        if x.last_touch < first or x.first_touch > last:
            return None
        banks = {isa.bank_of(w) for w in mine}
        for bank, (lo, hi) in x.bank_windows.items():
            if bank in banks and lo <= last and hi >= first:
                port = "write" if x.is_load else "read"
                return (f"needs the {port} port of scratchpad bank {bank} in cycles {first}..{last}, which the "
                        f"{x.kind} of instruction {x.pc} uses in cycles {lo}..{hi}")
        return None
    clash = (reads | writes) & x.words if x.is_load else writes & x.words
    verb = "writes" if x.is_load else "reads"
    return f"touches SRAM word {min(clash)} while the {x.kind} it {verb} (instruction {x.pc}) is in flight"
