"""Soak: many random programs through the machine model and both simulators, bit for bit.

    python tools/soak.py -n 10000          (make soak N=10000; also ``capra soak``)

Program i of a run is random_program(seed) (model/capra/randprog.py: every instruction form,
matmuls of 1..9 rows with and without BROWS, BIAS, RELU, column windows, every VEC and SMAX form,
DMA overlap) for a seed derived from --seed and i. Programs go in batches of --batch, each batch
at one external memory latency (0, 1, 16 cycles and the configuration's own, 4 at the default, in
turn). A batch is one image (model/replay/image.py, expectations from the machine model) replayed
once in Icarus and once in Verilator, in a folder of its own; the testbench compares the external
memory, the scratchpad words each program wrote and the seven counters, and prints every
program's counters, which must also equal the model's. --workers batches run at once on a local
Dask cluster (default 2: this machine's cores; 1: one after another in this process), or
--scheduler ADDRESS runs them on an existing Dask cluster (tools/capra_cli/executor.py): a batch
carries its configuration and seeds, so the verdicts are the same wherever it runs.

A program the testbench stops at (FAIL or MISMATCH) is counted as a mismatch, its image kept
under out/soak/ (written here, from the batch's result, wherever the batch ran), and the rest of
its batch is replayed after it, so every program is checked.

The chip and the model follow the active configuration (GA2_CONFIG, docs/design_space.md), e.g.
GA2_CONFIG="ext_words=2" python tools/soak.py -n 2000. With --stall P the memory's AXI channels stall
P percent of the cycles (capra.dma.StallSchedule, a seed of its own per batch), and the model runs
on the same schedule: the counters must still be exact.

Progress is one line per batch. The run is resumable: out/soak/state-<key>.json (one per seed,
batch size and configuration; written to a temporary file, then renamed) records the finished
batches, the sources they checked, and for each run that added batches its commit, simulators and
chip; the same command again continues where it stopped, a
larger -n extends a finished run, --fresh starts over, and a change to the RTL, the testbench or
the machine model starts over by itself (the earlier batches checked other code).

The last line: "soak: <programs> programs, <mismatches> mismatches, <rate> programs per second"
(totals over the run, resumed parts included), and when every program was checked by an earlier run
of these sources and settings, "(this run checked none: ...)" after it. Exit status 0 when every
program matched and this run replayed some of them, 1 when one did not or when this run checked
nothing (an earlier run's verdict stands in its own output), 2 for a bad argument or a state file
of other settings.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import replay
from capra import config
from capra.randprog import SPAN, random_program
from replay import image, runs
from replay.simulators import GA2_FILES, GA2_TOP, SIMULATORS
from replay.verdict import failed_program, parse_counters, verdict_line

from . import executor
from .common import Parser, ToolError, chip_line, int_range

SOAK_DIR = runs.OUT / "soak"
SEED_STRIDE = 1_000_000_000  # program i of --seed s is random_program(s * SEED_STRIDE + i + SEED_BASE)
SEED_BASE = 10_000_000  # above every seed the tests use
SIM_TIMEOUT = 900  # seconds for one simulator run of a batch
SOURCES = ("rtl/*.v", "rtl/*.vh", "tb/*.v", "model/capra/*.py", "model/replay/*.py")


def latencies() -> tuple[int, ...]:
    """The external read latencies the batches rotate through: 0, 1 and 16 cycles, and the active
    configuration's own (4 at the default)."""
    return tuple(sorted({0, 1, config.active().ext_latency, 16}))


def sources_hash() -> str:
    """A digest of everything a soak's verdict depends on: the RTL, the testbench, the machine model
    and the image format. A state saved under other sources checked other code: it does not count."""
    return runs.sources_hash(SOURCES)


def defines() -> tuple[str, ...]:
    """The testbench's defines for the active configuration (the latency is a plusarg: one build
    serves every batch)."""
    return replay.testbench_defines(0)


