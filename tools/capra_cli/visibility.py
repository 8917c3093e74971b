"""How much of what the random programs compute would a replay see if the chip got it wrong?

A replay compares what the image records: every external word and the scratchpad words the program
wrote (model/replay/image.py, tb/ga2_tb.v). A compute instruction's result that is overwritten before
the program ends, and never reaches anything compared, can be wrong without any replay noticing.
This measures it directly: for every word a compute instruction (MM, VEC, SMAX) writes, the machine
model runs the program again with that one word corrupted right after the instruction wrote it
(the least significant bit of its first element flipped: the smallest error, the one a rounding
bug makes), and the record of the corrupted run is compared with the true one. A word is *seen*
when the records differ. Counters do not depend on data, so only memory can show a difference.

The same is measured over the compiled programs of the 32-step decode, which store only their
outputs: there most results can be seen only in the scratchpad.

Usage: visibility.py [--programs N] [--min PERCENT]
Prints a row for the random programs and one for the decode (per instruction kind, the share
seen, and the share the external memory alone would show), then the verdict; exits 1 when the
random programs' share is below --min (default 95%).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import paged_lm as PL
import tiny_lm
from capra import isa
from capra.machine import Machine
from capra.randprog import random_program
from replay.image import Record, record_of

from .common import Parser, Progress, finish, in_range, int_range, require_decode

FLIP = 1  # bit 0 of the word: the lowest bit of its first int8 element (or of an int32 result)
GOAL = 95.0  # percent of corrupted words a replay must see
COMPUTE = {isa.OP_MM: "MM", isa.OP_VEC: "VEC", isa.OP_SMAX: "SMAX"}


@dataclass
class Visibility:
    """Corrupted words and how many of them changed the record, per instruction kind."""

    seen: Counter = field(default_factory=Counter)
    total: Counter = field(default_factory=Counter)

    def percent(self, kind: str | None = None) -> float:
        seen = self.seen[kind] if kind else sum(self.seen.values())
        total = self.total[kind] if kind else sum(self.total.values())
        return 100.0 * seen / total if total else 0.0

    def add(self, other: Visibility) -> None:
        self.seen.update(other.seen)
        self.total.update(other.total)


def _finish(mach: Machine, code: list[int], pc: int) -> Machine:
    """Run the program on from instruction pc to its HALT (Machine.run, from the middle)."""
    while mach.step(pc, isa.Instr.decode(code[4 * pc : 4 * pc + 4])):
        pc += 1
    mach.counters.cycles = mach.t
    mach.counters.dma_busy = mach.dma.busy_cycles
    return mach


def _expectations(record: Record, external_only: bool = False) -> tuple:
    """What of a record the replay compares memory against: the external words and the scratchpad
    words (the external memory alone: what replays compared before the scratchpad was)."""
    return (record.ext_changes,) if external_only else (record.ext_changes, record.sp_words)


def program_visibility(code: list[int], ext: list[int], extw: int | None = None,
                       ext_latency: int | None = None, external_only: bool = False) -> Visibility:
    """Corrupt each word each compute instruction of one program writes, one at a time."""
    init = list(ext)
    while init and init[-1] == 0:
        init.pop()
    mach = Machine.with_ext(init, isa.EXT_MEMORY if extw is None else extw, ext_latency=ext_latency)
    snapshots = []  # (pc after the instruction, its kind, the words it wrote, the machine then)
    pc = 0
    while True:
        ins = isa.Instr.decode(code[4 * pc : 4 * pc + 4])
        if not mach.step(pc, ins):
            break
        pc += 1
        if ins.op in COMPUTE:
            snapshots.append((pc, COMPUTE[ins.op], sorted(mach.last_writes), mach.copy()))
    mach.counters.cycles = mach.t
    mach.counters.dma_busy = mach.dma.busy_cycles
    truth = _expectations(record_of(code, init, mach), external_only)
    out = Visibility()
    for next_pc, kind, words, snap in snapshots:
        for w in words:
            bad = snap.copy()
            bad.sram[w] ^= FLIP
            after = record_of(code, init, _finish(bad, code, next_pc))
            seen = _expectations(after, external_only) != truth
            out.seen[kind] += seen
            out.total[kind] += 1
    return out


def measure(programs: int = 200, first_seed: int = 0, external_only: bool = False,
            progress: Progress | None = None) -> Visibility:
    """Visibility over the random programs of seeds first_seed .. first_seed + programs - 1."""
    def each():
        for seed in range(first_seed, first_seed + programs):
            yield random_program(seed)
            if progress is not None:
                progress.step()
    return of_programs(each(), external_only)


def of_programs(programs: Iterable[tuple[list[int], list[int]]], external_only: bool = False) -> Visibility:
    """Visibility over programs given as (code, external memory at the start)."""
    total = Visibility()
    for code, ext in programs:
        total.add(program_visibility(code, ext, external_only=external_only))
    return total


def decode_visibility(steps: int = 32) -> tuple[Visibility, Visibility]:
    """The same over the compiled programs of a decode (the tiny model, Chapter 12's host), compared
    as replays do, and with the external memory alone: a compiled step stores only its outputs, so
    most of what it computes can be seen only in the scratchpad."""
    _tokens, steps_run = PL.PagedChip(tiny_lm.make_model("structured"), steps, paged=False).generate(0, steps)
    full, alone = Visibility(), Visibility()
    for r in steps_run:
        full.add(program_visibility(list(r.code), list(r.ext)))
        alone.add(program_visibility(list(r.code), list(r.ext), external_only=True))
    return full, alone


def line(name: str, v: Visibility, alone: Visibility) -> str:
    """One row of the report: per instruction kind, the total, and the external memory alone."""
    kinds = "  ".join(f"{k} {v.seen[k]}/{v.total[k]}" for k in COMPUTE.values())
    return f"  {name:30s} {kinds}: {v.percent():5.1f}% (the external memory alone: {alone.percent():5.1f}%)"


def report(programs: int = 200, steps: int = 32, goal: float = GOAL) -> float:
    """Print the section (``make bench`` calls this) and return the random programs' percentage."""
    print("\n== what a replay sees: of the words compute instructions write, corrupted one at a time in the "
          "machine model (the lowest bit flipped), the share that changes the memory a replay compares")
    progress = Progress("random programs measured", 2 * programs)
    v = measure(programs, progress=progress)
    print(line(f"{programs} random programs", v, measure(programs, external_only=True, progress=progress)))
    print(line(f"the {steps}-step decode (compiled)", *decode_visibility(steps)))
    verdict = "meets" if v.percent() >= goal else "is BELOW"
    print(f"  replay visibility of computed words in the random programs: {v.percent():.1f}% ({verdict} the "
          f"{goal:g}% goal)")
    return v.percent()


def arguments(ap: Parser) -> None:
    ap.add_argument("--programs", type=int_range(1, 100000), default=200,
                    help="random programs to measure, seeds 0 .. N-1 (1..100000, default 200)")
    ap.add_argument("--min", type=in_range(float, 0.0, 100.0), default=GOAL,
                    help=f"the lowest acceptable total percentage (0..100, default {GOAL:g})")


def main(args) -> int:
    require_decode(32, "visibility")
    seen = report(args.programs, goal=args.min)
    problems = [] if seen >= args.min else [f"{seen:.1f}% of the computed words are seen, below --min {args.min:g}%"]
    return finish(problems, checks=1, passed=f"{seen:.1f}% of the computed words are seen (--min {args.min:g}%)")
