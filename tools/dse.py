#!/usr/bin/env python3
"""The design-space sweep: GA2 at every point of a grid of configurations (model/capra/config.py),
each verified on both simulators before it is reported.

Usage: python tools/dse.py [--random N] [--jobs J] [--no-cache] [--only KEY ...]
(``make dse`` runs it; docs/design_space.md explains the table.)

Grid: ext_latency in {0, 4, 8} x sram_words in {2048, 4096, 8192} x dma_queue in {2, 4, 8}
(27 points; L4 S4096 Q4 is the default chip). For each point, in a worker process of its own
(GA2_CONFIG-style: capra.config.set_active), on the machine's cores (--jobs, default 2):

  exactness  N random programs (--random, default 20) and the tiny model's 32-step decode (no
             window) replayed in Icarus and in Verilator built for the point; every word and all
             five counters must equal the machine model's (a mismatch is a failure, exit 1)
  cycles     decode steps 1 and 32, cycles per extra token of context ((c32 - c1) / 31), the
             efficiency of step 32 against its own roofline bound (capra.analysis.roofline)
  batching   tokens per kilocycle of one batch of 4 at context 8 (model/batched.py)
  area       the scratchpad's iCE40 block RAMs (16 banks of 4-kbit RAMs, counted from the size;
             the ga2 top's Yosys LUT4 count is not part of this phase's table)

A point whose decode does not fit its scratchpad is reported as such (the compiler's CompileError),
not as a failure. The Pareto front (cycles per token against block RAMs; lower is better in both)
is marked in the table and drawn in out/dse_pareto.png. Results are cached in out/dse/ keyed by the
configuration and a hash of the sources (rtl/, tb/, model/, the replay tools), so a second run only
prints. Exit status: 0 when every point's checks passed, 1 if one failed, 2 for a bad argument.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import bootstrap

bootstrap.need("numpy")

import cli  # noqa: E402

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(ROOT / "model"))

from capra import config  # noqa: E402

LATENCIES = (0, 4, 8)
SRAM_SIZES = (2048, 4096, 8192)
QUEUES = (2, 4, 8)
GRID = tuple(config.Config(ext_latency=lat, sram_words=s, dma_queue=q)
             for lat in LATENCIES for s in SRAM_SIZES for q in QUEUES)
STEPS = 32
BATCH, BATCH_CONTEXT = 4, 8
OUT = ROOT / "out"
CACHE = OUT / "dse"
FIGURE = OUT / "dse_pareto.png"
SOURCES = ("rtl/*.v", "rtl/*.vh", "tb/*.v", "model/*.py", "model/capra/*.py",
           "tools/dse.py", "tools/hw.py", "tools/ga2_progs.py", "tools/cli.py")


def sources_hash() -> str:
    h = hashlib.sha256()
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def bram_count(cfg: config.Config) -> int:
    """iCE40 4-kbit block RAMs of the scratchpad: 16 banks of sram_words / 16 words x 32 bits."""
    bank_bits = cfg.sram_words // 16 * 32
    return 16 * -(-bank_bits // 4096)


def replay_records(records: list[list[int]], name: str, extw: int) -> list[str]:
    """Replay records in both simulators (built for the active configuration); problems, if any."""
    import ga2_progs
    import hw

    image = CACHE / "images" / f"{name}.hex"
    image.parent.mkdir(parents=True, exist_ok=True)
    ga2_progs.write_image(records, image)
    replays = hw.replay(image, len(records), extw)
    problems = [f"{name}: {p}" for r in replays for p in r.problems]
    want = [rec[-6:-1] for rec in records]  # each record ends with its five counters and a CRC
    for r in replays:
        if not r.problems and r.counters != want:
            problems.append(f"{name}: {r.simulator}'s counters differ from the machine model's")
    return problems


def point(cfg: config.Config, n_random: int) -> dict:
    """Everything the table shows for one configuration (runs in a worker process)."""
    config.set_active(cfg)
    import batched
    import ga2_progs
    import numpy as np
    import paged_lm as PL
    import tiny_lm as T
    from capra import CompileError
    from capra.analysis import roofline
    from capra.randprog import EXTW, random_program

    name = cfg.key().replace(",", "_").replace("=", "")
    result: dict = {"config": cfg.key(), "label": cfg.label(), "brams": bram_count(cfg), "problems": []}
    m = T.make_model("structured")
    try:
        chip = PL.PagedChip(m, STEPS, None, 4, 64)
        _toks, records = chip.generate(0, STEPS)
    except CompileError as error:
        result["fits"] = str(error)
        return result
    cycles = [r["counters"][0] for r in records]
    result.update(step1=cycles[0], step32=cycles[-1], per_token=(cycles[-1] - cycles[0]) / (STEPS - 1),
                  eff32=roofline(records[-1]["code"]).bound / cycles[-1])
    ranges = batched.calibrate_ranges(m, STEPS, (None,))
    programs = batched.BatchPrograms(m, ranges)
    rng = np.random.default_rng(1)
    caches = [(rng.standard_normal((BATCH_CONTEXT - 1, T.D)), rng.standard_normal((BATCH_CONTEXT - 1, T.D)))
              for _ in range(BATCH)]
    try:
        step = programs.run(list(range(1, BATCH + 1)), caches)
        result["batch_tok_per_kcyc"] = 1000 * BATCH / step.counters[0]
    except CompileError as error:
        result["batch_tok_per_kcyc"] = None
        result["batch_fits"] = str(error)
    decode = [ga2_progs.record(r["code"], r["ext"], 8192) for r in records]
    result["problems"] += replay_records(decode, f"{name}_decode", 8192)
    rand = [ga2_progs.record(*random_program(seed), EXTW) for seed in range(n_random)]
    result["problems"] += replay_records(rand, f"{name}_random", EXTW)
    result["programs"] = len(decode) + len(rand)
    return result


def pareto(rows: list[dict]) -> set[str]:
    """Configurations no other beats or equals in both cycles per token and block RAMs."""
    ok = [r for r in rows if "per_token" in r and not r["problems"]]
    front = set()
    for r in ok:
        a = (r["per_token"], r["brams"])
        if not any((s["per_token"], s["brams"]) != a and s["per_token"] <= a[0] and s["brams"] <= a[1] for s in ok):
            front.add(r["config"])
    return front


def table(rows: list[dict], front: set[str]) -> list[str]:
    lines = [f"{'point':<16} {'step 1':>7} {'step 32':>7} {'cyc/tok':>7} {'eff32':>6} {'batch tok/kcyc':>14} "
             f"{'BRAM':>5} {'exact':>6}  pareto"]
    for r in rows:
        if "fits" in r:
            lines.append(f"{r['label']:<16} does not fit: {r['fits']}")
            continue
        batch = f"{r['batch_tok_per_kcyc']:.2f}" if r.get("batch_tok_per_kcyc") else "no fit"
        exact = "PASS" if not r["problems"] else "FAIL"
        lines.append(f"{r['label']:<16} {r['step1']:7d} {r['step32']:7d} {r['per_token']:7.1f} {r['eff32']:6.3f} "
                     f"{batch:>14} {r['brams']:5d} {exact:>6}  {'*' if r['config'] in front else ''}")
    return lines


def draw(rows: list[dict], front: set[str]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        cli.note("matplotlib is missing: no figure")
        return None
    ok = [r for r in rows if "per_token" in r]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter([r["brams"] for r in ok], [r["per_token"] for r in ok], c="0.6", label="configurations")
    best = sorted((r for r in ok if r["config"] in front), key=lambda r: r["brams"])
    ax.plot([r["brams"] for r in best], [r["per_token"] for r in best], "o-", c="C3", label="Pareto front")
    labels: dict[tuple, list[str]] = {}  # points with equal values share one label
    for r in best:
        labels.setdefault((r["brams"], r["per_token"]), []).append(r["label"])
    for (x, y), names in labels.items():
        ax.annotate(" / ".join(names), (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("scratchpad block RAMs (iCE40, 4 kbit each)")
    ax.set_ylabel("decode cycles per extra token of context")
    ax.set_title("GA2 design space (make dse)")
    ax.legend()
    with cli.atomic_path(FIGURE) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return FIGURE


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--random", type=cli.int_range(1, 1000), default=20,
                    help="random programs replayed per point, 1..1000 (default 20)")
    ap.add_argument("--jobs", type=cli.int_range(1, 64), default=2, help="worker processes, 1..64 (default 2)")
    ap.add_argument("--no-cache", action="store_true", help="recompute every point")
    ap.add_argument("--only", nargs="+", metavar="KEY", default=None,
                    help='configurations to run instead of the grid, e.g. "ext_latency=8,sram_words=2048"')
    args = ap.parse_args(argv)
    points = GRID
    if args.only:
        try:
            points = tuple(config.Config.parse(k) for k in args.only)
        except config.ConfigError as error:
            ap.refuse("--only", str(error))
    CACHE.mkdir(parents=True, exist_ok=True)
    src = sources_hash()

    def cache_file(cfg: config.Config) -> Path:
        return CACHE / f"{hashlib.sha256(f'{cfg.key()}|{src}|{args.random}'.encode()).hexdigest()[:20]}.json"

    rows: dict[str, dict] = {}
    todo = []
    for cfg in points:
        f = cache_file(cfg)
        if not args.no_cache and f.exists():
            rows[cfg.key()] = json.loads(f.read_text())
        else:
            todo.append(cfg)
    print(f"== {len(points)} configurations ({len(points) - len(todo)} cached), {args.random} random programs "
          f"and a {STEPS}-step decode each, replayed in Icarus and Verilator; {args.jobs} workers")
    progress = cli.Progress("points", len(todo), every=10.0)
    if todo:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(point, cfg, args.random): cfg for cfg in todo}
            for fut in as_completed(futures):
                cfg = futures[fut]
                try:
                    r = fut.result()
                except Exception as error:  # a worker that crashed is a failed point, named
                    r = {"config": cfg.key(), "label": cfg.label(), "brams": bram_count(cfg),
                         "problems": [f"{cfg.label()}: {type(error).__name__}: {error}"]}
                rows[cfg.key()] = r
                if not r["problems"]:
                    cli.write_json(cache_file(cfg), r)
                progress.step()
                cli.note(f"{cfg.label()}: {'does not fit' if 'fits' in r else 'FAIL' if r['problems'] else 'PASS'}")
    ordered = [rows[cfg.key()] for cfg in points]
    front = pareto(ordered)
    print()
    for line in table(ordered, front):
        print(line)
    print("\nBRAM: the scratchpad's iCE40 4-kbit block RAMs (16 banks); iCE40 has no DSPs (0 at every point).")
    figure = draw(ordered, front)
    if figure:
        print(f"figure: {figure.relative_to(ROOT)} (* in the table: the Pareto front, cycles per token vs BRAM)")
    problems = [p for r in ordered for p in r["problems"]]
    checked = sum(1 for r in ordered if "per_token" in r)
    return cli.finish(problems, checked, f"{checked} configuration{'s' * (checked != 1)} exact on both simulators "
                      f"({len(ordered) - checked} do not fit their scratchpad)")


if __name__ == "__main__":
    os.environ.setdefault("GA2_EXT", "8192")
    sys.exit(cli.run(main))