@dataclass
class Batch:
    index: int
    first: int  # the run's index of its first program
    count: int
    latency: int
    seed: int
    stall: int = 0  # percent of cycles each memory channel stalls
    chip: config.Config = field(default_factory=config.active)  # the run's configuration, wherever it runs

    def seeds(self) -> list[int]:
        return [self.seed * SEED_STRIDE + SEED_BASE + self.first + i for i in range(self.count)]

    def memory(self) -> config.Config:
        """The active configuration with this batch's stalls (a schedule seed of its own)."""
        stall_seed = (self.seed * 100_003 + self.index) % config.SEED_MAX + 1
        return replace(self.chip, ext_stall=self.stall, ext_seed=stall_seed)


@dataclass
class Outcome:
    batch: int
    programs: int
    mismatches: list[dict] = field(default_factory=list)
    kept: dict[str, list[int]] = field(default_factory=dict)  # file name in SOAK_DIR -> image words


def batches(n: int, size: int, seed: int, stall: int = 0) -> list[Batch]:
    rotation = latencies()
    return [Batch(b, first, min(size, n - first), rotation[b % len(rotation)], seed, stall)
            for b, first in enumerate(range(0, n, size))]


def _replay(sim, records: list[image.Record], path: Path, latency: int,
            first: int) -> tuple[int | None, str, dict[int, list[int]]]:
    """Replay records[first:]. Returns the index of the program the testbench stopped at (-1: it
    passed them all; None: it named none, so the rest of the batch is unchecked), its verdict line
    and the counters it printed, by index in records."""
    image.write_image(records[first:], path)
    try:
        _rc, out = sim.run(GA2_FILES, GA2_TOP, defines=defines(), timeout=SIM_TIMEOUT,
                           plusargs=(f"+PROG={path}", f"+LATENCY={latency}", *replay.memory_plusargs(config.active())))
    except Exception as error:  # a build or a run that breaks (or hangs) fails the check, and says why
        return None, f"FAIL: {sim.name} could not run: {str(error).strip().splitlines()[0][:200]}", {}
    line = verdict_line(out)
    got = {first + i: c for i, c in parse_counters(out).items()}
    if line.startswith("PASS"):
        return -1, line, got
    stopped = failed_program(line)
    return (first + stopped if stopped is not None else None), line, got


def run_batch(batch: Batch) -> Outcome:
    """Generate, model and replay one batch in both simulators (runs in a worker process, here or on
    a cluster): it writes only in a run folder of its own; the images to keep come back in the
    Outcome."""
    with config.use(batch.memory()):
        return _run_batch(batch)


def _run_batch(batch: Batch) -> Outcome:
    seeds = batch.seeds()
    records = [image.record(*random_program(s, ext_latency=batch.latency), ext_latency=batch.latency)
               for s in seeds]
    bad: dict[int, dict] = {}
    kept: dict[str, list[int]] = {}
    with runs.run_folder(f"soak-batch{batch.index}") as run:
        for sim in SIMULATORS:
            first = 0
            while first < len(records):
                stop, line, got = _replay(sim, records, run / "batch.hex", batch.latency, first)
                for i, c in got.items():
                    if c != records[i].counters and i not in bad:
                        bad[i] = {"seed": seeds[i], "simulator": sim.name,
                                  "why": f"counters {c}, the model says {records[i].counters}"}
                if stop is None:  # nothing after `first` was checked in this simulator
                    for i in range(first, len(records)):
                        bad.setdefault(i, {"seed": seeds[i], "simulator": sim.name, "why": line})
                    break
                if stop < 0:
                    break
                if stop not in bad:
                    bad[stop] = {"seed": seeds[stop], "simulator": sim.name, "why": line}
                kept[f"seed{seeds[stop]}_latency{batch.latency}.hex"] = image.header_words([records[stop]])
                first = stop + 1
    mismatches = [{"program": batch.first + i, "latency": batch.latency, **bad[i]} for i in sorted(bad)]
    return Outcome(batch.index, batch.count, mismatches, kept)


