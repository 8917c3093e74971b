"""The design-space sweep: GA2 at every point of a grid of configurations (model/capra/config.py),
each verified on both simulators before it is reported.

Usage: python tools/dse.py [--random N] [--workers N | --scheduler ADDRESS] [--no-cache] [--no-area] [--only KEY ...]
(``make dse`` runs it; also ``capra dse``; docs/design_space.md explains the table.)

Grid: ext_latency in {0, 4, 8} x sram_words in {2048, 4096, 8192} x dma_queue in {2, 4, 8} with the
one-word external port and the 4 x 4 array; the two-word port (ext_words=2) at ext_latency in
{0, 4, 8} x sram_words in {2048, 4096, 8192} with the default queue of 4; and the 2 x 2 and 8 x 8
arrays (n = 2, 8) at ext_latency in {0, 4, 8} x ext_words in {1, 2} with the default scratchpad and
queue (48 points; L4 S4096 Q4 is the default chip).
For each point, as a job of its own on a local Dask cluster of --workers processes (default 2, the
machine's cores) or on the existing Dask cluster at --scheduler ADDRESS (tools/capra_cli/executor.py),
with its configuration made active there (capra.config.set_active):

  exactness  N random programs (--random, default 20) and the tiny model's 32-step decode (no
             window) replayed in Icarus and in Verilator built for the point; every word and all
             seven counters must equal the machine model's (a mismatch is a failure, exit 1)
  cycles     decode steps 1 and 32, cycles per extra token of context ((c32 - c1) / 31), the
             efficiency of step 32 against its own roofline bound (capra.analysis.roofline)
  batching   tokens per kilocycle of one batch of 4 at context 8 (host.ModelRunner)
  area       the whole ga2 top synthesized by Yosys for the iCE40 (tools/synth.py's flow) with the
             point's RTL defines (Config.rtl_defines()): LUT4, flip-flops, block RAMs, DSPs, and the
             post-route Fmax from nextpnr-ice40 on the HX8K, or nextpnr's account of what does not fit

Area depends only on the RTL: ext_latency is a property of the memory and changes no RTL, so the
grid has 16 RTL configurations (sram_words x dma_queue, sram_words with the two-word port, and
each other array size with either port),
each synthesized once, after the simulations, as jobs on the same workers as the points (minutes
each; cached in out/synth/cache/ per set of defines of the machine that ran it, so a second run
takes seconds). For the Pareto front the area is one number in LUT4-equivalents,
LUT4 + 240 x BRAM: on the HX8K one 4-kbit block RAM is 1/32 of its block RAM as 240 LUT4 are 1/32
of its 7,680 logic cells (DSPs are 0: the HX8K has none; flip-flops share the LUT4s' logic cells).
--no-area, or no Yosys on the machine (said in one line), puts the analytic count of the
scratchpad's block RAMs in its place (16 banks, counted from the size; labelled "analytic").

A point whose decode does not fit its scratchpad is reported as such (the compiler's CompileError),
not as a failure; neither is a design that does not fit the HX8K. The Pareto front (cycles per
token against area; lower is better in both) is marked in the table and drawn in
out/dse_pareto.png. Results are cached in out/dse/ keyed by the configuration and a hash of the
sources (rtl/, tb/, the model, the host, the replay library and this command), so a second run only
prints. Exit status: 0 when every point's checks passed (and every synthesis finished with its
memories in block RAM), 1 if one failed, 2 for a bad argument.
"""

from __future__ import annotations

import hashlib
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stdout
from functools import partial
from pathlib import Path

import replay
from capra import config
from replay import image, runs

from . import executor, synth
from .common import BadArgument, Parser, finish, in_range, int_range, note

ROOT = runs.ROOT

LATENCIES = (0, 4, 8)
SRAM_SIZES = (2048, 4096, 8192)
QUEUES = (2, 4, 8)
WIDE_QUEUE = 4  # the two-word port is swept at the default queue only: a full product doubles the synthesis
ARRAYS = (2, 8)  # the other array sizes, at the default scratchpad and queue, with either port
GRID = tuple(config.Config(ext_latency=lat, sram_words=s, dma_queue=q)
             for lat in LATENCIES for s in SRAM_SIZES for q in QUEUES) + tuple(
    config.Config(ext_latency=lat, sram_words=s, dma_queue=WIDE_QUEUE, ext_words=2)
    for lat in LATENCIES for s in SRAM_SIZES) + tuple(
    config.Config(ext_latency=lat, ext_words=e, n=n) for n in ARRAYS for e in (1, 2) for lat in LATENCIES)
