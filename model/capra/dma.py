"""The DMA engine's timeline: when each transfer starts, when each of its words touches the
scratchpad, and when it ends (rtl/dma.v, docs/isa.md). The machine model and the compiler's
scheduler both keep time with it, so they cannot disagree.

A transfer is issued by the sequencer in cycle t and takes its descriptor ("setup") in cycle

    s = max(t + 1, the engine is free, STORE: one cycle after every earlier LOAD has ended)

A transfer moves in *beats*: a beat is up to E = EXT_WORDS consecutive words of one row (E = 1 or
2, the external interface's width), so a row of cols words takes ceil(cols / E) beats and a transfer
n = rows * ceil(cols / E). With an external memory that answers a read L cycles after taking it:

    LOAD   beat b requested in s+1+b, written to the scratchpad in s+2+L+b; ends at s+n+L+2;
           the engine is free for the next setup at s+n+1 (answers overlap the next requests)
    STORE  beat b read from the scratchpad in s+1+b, sent in s+3+b; ends at s+n+3; free at s+n+2

The words of a beat are consecutive addresses, so they lie in different scratchpad lanes (banks)
and are written or read in the same cycle.

A transfer is *in flight* from its issue until its end (a full queue, WAIT and HALT count these);
the engine is *busy* (counter c1) while a transfer that has taken its descriptor has not ended.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from . import isa


@dataclass(eq=False)
class Transfer:
    """One transfer: its words in the order they move, the banks they lie in, and its timing."""

    pc: int
    is_load: bool
    issue: int
    setup: int
    end: int
    sram_words: np.ndarray
    first_touch: int  # the cycle beat 0 touches the scratchpad
    beats: np.ndarray  # word i's beat: it touches the scratchpad in first_touch + beats[i]
    words: frozenset[int] = field(init=False)
    banks: frozenset[int] = field(init=False)  # the scratchpad banks it touches

    def __post_init__(self) -> None:
        self.words = frozenset(self.sram_words.tolist())
        self.banks = frozenset(np.unique(isa.bank_of(self.sram_words)).tolist())

    @property
    def kind(self) -> str:
        return "LOAD" if self.is_load else "STORE"


def word_beats(n: int, cols: int, ext_words: int) -> np.ndarray:
    """The beat of each of the n words of a transfer with rows of `cols` words (row-major order)."""
    i = np.arange(n)
    return (i // cols) * -(-cols // ext_words) + (i % cols) // ext_words


class DmaTimeline:
    """The engine's state: unfinished transfers (oldest first), when it is next free, busy cycles."""

    def __init__(self, latency: int | None = None, ext_words: int | None = None) -> None:
        if latency is None:  # the active configuration's (capra/config.py)
            latency = isa.EXT_LATENCY
        if ext_words is None:
            ext_words = isa.EXT_WORDS
        if ext_words not in (1, 2):
            raise ValueError(f"external interface of {ext_words} words per beat: it must be 1 or 2")
        if not 0 <= latency < isa.DMA_PENDING:
            raise ValueError(f"external read latency {latency} is outside 0..{isa.DMA_PENDING - 1} "
                             f"(the DMA keeps at most {isa.DMA_PENDING} reads waiting for their answers)")
        self.latency = latency
        self.ext_words = ext_words
        self.transfers: list[Transfer] = []
        self.engine_free = 0
        self.last_load_end = 0
        self.busy_until = 0
        self.busy_cycles = 0

    def copy(self) -> DmaTimeline:
        """An independent copy: the transfers themselves are never changed once made, so the copy
        shares them and owns only its list."""
        twin = copy.copy(self)
        twin.transfers = list(self.transfers)
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

    def issue(self, t: int, is_load: bool, sram_words: np.ndarray, cols: int, pc: int = -1) -> Transfer:
        """A transfer issued in cycle t (the queue must have room) moving `sram_words` in rows of
        `cols` words; returns it with its timing."""
        if cols < 1 or len(sram_words) % cols:
            raise ValueError(f"a transfer of {len(sram_words)} words in rows of {cols}")
        beats = word_beats(len(sram_words), cols, self.ext_words)
        n = int(beats[-1]) + 1
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
        x = Transfer(pc, is_load, t, setup, end, sram_words, first_touch, beats)
        self.transfers.append(x)
        self.busy_cycles += max(0, end - max(setup, self.busy_until))
        self.busy_until = max(self.busy_until, end)
        return x


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
            return f"touches SRAM word {min(touched)} that the LOAD of instruction {x.pc} writes"
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
