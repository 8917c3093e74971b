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
  area       the whole ga2 synthesized by Yosys synth_ecp5, placed and routed by nextpnr-ecp5 on the
             smallest ECP5 part that holds it (LFE5U-45F, or 85F for the 8 x 8 array) with the point's
             RTL defines (Config.rtl_defines()): make fpga's flow (tools/capra_cli/fpga.py) and its
             kept results in out/fpga/. LUT4, flip-flops, DP16KD block RAMs and MULT18X18D
             multipliers as nextpnr counts them, the post-route Fmax (the lowest of seeds 1..3,
             --seeds, for the default chip and the 8 x 8 array; seed 1 for the rest), or "no fit"
             and why
  speed      decode tokens a second: Fmax (MHz) x 1e6 / the cycles of decode step 32

Area depends only on the RTL: ext_latency is a property of the memory and changes no RTL, so the
grid has 16 RTL configurations (sram_words x dma_queue, sram_words with the two-word port, and
each other array size with either port), each synthesized, placed and routed once, after the
simulations, as jobs on the same workers as the points (minutes a seed; kept in out/fpga/ by the
configuration, the RTL sources and the tools' versions, so a rerun reads them and an interrupted
run resumes from the last finished seed). For the Pareto front the area is one number in
LUT4-equivalents, LUT4 + 406 x DP16KD + 609 x MULT18X18D: on the LFE5U-45F one DP16KD is 1/108 of
its block RAM as 406 LUT4 are 1/108 of its 43,848 logic cells, and one MULT18X18D 1/72 of its
multipliers as 609 LUT4 (flip-flops share the logic cells' slices). --no-area, or no ECP5 tools
on the machine (said in one line), leaves out the place and route: no Fmax and no tokens a second,
and the front is cycles per token against the scratchpad's analytic count of block RAMs (16
banks, counted from the size; labelled "analytic"), as the table and the figure say.

