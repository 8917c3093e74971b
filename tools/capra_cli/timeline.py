"""Where the cycles of a decode step go: a timeline of one solo step and one batch-8 step.

Usage: python -m capra_cli timeline [--context N] [--batch B] [--no-rtl]   (make timeline)

Both steps (every request at context N, default 8; B = 1 and B = --batch, default 8) run on the
machine model with its timeline on. For each it prints the cycles, what each unit was busy with,
how much of the DMA's time ran beside compute, and the cycles the sequencer stalled. It writes
out/timeline/<step>.json, a Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing;
one microsecond there is one cycle) with a lane per unit (sequencer, DMA, MM, VEC, SMAX) and per
memory channel (read requests, read data, writes), and out/timeline/timeline.png, the same lanes
for both steps.

Then both steps are replayed in Icarus and Verilator built to print the RTL's own events (the
testbench's +TIMELINE): each must PASS, and its events (every instruction taken, every
compute unit's last cycle, every transfer's setup and end) must be the machine model's, cycle for
cycle. Before that, each step's lanes must add up to its counters (the DMA lane to c1, MM to c2,
VEC and SMAX to c3, the sequencer's stalls to c4). --no-rtl leaves the replays out. Exit 0 only
when every check ran and passed; 2 for a bad argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import replay
import serving as S
import tiny_lm as T
from capra import config, isa
from capra.machine import Event, Machine
from replay import image, runs
from replay.simulators import SIMULATORS
from replay.timeline import ordered, rtl_events

from .common import BadArgument, Parser, finish, int_range, require_decode

OUT = runs.OUT / "timeline"
LANES = ("sequencer", "dma", "ext read requests", "ext read data", "ext writes", "mm", "vec", "smax")
COLOURS = {"sequencer": "dimgrey", "dma": "tab:blue", "ext read requests": "tab:cyan", "ext read data": "tab:cyan",
           "ext writes": "tab:purple", "mm": "tab:green", "vec": "tab:orange", "smax": "tab:olive"}


def arguments(ap: Parser) -> None:
    ap.add_argument("--context", type=int_range(2, 32), default=8, metavar="N",
                    help="every request's context, 2..32 (default 8, as make serve's full-batch table)")
    ap.add_argument("--batch", type=int_range(2, 8), default=8, metavar="B",
                    help="requests in the batched step, 2..8 (default 8)")
    ap.add_argument("--no-rtl", action="store_true", help="do not replay the steps on the RTL")


def slices(code: Sequence[int], events: Sequence[Event], latency: int) -> list[tuple[str, int, int, str]]:
    """The timeline as (lane, first cycle, cycles, label) slices, from the model's events.

    The sequencer lane holds its stalls (from the cycle it could take an instruction to the cycle
    it did: c4, h_unit and h_sync together) and the issue cycle of each instruction; a compute
    lane the cycles after an instruction's issue to its last; the DMA lane each transfer from setup to end; the
    memory channels follow from the setup cycle by the DMA's timing (docs/isa.md): a LOAD of n
    beats requests in s+1..s+n and writes the answers in s+2+L..s+n+1+L, a STORE reads the
    scratchpad in s+1..s+n and sends in s+3..s+n+2."""
    instr = {pc: isa.Instr.decode(code[4 * pc : 4 * pc + 4]) if 4 * pc + 4 <= len(code) else isa.Instr(isa.OP_HALT)
             for pc in {e.pc for e in events}}
    out = []
    go = sorted((e for e in events if e.kind == "go"), key=lambda e: e.pc)
    done = {e.pc: e.cycle for e in events if e.kind == "done"}
    setup = {e.pc: e.cycle for e in events if e.kind == "setup"}
    end = {e.pc: e.cycle for e in events if e.kind == "end"}
    ready = 0
    for e in go:
        ins = instr[e.pc]
        name = isa.OP_NAMES.get(ins.op, "?")
        if e.cycle > ready:
            out.append(("sequencer", ready, e.cycle - ready, f"stall before {name} (pc {e.pc})"))
        if e.unit in ("mm", "vec", "smax"):
            out.append((e.unit, e.cycle + 1, done[e.pc] - e.cycle, f"{name} pc {e.pc}"))
        out.append(("sequencer", e.cycle, 1, f"{name} pc {e.pc}"))
        ready = e.cycle + 1
        if e.unit == "dma":
            s, n = setup[e.pc], isa.effects(ins).cycles
            out.append(("dma", s, end[e.pc] - s + 1, f"{name} pc {e.pc}: {n} beats"))
            if ins.op == isa.OP_LOAD:
                out.append(("ext read requests", s + 1, n, f"pc {e.pc}"))
                out.append(("ext read data", s + 2 + latency, n, f"pc {e.pc}"))
            else:
                out.append(("ext writes", s + 3, n, f"pc {e.pc}"))
    return out


def lane_counts(sl: Sequence[tuple[str, int, int, str]], total: int) -> list[int]:
    """What the lanes of a timeline add up to, as ``counted`` gives it from the counters: the DMA
    lane's cycles, MM's, VEC's and SMAX's together (both may run in one cycle: two), and the
    sequencer's stalls."""
    stalls = sum(c for lane, _f, c, label in sl if lane == "sequencer" and label.startswith("stall"))
    return [int(busy(sl, "dma", total).sum()), int(busy(sl, "mm", total).sum()),
            int(busy(sl, "vec", total).sum() + busy(sl, "smax", total).sum()), stalls]


