#!/usr/bin/env python3
"""Soak: many random programs through the machine model and both simulators, bit for bit.

    python tools/soak.py -n 10000          (make soak N=10000)

Program i of a run is random_program(seed) (model/capra/randprog.py: every instruction form,
matmuls of 1..9 rows with and without BROWS, BIAS, RELU, column windows, every VEC and SMAX form,
DMA overlap) for a seed derived from --seed and i. Programs go in batches of --batch, each batch
at one external memory latency (0, 1, 4 and 16 cycles in turn: every latency the testbench is
run at). A batch is one image (tools/ga2_progs.py, expectations from the machine model) replayed
once in Icarus and once in Verilator; the testbench compares the external memory, the scratchpad
words each program wrote and the five counters, and prints every program's counters, which must
also equal the model's. --jobs batches run at once (default 2: this machine's cores).

A program the testbench stops at (FAIL or MISMATCH) is counted as a mismatch, its image kept
under out/soak/, and the rest of its batch is replayed after it, so every program is checked.

The chip and the model follow the active configuration (GA2_CONFIG, docs/design_space.md), e.g.
GA2_CONFIG="ext_words=2" python tools/soak.py -n 2000; the batches still rotate the latency.

Progress is one line per batch. The run is resumable: out/soak/state.json (written to a temporary
file, then renamed) records the finished batches; the same command again continues where it
stopped, a larger -n extends a finished run, --fresh starts over.

The last line: "soak: <programs> programs, <mismatches> mismatches, <rate> programs per second"
(totals over the run, resumed parts included). Exit status 0 when every program matched, 1 when
one did not or when nothing was checked, 2 for a bad argument or a state file of other settings.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import bootstrap

bootstrap.need("numpy")

import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "model"), str(ROOT / "tools")]

import ga2_progs  # noqa: E402
import hw  # noqa: E402
from capra import config  # noqa: E402
from capra.randprog import EXTW, random_program  # noqa: E402

LATENCIES = (0, 1, 4, 16)  # the external read latencies the tests replay at (tests/test_replay.py)
SOAK_DIR = Path(hw.ROOT) / "out" / "soak"
STATE = SOAK_DIR / "state.json"
SIMULATORS = (("Icarus", hw.sim_icarus, hw.build_icarus), ("Verilator", hw.sim_verilator, hw.build_verilator))
PROGRAM_RE = re.compile(r"\bprogram (\d+)\b")
SEED_STRIDE = 1_000_000_000  # program i of --seed s is random_program(s * SEED_STRIDE + i + SEED_BASE)
SEED_BASE = 10_000_000  # above every seed the tests use
SIM_TIMEOUT = 900  # seconds for one simulator run of a batch (about 10 s per 250 programs in Icarus)


def defines() -> tuple[str, ...]:
    """The testbench's defines, then the active configuration's chip defines (none at the default:
    the order of tests/replay_util.py, so the tests' build is reused). The latency is a plusarg:
    one build serves every batch."""
    return (f"EXTW={EXTW}", "DUMP") + hw.config_defines()


@dataclass
class Batch:
    index: int
    first: int  # the run's index of its first program
    count: int
    latency: int
    seed: int

    def seeds(self) -> list[int]:
        return [self.seed * SEED_STRIDE + SEED_BASE + self.first + i for i in range(self.count)]


@dataclass
class Outcome:
    batch: int
    programs: int
    mismatches: list[dict] = field(default_factory=list)


def batches(n: int, size: int, seed: int) -> list[Batch]:
    return [Batch(b, first, min(size, n - first), LATENCIES[b % len(LATENCIES)], seed)
            for b, first in enumerate(range(0, n, size))]


def _replay(name: str, simulate, records: list[list[int]], image: Path, latency: int,
            first: int) -> tuple[int | None, str, dict[int, list[int]]]:
    """Replay records[first:]. Returns the index of the program the testbench stopped at (-1: it
    passed them all; None: it named none, so the rest of the batch is unchecked), its verdict line
    and the counters it printed, by index in records."""
    ga2_progs.write_image(records[first:], image)
    try:
        _rc, out = simulate(hw.GA2_FILES, "ga2_tb", defines=defines(),
                            plusargs=(f"+PROG={image}", hw.latency_plusarg(latency)),
                            timeout=SIM_TIMEOUT)
    except Exception as error:  # a build or a run that breaks (or hangs) fails the check, and says why
        return None, f"FAIL: {name} could not run: {str(error).strip().splitlines()[0][:200]}", {}
    line = cli.verdict_text(out)
    got = {first + i: c for i, c in ga2_progs.parse_counters(out).items()}
    if line.startswith("PASS"):
        return -1, line, got
    found = PROGRAM_RE.search(line)
    return (first + int(found.group(1)) if found else None), line, got


def run_batch(batch: Batch) -> Outcome:
    """Generate, model and replay one batch in both simulators (runs in a worker process)."""
    seeds = batch.seeds()
    records = [ga2_progs.record(*random_program(s, ext_latency=batch.latency), EXTW, batch.latency) for s in seeds]
    expected = {i: r[-6:-1] for i, r in enumerate(records)}
    image = SOAK_DIR / f"batch{batch.index}.hex"
    bad: dict[int, dict] = {}
    for name, simulate, _build in SIMULATORS:
        first = 0
        while first < len(records):
            stop, line, got = _replay(name, simulate, records, image, batch.latency, first)
            for i, c in got.items():
                if c != expected[i] and i not in bad:
                    bad[i] = {"seed": seeds[i], "simulator": name, "why": f"counters {c}, the model says {expected[i]}"}
            if stop is None:  # nothing after `first` was checked in this simulator
                for i in range(first, len(records)):
                    bad.setdefault(i, {"seed": seeds[i], "simulator": name, "why": line})
                break
            if stop < 0:
                break
            if stop not in bad:
                bad[stop] = {"seed": seeds[stop], "simulator": name, "why": line}
            kept = SOAK_DIR / f"seed{seeds[stop]}_latency{batch.latency}.hex"
            ga2_progs.write_image([records[stop]], kept)
            first = stop + 1
    image.unlink(missing_ok=True)
    mismatches = [{"program": batch.first + i, "latency": batch.latency, **bad[i]} for i in sorted(bad)]
    return Outcome(batch.index, batch.count, mismatches)


# ---- state ---------------------------------------------------------------------------------------


class StateError(ValueError):
    """out/soak/state.json cannot be resumed with these settings (the message says why)."""


def load_state(seed: int, size: int, fresh: bool) -> dict:
    """The finished batches of an earlier run with the same --seed, --batch and configuration (none
    with fresh)."""
    chip = config.active().key()
    empty = {"seed": seed, "batch": size, "config": chip, "done": {}, "seconds": 0.0}
    if fresh or not STATE.exists():
        return empty
    try:
        state = json.loads(STATE.read_text())
        same = state["seed"] == seed and state["batch"] == size
        state.setdefault("config", config.DEFAULT.key())  # a state from before configurations
        state["done"], state["seconds"] = dict(state["done"]), float(state["seconds"])
        if not _well_formed(state):
            raise ValueError("not a soak state")
    except (ValueError, KeyError, TypeError, AttributeError, OSError):
        raise StateError(f"{STATE} is not a soak state; remove it or run with --fresh") from None
    if not same:
        raise StateError(f"{STATE} holds a run with --seed {state['seed']} --batch {state['batch']}; "
                         "use those to resume it, or --fresh to start over")
    if state["config"] != chip:
        raise StateError(f"{STATE} holds a run of the configuration {state['config']} (GA2_CONFIG), not {chip}; "
                         "resume it under that one, or --fresh to start over")
    return state


def _well_formed(state: dict) -> bool:
    """Every field the run reads is there with its type: batch numbers, a count of programs and a
    list of mismatches per finished batch, and a finite, non-negative number of seconds."""
    def count(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    done_ok = all(key.isdigit() and isinstance(d, dict) and count(d.get("programs"))
                  and isinstance(d.get("mismatches"), list) for key, d in state["done"].items())
    return (done_ok and count(state["seed"]) and count(state["batch"]) and isinstance(state["config"], str)
            and math.isfinite(state["seconds"]) and state["seconds"] >= 0)


def save_state(state: dict) -> None:
    """Write the state next to its place, then rename it there: never half a file."""
    cli.write_json(STATE, state)


def totals(state: dict, plan: list[Batch]) -> tuple[int, int]:
    """Programs checked and mismatches, over the planned batches the state has finished."""
    done = [state["done"][str(b.index)] for b in plan if str(b.index) in state["done"]]
    return sum(d["programs"] for d in done), sum(len(d["mismatches"]) for d in done)


def _outcomes(todo: list[Batch], jobs: int):
    """(batch, outcome) as batches finish: in worker processes, or here one by one with jobs = 1."""
    if jobs == 1:
        for b in todo:
            yield b, run_batch(b)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_batch, b): b for b in todo}
        for future in as_completed(futures):
            yield futures[future], future.result()


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("-n", "--programs", type=cli.int_range(1, 10_000_000), default=1000,
                    help="random programs to check, 1..10000000 (default 1000)")
    ap.add_argument("--seed", type=cli.int_range(0, 1_000_000), default=0,
                    help="which programs: run s checks programs no other s shares, 0..1000000 (default 0)")
    ap.add_argument("--batch", type=cli.int_range(1, 5000), default=250,
                    help="programs per simulator run, 1..5000 (default 250)")
    ap.add_argument("-j", "--jobs", type=cli.int_range(1, 64), default=2,
                    help="batches at once, 1..64 (default 2, the machine's cores)")
    ap.add_argument("--fresh", action="store_true", help="forget out/soak/state.json and start over")
    args = ap.parse_args(argv)

    try:
        state = load_state(args.seed, args.batch, args.fresh)
    except StateError as error:
        ap.error(str(error))
    hw.require_simulators()
    plan = batches(args.programs, args.batch, args.seed)
    if config.active() != config.DEFAULT:
        print(f"configuration: {config.active().label()} (GA2_CONFIG; the chip is built for it)", flush=True)
    todo = [b for b in plan if state["done"].get(str(b.index), {}).get("programs") != b.count]
    checked, bad = totals(state, plan)
    if checked:
        print(f"resuming: {checked} of {args.programs} programs already checked, {bad} mismatches", flush=True)
    for name, _simulate, build in SIMULATORS:  # build once, before the workers share the builds
        try:
            build(hw.GA2_FILES, "ga2_tb", defines())
        except (RuntimeError, OSError) as error:
            print(f"soak: cannot build the {name} testbench: {str(error).strip().splitlines()[0][:300]}")
            todo = []
    start = time.perf_counter()
    base_seconds = state["seconds"]
    for b, outcome in _outcomes(todo, args.jobs):
        state["done"][str(b.index)] = {"programs": outcome.programs, "latency": b.latency,
                                       "mismatches": outcome.mismatches}
        state["seconds"] = base_seconds + time.perf_counter() - start
        save_state(state)
        checked, bad = totals(state, plan)
        rate = checked / state["seconds"] if state["seconds"] else 0.0
        print(f"  batch {b.index + 1:4d}/{len(plan)} (latency {b.latency:2d}): {outcome.programs} programs, "
              f"{len(outcome.mismatches)} mismatches; {checked}/{args.programs} checked, {bad} mismatches, "
              f"{rate:.1f} programs/s", flush=True)
        for m in outcome.mismatches:
            print(f"    MISMATCH program {m['program']} (seed {m['seed']}, latency {m['latency']}, "
                  f"{m['simulator']}): {m['why']}", flush=True)
    checked, bad = totals(state, plan)
    rate = checked / state["seconds"] if state["seconds"] else 0.0
    print(f"soak: {checked} programs, {bad} mismatches, {rate:.1f} programs per second")
    return 0 if checked == args.programs and bad == 0 else 1


if __name__ == "__main__":
    sys.exit(cli.run(main))