# ---- state ---------------------------------------------------------------------------------------


def state_path(seed: int, size: int, stall: int = 0) -> Path:
    """Where the run of these settings on the active configuration keeps its state: a file per
    seed, batch size, stall rate and configuration, so two configurations can soak at once."""
    key = hashlib.sha256(f"{seed}|{size}|{config.active().key()}|stall{stall}".encode()).hexdigest()[:12]
    return SOAK_DIR / f"state-{key}.json"


def load_state(seed: int, size: int, fresh: bool, stall: int = 0) -> dict:
    """The finished batches of an earlier run with the same --seed, --batch, configuration and
    sources (none with fresh, or when the sources changed since: that run checked other code)."""
    chip, sources = config.active().key(), sources_hash()
    empty = {"seed": seed, "batch": size, "stall": stall, "config": chip, "sources": sources, "done": {},
             "seconds": 0.0}
    path = state_path(seed, size, stall)
    if fresh or not path.exists():
        return empty
    try:
        state = json.loads(path.read_text())
        state["done"], state["seconds"] = dict(state["done"]), float(state["seconds"])
        if (not _well_formed(state) or state["seed"] != seed or state["batch"] != size or state["config"] != chip
                or state.get("stall", 0) != stall):
            raise ValueError("not this run's state")
    except (ValueError, KeyError, TypeError, AttributeError, OSError):
        raise ToolError(f"{path} is not a soak state of these settings; remove it or run with --fresh") from None
    if state.get("sources") != sources:
        print(f"the RTL, testbench or machine model changed since {path.name} was saved: starting over", flush=True)
        return empty
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
    runs.write_json(state_path(state["seed"], state["batch"], state.get("stall", 0)), state)


def totals(state: dict, plan: list[Batch]) -> tuple[int, int]:
    """Programs checked and mismatches, over the planned batches the state has finished."""
    done = [state["done"][str(b.index)] for b in plan if str(b.index) in state["done"]]
    return sum(d["programs"] for d in done), sum(len(d["mismatches"]) for d in done)


def _outcomes(todo: list[Batch], workers: int, scheduler: str | None):
    """(batch, outcome) as batches finish (executor.run: a local Dask cluster, the one at
    `scheduler`, or here one by one with one worker)."""
    for b, future in executor.run(run_batch, todo, workers=workers, scheduler=scheduler, what="soak batches"):
        yield b, future.result()


def arguments(ap: Parser) -> None:
    ap.add_argument("-n", "--programs", type=int_range(1, 10_000_000), default=1000,
                    help="random programs to check, 1..10000000 (default 1000)")
    ap.add_argument("--seed", type=int_range(0, 1_000_000), default=0,
                    help="which programs: run s checks programs no other s shares, 0..1000000 (default 0)")
    ap.add_argument("--batch", type=int_range(1, 5000), default=250,
                    help="programs per simulator run, 1..5000 (default 250)")
    executor.arguments(ap, "batches")
    ap.add_argument("--stall", type=int_range(0, config.STALL_MAX), default=None,
                    help=f"percent of cycles each AXI channel of the memory stalls, 0..{config.STALL_MAX} "
                         "(default: the configuration's, 0 unless GA2_CONFIG sets ext_stall); the model runs on the "
                         "same seeded schedule")
    ap.add_argument("--fresh", action="store_true", help="forget the saved state of this run and start over")


def main(args) -> int:
    executor.check(args)
    if config.active().ext_memory < SPAN:
        raise ToolError(f"GA2_EXT: random programs use {SPAN} words of external memory, the configuration has "
                        f"{config.active().ext_memory}")
    stall = config.active().ext_stall if args.stall is None else args.stall
    replay.require()
    runs.make_folder(SOAK_DIR)  # its state and kept images go there: a file in the way is one line, before any batch
    with holding(state_path(args.seed, args.batch, stall)):
        return _soak(args, stall)


