#!/usr/bin/env python3
"""Benchmarks of the chip and its simulators (figures, never pass/fail).

Prints: simulated cycles per second in Icarus and in Verilator (the 32-step decode, with the
testbench's per-program loading subtracted by timing an image of as many empty programs), the
Python machine model's time per program, and for matmuls and softmaxes of a few sizes the
cycles against the roofline bound max(words moved, MACs / 16); and how many of the words the random
programs compute a replay would see wrong (tools/visibility.py). A replay that does not PASS stops
it with exit status 1: the speed of a wrong run is no figure.
Usage: bench.py [--repeats N]"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import bootstrap

bootstrap.need("numpy")

os.environ.setdefault("GA2_EXT", "8192")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "model"), str(ROOT / "tools")]

import capra  # noqa: E402
import cli  # noqa: E402
import decode  # noqa: E402
import ga2_progs  # noqa: E402
import hw  # noqa: E402
import limits  # noqa: E402
import numpy as np  # noqa: E402
import tiny_lm as T  # noqa: E402
import visibility  # noqa: E402
from capra import asm  # noqa: E402
from capra.analysis import roofline  # noqa: E402
from capra.graph import Graph  # noqa: E402
from capra.machine import Counters, run_program  # noqa: E402


def timed_run(sim, image: Path, extw: int, programs: int) -> float:
    """Seconds of one replay of an image of `programs` programs; a replay that does not pass stops
    the benchmark with exit status 1 (a speed of a wrong run is no figure)."""
    t0 = time.perf_counter()
    rc, out = sim(hw.GA2_FILES, "ga2_tb", defines=(f"EXTW={extw}",), plusargs=(f"+PROG={image}",))
    elapsed = time.perf_counter() - t0
    replay = cli.replay_verdict(sim.__name__, rc, out, programs)
    if not replay.passed:
        print(f"bench.py: a benchmark replay did not pass: {'; '.join(replay.problems)}", file=sys.stderr)
        raise SystemExit(cli.EXIT_FAIL)
    return elapsed


def simulator_speed(repeats: int) -> None:
    print("== simulators and the machine model")
    extw = cli.ext_words()
    _toks, records = decode.ChipHost(T.make_model("structured"), 32).generate(0, 32)
    recs = [ga2_progs.record(r.code, r.ext) for r in records]
    empty = [ga2_progs.record(asm.halt(), r.ext) for r in records]
    work = Path(hw.ROOT) / "out" / "bench"
    # Verilator is fast enough that one decode is lost in its start-up time: give it 10 copies
    for name, sim, copies in (("Icarus", hw.sim_icarus, 1), ("Verilator", hw.sim_verilator, 10)):
        ga2_progs.write_image(recs * copies, work / f"decode{copies}.hex")
        ga2_progs.write_image(empty * copies, work / f"empty{copies}.hex")
        cycles = copies * (sum(r.counters.cycles for r in records) - sum(e[-6] for e in empty))
        n = len(records) * copies
        timed_run(sim, work / f"empty{copies}.hex", extw, n)  # build once, outside the timing
        full = statistics.median(timed_run(sim, work / f"decode{copies}.hex", extw, n) for _ in range(repeats))
        base = statistics.median(timed_run(sim, work / f"empty{copies}.hex", extw, n) for _ in range(repeats))
        rate = cycles / max(full - base, 1e-9)
        print(f"  {name:10s} {copies:2d} x the 32-step decode ({cycles} cycles beyond empty programs, EXTW={extw}): "
              f"{full:6.2f} s, empty programs {base:5.2f} s: {rate:12,.0f} simulated cycles per second")
    t0 = time.perf_counter()
    for _ in range(repeats):
        for r in records:
            run_program(r.code, r.ext, extw)
    per = (time.perf_counter() - t0) / (repeats * len(records))
    print(f"  Python machine model: {per * 1e3:.2f} ms per decode program "
          f"({sum(r.counters.cycles for r in records) / len(records) / per:,.0f} modelled cycles per second)")


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
    shapes = [(1, 16, 16), (1, 64, 64)] + [(r, 64, 64) for r in range(2, 10)] + [(16, 64, 64), (64, 64, 32),
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


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--repeats", type=cli.int_range(1, 20), default=3,
                    help="runs per simulator timing, the median is printed (1..20, default 3)")
    args = ap.parse_args(argv)
    limits.require_decode(32, "make bench")
    hw.require_simulators()
    simulator_speed(args.repeats)
    kernels()
    seen = visibility.report()  # the one figure here with a goal: below it, the run fails
    return 0 if seen >= visibility.GOAL else 1


if __name__ == "__main__":
    sys.exit(cli.run(main))