A point whose decode does not fit its scratchpad is reported as such (the compiler's CompileError),
not as a failure; neither is a design that no ECP5 part holds. The Pareto front (tokens a second,
higher is better, against area, lower is better) is marked in the table and drawn in
out/dse_pareto.png, with the points on the 85F as squares and those no part holds as crosses on
the x axis. Point results are cached in out/dse/ keyed by the configuration and a hash of the
sources (rtl/, tb/, the model, the host, the replay library and this command), so a second run only
prints. Exit status: 0 when every point's checks passed and every synthesis and seed finished, 1
if one failed, 2 for a bad argument.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import math
import secrets
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import replay
from capra import checks, config
from replay import image, runs

from . import ecp5, executor, fpga, synth
from .common import BadArgument, Parser, chip_argument, finish, in_range, int_range, note

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
AREA_DEVICE = ecp5.DEVICES["45k"]  # the area rule's weights: shares of the LFE5U-45F, the part most points take
BRAM_LUT4 = AREA_DEVICE.comb // AREA_DEVICE.bram  # LUT4-equivalents of one DP16KD: the same share of the 45F
DSP_LUT4 = AREA_DEVICE.comb // AREA_DEVICE.dsp  # and of one MULT18X18D
AREA_RULE = f"LUT4 + {BRAM_LUT4} x DP16KD + {DSP_LUT4} x MULT18X18D"
FREQ = fpga.DEFAULT_FREQ  # make fpga's target, so the two share kept seeds
DEFAULT_SEEDS = 3  # --seeds: placement seeds 1..N for SEEDED_CHIPS
SEEDED_CHIPS = (config.Config(), config.Config(n=8))  # the default chip and the 8 x 8 array
SYNTH_TIMEOUT = fpga.STEP_TIMEOUT  # seconds per Yosys or nextpnr step
# What a step took here when nothing is kept to estimate from (docs/design_space.md quotes the runs).
SYNTH_SECONDS, SEED_SECONDS = 100.0, 600.0


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
    result["provenance"] = runs.provenance(cfg)  # what measured it: chip, sources, commit, simulators
    return result


# ---- area: the whole chip placed and routed on the ECP5 (fpga.py's flow and cache) ----------------


def chip_config(cfg: config.Config) -> config.Config:
    """The configuration as the RTL sees it: the chip's fields of `cfg`, the memory's at the
    default. Its key is the one ``make fpga --config`` records, so the two share kept results."""
    return config.Config(**{field: getattr(cfg, field) for field in config.RTL_DEFINES.values()})


def seed_count(cfg: config.Config, seeds: int = DEFAULT_SEEDS) -> int:
    """Placement seeds for a point's chip: SEEDED_CHIPS are the ones a reader builds, so their Fmax
    is the lowest of `seeds` (--seeds, default three); every other chip is placed once."""
    return seeds if chip_config(cfg) in SEEDED_CHIPS else 1


def no_fit_reason(log_text: str) -> str:
    """nextpnr's account of a design it could not place, or '' for another failure."""
    return synth.overflowed_resource(log_text) or ""


def area_from_seeds(counts: dict[str, int], device: ecp5.Device | None, seeds: list[fpga.SeedFigures],
                    no_fit: str = "", error: str = "") -> dict:
    """The table's area of one chip (a plain dict: it goes next to a point's row). Placed: nextpnr's
    utilization after packing (the same for every seed) and the lowest Fmax over the seeds. Not
    placed (no part holds it, or nextpnr found no room): the synthesized netlist's counts
    (ecp5.logic_cells_estimate for the logic cells), with `no_fit` saying why."""
    if seeds:
        use, counted = seeds[0].use, "nextpnr"
    elif not counts:  # not synthesized
        use, counted = dict.fromkeys(("LUT4", "FF", "BRAM", "DSP")), None
    else:
        use = {"LUT4": ecp5.logic_cells_estimate(counts), "FF": counts.get("TRELLIS_FF", 0),
               "BRAM": counts.get("DP16KD", 0), "DSP": counts.get("MULT18X18D", 0)}
        counted = "yosys"
    return {"lut4": use["LUT4"], "ff": use["FF"], "bram": use["BRAM"], "dsp": use["DSP"], "counted": counted,
            "device": device.part if device and seeds else None,
            "fmax": min(s.fmax for s in seeds) if seeds else None,
            "seeds": [{"seed": s.seed, "fmax": s.fmax, "seconds": s.seconds} for s in seeds],
            "no_fit": no_fit, "error": error}


def ecp5_area(cfg: config.Config, *, no_cache: bool, timeout: float, seeds: int = DEFAULT_SEEDS) -> dict:
    """The whole ga2 of `cfg`'s chip synthesized (Yosys synth_ecp5), on the smallest part that holds
    it (ecp5.choose_device), placed and routed with seeds 1..seed_count(cfg, seeds), one after
    another: fpga.py's steps, kept in out/fpga/ by the configuration, RTL sources and tool versions,
    so a kept synthesis or seed is read, not run (one job: here, or on a Dask worker). Adds the
    time spent ("seconds", 0 when everything was kept) and "cached"."""
    cfg = chip_config(cfg)
    seeds = seed_count(cfg, seeds)
    tools, token = fpga.versions(), secrets.token_hex(4)
    spent = 0.0
    try:
        syn = fpga.synthesize(cfg, tools, token, timeout, no_cache)
    except fpga.StepFailed as failure:
        return {**area_from_seeds({}, None, [], error=f"synthesis: {failure}"), "seconds": 0.0, "cached": False}
    if not syn.reused:
        spent += syn.result["seconds"]
    device, why = ecp5.choose_device(syn.counts)
    found: list[fpga.SeedFigures] = []
    no_fit, error = ("" if device else why), ""
    jobs: list[fpga.SeedJob] = []
    with executor.stopped_by(lambda: fpga.stop_seeds(jobs)):
        for seed in range(1, seeds + 1) if device else ():
            final = fpga.seed_folder(syn.folder, device, FREQ, seed)
            if fpga.kept_seed(final, tools, no_cache) is None:
                job = fpga.SeedJob(str(syn.folder / "netlist.json"), str(final), device.label, FREQ, seed,
                                   fpga.tool_path(fpga.NEXTPNR), tools, timeout, token)
                jobs.append(job)
                try:
                    spent += fpga.place_and_route(job)["seconds"]
                except fpga.StepFailed as failure:
                    logs = sorted(final.parent.glob(f"{final.name}-{token}-*/nextpnr.log"))
                    no_fit = no_fit_reason(logs[-1].read_text(errors="replace")) if logs else ""
                    error = "" if no_fit else str(failure)  # it names its seed
                    break
            found.append(fpga.seed_figures(final))
    if no_fit or error:
        found = []
    area = area_from_seeds(syn.counts, device, found, no_fit, error)
    return {**area, "seconds": round(spent, 1), "cached": spent == 0.0}


def place_areas(points: tuple[config.Config, ...], *, no_cache: bool, timeout: float, seeds: int = DEFAULT_SEEDS,
                workers: int = 1, scheduler: str | None = None) -> dict[tuple[str, ...], dict]:
    """ecp5_area once per distinct RTL configuration among `points` (a new one takes minutes a seed
    and a core), `workers` at a time or on the Dask cluster at `scheduler` (executor.run); progress
    on stderr. Keyed by Config.rtl_defines(), in the order of `points`."""
    chips = list({cfg.rtl_defines(): chip_config(cfg) for cfg in points}.values())
    executor.announce(len(chips), f"RTL configuration{'s' * (len(chips) != 1)} to place and route (ga2, ECP5; "
                                  "what out/fpga/ keeps is read)", workers, scheduler)
    job = partial(ecp5_area, no_cache=no_cache, timeout=timeout, seeds=seeds)
    found: dict[tuple[str, ...], dict] = {}
    for chip, future in executor.run(job, chips, workers=workers, scheduler=scheduler, what="chips"):
        try:
            found[chip.rtl_defines()] = future.result()
        except Exception as error:  # a crash in the job is that chip's failure, named
            found[chip.rtl_defines()] = {**area_from_seeds({}, None, []), "seconds": 0.0, "cached": False,
                                         "error": f"{type(error).__name__}: {error}"}
        note(f"ECP5 area of ga2 {rtl_label(chip)} ({' '.join(chip.rtl_defines()) or 'no defines'}): done")
    return {chip.rtl_defines(): found[chip.rtl_defines()] for chip in chips}


def measured_area(area: dict | None) -> float | None:
    """A measured area as one number in LUT4-equivalents (AREA_RULE), or None when it has no counts."""
    if not area or any(area.get(k) is None for k in ("lut4", "bram", "dsp")):
        return None
    return area["lut4"] + BRAM_LUT4 * area["bram"] + DSP_LUT4 * area["dsp"]


def analytic_area(row: dict) -> float:
    """The fallback without the ECP5 tools: the scratchpad's block RAMs counted from its size."""
    return row["brams"]


def tokens_per_second(row: dict) -> float | None:
    """Decode tokens a second on the part: the chip's Fmax (the lowest over its seeds) over the
    cycles of decode step STEPS; None without both."""
    fmax = (row.get("area") or {}).get("fmax")
    if fmax is None or "step32" not in row:
        return None
    return fmax * 1e6 / row["step32"]


def area_problems(areas: dict[tuple[str, ...], dict], labels: dict[tuple[str, ...], str]) -> list[str]:
    """A synthesis or place and route that failed or timed out fails the sweep (a design no part
    holds does not: that is a measurement)."""
    return [f"area of {labels[defines]}: {area['error']}" for defines, area in areas.items() if area.get("error")]


def fmax_cell(area: dict) -> str:
    if area.get("fmax") is not None:
        return f"{area['fmax']:.1f}"
    return "no fit" if area.get("no_fit") else "-"


def device_cell(area: dict) -> str:
    return (area.get("device") or "-").replace("LFE5U-", "")


def area_lines(areas: dict[tuple[str, ...], dict], labels: dict[tuple[str, ...], str],
               seeds: int = DEFAULT_SEEDS) -> list[str]:
    """The footnote: how area and Fmax were measured, and per RTL configuration the part, each
    seed's Fmax, what did not fit and the time spent."""
    base = AREA_DEVICE
    lines = [f"Area: Yosys synth_ecp5 of the whole ga2 per RTL configuration (ext_latency changes no RTL), placed "
             f"and routed by nextpnr-ecp5 out of context on the smallest part that holds it ({ecp5.PACKAGE}, "
             f"speed {ecp5.SPEED}, target {FREQ:g} MHz; make fpga's flow and out/fpga/). LUT4 = TRELLIS_COMB, "
             "FF = TRELLIS_FF (nextpnr after packing), DP16KD = 18-kbit block RAMs, MULT18 = MULT18X18D.",
             f"area = {AREA_RULE}, in LUT4-equivalents: one DP16KD is 1/{base.bram} of the {base.part}'s block RAM "
             f"as {BRAM_LUT4} LUT4 are 1/{base.bram} of its {base.comb} logic cells, one MULT18X18D 1/{base.dsp} "
             f"of its multipliers as {DSP_LUT4} LUT4 (flip-flops share the logic cells' slices).",
             f"Fmax: MHz post-route, {f'the lowest over seeds 1..{seeds}' if seeds > 1 else 'seed 1'} for "
             f"{' and '.join(rtl_label(c) for c in SEEDED_CHIPS)}, seed 1 for the rest; tok/s = Fmax x 1e6 / the "
             f"cycles of decode step {STEPS}. no fit: no part holds it (its area is then Yosys's counts). "
             "Per RTL configuration:"]
    for defines, area in areas.items():
        time = f"{area['seconds']:.0f} s" if not area.get("cached") else "kept"
        seeds = ", ".join(f"seed {s['seed']} {s['fmax']:.1f} MHz" for s in area.get("seeds", []))
        said = area.get("error") or (f"does not fit: {area['no_fit']}" if area.get("no_fit") else
                                     f"{area.get('device')}: {seeds}")
        lines.append(f"  {labels[defines]:<11} {said} ({time})")
    return lines


# ---- the front and the table --------------------------------------------------------------------


def cycles_per_token(row: dict) -> float | None:
    return row.get("per_token")


def pareto(rows: list[dict], cost: Callable[[dict], float | None],
           speed: Callable[[dict], float | None] = cycles_per_token, higher: bool = False) -> set[str]:
    """Configurations no other beats or equals in both speed(row) (lower is better, or higher with
    `higher`: tokens a second) and cost(row) (the area, lower is better); a row where either is None
    (not measured, no fit) or whose checks failed is left out. Points with equal values are all kept."""
    sign = -1.0 if higher else 1.0
    ok = [(r["config"], (speed(r), cost(r))) for r in rows if "per_token" in r and not r["problems"]]
    ok = [(name, (sign * a[0], a[1])) for name, a in ok if a[0] is not None and a[1] is not None]
    return {name for name, a in ok
            if not any(b != a and b[0] <= a[0] and b[1] <= a[1] for _other, b in ok)}


def table(rows: list[dict], front: set[str], measured: bool) -> list[str]:
    """The sweep's table: with `measured` the ECP5 columns and tokens a second, else the analytic
    block-RAM count (and the front is by cycles per token)."""
    area_head = (f"{'LUT4':>6} {'FF':>6} {'DP16KD':>6} {'MULT18':>6} {'part':>4} {'Fmax':>6} {'area':>6} "
                 f"{'tok/s@' + str(STEPS):>9}" if measured else f"{'BRAM (analytic)':>15}")
    lines = [f"{'point':<16} {'step 1':>7} {'step ' + str(STEPS):>7} {'cyc/tok':>7} {'eff32':>6} "
             f"{'batch tok/kcyc':>14} {area_head} {'exact':>6}  pareto"]
    for r in rows:
        if "fits" in r:
            lines.append(f"{r['label']:<16} does not fit: {r['fits']}")
            continue
        batch = f"{r['batch_tok_per_kcyc']:.2f}" if r.get("batch_tok_per_kcyc") else "no fit"
        exact = "PASS" if not r["problems"] else "FAIL"
        if measured:
            a = r.get("area") or {}
            total, rate = measured_area(a), tokens_per_second(r)
            cells = (f"{synth.cell(a.get('lut4')):>6} {synth.cell(a.get('ff')):>6} {synth.cell(a.get('bram')):>6} "
                     f"{synth.cell(a.get('dsp')):>6} {device_cell(a):>4} {fmax_cell(a):>6} {synth.cell(total):>6} "
                     f"{f'{rate:,.0f}' if rate else '-':>9}")
        else:
            cells = f"{r['brams']:>15d}"
        lines.append(f"{r['label']:<16} {r['step1']:7d} {r['step32']:7d} {r['per_token']:7.1f} {r['eff32']:6.3f} "
                     f"{batch:>14} {cells} {exact:>6}  {'*' if r['config'] in front else ''}")
    return lines


@dataclass(frozen=True)
class Axes:
    """What the figure plots: cost (x) and speed (y) of a row, their labels, and whether a higher
    speed is better; `unplaced` marks a row drawn on the x axis with no speed (no part holds it)."""

    cost: Callable[[dict], float | None]
    speed: Callable[[dict], float | None]
    xlabel: str
    ylabel: str
    higher: bool = False


def unplaced(row: dict) -> bool:
    return bool((row.get("area") or {}).get("no_fit"))


def placed_area(row: dict) -> float | None:
    return measured_area(row.get("area"))


def axes_for(measured: bool) -> Axes:
    """The front's two measures: tokens a second against the ECP5 area when the chips were placed
    and routed (`measured`), else cycles per token against the analytic block-RAM count."""
    if measured:
        return Axes(placed_area, tokens_per_second, f"area, LUT4-equivalents ({AREA_RULE}; ECP5)",
                    f"decode tokens/s at step {STEPS} (Fmax / cycles; higher is better)", higher=True)
    return Axes(analytic_area, cycles_per_token,
                "scratchpad block RAMs (analytic: counted from its size; iCE40, 4 kbit each)",
                "decode cycles per extra token of context (lower is better)")


def draw(rows: list[dict], front: set[str], axes: Axes, rest: list[dict] | None = None,
         caption: str = "") -> Path | None:
    """The Pareto figure of `rows`; `rest` (other points of the grid, from the cache) drawn pale
    behind them and counted in the front; points on the LFE5U-85F drawn as squares and points no
    part holds as crosses on the x axis (no clock, so no speed); `caption`, a line under the axes
    saying what is left out. None (said why) when there is nothing to draw or only one point: one
    dot has no front."""
    rest = rest or []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        note("matplotlib is missing: no figure")
        return None

    def drawn(r: dict) -> bool:
        return "per_token" in r and axes.cost(r) is not None and axes.speed(r) is not None

    ok = [r for r in rows if drawn(r)]
    pale = [r for r in rest if drawn(r)]
    crosses = [r for r in rows + rest if "per_token" in r and axes.cost(r) is not None and unplaced(r)]
    if not ok:
        note("no point has both a speed and an area: no figure")
        return None
    if len(ok) + len(pale) < 2:
        note("one point, and no other point of the grid in the cache: no Pareto front to draw "
             "(run more points, or the whole grid, first)")
        return None
    fig, ax = plt.subplots(figsize=(7, 4.8))
    big = ecp5.DEVICES["85k"].part

    def scatter(points: list[dict], color: str, label: str) -> None:
        for marker, on_big in (("o", False), ("s", True)):
            chosen = [r for r in points if ((r.get("area") or {}).get("device") == big) == on_big]
            if chosen:
                ax.scatter([axes.cost(r) for r in chosen], [axes.speed(r) for r in chosen], c=color, marker=marker,
                           label=label + (f" ({big})" if on_big else ""))

    if pale:
        scatter(pale, "0.85", "the rest of the grid (cached)")
    scatter(ok, "0.45", "configurations run" if pale else "configurations")
    if crosses:
        ax.scatter([axes.cost(r) for r in crosses], [0] * len(crosses), c="C0", marker="x",
                   label="fits no part (no clock): at its area")
    best = sorted((r for r in ok + pale if r["config"] in front), key=lambda r: (axes.cost(r), axes.speed(r)))
    ax.plot([axes.cost(r) for r in best], [axes.speed(r) for r in best], "-", c="C3", label="Pareto front")
    ax.scatter([axes.cost(r) for r in best], [axes.speed(r) for r in best], c="C3", zorder=3)
    labels: dict[tuple, list[str]] = {}  # points with equal values share one label
    for r in best + crosses:
        labels.setdefault((axes.cost(r), 0 if unplaced(r) else axes.speed(r)), []).append(r["label"])
    for (x, y), names in labels.items():
        ax.annotate(" / ".join(names), (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel(axes.xlabel)
    ax.set_ylabel(axes.ylabel)
    ax.set_title("GA2 design space (make dse)")
    ax.legend(fontsize=7)
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


def cached_point(cfg: config.Config, src: str, n_random: int, cache: Path | None = None) -> Path:
    """Where a point's result is kept: one file per configuration, sources and number of random programs,
    in `cache` (default: CACHE as it is when called, so a test's own folder is the one used)."""
    cache = CACHE if cache is None else cache
    return cache / f"{hashlib.sha256(f'{cfg.key()}|{src}|{n_random}'.encode()).hexdigest()[:20]}.json"


def _number(value: object) -> bool:
    return checks.is_number(value) and math.isfinite(value)


def _count(value: object) -> bool:
    return checks.is_number(value) and isinstance(value, int) and value >= 0


def _cycles(value: object) -> bool:
    return _count(value) and value > 0  # a divisor (tokens a second)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# What the table, the front, the figure and the report page read of a cached row, and the type each
# needs: every row has the first; a row that fits its scratchpad ("fits" absent) the second; in a
# row with an "area" (the ECP5 flow's), each of the third may be absent or null (not placed).
ROW_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "label": (_text, "a string"), "brams": (_count, "a whole number"), "problems": (_texts, "a list of strings")}
MEASURED_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "step1": (_cycles, "a positive whole number"), "step32": (_cycles, "a positive whole number"),
    "per_token": (_number, "a number"), "eff32": (_number, "a number"),
    "batch_tok_per_kcyc": (lambda v: v is None or _number(v), "a number or null")}
AREA_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    **{k: (_number, "a number") for k in ("lut4", "ff", "bram", "dsp", "fmax")}, "device": (_text, "a string")}


