"""Chapter 15: the software checks, then 32 decode steps of the tiny model with no window, a window
of 8 and a window of 4, each replayed on the RTL in Icarus and in Verilator.

Usage: python tools/ch15_run.py        (``make sim`` runs it; also ``capra sim``)
       python tools/ch15_run.py --stall 25 [--stall-seed 7]   (make sim STALL=25: a memory whose
       channels stall; the model runs on the same schedule, so every counter is still exact)

Prints the book's three sections with this project's numbers: the checks, the rule and the pages
in use, the replays and a table of cycles per step with the totals, what one more token of context
costs and what each window saves. Then a verdict: every check passed, every replay PASSed, both
simulators printed identical counters (equal to the machine model's), windowed steps cost the
same once the window is full, and the totals are ordered None > 8 > 4. Exits 1 if any of that
fails. Each window's two replays start as soon as its decode is done and run side by side with
the next decodes and the software checks, each image in a folder of its own (kept, and named, when
a replay fails). Only when the verdict is PASS it writes the
cycles per step to out/ch15_run.json (read by tools/ch15_figures.py; marked "verdict": "PASS" and
with the configuration that ran); a run that fails removes an earlier out/ch15_run.json, so no
figure shows numbers this code did not pass with.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

import paged_lm as PL
import paged_tests as PT
import replay
import tiny_lm as T
from capra import config
from replay import image, runs

from .common import Parser, chip_line, finish, memory, memory_arguments, require_decode

N_STEPS = 32
PAGE = 4
WINDOWS = (None, 8, 4)
TABLE_STEPS = (1, 4, 8, 9, 12, 16, 24, 32)
RUN_JSON = runs.OUT / "ch15_run.json"
RUN_VERDICT = "PASS"  # out/ch15_run.json holds this verdict: written only by a run that passed


def arguments(ap: Parser) -> None:
    """The chapter's run is fixed; only the memory may stall (make sim STALL=25)."""
    memory_arguments(ap)


def section_checks() -> list[str]:
    print("== 1. software checks (page table vs a shadow model under 2,400 random operations with invariants "
          "after every one; exhaustion; exact page counts; paged host == plain host; window semantics)")
    problems = PT.check_all()
    print("  problems:", problems if problems else "none")
    return problems


def decode_all(m: dict, decoded: Callable[[int | None, list], None] = lambda W, steps: None,
               ) -> tuple[dict, list[str], list[str]]:
    """The 32-step decode under each window on the paged host: the steps, section 2's lines (printed
    later, after section 1) and the problems found. ``decoded(W, steps)`` is called as each window's
    decode is done (to start its replays while the next window decodes)."""
    expected = PT.rule_tokens(0, N_STEPS)
    decodes, lines, problems = {}, [], []
    for W in WINDOWS:
        chip = PL.PagedChip(m, N_STEPS, W, PAGE, 64)
        toks, records = chip.generate(0, N_STEPS)
        decodes[W] = records
        decoded(W, records)
        ok = toks == expected
        pages = {L: records[L]["pages"] for L in (1, 8, 16)}  # pages when step L+1 starts = after step L
        lines.append(f"  window {W!s:>4}: rule ok {ok}; distinct programs compiled {len(chip.progs)}; pages in use: "
                     f"after step 1 {pages[1]}, 8 {pages[8]}, 16 {pages[16]}, {N_STEPS} {chip.cache.used()}; "
                     f"peak {chip.peak}")
        if not ok:
            problems.append(f"window {W}: the rule does not hold")
        if len(chip.progs) != (W or N_STEPS):
            problems.append(f"window {W}: {len(chip.progs)} programs compiled, expected {W or N_STEPS}")
    return decodes, lines, problems


def section_rule(lines: list[str]) -> None:
    print(f"\n== 2. the rule f(t) = 5t+3 mod 16 for {N_STEPS} tokens, and the pages in use (page = {PAGE} rows)")
    for line in lines:
        print(line)


def replay_job(W: int | None, steps: list) -> tuple[replay.Replay, list[str]]:
    """The image of one window, each step's record from the machine model; a step whose host
    counters differ from its record's is a problem (the host ran another program than the one
    replayed)."""
    records = [image.record(step.code, step.ext) for step in steps]
    stale = [step.L for step, rec in zip(steps, records, strict=True) if step.counters != rec.counters]
    problems = [f"window {W}: steps {stale}: the host's counters differ from the record's"] if stale else []
    return replay.Replay(f"ch15_W{W}", records), problems


def section_replay(pending: dict[int | None, Future]) -> tuple[dict, list[str]]:
    print("\n== 3. the decodes replayed on the RTL")
    cycles, problems = {}, []
    for W in WINDOWS:
        verdicts = pending[W].result()[0]
        for v in verdicts:
            print(f"  window {W!s:>4} {v.simulator:10s}{v.line} (exit {v.rc})")
            problems += [f"window {W}: {p}" for p in v.problems]
            if v.image:
                problems.append(f"window {W}: the image is kept in {v.image}")
        if all(v.passed for v in verdicts):
            cycles[W] = [c[0] for c in verdicts[0].counters]
    if problems:
        return cycles, list(dict.fromkeys(problems))
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


def main(args) -> int:
    with memory(args):
        return _main()


def _main() -> int:
    require_decode(N_STEPS, "the chapter's run")
    replay.require()
    cfg = config.active()
    if (line := chip_line()) is not None:
        print(line, flush=True)
    # The decodes first, silently, each window's replays (an Icarus run takes seconds) started as
    # soon as its decode is done: they run on the cores while the next decodes and the software
    # checks run here, and the sections print in the book's order.
    pending: dict[int | None, Future] = {}
    found: list[str] = []

    def start_replay(W: int | None, steps: list) -> None:
        job, stale = replay_job(W, steps)
        found.extend(stale)
        pending[W] = replay.replay_in_background([job], tool="sim", workers=len(replay.SIMULATORS))

    decodes, rule_lines, problems = decode_all(T.make_model("structured"), start_replay)
    problems = section_checks() + problems + found
    section_rule(rule_lines)
    cycles, found = section_replay(pending)
    problems += found
    if len(cycles) == len(WINDOWS):
        problems += shape_problems(cycles)
    print()
    if problems:
        RUN_JSON.unlink(missing_ok=True)  # the figures must not show an earlier run's numbers as this code's
        return finish(problems, checks=1, itemize=True)
    runs.write_json(RUN_JSON, {"verdict": RUN_VERDICT, "steps": N_STEPS, "page": PAGE, "config": cfg.key(),
                               "source": "RTL (Icarus == Verilator == machine model)",
                               "provenance": runs.provenance(cfg),
                               "cycles": {str(W): cycles[W] for W in WINDOWS},
                               "pages": {str(W): [r["pages"] for r in decodes[W]] for W in WINDOWS}})
    flat = ", ".join(f"W={W} flat at {cycles[W][W - 1]} cycles from step {W}" for W in WINDOWS if W)
    return finish([], checks=sum(len(c) for c in cycles.values()), brackets=True,
                  passed=f"checks clean; 6 replays PASS with identical counters; {flat}; "
                         f"totals {' > '.join(str(sum(cycles[W])) for W in WINDOWS)}")
