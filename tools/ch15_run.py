#!/usr/bin/env python3
"""Chapter 15: the software checks, then 32 decode steps of the tiny model with no window, a window
of 8 and a window of 4, each replayed on the RTL in Icarus and in Verilator.

Usage: python tools/ch15_run.py        (``make sim`` runs it)

Prints the book's three sections with this project's numbers: the checks, the rule and the pages
in use, the replays and a table of cycles per step with the totals, what one more token of context
costs and what each window saves. Then a verdict: every check passed, every replay PASSed, both
simulators printed identical counters (equal to the machine model's), windowed steps cost the
same once the window is full, and the totals are ordered None > 8 > 4. Exits 1 if any of that
fails. Writes the cycles per step to out/ch15_run.json (read by tools/ch15_figures.py) and the
replay images to out/ch15_W<window>.hex.
"""

from __future__ import annotations

import json
import os
import subprocess
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
SIMULATORS = (("Icarus", hw.sim_icarus), ("Verilator", hw.sim_verilator))
OUT = Path(hw.ROOT) / "out"


def verdict_line(output: str) -> str:
    return ga2_progs.verdict_line(output)


def parse_counters(output: str) -> list[list[int]]:
    """The five counters of every program, in program order."""
    found = ga2_progs.parse_counters(output)
    return [found[i] for i in sorted(found)]


def replay(W, records: list[dict]) -> tuple[list[list[int]] | None, list[str]]:
    """Replay one decode in both simulators; returns (counters, problems)."""
    image = OUT / f"ch15_W{W}.hex"
    ga2_progs.write_image([ga2_progs.record(r["code"], r["ext"]) for r in records], image)
    counters: dict[str, list[list[int]]] = {}
    problems = []
    for name, simulate in SIMULATORS:
        try:
            rc, output = simulate(hw.GA2_FILES, "ga2_tb", defines=("EXTW=8192", "DUMP"),
                                  plusargs=(f"+PROG={image.relative_to(hw.ROOT)}",))
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:  # missing tool, failed build
            rc, output = -1, f"FAIL: could not run {name}: " + " | ".join(str(error).strip().splitlines()[:3])
        line = verdict_line(output)
        print(f"  window {W!s:>4} {name:10s}{line} (exit {rc})")
        counters[name] = parse_counters(output)
        if not line.startswith("PASS") or rc != 0:
            problems.append(f"window {W}: {name} did not pass")
    machine = [r["counters"] for r in records]
    if counters["Icarus"] != counters["Verilator"]:
        problems.append(f"window {W}: Icarus and Verilator printed different counters")
    if counters["Icarus"] != machine:
        problems.append(f"window {W}: the RTL counters differ from the machine model's")
    return (counters["Icarus"] if not problems else None), problems


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
    problems = section_checks()
    decodes, found = section_rule(T.make_model("structured"))
    problems += found
    cycles, found = section_replay(decodes)
    problems += found
    if len(cycles) == len(WINDOWS):
        problems += shape_problems(cycles)
        OUT.mkdir(exist_ok=True)
        result = {"steps": N_STEPS, "page": PAGE, "source": "RTL (Icarus == Verilator == machine model)",
                  "cycles": {str(W): cycles[W] for W in WINDOWS},
                  "pages": {str(W): [r["pages"] for r in decodes[W]] for W in WINDOWS}}
        (OUT / "ch15_run.json").write_text(json.dumps(result, indent=1) + "\n")
    print()
    if problems:
        print("VERDICT: FAIL")
        for p in problems:
            print("  -", p)
        return 1
    flat = ", ".join(f"W={W} flat at {cycles[W][W - 1]} cycles from step {W}" for W in WINDOWS if W)
    print(f"VERDICT: PASS (checks clean; 6 replays PASS with identical counters; {flat}; "
          f"totals {' > '.join(str(sum(cycles[W])) for W in WINDOWS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