def row_problem(row: object, cfg: config.Config) -> str | None:
    """Why `row`, read from `cfg`'s cache file, is not a result `point` wrote for it (None when it
    is): valid JSON can still lack a field or hold another type (a file edited, or written by other
    code), and the table would end in a traceback on it; so every field it reads is checked here."""
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    if "config" not in row:
        return "it has no 'config'"
    if row["config"] != cfg.key():
        return f"it is the row of {row['config']!r}, not of {cfg.label()}"
    checks = dict(ROW_FIELDS)
    if "fits" in row:
        checks["fits"] = (_text, "a string")
    else:
        checks.update(MEASURED_FIELDS)
    for name, (ok, what) in checks.items():
        if name not in row:
            return f"it has no {name!r}"
        if not ok(row[name]):
            return f"its {name!r} is not {what}"
    area = row.get("area")
    if area is None:
        return None
    if not isinstance(area, dict):
        return "its 'area' is not an object"
    for name, (ok, what) in AREA_FIELDS.items():
        if area.get(name) is not None and not ok(area[name]):
            return f"its area's {name!r} is not {what}"
    return None


def read_point(path: Path, cfg: config.Config) -> dict:
    """The row kept in `path` for `cfg`; UserError (one line) when the file is unreadable, not
    complete JSON or not such a row (row_problem): each is a point to measure again, never a crash."""
    what = f"the cached result of {cfg.label()}"
    row = runs.read_json(path, what)
    problem = row_problem(row, cfg)
    if problem is not None:
        raise runs.UserError(f"{path} is not a sweep point's result ({what}): {problem}")
    return row


