"""Benchmarks of the chip and its simulators (figures, never pass/fail).

Prints: simulated cycles per second in Icarus and in Verilator (the 32-step decode, with the
testbench's per-program loading subtracted by timing an image of as many empty programs; seconds
of the simulator's CPU time, user and system, so that other work on a shared machine changes the
figure little), the
Python machine model's time per program, and for matmuls and softmaxes of a few sizes the
cycles against the roofline bound max(words moved, MACs / 16); and how many of the words the random
programs compute a replay would see wrong (tools/visibility.py). A replay that does not PASS stops
it with exit status 1: the speed of a wrong run is no figure.

Usage: bench.py [--repeats N]       (``make bench`` runs it; also ``capra bench``)"""

from __future__ import annotations

import resource
import statistics
import time

import capra
import numpy as np
import paged_lm as PL
import replay
import tiny_lm as T
from capra import asm, config
from capra.analysis import roofline
from capra.graph import Graph
from capra.machine import Counters, run_program
from replay import image, runs
from replay.runs import note
from replay.simulators import GA2_FILES, GA2_TOP, SIMULATORS
from replay.verdict import judge

from . import visibility
from .common import EXIT_FAIL, Parser, int_range, require_decode


class ReplayFailed(Exception):
    """A timed replay that did not pass: the benchmark stops with exit status 1 (a failed check, not
    a user's mistake)."""


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(sim, path, records: list[image.Record]) -> float:
    """CPU seconds of one replay of the image at `path` (the simulator's: it is built before, by
    an untimed run); ReplayFailed when it does not pass (the speed of a wrong run is no figure)."""
    defines = replay.testbench_defines(0)
    t0 = children_cpu()
    memory = (f"+LATENCY={config.active().ext_latency}", *replay.memory_plusargs(config.active()))  # the model's
    rc, out = sim.run(GA2_FILES, GA2_TOP, defines=defines, plusargs=(f"+PROG={path}", *memory))
    elapsed = children_cpu() - t0
    verdict = judge(sim.name, rc, out, len(records), expected=[r.counters for r in records])
    if not verdict.passed:
        raise ReplayFailed(f"a benchmark replay did not pass: {'; '.join(verdict.problems)}")
    return elapsed


def simulator_speed(repeats: int) -> None:
    """Simulated cycles per second of each simulator on the 32-step decode of `make sim` (no window),
    and the machine model's time per program."""
    print("== simulators and the machine model")
    _toks, steps = PL.PagedChip(T.make_model("structured"), 32, paged=False, n_pages=9).generate(0, 32)
    recs = [image.record(s.code, s.ext) for s in steps]
    empty = [image.record(asm.halt(), s.ext) for s in steps]
    with runs.run_folder("bench") as run:
        # Verilator is fast enough that one decode is lost in its start-up time: give it 10 copies
        for sim, copies in zip(SIMULATORS, (1, 10), strict=True):
            image.write_image(recs * copies, run / f"decode{copies}.hex")
            image.write_image(empty * copies, run / f"empty{copies}.hex")
            cycles = copies * (sum(r.counters[0] for r in recs) - sum(e.counters[0] for e in empty))
            timed_run(sim, run / f"empty{copies}.hex", empty * copies)  # build once, outside the timing
            full = statistics.median(timed_run(sim, run / f"decode{copies}.hex", recs * copies)
                                     for _ in range(repeats))
            base = statistics.median(timed_run(sim, run / f"empty{copies}.hex", empty * copies)
                                     for _ in range(repeats))
            rate = cycles / max(full - base, 1e-9)
            print(f"  {sim.name:10s} {copies:2d} x the 32-step decode ({cycles} cycles beyond empty programs): "
                  f"{full:6.2f} s CPU, empty programs {base:5.2f} s: {rate:12,.0f} simulated cycles per second")
    t0 = time.process_time()
    for _ in range(repeats):
        for s in steps:
            run_program(s.code, s.ext, capra.isa.EXT_MEMORY)
    per = (time.process_time() - t0) / (repeats * len(steps))
    print(f"  Python machine model: {per * 1e3:.2f} ms CPU per decode program "
          f"({sum(s.cycles for s in steps) / len(steps) / per:,.0f} modelled cycles per second)")


def compiled_kernel(graph: Graph, feed: dict) -> tuple[list[int], Counters]:
    """A one-node graph compiled by capra and run on the machine model (equal to the RTL)."""
    program = capra.compile_graph(graph, [feed])
    _out, mach = capra.run(program, feed, machine=True)
    return program.code, mach.counters


def matmul_kernel(r: int, k: int, m: int) -> tuple[list[int], Counters]:
    rng = np.random.default_rng(0)
    g = Graph(f"matmul_{r}x{k}x{m}")
    g.matmul("y", g.input("x", (r, k)), g.const("W", rng.standard_normal((k, m)) / np.sqrt(k)))
    g.set_outputs(["y"])
    return compiled_kernel(g, {"x": rng.standard_normal((r, k))})


def softmax_kernel(n: int) -> tuple[list[int], Counters]:
    rng = np.random.default_rng(1)
    g = Graph(f"softmax_{n}")
    g.softmax("p", g.input("x", (1, n)))
    g.set_outputs(["p"])
    return compiled_kernel(g, {"x": rng.standard_normal((1, n)) * 2})


def kernels() -> None:
    print("\n== kernels compiled by capra, on the machine model (exact, equal to the RTL): cycles against "
          "the roofline bound max(words moved, MACs / 16)")
    print(f"  {'kernel':22s} {'cycles':>7s} {'words':>6s} {'MACs':>8s} {'bound':>7s} {'eff':>5s}  unit busy")
    shapes = [(1, 16, 16), (1, 64, 64), *((r, 64, 64) for r in range(2, 10)), (16, 64, 64), (64, 64, 32),
              (1, 1024, 8)]
    for r, k, m in shapes:
        code, c = matmul_kernel(r, k, m)
        rf = roofline(code)
        print(f"  {f'matmul {r}x{k}x{m}':22s} {c.cycles:7d} {rf.dma_words:6d} {rf.macs:8d} {rf.bound:7.0f} "
              f"{rf.efficiency(c.cycles):5.2f}  mm {c.mm_busy}")
    for n in (16, 64, 256, 1024):
        code, c = softmax_kernel(n)
        rf = roofline(code)
        print(f"  {f'softmax n={n}':22s} {c.cycles:7d} {rf.dma_words:6d} {rf.macs:8d} {rf.bound:7.0f} "
              f"{rf.efficiency(c.cycles):5.2f}  smax {c.vec_busy}")
    print("  (a lone kernel pays for its first load and its last store; the compiler loads a weight over "
          f"{capra.compiler.CHUNK_WORDS} words in column chunks and runs each chunk's matmul while the next loads)")


def arguments(ap: Parser) -> None:
    ap.add_argument("--repeats", type=int_range(1, 20), default=3,
                    help="runs per simulator timing, the median is printed (1..20, default 3)")


def main(args) -> int:
    require_decode(32, "make bench")
    replay.require()
    try:
        simulator_speed(args.repeats)
    except ReplayFailed as error:
        note(str(error))
        return EXIT_FAIL
    kernels()
    seen = visibility.report()  # the one figure here with a goal: below it, the run fails
    return 0 if seen >= visibility.GOAL else 1