def counted(counters: Sequence[int]) -> list[int]:
    """c1, c2, c3 and every cycle the sequencer held an instruction (c4 + h_unit + h_sync), from a
    step's seven counters."""
    return [*counters[1:4], sum(counters[4:7])]


def chrome_trace(name: str, sl: Sequence[tuple[str, int, int, str]], meta: dict) -> dict:
    """A Chrome trace (the JSON Perfetto opens): one thread per lane, one complete event per slice,
    timestamps in cycles (shown as microseconds)."""
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": f"GA2: {name}"}}]
    for tid, lane in enumerate(LANES):
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": tid, "args": {"name": lane}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": tid, "args": {"sort_index": tid}})
    for lane, first, cycles, label in sl:
        events.append({"ph": "X", "name": label, "pid": 0, "tid": LANES.index(lane), "ts": first, "dur": cycles})
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": meta}


def busy(sl: Sequence[tuple[str, int, int, str]], lane: str, total: int) -> np.ndarray:
    """Per cycle, whether `lane` is busy."""
    mask = np.zeros(total, dtype=bool)
    for name, first, cycles, _label in sl:
        if name == lane:
            mask[first : first + cycles] = True
    return mask


def summary(name: str, counters: list[int], sl: Sequence[tuple[str, int, int, str]]) -> list[str]:
    total = counters[0]
    compute = busy(sl, "mm", total) | busy(sl, "vec", total) | busy(sl, "smax", total)
    dma = busy(sl, "dma", total)
    stalls = sum(c for lane, _f, c, label in sl if lane == "sequencer" and label.startswith("stall"))
    lines = [f"== {name}: {total} cycles"]
    for lane in ("dma", "mm", "vec", "smax"):
        n = int(busy(sl, lane, total).sum())
        count = sum(1 for x in sl if x[0] == lane)
        lines.append(f"  {lane:5} busy {n:6d} cycles ({n / total:5.1%}) in {count} instructions")
    both = busy(sl, "smax", total) & (busy(sl, "mm", total) | busy(sl, "vec", total))
    lines.append(f"  DMA beside compute {int((dma & compute).sum()):6d} cycles; the two engines side by side "
                 f"{int(both.sum())}; nothing busy {int((~dma & ~compute).sum())}")
    lines.append(f"  sequencer held {stalls} cycles: on the DMA {counters[4]} (c4), for its own engine "
                 f"{counters[5]} (h_unit), for the other engine {counters[6]} (h_sync)")
    return lines