def cached_rest(points: tuple[config.Config, ...], cache_file: Callable[[config.Config], Path]) -> list[dict]:
    """The grid's other points that this run's sources have measured before (for --only's figure)."""
    chosen = {cfg.key() for cfg in points}
    rest = []
    for cfg in GRID:
        f = cache_file(cfg)
        if cfg.key() not in chosen and f.exists():
            try:
                rest.append(read_point(f, cfg))
            except runs.UserError:  # damaged: not drawn (a run of that point measures it again)
                continue
    return rest


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def pending_placement(points: tuple[config.Config, ...], no_cache: bool,
                      seeds: int = DEFAULT_SEEDS) -> tuple[int, dict[str | None, int]]:
    """(syntheses, seeds by part) of the ECP5 flow that `points` need and out/fpga/ does not keep,
    found without running a tool (a chip not yet synthesized counts all its seeds). A seed's part
    is its chip's, from the kept synthesis or any kept synthesis of the same chip (other sources),
    or None when no synthesis of the chip is kept. Before the ECP5 tools are installed (make dse
    installs them) nothing is kept for them: every chip and seed counts."""
    chips = {chip_config(cfg) for cfg in points}
    parts = fpga.kept_parts()
    pending: Counter[str | None] = Counter()
    try:
        tools = fpga.versions()
    except importlib.metadata.PackageNotFoundError:
        for chip in chips:
            pending[parts.get(chip.key())] += seed_count(chip, seeds)
        return len(chips), dict(pending)
    syntheses = 0
    for chip in chips:
        folder = fpga.synthesis_folder(chip, tools)
        kept = fpga.cached(folder, no_cache)
        if kept is None:
            syntheses += 1
            pending[parts.get(chip.key())] += seed_count(chip, seeds)
            continue
        device, _why = ecp5.choose_device(kept["counts"])
        if device is not None:
            pending[device.part] += sum(
                fpga.kept_seed(fpga.seed_folder(folder, device, FREQ, seed), tools, no_cache) is None
                for seed in range(1, seed_count(chip, seeds) + 1))
    return syntheses, {part: n for part, n in pending.items() if n}


