"""Many requests on one chip: continuous batching over the paged pool, checked on the RTL.

Usage: python tools/serve_run.py [--requests N] [--seed S] [--pages P] [--replay one|all|none]
       (make serve runs it with the defaults; also ``capra serve``)

A set of requests (different prompt lengths and token counts, some sharing a prompt, arriving over
time) is served with B_max = 1, 2, 4 and 8 requests per batch, with no window and with a window of
8, every step on GA2's machine model. Per run it prints the steps, the total cycles, the tokens
generated per thousand cycles and their ratio to B_max = 1, the ceiling of that ratio (the run's
tokens over the sum of its steps' roofline bounds, against B_max = 1 as measured: what no engine
could beat running these programs through this port and array), the distinct batch programs the
run needed, the peak pages in use, the mean batch and the efficiency (the steps' roofline bounds
over their cycles; a step's bound is the larger of its DMA beats, weights once plus each request's
rows, and its MACs / N^2 for the N x N array).

Checked, per run: every request's tokens and int8 logits equal its decode alone; its tokens follow
the tiny model's rule; every step's machine-model outputs equal the program's integer semantics;
the pool's invariants hold after every step; every request finishes once; every page is free at
the end. Then every step of the B_max = 4, window 8 run (--replay all: of every run) is replayed in
Icarus and Verilator: each must PASS with counters identical to the machine model's.

Writes out/serve_run.json (with the configuration that ran) and out/serve_run.png (tokens per
kilocycle against B_max; pages in use over time). The last line is the verdict; the exit status
is 0 only if every check passed.
"""

from __future__ import annotations

import random
from pathlib import Path

import host
import numpy as np
import paged_tests
import replay
import serving as S
import tiny_lm as T
from capra import CompileError, config
from capra.analysis import roofline
from replay import image, runs

from . import fpga
from .common import Parser, chip_line, finish, int_range, memory, memory_arguments, require_decode

B_MAXES = (1, 2, 4, 8)
WINDOWS = (None, 8)
PAGE = 4
REPLAY_RUN = (4, 8)  # (B_max, window) replayed by default
OUT = runs.OUT


def make_requests(n: int, seed: int, window: int | None) -> list[S.Request]:
    """n requests: a quarter share one 5-token prompt, a sixth another 3-token one, the rest have
    their own prompt of 1..4 tokens; 4..24 tokens each; arrivals spread over 6,000 cycles, the
    first of each shared prompt among the earliest, so later ones find its rows."""
    rnd = random.Random(seed)
    shared = [tuple(rnd.randrange(T.V) for _ in range(5)), tuple(rnd.randrange(T.V) for _ in range(3))]
    arrivals = sorted(rnd.randrange(6000) for _ in range(n))
    arrivals[:2] = [0, 0]
    reqs = []
    for i in range(n):
        if i % 4 == 0:
            prompt = shared[0]
        elif i % 6 == 1:
            prompt = shared[1]
        else:
            prompt = tuple(rnd.randrange(T.V) for _ in range(rnd.randint(1, 4)))
        reqs.append(S.Request(f"r{i:02d}", prompt, rnd.randint(4, 24), window, arrivals[i]))
    return reqs


def rule(prompt: tuple[int, ...], n: int) -> list[int]:
    """The structured model's n tokens after a prompt: its rule applied to the last prompt token."""
    return paged_tests.rule_tokens(prompt[-1], n)[1:]


def serve(m, runner, reqs, b_max: int, pages: int) -> tuple[S.Report, list[str]]:
    """One run, with the pool's invariants checked after every step."""
    problems: list[str] = []
    server = S.Server(m, b_max, pages, PAGE, windows=WINDOWS, runner=runner, check=True, keep_images=True)
    for r in reqs:
        server.submit(r)

    def after(srv: S.Server, step) -> None:
        found = paged_tests.pool_invariants(srv.pool, f"step {len(srv.log)}")
        if srv.blocks.reserved() > srv.blocks.n_pages:
            found.append(f"step {len(srv.log)}: reservations {srv.blocks.reserved()} exceed the pool")
        found += [f"step {len(srv.log)}: {seq.rid} holds more pages than it reserved"
                  for seq in srv.scheduler.running if srv.blocks.held(seq.rid) > seq.reserved]
        problems.extend(found[:3])

    report = server.run(after)
    if server.pool.used() != 0 or server.pool.table:
        problems.append(f"{server.pool.used()} pages still in use at the end ({sorted(server.pool.table, key=str)})")
    return report, problems


def check_run(report: S.Report, reqs, solos: dict) -> list[str]:
    problems = []
    if sorted(report.finish_order) != sorted(r.rid for r in reqs):
        problems.append(f"finished {sorted(report.finish_order)}, submitted {sorted(r.rid for r in reqs)}")
    for r in reqs:
        toks, logits = report.tokens.get(r.rid), report.logits.get(r.rid)
        if toks != solos[r.rid][0] or logits != solos[r.rid][1]:
            problems.append(f"request {r.rid}: tokens or logits differ from its decode alone")
        if toks != rule(r.prompt, r.n_new):
            problems.append(f"request {r.rid}: tokens {toks} do not follow the rule")
    return problems


