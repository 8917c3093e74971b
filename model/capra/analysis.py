"""Roofline bounds of a GA2 program, read off its code (docs/cycle_model.md).

GA2 moves at most one beat per cycle over its external interface (a word, or on a two-word bus the
words of a row in one aligned pair: isa.dma_beats) and does at most N*N int8 MACs per cycle. A
program can therefore not finish in fewer cycles than

    bound = max(beats of LOAD and STORE, MACs / (N*N))

With a one-word interface the beats are the words moved.

Efficiency = bound / cycles. Decode steps are bandwidth-bound: the word term dominates.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import isa
from .isa import Instr


@dataclass(frozen=True)
class Roofline:
    dma_words: int
    dma_transfers: int
    dma_beats: int
    macs: int
    vector_elements: int

    @property
    def mac_cycles(self) -> float:
        return self.macs / (isa.N * isa.N)

    @property
    def bound(self) -> float:
        return max(self.dma_beats, self.mac_cycles)

    def efficiency(self, cycles: int) -> float:
        return self.bound / cycles if cycles else 0.0


def roofline(code: list[int]) -> Roofline:
    """Count what a program moves and computes (HALT or the end of the code stops the count)."""
    words = transfers = beats = macs = elements = 0
    for i in range(0, len(code), isa.WORDS_PER_INSTR):
        ins = Instr.decode(code[i : i + 4])
        if ins.op == isa.OP_HALT:
            break
        if ins.op == isa.OP_LOAD and ins.flags == isa.LD_GATHER:
            # its rows' addresses come from its descriptors: counted as aligned rows (on a one-word
            # bus exact); the descriptors' reads are not data moved
            words += ins.cnt * ins.c
            beats += ins.cnt * -(-ins.c // isa.EXT_WORDS)
            transfers += 1
        elif ins.op in (isa.OP_LOAD, isa.OP_STORE):
            words += ins.cnt * ins.c
            f = isa.dma_fields(ins)
            beats += isa.dma_beats(f.rows, f.cols, f.ext, f.ext_stride)
            transfers += 1
        elif ins.op == isa.OP_MM:
            m, first, _stride = isa.mm_fields(ins)
            first, end = isa.mm_window(m, first, ins.sub)
            macs += ins.cnt * ins.d * (min(4 * end, m) - 4 * first)  # the column window's outputs
        elif ins.op == isa.OP_VEC:
            elements += ins.cnt * isa.vec_rows(ins)
        elif ins.op == isa.OP_SMAX:
            elements += ins.cnt
    return Roofline(words, transfers, beats, macs, elements)