def estimate(todo: int, cached: list[dict], jobs: int | None,
             placement: tuple[int, dict[str | None, int]] | None = None,
             kept: tuple[list[float], dict[str, list[float]]] = ([], {})) -> str:
    """How long the run will take, from the times the cache recorded (a point records its own);
    `jobs` points at a time (None: a cluster of a size not known here, so a time per point only).
    `placement`, (syntheses, seeds by part) still to run on the ECP5, adds their time from the
    `kept` (synthesis, seeds by part) times of out/fpga/: the median of the kept syntheses, and for
    each part the median of its kept seeds; a part with none kept, or a chip whose part is not
    known before its synthesis, goes by the median of every kept seed; SYNTH_SECONDS and
    SEED_SECONDS when nothing is kept."""
    times = [r["seconds"] for r in cached if isinstance(r.get("seconds"), (int, float))]
    if not todo:
        text = "every point is cached"
    elif times and jobs is None:
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
    if placement is None:
        return text
    syntheses, pending = placement
    seeds = sum(pending.values())
    if not syntheses and not seeds:
        return text + "; every ECP5 synthesis and seed is kept in out/fpga/"
    synth_kept, seeds_kept = kept
    each_synth = statistics.median(synth_kept) if synth_kept else SYNTH_SECONDS
    synth_from = f"the median of {len(synth_kept)} kept" if synth_kept else "none kept: this machine's figure"
    every = [t for times in seeds_kept.values() for t in times]
    work = syntheses * each_synth
    per_seed = []
    for part in sorted(pending, key=lambda p: (p is None, p or "")):
        n, own = pending[part], seeds_kept.get(part or "", [])
        if own:
            each, source = statistics.median(own), f"the median of {len(own)} kept there"
        elif every:
            each, source = statistics.median(every), f"the median of all {len(every)} kept"
        else:
            each, source = SEED_SECONDS, "none kept: this machine's figure"
        work += n * each
        where = f"on the {part}" if part else "on a part not known before synthesis"
        per_seed.append(f"{n} {where} at {duration(each)} a seed, {source}")
    share = "" if jobs is None else f", about {duration(work / jobs)} on {jobs} workers" if jobs > 1 else ""
    return (text + f"; then the ECP5: {syntheses} synthes{'es' if syntheses != 1 else 'is'} and {seeds} "
            f"place-and-route seed{'s' * (seeds != 1)} not kept, {duration(work)} of one core{share} "
            f"({each_synth:.0f} s a synthesis, {synth_from}; seeds: {'; '.join(per_seed)})")