def replay_runs(logs: dict, runs_to_replay: list[tuple]) -> tuple[list[str], int]:
    """Every step of the chosen runs in both simulators, side by side: each must PASS with the
    machine model's counters. (problems, steps replayed)"""
    jobs = [replay.Replay(f"B{b}_W{W}", [image.record(s.code, s.ext) for s in logs[(b, W)]])
            for b, W in runs_to_replay]
    problems = []
    for job, verdicts in zip(jobs, replay.replay_all(jobs, tool="serve"), strict=True):
        for v in verdicts:
            print(f"  {job.name} {v.simulator:10s}{v.line} (exit {v.rc}, {v.seconds:.1f} s)", flush=True)
            problems += [f"{job.name}: {p}" for p in v.problems]
    return list(dict.fromkeys(problems)), sum(len(job.records) for job in jobs)


def full_batches(runner, context: int = 8) -> None:
    """One step of a full batch at one context, B = 1, 2, 4, 8: its cycles against its bound."""
    print(f"\n== one batched step, every request at context {context}: cycles against the roofline bound")
    print(f"{'B':>3} {'cycles':>7} {'words':>6} {'MACs':>6} {'bound':>6} {'eff':>5} {'tok/kcyc':>8} {'cyc/token':>9}")
    rng = np.random.default_rng(0)
    steps = []
    for b in B_MAXES:
        caches = [(rng.standard_normal((context - 1, T.D)), rng.standard_normal((context - 1, T.D)))
                  for _ in range(b)]
        step = runner.run(list(range(b)), caches, check=True)
        rf = roofline(step.code)
        cycles = step.counters[0]
        steps.append((f"B={b}", b, cycles))
        print(f"{b:3d} {cycles:7d} {rf.dma_words:6d} {rf.macs:6d} {rf.bound:6.0f} {rf.efficiency(cycles):5.2f} "
              f"{1000 * b / cycles:8.3f} {cycles / b:9.1f}")
    print(f"  {fpga.tokens_line(steps, config.active())}")


def figure(results: dict, pages_over_time: dict, path: Path, replayed: list, footer: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for W in WINDOWS:
        left.plot(B_MAXES, [results[(b, W)]["tokens_per_kcycle"] for b in B_MAXES], "o-",
                  label="no window" if W is None else f"window {W}")
    left.set_xlabel("B_max (requests per batch)")
    left.set_ylabel("tokens per 1,000 cycles")
    left.set_xticks(B_MAXES)
    left.grid(alpha=0.3)
    left.legend()
    left.set_title("Throughput (machine model; replayed on the RTL: "
                   + (", ".join(f"B_max={b} W={W}" for b, W in replayed) or "none") + ")", fontsize=9)
    for b in B_MAXES:
        clocks, pages = pages_over_time[b]
        right.step(clocks, pages, where="post", label=f"B_max = {b}")
    # Cycles run to six digits: in thousands, so the tick labels of the axis do not run together.
    right.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _pos: f"{x / 1000:g}"))
    right.set_xlabel("cycle (thousands)")
    right.set_ylabel("pages in use")
    right.set_title(f"Pages in use, window {WINDOWS[-1]}")
    right.grid(alpha=0.3)
    right.legend()
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.text(0.01, 0.01, footer, fontsize=7, color="0.4")
    with runs.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png", metadata=runs.figure_metadata(footer))
    plt.close(fig)


def arguments(ap: Parser) -> None:
    ap.add_argument("--requests", type=int_range(16, 64), default=16, help="requests per run, 16..64 (default 16)")
    ap.add_argument("--seed", type=int_range(0, 2**31 - 1), default=1, help="request generator seed (default 1)")
    ap.add_argument("--pages", type=int_range(8, 4096), default=64,
                    help=f"pages in the pool, {PAGE} rows each, 8..4096 (default 64)")
    ap.add_argument("--replay", choices=("one", "all", "none"), default="one",
                    help="replay the B_max=4, W=8 run (one, default), every run (all), or none on the RTL")
    memory_arguments(ap)


def main(args) -> int:
    with memory(args):
        return _main(args)


