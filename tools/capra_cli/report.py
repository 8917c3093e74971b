"""Cycles of every decode step against its roofline bound, and the cost of one more token.

For the model's decode without a window (contexts 1..steps): per step the cycles (machine model =
RTL, exact), the words the DMA engine moves, the MACs, the bound max(beats, MACs / N^2; N^2 = 16 on
the default 4 x 4 array), the efficiency bound / cycles, the cycles added by one more token of
context and the counters' split (stall: c4, held: h_unit + h_sync). Then the same decode with a
window of 8 and of 4 (the host of Chapter 15: each step runs the program for context min(L, W)),
one line each, and the cost of one
more token of context against the ideal: one K row and one V row to move, 2 x ceil(D / 4) words (in
beats of EXT_WORDS words).

Goals, checked: every step of every window at least 0.80 of its bound, one more token at most 1.25x
the ideal. Exit status 0 when both hold, 1 when one does not, 2 for a bad argument (fewer than 2
steps, or more than the largest context the chip can run: found by compiling, see model/host/limits.py).

Usage: decode_report.py [--steps N] [--model structured|random]      (also ``capra report``)"""

from __future__ import annotations

import paged_lm
import tiny_lm as T
from capra import config, isa
from capra.analysis import roofline
from capra.machine import Counters

from . import fpga
from .common import Parser, at_least, check_context, finish, note

GOAL_EFFICIENCY = 0.80  # every step's bound / cycles
GOAL_PER_TOKEN = 1.25   # one more token of context, against the ideal
WINDOWS = (None, 8, 4)
PAGE = 4  # rows per page, as in Chapter 15


def decode(model: dict, steps: int, W: int | None) -> list[dict]:
    """The records of one decode on the machine model (the Chapter 15 host, greedy from token 0),
    with a page pool large enough for every step (the pages do not change the cycles)."""
    n_pages = -(-steps // PAGE) + 1
    _toks, records = paged_lm.PagedChip(model, steps, W, PAGE, n_pages).generate(0, steps)
    return records


def arguments(ap: Parser) -> None:
    ap.add_argument("--steps", type=at_least(2), default=32,
                    help="decode steps, at least 2 (default 32: contexts 1..32); at most the largest context the "
                         "chip can run")
    ap.add_argument("--model", choices=("structured", "random"), default="structured",
                    help="which tiny model (default structured)")


def main(args) -> int:
    model = T.make_model(args.model)
    check_context("--steps", args.steps, model)
    print(f"{'step':>4s} {'ctx':>4s} {'cycles':>7s} {'words':>6s} {'MACs':>6s} {'bound':>6s} {'eff':>6s} "
          f"{'+cycles':>8s} {'dma':>5s} {'mm':>5s} {'vec':>5s} {'stall':>5s} {'held':>5s}")
    worst: dict[int | None, float] = {}
    totals: dict[int | None, int] = {}
    per_token = 0.0
    for W in WINDOWS:
        if args.steps > 64:
            note(f"decoding {args.steps} steps with window {W} on the machine model")
        records = decode(model, args.steps, W)
        prev = None
        worst[W] = 1.0
        for r in records:
            c = Counters(*r["counters"])
            rf = roofline(r["code"])
            eff = rf.efficiency(c.cycles)
            worst[W] = min(worst[W], eff)
            if W is None:
                inc = "" if prev is None else f"{c.cycles - prev:8d}"
                print(f"{r['L']:4d} {r['ctx']:4d} {c.cycles:7d} {rf.dma_words:6d} {rf.macs:6d} {rf.bound:6.0f} "
                      f"{eff:6.2f} {inc:>8s} {c.dma_busy:5d} {c.mm_busy:5d} {c.vec_busy:5d} {c.dma_stall:5d} "
                      f"{c.hold_unit + c.hold_sync:5d}")
            prev = c.cycles
        totals[W] = sum(r["counters"][0] for r in records)
        if W is None:
            solo = [r["counters"][0] for r in records]
            first, last = records[0]["counters"][0], records[-1]["counters"][0]
            per_token = (last - first) / (len(records) - 1)
    print()
    for W in WINDOWS:
        print(f"window {W!s:>4}: {totals[W]:6d} cycles in {args.steps} steps, worst step efficiency {worst[W]:.3f}")

    words = 2 * isa.words_for(T.D)
    ideal = 2 * isa.dma_beats(1, isa.words_for(T.D))  # cycles: the port moves a beat a cycle
    ratio = per_token / ideal
    low = min(worst.values())
    moved = f"{words} words" if ideal == words else f"{words} words in {ideal} beats"
    print(f"one more token of context: {per_token:.2f} cycles on average (ideal {ideal}: one K row and one V "
          f"row of {T.D} int8 = {moved}), {ratio:.2f}x the ideal")
    print(fpga.tokens_line([(f"step {len(solo)}", 1, solo[-1]), (f"{len(solo)} steps", len(solo), sum(solo))],
                           config.active()))
    failed = []
    if low < GOAL_EFFICIENCY:
        failed.append(f"a step at {low:.3f} of its bound (goal >= {GOAL_EFFICIENCY:.2f})")
    if ratio > GOAL_PER_TOKEN:
        failed.append(f"one more token at {ratio:.2f}x the ideal (goal <= {GOAL_PER_TOKEN:.2f}x)")
    return finish(failed, checks=args.steps * len(WINDOWS),
                  passed=f"every step of every window >= {GOAL_EFFICIENCY:.2f} of its bound (worst {low:.3f}); "
                         f"one more token {ratio:.2f}x the ideal (goal <= {GOAL_PER_TOKEN:.2f}x)")
