"""Chapter 15, exercise 3's worked answer: attention sinks on the paged host, checked.

Step L reads the sink rows 0 .. S-1 and the most recent rows, min(L, W) - 1 rows in all (every
previous row while L <= W). The answer (model/answers/sinks.py) changes the gather, the release,
the float reference and the calibration, and leaves model/paged_lm.py and the programs as they
are. Its checks (model/answers/sinks_checks.py): (1) the chip is given exactly the attended rows
and follows the float reference with sinks token for token; (2) that reference equals a step over
keys and values recomputed from the token ids; (3) the page table's invariants hold after every
step and the pages held are those the needed rows take; (4) every program is calibrated on the
rows the gather gives it.

It prints, per step, the rows read, the pages held when the step starts (no window, the window
alone, the window with sinks under front-only trim and with the middle release) and the chip's
token beside the float reference's; then the peaks, the errors and one line per group of checks,
and a last line with the verdict: a pass only when every check passed (exit status 1 otherwise).

Usage: python tools/ch15_sinks.py [--window W] [--sinks S] [--steps N] [--page P]
"""

from __future__ import annotations

import tiny_lm as T
from answers import sinks_checks as checks

from .common import BadArgument, Parser, check_context, finish, int_range

GROUPS = {"(1)": "the chip follows the float reference with sinks",
          "(2)": "the float reference equals the recomputation from the token ids",
          "(3)": "the page table's invariants and the pages held",
          "(4)": "the calibration sees the rows the gather gives"}


def arguments(ap: Parser) -> None:
    ap.add_argument("--window", type=int_range(2, 64), default=8, metavar="W",
                    help="the window W in tokens, 2..64 (default 8)")
    ap.add_argument("--sinks", type=int_range(1, 63), default=2, metavar="S",
                    help="sink rows S, 1..W-1 (default 2)")
    ap.add_argument("--steps", type=int_range(1, 128), default=32, metavar="N",
                    help="decode steps N, 1..128 (default 32)")
    ap.add_argument("--page", type=int_range(1, 64), default=4, metavar="P",
                    help="rows per page P, 1..64 (default 4)")


def spans(rows: list[int]) -> str:
    """Row numbers as ranges: [0, 1, 5, 6, 7] -> '0-1 5-7'."""
    runs: list[list[int]] = []
    for i in rows:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return " ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs) or "-"


def main(args) -> int:
    W, S, steps, page = args.window, args.sinks, args.steps, args.page
    if S > W - 1:
        raise BadArgument("--sinks", f"{S} sink rows do not fit a window of {W}: at most W - 1 = {W - 1}")
    check_context("--window", min(W, steps), T.make_model("random", checks.MODEL_SEED))
    print(f"exercise 3, attention sinks: window W={W}, S={S} sink rows, {steps} steps, pages of {page} rows")
    print(f"step L reads rows 0..{S - 1} and the last {W - 1 - S} rows once L > {W}; the programs are the window's "
          f"(contexts 1..{min(W, steps)})")
    res = checks.run_all(W, S, steps, page)
    sinks = f"W={W}+{S}"
    print(f"\n{'':15s} {'':22s} {'pages held when the step starts':^38s} {'token':^11s}")
    print(f"{'L':>3s} {'ctx':>3s}  {'rows read':22s} {'none':>6s} {f'W={W}':>6s} {sinks + ' front':>12s} "
          f"{sinks + ' middle':>13s} {'chip':>5s} {'float':>5s}")
    for row in res.table:
        L = row["L"]
        cells = [f"{row[c]:6d}" if c in row else f"{'?':>6s}" for c in ("none", "window")]
        print(f"{L:3d} {min(L, W):3d}  {spans(checks.attended(L, W, S)):22s} {' '.join(cells)} "
              f"{row.get('front', '?'):>12} {row.get('middle', '?'):>13} {row.get('chip', '?'):>5} "
              f"{row.get('float', '?'):>5}")
    bound = -(-S // page) + -(-(W - 1 - S) // page) + 1
    peaks = res.peaks
    print(f"\npeak pages: no window {peaks.get('none', '?')}, window alone {peaks.get('window', '?')}, "
          f"sinks with front-only trim {peaks.get('front', '?')} (nothing is released: row 0 is read at every step), "
          f"sinks with the middle release {peaks.get('middle', '?')} (bound ceil(S/P) + ceil((W-1-S)/P) + 1 = {bound})")
    print(f"the chip's logits against the float with sinks: largest relative error {res.error_sinks:.3f}"
          + (f"; against the float without them (steps past the window): {res.error_window:.3f}"
             if steps > W else ""))
    print(f"(the chapter's windowed chip against its own float reference: {res.error_chapter:.3f}; "
          f"the bound is the larger of 0.15 and 1.5 times that)")
    for group, what in GROUPS.items():
        failed = sum(1 for p in res.problems if p.startswith(group))
        print(f"{group} {what}: {res.counts.get(group, 0)} checks, {failed} failed")
    return finish(res.problems, res.checks, f"{res.checks} checks, the worked answer to exercise 3 holds",
                  itemize=True)