def arguments(ap: Parser) -> None:
    ap.add_argument("--random", type=int_range(1, 1000), default=DEFAULT_RANDOM,
                    help="random programs replayed per point, 1..1000 (default 20)")
    executor.arguments(ap, "points")
    ap.add_argument("--no-cache", action="store_true",
                    help="recompute every point, and synthesize, place and route every RTL configuration again "
                         "(minutes a seed)")
    ap.add_argument("--no-area", action="store_true",
                    help="no ECP5 place and route: no Fmax or tokens/s, ranked by cycles per token against the "
                         "scratchpad's analytic block-RAM count")
    ap.add_argument("--seeds", type=int_range(1, 32), default=DEFAULT_SEEDS, metavar="N",
                    help=f"placement seeds 1..N, 1..32, for {' and '.join(rtl_label(c) for c in SEEDED_CHIPS)} "
                         f"(their Fmax is the lowest; every other chip: seed 1); default {DEFAULT_SEEDS}")
    ap.add_argument("--synth-timeout", type=in_range(float, 1, 86400), default=SYNTH_TIMEOUT, metavar="SECONDS",
                    help=f"seconds allowed per Yosys or nextpnr step (default {SYNTH_TIMEOUT:g})")
    ap.add_argument("--only", nargs="+", metavar="KEY", default=None,
                    help='configurations to run instead of the grid, e.g. "ext_latency=8,sram_words=2048"')


