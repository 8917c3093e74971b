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
the ideal (with 16 steps or more: a shorter decode measures less than a token costs). Exit status 0
when both hold, 1 when one does not, 2 for a bad argument (fewer than 2 steps, or more than the
largest context the chip can run: found by compiling, see model/host/limits.py).

Then it writes out/report.html, one page with every result this checkout has made (the roofline,
decode steps, serving, the sweep, synthesis, the mutation score, the soak: tools/capra_cli/report_page.py),
and out/report/roofline.png; --no-page prints the roofline only.

Usage: decode_report.py [--steps N] [--model structured|random] [--no-page]     (also ``capra report``)"""

from __future__ import annotations

import builtins
from pathlib import Path

import paged_lm
import tiny_lm as T
from capra import config, isa
from capra.analysis import roofline
from capra.machine import Counters
from replay import runs

from . import fpga, report_page
from .common import Parser, at_least, check_context, finish, note

GOAL_EFFICIENCY = 0.80  # every step's bound / cycles
GOAL_PER_TOKEN = 1.25   # one more token of context, against the ideal
# The fewest steps whose average says what one more token costs: the first steps are bound by the
# weights' loads, behind which a token's K and V rows hide (steps 1..4 add 5.3 cycles a token, the
# decode's later steps 8), so a shorter decode measures less than a token costs; below it the goal
# is said to be not checked.
SLOPE_STEPS = 16
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
    ap.add_argument("--no-page", action="store_true",
                    help="print the roofline only; do not write out/report.html (the page of every result)")


def draw(series: dict[int | None, list[tuple[int, int, float]]], model: str, path: Path, footer: str) -> Path:
    """Cycles of every step in each window and the roofline bound of the steps without one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    for W, points in series.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], "o-", ms=3,
                label="cycles, no window" if W is None else f"cycles, window {W}")
    solo = series[None]
    ax.plot([p[0] for p in solo], [p[2] for p in solo], "k--", label="roofline bound, no window")
    ax.set_xlabel("decode step (context)")
    ax.set_ylabel("cycles")
    ax.set_title(f"Decode steps of the {model} model against the roofline (machine model = RTL)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.text(0.01, 0.01, footer, fontsize=7, color="0.4")
    with runs.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png", metadata=runs.figure_metadata(footer))
    plt.close(fig)
    return path


def write_page(lines: list[str], series: dict, model: str) -> None:
    """out/report/roofline.png and out/report.html, the page of every result (report_page)."""
    prov = runs.provenance()
    figure = draw(series, model, runs.OUT / "report" / "roofline.png", runs.footer(prov))
    page, secs = report_page.write(runs.OUT, report_page.Roofline(lines, figure, prov))
    shown = page.relative_to(runs.ROOT) if page.is_relative_to(runs.ROOT) else page
    builtins.print(f"wrote {shown}: {report_page.summary(secs)}")


def main(args) -> int:
    model = T.make_model(args.model)
    check_context("--steps", args.steps, model)
    lines: list[str] = []

    def print(line: str = "") -> None:  # every line printed is also the page's table
        lines.append(line)
        builtins.print(line)

    series: dict[int | None, list[tuple[int, int, float]]] = {}  # per window: (step, cycles, bound)
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
        series[W] = []
        for r in records:
            c = Counters(*r["counters"])
            rf = roofline(r["code"])
            eff = rf.efficiency(c.cycles)
            worst[W] = min(worst[W], eff)
            series[W].append((r["L"], c.cycles, rf.bound))
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
          f"row of {T.D} int8 = {moved}), {ratio:.2f}x the ideal"
          + ("" if args.steps >= SLOPE_STEPS else f" (not held to the goal: {args.steps} steps, fewer than the "
                                                  f"{SLOPE_STEPS} that measure it)"))
    print(fpga.tokens_line([(f"step {len(solo)}", 1, solo[-1]), (f"{len(solo)} steps", len(solo), sum(solo))],
                           config.active()))
    failed = []
    if low < GOAL_EFFICIENCY:
        failed.append(f"a step at {low:.3f} of its bound (goal >= {GOAL_EFFICIENCY:.2f})")
    slope = args.steps >= SLOPE_STEPS
    if slope and ratio > GOAL_PER_TOKEN:
        failed.append(f"one more token at {ratio:.2f}x the ideal (goal <= {GOAL_PER_TOKEN:.2f}x)")
    if not args.no_page:
        write_page(lines, series, args.model)
    return finish(failed, checks=args.steps * len(WINDOWS) + slope,
                  passed=f"every step of every window >= {GOAL_EFFICIENCY:.2f} of its bound (worst {low:.3f}); "
                         + (f"one more token {ratio:.2f}x the ideal (goal <= {GOAL_PER_TOKEN:.2f}x)" if slope else
                            f"one more token not checked ({args.steps} steps, fewer than {SLOPE_STEPS})"))