def figure(steps: list[tuple[str, int, list]], path: Path, footer: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(steps), 1, figsize=(12, 2.2 * len(steps) + 0.6))
    for ax, (name, total, sl) in zip(np.atleast_1d(axes), steps, strict=True):
        for row, lane in enumerate(LANES):
            bars = [(first, cycles) for ln, first, cycles, label in sl if ln == lane and not label.startswith("stall")]
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=COLOURS[lane], edgecolors="none")
        stalls = [(first, cycles) for ln, first, cycles, label in sl if label.startswith("stall")]
        ax.broken_barh(stalls, (-0.4, 0.8), facecolors="mistyrose", edgecolors="none", label="stalled on the DMA")
        ax.legend(loc="upper right", fontsize=7)
        ax.set_yticks(range(len(LANES)), LANES, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, total)
        ax.set_title(f"{name}: {total} cycles (machine model; the RTL's events are the same)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    np.atleast_1d(axes)[-1].set_xlabel("cycle")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.text(0.01, 0.005, footer, fontsize=7, color="0.4")
    with runs.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png", metadata=runs.figure_metadata(footer))
    plt.close(fig)


def main(args) -> int:
    require_decode(32, "the timeline")
    if not args.no_rtl:
        replay.require()
    runs.make_folder(OUT)  # a file where the folder goes is one line now, not a traceback after the work
    m = T.make_model("structured")
    runner = S.make_runner(m, 32, (None, 8))
    cfg = config.active()
    rng = np.random.default_rng(0)
    problems: list[str] = []
    checks = 0
    figures = []
    OUT.mkdir(parents=True, exist_ok=True)
    prov = runs.provenance(cfg)
    records = []
    for b in (1, args.batch):
        caches = [(rng.standard_normal((args.context - 1, T.D)), rng.standard_normal((args.context - 1, T.D)))
                  for _ in range(b)]
        error = runner.fits([args.context] * b)
        if error:
            raise BadArgument("--context", f"a batch of {b} at context {args.context} does not fit GA2: {error}")
        step = runner.run(list(range(b)), caches, check=True)
        machine = Machine.with_ext(step.ext, isa.EXT_MEMORY, events=True)
        machine.run(step.code)
        if machine.counters.with_holds() != step.counters:
            problems.append(f"B={b}: the timeline's run took {machine.counters.with_holds()}, the step {step.counters}")
        name = "solo" if b == 1 else f"batch{b}"
        sl = slices(step.code, machine.events, cfg.ext_latency)
        print("\n".join(summary(f"{name} step (B={b}, context {args.context})", step.counters, sl)))
        lanes, want = lane_counts(sl, step.counters[0]), counted(step.counters)
        if lanes != want:
            problems.append(f"{name}: the timeline's lanes add up to {lanes} cycles, the counters say {want}")
        checks += 1
        meta = {"step": name, "batch": b, "context": args.context, "cycles": step.counters[0],
                "counters": step.counters, "provenance": prov,
                "time unit": "one microsecond of the trace is one cycle"}
        runs.write_json(OUT / f"{name}.json", chrome_trace(f"{name} step, B={b}, context {args.context}", sl, meta))
        figures.append((f"{name} step, B={b}, context {args.context}", step.counters[0], sl))
        records.append((name, image.record(step.code, step.ext), machine.events))
    figure(figures, OUT / "timeline.png", runs.footer(prov))
    print(f"wrote {', '.join(f'out/timeline/{n}.json' for n, _r, _e in records)} and out/timeline/timeline.png")
    if not args.no_rtl:
        print("\n== the RTL's timeline (testbench run with +TIMELINE), against the model's")
        for sim in SIMULATORS:
            verdict, found = rtl_events([r for _n, r, _e in records], sim)
            checks += 1
            if not verdict.passed:
                problems += verdict.problems
                continue
            for (name, _r, model), rtl in zip(records, found, strict=True):
                want, got = ordered(model), ordered(rtl)
                if want == got:
                    print(f"  {sim.name:9} {name:7} {len(got)} events, equal to the model's")
                    continue
                first = next((i for i, (x, y) in enumerate(zip(want, got)) if x != y), min(len(want), len(got)))
                problems.append(f"{sim.name} {name}: event {first} differs: the model's "
                                f"{want[first] if first < len(want) else 'none'}, the RTL's "
                                f"{got[first] if first < len(got) else 'none'}")
    passed = "the lanes add up to the counters"
    if not args.no_rtl:
        passed += "; both steps' RTL timelines equal the model's in Icarus and Verilator"
    return finish(problems, checks, passed, brackets=True)