def main(args) -> int:
    executor.check(args)
    points = GRID
    if args.only:
        points = tuple(chip_argument("--only", k) for k in args.only)
        seen: dict[str, str] = {}
        for text, cfg in zip(args.only, points):
            if cfg.key() in seen:
                raise BadArgument("--only", f"{text!r} and {seen[cfg.key()]!r} are the same configuration "
                                  f"({cfg.label()})")
            seen[cfg.key()] = text
    replay.require()
    CACHE.mkdir(parents=True, exist_ok=True)
    src = sources_hash()
    missing = [] if args.no_area else [name for name in (fpga.YOSYS, fpga.NEXTPNR) if fpga.tool_path(name) is None]
    measured = not args.no_area and not missing
    if missing:
        note(f"{' and '.join(missing)} missing ({fpga.INSTALL_HINT}): no ECP5 area, Fmax or tokens/s; "
             "ranked by cycles per token against the scratchpad's analytic block-RAM count")

    def cache_file(cfg: config.Config) -> Path:
        return cached_point(cfg, src, args.random)

    rows: dict[str, dict] = {}
    todo = []
    for cfg in points:
        f = cache_file(cfg)
        if not args.no_cache and f.exists():
            try:
                rows[cfg.key()] = read_point(f, cfg)
                continue
            except runs.UserError as error:  # a run killed while writing, a damaged row: measure it again
                note(f"{error}; measuring it again")
        todo.append(cfg)
    rest = cached_rest(points, cache_file) if args.only else []
    print(f"== {len(points)} configuration{'s' * (len(points) != 1)} ({len(points) - len(todo)} cached), "
          f"{args.random} random programs and a {STEPS}-step decode each, replayed in Icarus and Verilator; "
          f"{executor.where(args.workers, args.scheduler)}")
    placement = pending_placement(points, args.no_cache, args.seeds) if measured else None
    print(estimate(len(todo), list(rows.values()) + rest, None if args.scheduler else args.workers, placement,
                   fpga.kept_times() if measured else ([], {})))
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
        areas = place_areas(points, no_cache=args.no_cache, timeout=args.synth_timeout, seeds=args.seeds,
                            workers=args.workers, scheduler=args.scheduler)
        for cfg, r in zip(points, ordered):
            r["area"] = areas[cfg.rtl_defines()]
            if not r["problems"]:  # the cached row keeps its area: an --only run draws it behind its points
                runs.write_json(cache_file(cfg), r)
        rest = [r for r in rest if r.get("area")]
        what = f"tokens/s at step {STEPS} vs area ({AREA_RULE})"
    else:
        what = "cycles per token vs BRAM (analytic)"
    axes = axes_for(measured)
    front = pareto(ordered + rest, axes.cost, axes.speed, axes.higher)
    print()
    for line in table(ordered, front, measured):
        print(line)
    print()
    if measured:
        print("\n".join(area_lines(areas, labels, args.seeds)))
    else:
        print(f"{'--no-area' if args.no_area else 'No ECP5 tools'}: no place and route, so no Fmax and no "
              "tokens/s; the front is cycles per token against BRAM (analytic): the scratchpad's iCE40 4-kbit "
              "block RAMs counted from its size (16 banks), not synthesized (the rest of ga2 and its logic are "
              "not counted).")
    caption = "" if measured else ("--no-area" if args.no_area else "no ECP5 tools") + (
        ": not placed and routed, so no Fmax and no tokens/s; ranked by cycles per token, and the x axis counts "
        "only the scratchpad's block RAMs (the rest of ga2 and its logic are left out)")
    figure = draw(ordered, front, axes, rest, caption)
    if figure:
        print(f"figure: {figure.relative_to(ROOT)} (* in the table: the Pareto front, {what})")
    problems = [p for r in ordered for p in r["problems"]] + area_problems(areas, labels)
    checked = sum(1 for r in ordered if "per_token" in r)
    area_text = (f"; {len(areas)} RTL configuration{'s' * (len(areas) != 1)} placed and routed on the ECP5 "
                 f"({sum(1 for a in areas.values() if a.get('no_fit'))} fit no part)" if areas else "")
    return finish(problems, checked, f"{checked} configuration{'s' * (checked != 1)} exact on both simulators "
                  f"({len(ordered) - checked} do not fit their scratchpad){area_text}")
