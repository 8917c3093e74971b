"""Replays: a list of programs, run on the RTL in both simulators, judged against the machine model.

Everything between a program and a verdict lives in this package, once:

    image.py        the replay image (``Record``, ``record(code, ext)``, writing, reading, CRC-32)
    simulators.py   building and running Icarus and Verilator, cached, one build per configuration
    verdict.py      the one reader of what the testbench prints (``Verdict``, ``judge``)
    runs.py         a folder per run, atomic files, child processes in their own groups

and ``replay`` / ``replay_all`` here tie them together: write the image into the run's own
folder, build the testbench for the configuration, run the simulators side by side, and judge
each run (every program PASSed, and every program's counters equal the machine model's).
``replay_in_background`` starts ``replay_all`` and returns at once, for a caller with other work
to do while the simulators run.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from capra import config as capra_config

from .image import Record, read_image, record, write_image
from .runs import ROOT, RunFolder, UserError, note, run_folder
from .simulators import GA2_FILES, GA2_TOP, SIMULATORS, Simulator, SimulatorMissing, require
from .verdict import Verdict, judge, parse_counters

__all__ = ["GA2_FILES", "ROOT", "Record", "Replay", "SimulatorMissing", "UserError", "Verdict", "judge",
           "parse_counters", "read_image", "record", "replay", "replay_all", "replay_in_background", "require",
           "testbench_defines"]

DEFAULT_TIMEOUT = 3600.0  # seconds per simulator run: far past any replay the tools make


def _tb_maxwords() -> int | None:
    """The replay testbench's default image size limit (`define MAXWORDS in tb/ga2_tb.v)."""
    match = re.search(r"`define\s+MAXWORDS\s+(\d+)", (ROOT / "tb" / "ga2_tb.v").read_text())
    return int(match.group(1)) if match else None


def memory_plusargs(cfg: capra_config.Config) -> tuple[str, ...]:
    """The testbench's plusargs for the configuration's memory stalls (none for a memory that is
    always ready: the testbench's default)."""
    return (f"+STALL={cfg.ext_stall}", f"+SEED={cfg.ext_seed}") if cfg.ext_stall else ()


def testbench_defines(image_words: int, cfg: capra_config.Config | None = None, *extra: str) -> tuple[str, ...]:
    """The replay testbench's defines for an image of `image_words` words on configuration `cfg`
    (default: the active one): its memory and chip (``Config.testbench_defines``), DUMP, `extra`,
    and MAXWORDS raised to the next power of two only for an image larger than the testbench's
    default (so the usual images share one cached build)."""
    cfg = capra_config.active() if cfg is None else cfg
    defines = [*cfg.testbench_defines(), "DUMP", *extra]
    default = _tb_maxwords()
    if default is None or image_words > default:
        defines.append(f"MAXWORDS={1 << max(image_words - 1, 1).bit_length()}")
    return tuple(defines)


@dataclass
class Replay:
    """One image to replay: a name (for messages and its file), its records, and the memory's
    latency (default: the configuration's)."""

    name: str
    records: Sequence[Record]
    latency: int | None = None


def _run_one(sim: Simulator, image: Path, job: Replay, defines: tuple[str, ...], cfg: capra_config.Config,
             timeout: float) -> Verdict:
    latency = cfg.ext_latency if job.latency is None else job.latency
    start = time.perf_counter()
    try:
        rc, output = sim.run(GA2_FILES, GA2_TOP, defines=defines, timeout=timeout,
                             plusargs=(f"+PROG={image}", f"+LATENCY={latency}", *memory_plusargs(cfg)))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:  # a failed build, a run that hangs
        rc, output = -1, f"FAIL: could not run {sim.name}: " + " | ".join(str(error).strip().splitlines()[:3])
    verdict = judge(sim.name, rc, output, len(job.records), dump=True, expected=[r.counters for r in job.records])
    verdict.seconds = time.perf_counter() - start
    return verdict


def replay_all(jobs: Sequence[Replay], *, cfg: capra_config.Config | None = None,
               simulators: Sequence[Simulator] = SIMULATORS, extra_defines: Sequence[str] = (),
               workers: int | None = None, timeout: float = DEFAULT_TIMEOUT, tool: str = "replay",
               folder: RunFolder | None = None) -> list[list[Verdict]]:
    """Replay every job in every simulator, `workers` runs at a time (default: the machine's cores);
    returns, per job, one Verdict per simulator. A simulator that cannot be built or run is a failed
    verdict, named; a job that fails keeps its image (the verdict's ``image`` says where)."""
    cfg = capra_config.active() if cfg is None else cfg
    require(*(s.tool for s in simulators))
    with nullcontext(folder) if folder is not None else run_folder(tool) as run:
        images = []
        for job in jobs:
            path = run / f"{job.name}.hex"
            words = write_image(job.records, path)
            images.append((path, testbench_defines(len(words), cfg, *extra_defines)))
        for sim in simulators:  # build each once, before the runs share the build
            for defines in dict.fromkeys(d for _p, d in images):
                sim.build(GA2_FILES, GA2_TOP, defines)
        # the slower simulator's runs first (Icarus takes about a hundred times Verilator's time), so
        # no long run starts last
        tasks = [(j, sim) for sim in simulators for j in range(len(jobs))]
        long = [jobs[j].name for j, _s in tasks if len(jobs[j].records) > 64]
        if long:
            note(f"replaying {', '.join(dict.fromkeys(long))} ({sum(len(j.records) for j in jobs)} programs)")
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            futures = [pool.submit(_run_one, sim, images[j][0], jobs[j], images[j][1], cfg, timeout)
                       for j, sim in tasks]
            results = [f.result() for f in futures]
        out = [[results[s * len(jobs) + j] for s in range(len(simulators))] for j in range(len(jobs))]
        for (path, _defines), verdicts in zip(images, out, strict=True):
            if not all(v.passed for v in verdicts):
                run.keep()
                for v in verdicts:
                    v.image = str(path)
    return out


def replay_in_background(jobs: Sequence[Replay], **options) -> Future:
    """``replay_all(jobs, **options)`` in a thread of its own: returns at once, and the Future's
    ``result()`` is replay_all's answer (or raises what it raised). Stopping the tool
    (``runs.kill_children``) ends its simulator runs too; the thread never holds the process open."""
    future: Future = Future()

    def work() -> None:
        try:
            future.set_result(replay_all(jobs, **options))
        except BaseException as error:  # noqa: BLE001 - handed to the caller through result()
            future.set_exception(error)

    threading.Thread(target=work, name="replay", daemon=True).start()
    return future


def replay(records: Sequence[Record], *, name: str = "replay", latency: int | None = None,
           **options) -> list[Verdict]:
    """Replay one image of `records` in both simulators (``replay_all``); one Verdict each."""
    return replay_all([Replay(name, records, latency)], **options)[0]
