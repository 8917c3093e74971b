#!/usr/bin/env python3
"""Chapter 15: the software checks, then 32 decode steps of the tiny model with no window, a window
of 8 and a window of 4, each replayed on the RTL in Icarus and in Verilator.

Usage: python tools/ch15_run.py        (``make sim`` runs it)

Prints the book's three sections with this project's numbers: the checks, the rule and the pages
in use, the replays and a table of cycles per step with the totals, what one more token of context
costs and what each window saves. Then a verdict: every check passed, every replay PASSed, both
simulators printed identical counters (equal to the machine model's), windowed steps cost the
same once the window is full, and the totals are ordered None > 8 > 4. Exits 1 if any of that
fails. Writes the replay images to out/ch15_W<window>.hex and, only when the verdict is PASS, the
cycles per step to out/ch15_run.json (read by tools/ch15_figures.py; marked "verdict": "PASS"); a
run that fails removes an earlier out/ch15_run.json, so no figure shows numbers this code did not
pass with.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import bootstrap

bootstrap.need("numpy")

import cli  # noqa: E402

os.environ["GA2_EXT"] = "8192"
TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(TOOLS.parent / "model"))

import ga2_progs  # noqa: E402
import hw  # noqa: E402
import paged_lm as PL  # noqa: E402
import paged_tests as PT  # noqa: E402
import tiny_lm as T  # noqa: E402

N_STEPS = 32
PAGE = 4
WINDOWS = (None, 8, 4)
TABLE_STEPS = (1, 4, 8, 9, 12, 16, 24, 32)
OUT = Path(hw.ROOT) / "out"


RUN_JSON = OUT / "ch15_run.json"
RUN_VERDICT = "PASS"  # out/ch15_run.json holds this verdict: written only by a run that passed


def replay(W, records: list[dict]) -> tuple[list[list[int]] | None, list[str]]:
    """Replay one decode in both simulators; returns (counters, problems)."""
    image = OUT / f"ch15_W{W}.hex"
    ga2_progs.write_image([ga2_progs.record(r["code"], r["ext"]) for r in records], image)
    replays = hw.replay(image, len(records), 8192)
    problems = []
    for r in replays:
        print(f"  window {W!s:>4} {r.simulator:10s}{r.line} (exit {r.rc})")
        problems += [f"window {W}: {p}" for p in r.problems]
    icarus, verilator = (r.counters for r in replays)
    machine = [r["counters"] for r in records]
    if icarus != verilator:
        problems.append(f"window {W}: Icarus and Verilator printed different counters")
    if icarus != machine:
        problems.append(f"window {W}: the RTL counters differ from the machine model's")
    return (icarus if not problems else None), problems


def section_checks() -> list[str]:
    print("== 1. software checks (page table vs a shadow model under 2,400 random operations with invariants "
          "after every one; exhaustion; exact page counts; paged host == plain host; window semantics)")
    problems = PT.check_all()
    print("  problems:", problems if problems else "none")
    return problems


def section_rule(m: dict) -> tuple[dict, list[str]]:
    print(f"\n== 2. the rule f(t) = 5t+3 mod 16 for {N_STEPS} tokens, and the pages in use (page = {PAGE} rows)")
    expected = PT.rule_tokens(0, N_STEPS)
    decodes, problems = {}, []
    for W in WINDOWS:
        chip = PL.PagedChip(m, N_STEPS, W, PAGE, 64)
        toks, records = chip.generate(0, N_STEPS)
        decodes[W] = records
        ok = toks == expected
        pages = {L: records[L]["pages"] for L in (1, 8, 16)}  # pages when step L+1 starts = after step L
        print(f"  window {W!s:>4}: rule ok {ok}; distinct programs compiled {len(chip.progs)}; pages in use: "
              f"after step 1 {pages[1]}, 8 {pages[8]}, 16 {pages[16]}, {N_STEPS} {chip.cache.used()}; "
              f"peak {chip.peak}")
        if not ok:
            problems.append(f"window {W}: the rule does not hold")
        if len(chip.progs) != (W or N_STEPS):
            problems.append(f"window {W}: {len(chip.progs)} programs compiled, expected {W or N_STEPS}")
    return decodes, problems


def section_replay(decodes: dict) -> tuple[dict, list[str]]:
    print("\n== 3. the decodes replayed on the RTL")
    cycles, problems = {}, []
    for W in WINDOWS:
        counters, found = replay(W, decodes[W])
        problems += found
        if counters is not None:
            cycles[W] = [c[0] for c in counters]
    if problems:
        return cycles, problems
    print("  Icarus and Verilator printed identical counters for all "
          f"{sum(len(c) for c in cycles.values())} programs, equal to the machine model's")
    print(f"\n{'step':>5} " + " ".join(f"{'cycles W=' + str(W):>14}" for W in WINDOWS))
    for L in TABLE_STEPS:
        print(f"{L:5d} " + " ".join(f"{cycles[W][L - 1]:14d}" for W in WINDOWS))
    print(f"{'total':>5} " + " ".join(f"{sum(cycles[W]):14d}" for W in WINDOWS))
    print()
    for line in cost_lines(cycles):
        print(" ", line)
    return cycles, problems


def cost_lines(cycles: dict) -> list[str]:
    """What one more token of context costs without a window, and what each window saves in total."""
    full = cycles[None]
    per_token = (full[-1] - full[0]) / (len(full) - 1)
    saved = [f"a window of {W} saves {100 * (sum(full) - sum(cycles[W])) / sum(full):.1f}%"
             for W in WINDOWS if W is not None]
    return [f"without a window one more token of context costs {per_token:.1f} cycles on average "
            f"(step 1: {full[0]}, step {len(full)}: {full[-1]})",
            f"over {len(full)} steps {' and '.join(saved)} of the cycles of no window"]


def shape_problems(cycles: dict) -> list[str]:
    """Windowed steps cost the same from the step the window fills; totals ordered None > 8 > 4."""
    problems = []
    for W in WINDOWS:
        if W is not None and len(set(cycles[W][W - 1:])) != 1:
            problems.append(f"window {W}: cycles not flat from step {W}: {sorted(set(cycles[W][W - 1:]))}")
    totals = [sum(cycles[W]) for W in WINDOWS]
    if not totals[0] > totals[1] > totals[2]:
        problems.append(f"totals not ordered None > 8 > 4: {totals}")
    return problems


def main(argv: list[str] | None = None) -> int:
    cli.parser(__doc__).parse_args(argv)
    hw.require_simulators()
    problems = section_checks()
    decodes, found = section_rule(T.make_model("structured"))
    problems += found
    cycles, found = section_replay(decodes)
    problems += found
    if len(cycles) == len(WINDOWS):
        problems += shape_problems(cycles)
    print()
    if problems:
        if RUN_JSON.exists():  # the figures must not show an earlier run's numbers as this code's
            RUN_JSON.unlink()
        return cli.finish(problems, checks=1, itemize=True)
    cli.write_json(RUN_JSON, {"verdict": RUN_VERDICT, "steps": N_STEPS, "page": PAGE,
                              "source": "RTL (Icarus == Verilator == machine model)",
                              "cycles": {str(W): cycles[W] for W in WINDOWS},
                              "pages": {str(W): [r["pages"] for r in decodes[W]] for W in WINDOWS}})
    flat = ", ".join(f"W={W} flat at {cycles[W][W - 1]} cycles from step {W}" for W in WINDOWS if W)
    return cli.finish([], checks=sum(len(c) for c in cycles.values()), brackets=True,
                      passed=f"checks clean; 6 replays PASS with identical counters; {flat}; "
                             f"totals {' > '.join(str(sum(cycles[W])) for W in WINDOWS)}")


if __name__ == "__main__":
    sys.exit(cli.run(main))