STEPS = 32
BATCH, BATCH_CONTEXT = 4, 8
OUT = runs.OUT
CACHE = OUT / "dse"
FIGURE = OUT / "dse_pareto.png"
DEFAULT_RANDOM = 20  # random programs replayed at each point
SOURCES = ("rtl/*.v", "rtl/*.vh", "tb/*.v", "model/*.py", "model/capra/*.py", "model/host/*.py",
           "model/replay/*.py", "tools/capra_cli/dse.py")
DEVICE = synth.HX8K
BRAM_LUT4 = DEVICE.logic_cells // DEVICE.brams  # LUT4-equivalents of one block RAM: the same share of the HX8K
AREA_RULE = f"LUT4 + {BRAM_LUT4} x BRAM"
SYNTH_TIMEOUT = 1800.0  # seconds per Yosys or nextpnr step: ga2 takes minutes, more on a busy machine


def sources_hash() -> str:
    """A digest of what a sweep point's figures depend on: a cached point of other sources is measured again."""
    return runs.sources_hash(SOURCES)


def bram_count(cfg: config.Config) -> int:
    """iCE40 4-kbit block RAMs of the scratchpad: 16 banks of sram_words / 16 words x 32 bits. A 4-kbit
    RAM is at most 16 bits wide (256 x 16), so a bank takes two per 256 words or part of 256: a bank
    of 128 words takes two, half empty, as Yosys confirms (2048 and 4096 words both come to 77 in ga2)."""
    return 16 * 2 * -(-(cfg.sram_words // 16) // 256)


def rtl_label(cfg: config.Config) -> str:
    """The part of a point's label the RTL sees: ``S4096 Q4`` (`` E2`` for the two-word port, `` N8``
    for another array; ext_latency is the testbench's)."""
    return cfg.label().split(" ", 1)[1]


def point(cfg: config.Config, n_random: int, simulators: tuple = replay.SIMULATORS) -> dict:
    """Everything the table shows for one configuration (runs in a worker process); the replays
    run in `simulators` (the sweep: both)."""
    started = time.monotonic()
    config.set_active(cfg)
    import host
    import numpy as np
    import paged_lm as PL
    import tiny_lm as T
    from capra import CompileError
    from capra.analysis import roofline
    from capra.randprog import random_program

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
    runner = host.ModelRunner(m, host.calibrate(m, STEPS).ranges)
    rng = np.random.default_rng(1)
    caches = [(rng.standard_normal((BATCH_CONTEXT - 1, T.D)), rng.standard_normal((BATCH_CONTEXT - 1, T.D)))
              for _ in range(BATCH)]
    try:
        step = runner.run(list(range(1, BATCH + 1)), caches)
        result["batch_tok_per_kcyc"] = 1000 * BATCH / step.counters[0]
    except CompileError as error:
        result["batch_tok_per_kcyc"] = None
        result["batch_fits"] = str(error)
    decode = [image.record(r["code"], r["ext"]) for r in records]
    rand = [image.record(*random_program(seed)) for seed in range(n_random)]
    jobs = [replay.Replay(f"{name}_decode", decode), replay.Replay(f"{name}_random", rand)]
    verdicts = replay.replay_all(jobs, tool=f"dse-{name}", workers=1, simulators=simulators)
    result["problems"] += [f"{job.name}: {p}" for job, vs in zip(jobs, verdicts, strict=True) for v in vs
                           for p in v.problems]
    result["programs"] = len(decode) + len(rand)
    result["seconds"] = round(time.monotonic() - started, 1)  # for the next run's estimate
    return result


# ---- area ---------------------------------------------------------------------------------------


def area_of(result: synth.Result) -> dict:
    """What the table needs from one synthesis of ga2 (a plain dict: it goes next to a point's row)."""
    counts = result.counts or {}
    return {"lut4": counts.get("lut4"), "ff": counts.get("ff"), "bram": counts.get("bram"),
            "dsp": counts.get("dsp"), "fmax": result.fmax, "note": result.note, "error": result.error,
            "memory_ok": result.memory_ok, "memory_lines": result.memory_lines, "seconds": result.seconds,
            "cached": result.cached}


def measured_area(area: dict | None) -> float | None:
    """A synthesized area in LUT4-equivalents (AREA_RULE), or None when synthesis gave no counts."""
    if not area or area.get("lut4") is None or area.get("bram") is None:
        return None
    return area["lut4"] + BRAM_LUT4 * area["bram"]


def analytic_area(row: dict) -> float:
    """The fallback without Yosys: the scratchpad's block RAMs counted from its size."""
    return row["brams"]


def area(defines: tuple[str, ...], *, place: bool, no_cache: bool, timeout: float) -> dict:
    """The area of ga2 with `defines` (one job: here, or on a Dask worker, whose synthesis cache is
    its own)."""
    tools = synth.Children()
    with executor.stopped_by(tools.kill_all), redirect_stdout(sys.stderr):  # synth's progress lines: stderr
        return area_of(synth.synthesize_top(defines, place=place, timeout=timeout, no_cache=no_cache,
                                            children=tools))


def synthesize_areas(points: tuple[config.Config, ...], *, place: bool, no_cache: bool, timeout: float,
                     workers: int = 1, scheduler: str | None = None) -> dict[tuple[str, ...], dict]:
    """ga2 synthesized once per distinct RTL configuration among `points` (each takes minutes and
    most of a core), `workers` at a time or on the Dask cluster at `scheduler` (executor.run);
    progress on stderr. Keyed by Config.rtl_defines(), in the order of `points`."""
    distinct = list(dict.fromkeys(cfg.rtl_defines() for cfg in points))
    labels = {cfg.rtl_defines(): rtl_label(cfg) for cfg in points}
    executor.announce(len(distinct), "RTL configurations to synthesize (ga2, Yosys)", workers, scheduler)
    job = partial(area, place=place, no_cache=no_cache, timeout=timeout)
    found: dict[tuple[str, ...], dict] = {}
    for defines, future in executor.run(job, distinct, workers=workers, scheduler=scheduler, what="syntheses"):
        found[defines] = future.result()
        note(f"area of ga2 {labels[defines]} ({' '.join(defines) or 'no defines'}): done")
    return {defines: found[defines] for defines in distinct}


def area_problems(areas: dict[tuple[str, ...], dict], labels: dict[tuple[str, ...], str]) -> list[str]:
    """A synthesis that failed or timed out, or a memory left outside block RAM, fails the sweep (a
    design too big for the HX8K does not: that is a measurement)."""
    problems = []
    for defines, area in areas.items():
        if area["error"]:
            problems.append(f"area of {labels[defines]}: {area['error']}")
        elif area["memory_ok"] is False:
            problems.append(f"area of {labels[defines]}: " + "; ".join(area["memory_lines"]))
    return problems


def fmax_cell(area: dict) -> str:
    if area.get("fmax") is not None:
        return f"{area['fmax']:.1f}"
    return "no fit" if str(area.get("note", "")).startswith("does not fit") else "-"


def area_lines(areas: dict[tuple[str, ...], dict], labels: dict[tuple[str, ...], str]) -> list[str]:
    """The footnote: how area was measured, and per RTL configuration what nextpnr said and the time."""
    lines = ["Area: Yosys synth_ice40 of the whole ga2 per RTL configuration (ext_latency changes no RTL). "
             "LUT4 = SB_LUT4, FF = SB_DFF*, BRAM = SB_RAM40_4K (4 kbit), DSP = SB_MAC16 (the HX8K has none).",
             f"area = {AREA_RULE}, in LUT4-equivalents: one block RAM is 1/{DEVICE.brams} of the HX8K's block RAM "
             f"as {BRAM_LUT4} LUT4 are 1/{DEVICE.brams} of its {DEVICE.logic_cells} logic cells.",
             "Fmax: MHz post-route, nextpnr-ice40 --hx8k --package ct256 --seed 1 --freq 100, a register on every "
             "port bit (no fit: the design does not fit the HX8K); per RTL configuration:"]
    for defines, area in areas.items():
        time = f"{area['seconds']:.0f} s" + (", cached" if area["cached"] else "")
        said = area["error"] or area["note"] or (f"Fmax {area['fmax']:.1f} MHz" if area["fmax"] else "")
        lines.append(f"  {labels[defines]:<11} {said} ({time})")
    return lines


# ---- the front and the table --------------------------------------------------------------------


def pareto(rows: list[dict], cost: Callable[[dict], float | None]) -> set[str]:
    """Configurations no other beats or equals in both cycles per token and cost(row) (the area; None:
    not measured, left out). Points with equal values are all kept."""
    ok = [(r["config"], (r["per_token"], cost(r))) for r in rows if "per_token" in r and not r["problems"]]
    ok = [(name, a) for name, a in ok if a[1] is not None]
    return {name for name, a in ok
            if not any(b != a and b[0] <= a[0] and b[1] <= a[1] for _other, b in ok)}


def table(rows: list[dict], front: set[str], measured: bool) -> list[str]:
    """The sweep's table: with `measured` the synthesized area columns, else the analytic BRAM count."""
    area_head = (f"{'LUT4':>6} {'FF':>6} {'BRAM':>4} {'DSP':>3} {'Fmax':>6} {'area':>6}" if measured
                 else f"{'BRAM (analytic)':>15}")
    lines = [f"{'point':<16} {'step 1':>7} {'step 32':>7} {'cyc/tok':>7} {'eff32':>6} {'batch tok/kcyc':>14} "
             f"{area_head} {'exact':>6}  pareto"]
    for r in rows:
        if "fits" in r:
            lines.append(f"{r['label']:<16} does not fit: {r['fits']}")
            continue
        batch = f"{r['batch_tok_per_kcyc']:.2f}" if r.get("batch_tok_per_kcyc") else "no fit"
        exact = "PASS" if not r["problems"] else "FAIL"
        if measured:
            a = r.get("area") or {}
            total = measured_area(a)
            cells = (f"{synth.cell(a.get('lut4')):>6} {synth.cell(a.get('ff')):>6} {synth.cell(a.get('bram')):>4} "
                     f"{synth.cell(a.get('dsp')):>3} {fmax_cell(a):>6} {synth.cell(total):>6}")
        else:
            cells = f"{r['brams']:>15d}"
        lines.append(f"{r['label']:<16} {r['step1']:7d} {r['step32']:7d} {r['per_token']:7.1f} {r['eff32']:6.3f} "
                     f"{batch:>14} {cells} {exact:>6}  {'*' if r['config'] in front else ''}")
    return lines


def draw(rows: list[dict], front: set[str], cost: Callable[[dict], float | None], xlabel: str,
         rest: list[dict] | None = None, caption: str = "") -> Path | None:
    """The Pareto figure of `rows`; `rest` (other points of the grid, from the cache) drawn pale
    behind them and counted in the front; `caption`, a line under the axes saying what is left out.
    None (said why) when there is nothing to draw or only one point: one dot has no front."""
    rest = rest or []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        note("matplotlib is missing: no figure")
        return None
    ok = [r for r in rows if "per_token" in r and cost(r) is not None]
    pale = [r for r in rest if "per_token" in r and cost(r) is not None]
    if not ok:
        note("no point has both cycles and an area: no figure")
        return None
    if len(ok) + len(pale) < 2:
        note("one point, and no other point of the grid in the cache: no Pareto front to draw "
             "(run more points, or the whole grid, first)")
        return None
    fig, ax = plt.subplots(figsize=(7, 4.8))
    if pale:
        ax.scatter([cost(r) for r in pale], [r["per_token"] for r in pale], c="0.85",
                   label="the rest of the grid (cached)")
    ax.scatter([cost(r) for r in ok], [r["per_token"] for r in ok], c="0.45",
               label="configurations run" if pale else "configurations")
    best = sorted((r for r in ok + pale if r["config"] in front), key=lambda r: (cost(r), -r["per_token"]))
    ax.plot([cost(r) for r in best], [r["per_token"] for r in best], "o-", c="C3", label="Pareto front")
    labels: dict[tuple, list[str]] = {}  # points with equal values share one label
    for r in best:
        labels.setdefault((cost(r), r["per_token"]), []).append(r["label"])
    for (x, y), names in labels.items():
        ax.annotate(" / ".join(names), (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("decode cycles per extra token of context")
    ax.set_title("GA2 design space (make dse)")
    ax.legend()
    # the sweep's points are each measured on the chip they name: the footer says which sources and commit
    prov = runs.provenance()
    lines = [caption] if caption else []
    lines.append(runs.footer({**prov, "chip": "each point on its own configuration"}))
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, color="0.3")
    fig.subplots_adjust(bottom=0.12 + 0.04 * len(lines))
    with runs.atomic_path(FIGURE) as tmp:
        fig.savefig(tmp, format="png", dpi=120, metadata=runs.figure_metadata(lines[-1]))
    plt.close(fig)
    return FIGURE


def cached_point(cfg: config.Config, src: str, n_random: int, cache: Path = CACHE) -> Path:
    """Where a point's result is kept: one file per configuration, sources and number of random programs."""
    return cache / f"{hashlib.sha256(f'{cfg.key()}|{src}|{n_random}'.encode()).hexdigest()[:20]}.json"


def cached_rest(points: tuple[config.Config, ...], cache_file: Callable[[config.Config], Path]) -> list[dict]:
    """The grid's other points that this run's sources have measured before (for --only's figure)."""
    chosen = {cfg.key() for cfg in points}
    rest = []
    for cfg in GRID:
        f = cache_file(cfg)
        if cfg.key() not in chosen and f.exists():
            try:
                rest.append(runs.read_json(f, f"the cached result of {cfg.label()}"))
            except runs.UserError:  # damaged: not drawn (a run of that point measures it again)
                continue
    return rest


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def estimate(todo: int, cached: list[dict], jobs: int | None, synthesis: bool) -> str:
    """How long the run will take, from the times the cache recorded (a point records its own);
    `jobs` points at a time (None: a cluster of a size not known here, so a time per point only)."""
    if not todo:
        return "every point is cached: the table comes at once" + (
            " (after the area of any RTL configuration not yet synthesized)" if synthesis else "")
    times = [r["seconds"] for r in cached if isinstance(r.get("seconds"), (int, float))]
    if times and jobs is None:
        each = statistics.median(times)
        text = (f"{todo} point{'s' * (todo != 1)} to measure: {each:.0f} s a point (the median of {len(times)} in "
                f"the cache), divided among the cluster's workers")
    elif times:
        each = statistics.median(times)
        rounds = -(-todo // jobs)
        text = (f"{todo} point{'s' * (todo != 1)} to measure: about {duration(rounds * each)} "
                f"({each:.0f} s a point, the median of {len(times)} in the cache, {jobs} at a time)")
    else:
        text = f"{todo} point{'s' * (todo != 1)} to measure (no time in the cache to estimate from yet)"
    if synthesis:
        syn = [r["area"]["seconds"] for r in cached
               if isinstance(r.get("area"), dict) and not r["area"].get("cached") and r["area"].get("seconds")]
        text += ("; then each RTL configuration not yet synthesized, one after the other"
                 + (f" (about {duration(statistics.median(syn))} each here)" if syn else " (minutes each)"))
    return text


def arguments(ap: Parser) -> None:
    ap.add_argument("--random", type=int_range(1, 1000), default=DEFAULT_RANDOM,
                    help="random programs replayed per point, 1..1000 (default 20)")
    executor.arguments(ap, "points")
    ap.add_argument("--no-cache", action="store_true",
                    help="recompute every point, and synthesize every RTL configuration again (minutes each)")
    ap.add_argument("--no-area", action="store_true",
                    help="no synthesis: the area column is the scratchpad's analytic block-RAM count")
    ap.add_argument("--synth-timeout", type=in_range(float, 1, 86400), default=SYNTH_TIMEOUT, metavar="SECONDS",
                    help=f"seconds allowed per Yosys or nextpnr step (default {SYNTH_TIMEOUT:g})")
    ap.add_argument("--only", nargs="+", metavar="KEY", default=None,
                    help='configurations to run instead of the grid, e.g. "ext_latency=8,sram_words=2048"')


def main(args) -> int:
    executor.check(args)
    points = GRID
    if args.only:
        if any(not k.replace(",", "").strip() for k in args.only):
            raise BadArgument("--only", "an empty key (name a configuration, e.g. \"n=8,ext_words=2\")")
        try:
            points = tuple(config.Config.parse(k) for k in args.only)
        except config.ConfigError as error:
            raise BadArgument("--only", str(error)) from None
        seen: dict[str, str] = {}
        for text, cfg in zip(args.only, points):
            if cfg.key() in seen:
                raise BadArgument("--only", f"{text!r} and {seen[cfg.key()]!r} are the same configuration "
                                  f"({cfg.label()})")
            seen[cfg.key()] = text
    replay.require()
    CACHE.mkdir(parents=True, exist_ok=True)
    src = sources_hash()
    missing = [] if args.no_area else synth.missing_tools(False, [], place_all=True)
    measured = not args.no_area and synth.PYPI_TOOLS.yosys not in missing
    if missing:
        note(f"{' and '.join(missing)} missing ({synth.INSTALL_HINT}): "
             + ("no Fmax" if measured else "the area column is the analytic block-RAM count, not synthesized"))

    def cache_file(cfg: config.Config) -> Path:
        return cached_point(cfg, src, args.random)

    rows: dict[str, dict] = {}
    todo = []
    for cfg in points:
        f = cache_file(cfg)
        if not args.no_cache and f.exists():
            try:
                rows[cfg.key()] = runs.read_json(f, f"the cached result of {cfg.label()}")
                continue
            except runs.UserError as error:  # a run killed while writing: measure the point again
                note(f"{error}; measuring it again")
        todo.append(cfg)
    rest = cached_rest(points, cache_file) if args.only else []
    print(f"== {len(points)} configurations ({len(points) - len(todo)} cached), {args.random} random programs "
          f"and a {STEPS}-step decode each, replayed in Icarus and Verilator; "
          f"{executor.where(args.workers, args.scheduler)}")
    print(estimate(len(todo), list(rows.values()) + rest, None if args.scheduler else args.workers, measured))
    for cfg, fut in executor.run(partial(point, n_random=args.random), todo, workers=args.workers,
                                 scheduler=args.scheduler, what="points"):
        try:
            r = fut.result()
        except Exception as error:  # a point that crashed is a failed point, named
            r = {"config": cfg.key(), "label": cfg.label(), "brams": bram_count(cfg),
                 "problems": [f"{cfg.label()}: {type(error).__name__}: {error}"]}
        rows[cfg.key()] = r
        if not r["problems"]:
            runs.write_json(cache_file(cfg), r)
        note(f"{cfg.label()}: {'does not fit' if 'fits' in r else 'FAIL' if r['problems'] else 'PASS'}")
    ordered = [rows[cfg.key()] for cfg in points]
    labels = {cfg.rtl_defines(): rtl_label(cfg) for cfg in points}
    areas: dict[tuple[str, ...], dict] = {}
    if measured:
        areas = synthesize_areas(points, place="nextpnr-ice40" not in missing, no_cache=args.no_cache,
                                 timeout=args.synth_timeout, workers=args.workers, scheduler=args.scheduler)
        for cfg, r in zip(points, ordered):
            r["area"] = areas[cfg.rtl_defines()]
            if not r["problems"]:  # the cached row keeps its area: an --only run draws it behind its points
                runs.write_json(cache_file(cfg), r)
        rest = [r for r in rest if r.get("area")]

        def cost(r: dict) -> float | None:
            return measured_area(r.get("area"))

        what, xlabel = f"area ({AREA_RULE})", f"area, LUT4-equivalents ({AREA_RULE}; Yosys, iCE40)"
    else:
        cost, what = analytic_area, "BRAM (analytic)"
        xlabel = "scratchpad block RAMs (analytic: counted from its size; iCE40, 4 kbit each)"
    front = pareto(ordered + rest, cost)
    print()
    for line in table(ordered, front, measured):
        print(line)
    print()
    if measured:
        print("\n".join(area_lines(areas, labels)))
    else:
        print("BRAM (analytic): the scratchpad's iCE40 4-kbit block RAMs counted from its size (16 banks), not "
              "synthesized; the rest of ga2 (about 45 more at the default) is not counted.")
    caption = "" if measured else ("--no-area" if args.no_area else "no Yosys") + (
        ": not synthesized; the x axis counts only the scratchpad's block RAMs (the rest of ga2, "
        "its logic and its Fmax are left out)")
    figure = draw(ordered, front, cost, xlabel, rest, caption)
    if figure:
        print(f"figure: {figure.relative_to(ROOT)} (* in the table: the Pareto front, cycles per token vs {what})")
    problems = [p for r in ordered for p in r["problems"]] + area_problems(areas, labels)
    checked = sum(1 for r in ordered if "per_token" in r)
    area_text = f"; area of {len(areas)} RTL configuration{'s' * (len(areas) != 1)} from Yosys" if areas else ""
    return finish(problems, checked, f"{checked} configuration{'s' * (checked != 1)} exact on both simulators "
                  f"({len(ordered) - checked} do not fit their scratchpad){area_text}")