def _main(args) -> int:
    require_decode(32, "serving")
    if args.replay != "none":
        replay.require()
    m = T.make_model("structured")
    runner = S.make_runner(m, 32, WINDOWS)
    cfg = config.active()
    if (line := chip_line()) is not None:
        print(line, flush=True)
    problems: list[str] = []
    results: dict = {}
    logs: dict = {}
    print(f"== {args.requests} requests (seed {args.seed}), pool of {args.pages} pages of {PAGE} rows; "
          f"B_max {', '.join(map(str, B_MAXES))}; no window and window 8")
    for W in WINDOWS:
        reqs = make_requests(args.requests, args.seed, W)
        solos = {r.rid: S.decode_alone(r, runner) for r in reqs}
        if W is None:
            shared = sum(1 for r in reqs if sum(q.prompt == r.prompt for q in reqs) > 1)
            print(f"  prompts of {min(len(r.prompt) for r in reqs)}..{max(len(r.prompt) for r in reqs)} tokens "
                  f"({shared} requests share one of two prompts), {min(r.n_new for r in reqs)}.."
                  f"{max(r.n_new for r in reqs)} tokens to generate, {sum(r.n_new for r in reqs)} in all; "
                  f"arrivals over cycles 0..{max(r.arrival for r in reqs)}")
        print(f"\n{'window':>6} {'B_max':>5} {'steps':>5} {'cycles':>7} {'tok/kcyc':>8} {'ratio':>6} {'ceiling':>7} "
              f"{'programs':>8} {'peak pages':>10} {'mean batch':>10} {'eff':>5} {'forked':>6}")
        for b in B_MAXES:
            try:
                report, found = serve(m, runner, reqs, b, args.pages)
            except (S.ServingError, host.MachineMismatch, CompileError) as error:
                problems.append(f"B_max={b} W={W}: the run stopped: {type(error).__name__}: {error}")
                continue
            found += check_run(report, reqs, solos)
            problems += [f"B_max={b} W={W}: {p}" for p in found]
            bound = sum(s.bound for s in report.steps)
            tpk = report.tokens_per_kilocycle()
            results[(b, W)] = {"steps": len(report.steps), "cycles": report.cycles, "tokens": report.generated,
                               "tokens_per_kcycle": tpk, "programs": report.distinct_programs,
                               "peak_pages": report.peak_pages, "efficiency": bound / report.cycles,
                               "mean_batch": sum(len(s.rids) for s in report.steps) / len(report.steps),
                               "forked": len(report.forked)}
            logs[(b, W)] = report.steps
            r = results[(b, W)]
            base = results[(1, W)]["tokens_per_kcycle"] if (1, W) in results else float("nan")
            ratio = tpk / base
            # the ratio if every step of this run took exactly its roofline bound (B_max = 1 as measured)
            ceiling = 1000 * report.generated / bound / base
            r["ratio"], r["ceiling"] = ratio, ceiling
            print(f"{W!s:>6} {b:5d} {r['steps']:5d} {r['cycles']:7d} {tpk:8.3f} {ratio:6.2f} {ceiling:7.2f} "
                  f"{r['programs']:8d} "
                  f"{r['peak_pages']:10d} {r['mean_batch']:10.2f} {r['efficiency']:5.2f} {r['forked']:6d}", flush=True)
    full_batches(runner)
    print("\n  every request's tokens and logits equal its decode alone and follow the rule; machine model =\n"
          "  integer semantics at every step; pool invariants after every step; every page free at the end: "
          + ("yes" if not problems else "NO"))

    chosen = [REPLAY_RUN] if args.replay == "one" else [] if args.replay == "none" else \
        [(b, W) for W in WINDOWS for b in B_MAXES]
    chosen = [run for run in chosen if run in logs]  # a run that stopped is a problem already
    if chosen:
        print(f"\n== replays on the RTL ({', '.join(f'B_max={b} W={W}' for b, W in chosen)}), every step")
    found, replayed = replay_runs(logs, chosen) if chosen else ([], 0)
    problems += found

    prov = runs.provenance(cfg)
    data = {"requests": args.requests, "seed": args.seed, "pages": args.pages, "page": PAGE, "config": cfg.key(),
            "provenance": prov,
            "runs": [{"b_max": b, "window": W, **results[(b, W)]} for W in WINDOWS for b in B_MAXES
                     if (b, W) in results],
            "replayed_steps": replayed, "verdict": "PASS" if not problems else "FAIL"}
    runs.write_json(OUT / "serve_run.json", data)  # always: a failed run must not leave an old PASS
    if len(results) == len(WINDOWS) * len(B_MAXES):
        figure(results, {b: ([s.clock for s in logs[(b, 8)]], [s.pages for s in logs[(b, 8)]]) for b in B_MAXES},
               OUT / "serve_run.png", replayed=chosen, footer=runs.footer(prov))
        print("  wrote out/serve_run.json and out/serve_run.png")
    else:
        print("  wrote out/serve_run.json (no figure: a run stopped)")
    print()
    best = max((r["ratio"] for (b, _W), r in results.items() if b == 8), default=float("nan"))
    replays = (f"{replayed} steps replayed in Icarus and Verilator with identical counters" if replayed
               else "no RTL replay (--replay none)")
    return finish(problems, checks=len(results) + replayed, brackets=True, itemize=True,
                  passed=f"{len(results)} runs checked; {replays}; B_max=8 gives up to {best:.2f}x the "
                         f"tokens per cycle of B_max=1")