@contextmanager
def holding(path: Path) -> Iterator[None]:
    """An exclusive lock on the state file `path` while a run uses it: a second run with the same
    settings and chip (the same state) is refused in one line, instead of both rewriting the state
    and a --fresh one erasing the other's batches. Runs with other settings have other states."""
    with open(path.with_suffix(".lock"), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ToolError(f"another soak with these settings is running ({path.name} is in use): wait for it, or "
                            "give another --seed") from None
        yield


def _soak(args, stall: int) -> int:
    """The run, holding its state (``main`` checked the arguments and took the lock)."""
    state = load_state(args.seed, args.batch, args.fresh, stall)
    plan = batches(args.programs, args.batch, args.seed, stall)
    if stall:
        print(f"memory: every AXI channel stalls {stall}% of the cycles (a schedule seed per batch)", flush=True)
    # the chip alone: the memory's stalls are the line above (a seed per batch), whatever GA2_CONFIG said
    if (line := chip_line(replace(config.active(), ext_stall=0))) is not None:
        print(line, flush=True)
    todo = [b for b in plan if state["done"].get(str(b.index), {}).get("programs") != b.count]
    checked, bad = totals(state, plan)
    if checked:
        print(f"resuming: {checked} of {args.programs} programs already checked, {bad} mismatches", flush=True)
    for sim in SIMULATORS:  # build once, before the workers share the builds
        try:
            sim.build(GA2_FILES, GA2_TOP, defines())
        except (RuntimeError, OSError) as error:
            print(f"soak: cannot build the {sim.name} testbench: {str(error).strip().splitlines()[0][:300]}")
            todo = []
    start = time.perf_counter()
    base_seconds = state["seconds"]
    # What this run checked with: the state's `sources` keys it to the code, and each run that adds
    # batches records the commit and the simulators it replayed them on.
    prov = runs.provenance()
    this_run = {"commit": prov["commit"], "simulators": prov["simulators"], "chip": prov["chip"], "batches": 0}
    executor.announce(len(todo), "batches", args.workers, args.scheduler)
    for b, outcome in _outcomes(todo, args.workers, args.scheduler):
        if not this_run["batches"]:
            state.setdefault("runs", []).append(this_run)
        this_run["batches"] += 1
        for name, words in outcome.kept.items():
            image.write_words(words, SOAK_DIR / name)
        state["done"][str(b.index)] = {"programs": outcome.programs, "latency": b.latency,
                                       "mismatches": outcome.mismatches}
        state["seconds"] = base_seconds + time.perf_counter() - start
        save_state(state)
        checked, bad = totals(state, plan)
        rate = checked / state["seconds"] if state["seconds"] else 0.0
        memory = f"latency {b.latency:2d}" + (f", stall {b.stall}%" if b.stall else "")
        print(f"  batch {b.index + 1:4d}/{len(plan)} ({memory}): {outcome.programs} programs, "
              f"{len(outcome.mismatches)} mismatches; {checked}/{args.programs} checked, {bad} mismatches, "
              f"{rate:.1f} programs/s", flush=True)
        for m in outcome.mismatches:
            print(f"    MISMATCH program {m['program']} (seed {m['seed']}, latency {m['latency']}, "
                  f"{m['simulator']}): {m['why']}", flush=True)
    checked, bad = totals(state, plan)
    rate = checked / state["seconds"] if state["seconds"] else 0.0
    earlier = (" (this run checked none: every one was checked by an earlier run of these sources and "
               "settings; --fresh checks them again)") if checked and not todo else ""
    print(f"soak: {checked} programs, {bad} mismatches, {rate:.1f} programs per second{earlier}")
    # a run that replayed nothing is no check, whatever an earlier run found: exit 1 and say so
    return 0 if checked == args.programs and bad == 0 and todo else 1
