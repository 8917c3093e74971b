"""Chapter 12: decode 32 tokens from token 0 with the structured model, one program per context
size, and replay all 32 programs on Icarus and Verilator.

Usage: ch12_run.py [--steps N] [--start T]        (also ``capra ch12``)

The host is Chapter 12's: the cache kept as plain lists (``paged_lm.PagedChip`` with no window and
``paged=False``). Passes (exit 0) only when the rule f(t) = 5t + 3 mod 16 holds on the machine
model, both simulators PASS the replay of every program, and their counters equal the machine
model's; exits 1 otherwise, 2 for a bad argument (a start token outside the vocabulary, more
steps than the largest context the chip can run, a bad GA2_EXT or GA2_CONFIG)."""

from __future__ import annotations

import paged_lm as PL
import replay
import tiny_lm as T
from replay import image

from .common import Parser, at_least, check_context, finish, int_range, note


def arguments(ap: Parser) -> None:
    ap.add_argument("--steps", type=at_least(1), default=32, metavar="N",
                    help="decode steps = programs replayed (default 32; at most the largest context "
                         "the chip can run, checked by compiling it)")
    ap.add_argument("--start", type=int_range(0, T.V - 1), default=0, metavar="T",
                    help=f"the first token, 0..{T.V - 1} (default 0)")


def main(args) -> int:
    m = T.make_model("structured")
    check_context("--steps", args.steps, m)
    replay.require()
    if args.steps > 64:
        note(f"decoding {args.steps} steps on the machine model")
    chip = PL.PagedChip(m, args.steps, W=None, paged=False, n_pages=-(-args.steps // 4) + 1)
    toks, steps = chip.generate(args.start, args.steps)
    expected = [args.start]
    for _ in range(args.steps):
        expected.append(T.f_next(expected[-1]))
    print(f"tokens: {toks}")
    print(f"rule f(t) = 5t + 3 mod 16 holds on the machine model: {toks == expected}; "
          f"programs compiled: {len(chip.progs)}")
    problems = [] if toks == expected else ["the rule f(t) = 5t + 3 mod 16 does not hold on the machine model"]
    records = [image.record(s.code, s.ext) for s in steps]
    verdicts = replay.replay(records, name="ch12", tool="ch12")
    for v in verdicts:
        print(f"{v.simulator:10s} {v.line} ({v.seconds:.1f} s)")
        problems += v.problems
    same = all(v.counters == [s.counters for s in steps] for v in verdicts)
    print(f"counters identical in Icarus, Verilator and the machine model: {same}")
    if not same:
        problems.append("the simulators' counters differ from the machine model's")
    return finish(problems, checks=len(records) * len(verdicts),
                  passed=f"{len(records)} programs replayed in both simulators, counters equal to the "
                         "machine model's")
