#!/usr/bin/env python3
"""Cycles of every decode step against its roofline bound, and the cost of one more token.

For the structured model's 32-step decode (contexts 1..32): cycles (machine model = RTL, exact),
words moved, the bound max(words, MACs/16), efficiency, and the cycles added per extra token of
context against the ideal: one K row and one V row to move (2 x ceil(D/4) words).
Usage: decode_report.py [--steps N] [--model structured|random]"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("GA2_EXT", "8192")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

import decode  # noqa: E402
import tiny_lm as T  # noqa: E402
from capra import isa  # noqa: E402
from capra.analysis import roofline  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--model", default="structured")
    args = ap.parse_args()
    m = T.make_model(args.model, 1)
    toks, records = decode.ChipHost(m, args.steps).generate(0, args.steps)
    ideal = 2 * isa.words_for(T.D)
    print(f"{'step':>4s} {'ctx':>4s} {'cycles':>7s} {'words':>6s} {'MACs':>6s} {'bound':>6s} {'eff':>6s} "
          f"{'+cycles':>8s} {'dma':>5s} {'mm':>5s} {'vec':>5s} {'stall':>5s}")
    prev = None
    worst = 1.0
    for r in records:
        c = r.counters
        rf = roofline(r.code)
        eff = rf.efficiency(c.cycles)
        worst = min(worst, eff)
        inc = "" if prev is None else f"{c.cycles - prev:8d}"
        print(f"{r.L:4d} {r.ctx:4d} {c.cycles:7d} {rf.dma_words:6d} {rf.macs:6d} {rf.bound:6.0f} {eff:6.2f} "
              f"{inc:>8s} {c.dma_busy:5d} {c.mm_busy:5d} {c.vec_busy:5d} {c.dma_stall:5d}")
        prev = c.cycles
    first, last = records[0].counters.cycles, records[-1].counters.cycles
    per_token = (last - first) / (len(records) - 1)
    print(f"\nper extra token of context: {per_token:.1f} cycles on average (ideal {ideal}: one K row and one V "
          f"row of {T.D} int8 = {ideal} words), {per_token / ideal:.2f}x the ideal")
    print(f"worst step efficiency {worst:.2f} (bound / cycles); goal >= 0.50 (within 2x of the bound)")
    total = sum(r.counters.cycles for r in records)
    print(f"total {total} cycles for {len(records)} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
