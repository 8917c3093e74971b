"""Building and running the two simulators, Icarus Verilog and Verilator, with cached builds.

A compiled simulator is kept in the build cache (``out/sim/``, or the folder named by the
``CAPRA_SIM_CACHE`` environment variable), keyed by the contents of every source it reads (the
files named, and every ``rtl/*.v``, ``rtl/*.vh`` and ``tb/*.v``, which the simulators find by module
name), the top module, the defines, the flags and the simulator's version (the sources as a set: the
order they are named in does not change what is built). So a build is made once per change
of RTL, configuration or tool, and two copies of the repository with the same RTL can share one.

A Verilator build compiles the generated C++ of the design and Verilator's own runtime (about a
third of its time, the same for every design): the runtime's objects are kept beside the builds,
keyed by what they are compiled from (the Verilator and C++ compiler versions, the flags, the
generated build switches, tb/sim_hooks.cpp), and copied into every later build instead of compiled
again.

Builds are safe to start at once from several processes (test workers, parallel tools): a build
holds a lock on its key while it runs, so the second process waits and then uses the first one's
result, and a build is made under a temporary name and renamed when complete, so the cache never
holds half a simulator. Every build and run is a child in a process group of its own
(``runs.run_command``): a timeout, Ctrl-C or SIGTERM kills the whole group.

``sim_icarus(files, top, defines=(), plusargs=(), ...)`` and ``sim_verilator(...)`` return
``(exit status, everything printed)``; tools/hw.py gives the book these names.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from . import runs
from .runs import ROOT, UserError, note, run_command

INCLUDE_DIR = ROOT / "rtl"
TB_DIR = ROOT / "tb"  # the testbench's modules, found by name too: the chapter's listing names
# tb/extmem_rw.v and tb/ga2_tb.v, and the simulator finds ga2_sys (the chip on that memory) here
CACHE_ENV = "CAPRA_SIM_CACHE"

# The replay testbench. The simulators find the modules ga2 instantiates in rtl/, and the
# testbench's in tb/, by name ("-y"), so a new module in its own file needs no change here.
GA2_FILES = ("rtl/ga2.v", "tb/extmem_rw.v", "tb/ga2_sys.v", "tb/ga2_tb.v")
GA2_TOP = "ga2_tb"

INSTALL_HINT = {
    "iverilog": "Icarus Verilog is not installed: apt-get install iverilog",
    "verilator": "Verilator is not installed: apt-get install verilator",
}

# Verilator's runtime turns a string argument ($fopen's file name) into text in a 256-character
# stack buffer and overruns it on a longer one; room for ga2_tb's PATH_MAX + 1 characters.
# VL_USER_STOP with tb/sim_hooks.cpp: Verilog $stop exits with status 1 instead of aborting.
# --x-initial fast: registers start at zero without asking the random generator for each (what the
# default gives with +verilator+rand+reset+0, as the chip resets every register anyway; 5 ms less at
# every start). OPT_FAST: the model's C++ at -O2 (Verilator's default -Os runs the replay about 25%
# slower); OPT_GLOBAL: the runtime's too (the --timing scheduler, $display; -O3 and Verilator's own -O3
# measured no faster: docs/cycle_model.md).
# Verilator writes the C++ and its makefile (--cc --exe --timing, with its own main, --main, or
# the replay testbench's, tb/ga2_tb_main.cpp, which drives the clock instead of a --timing
# coroutine: docs/cycle_model.md); the build runs make on it itself, with the runtime's objects in
# place when they are kept.
VERILATOR_FLAGS = ("-CFLAGS", "-DVL_VALUE_STRING_MAX_WORDS=1040", "-CFLAGS", "-DVL_USER_STOP", "--x-initial", "fast")
VERILATOR_MAKE = ("OPT_FAST=-O2", "OPT_GLOBAL=-O2")
VERILATOR_HOOKS = ROOT / "tb" / "sim_hooks.cpp"
# the testbenches that bring their own main (it drives the clock); any other top gets Verilator's
VERILATOR_MAINS = {GA2_TOP: ROOT / "tb" / "ga2_tb_main.cpp"}


class SimulatorMissing(UserError, RuntimeError):
    """A simulator executable is not on PATH; the message says what to install."""


class BuildFailed(RuntimeError):
    """A simulator could not compile the sources; the message holds what it printed."""


def require(*tools: str) -> None:
    """SimulatorMissing naming every one of `tools` (default: both simulators) that is not on PATH:
    for a tool to call before any work, instead of output, files and a failed replay first."""
    missing = [INSTALL_HINT[t] for t in (tools or tuple(INSTALL_HINT)) if shutil.which(t) is None]
    if missing:
        raise SimulatorMissing("; ".join(missing))


def cache_dir() -> Path:
    """Where compiled simulators are kept."""
    return Path(os.environ.get(CACHE_ENV) or runs.OUT / "sim")


@cache
def _version(tool: str) -> str:
    """The simulator's own version line: a new version is a new build."""
    flag = "-V" if tool == "iverilog" else "--version"
    with suppress(OSError, subprocess.SubprocessError):
        proc = subprocess.run([tool, flag], capture_output=True, text=True, timeout=30)
        return (proc.stdout or proc.stderr).strip().splitlines()[0] if (proc.stdout or proc.stderr) else ""
    return ""


def _abs(files: Iterable[str | os.PathLike]) -> list[Path]:
    return [Path(f) if os.path.isabs(f) else ROOT / f for f in files]


def _shown(path: Path) -> str:
    """A source's name in a build key: relative to the repository, so copies of it share builds."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def build_key(kind: str, files: Sequence[Path], top: str, defines: Sequence[str]) -> str:
    """The cache key of one build (module docstring)."""
    flags = "|".join(VERILATOR_FLAGS + VERILATOR_MAKE) if kind == "verilator" else ""
    h = hashlib.sha256(f"{kind}|{_version(kind)}|{top}|{'|'.join(defines)}|{flags}".encode())
    extra = [VERILATOR_HOOKS, *_main_of(top)] if kind == "verilator" else []
    # the sources as a set: the chapter's listing names every rtl/*.v in its own order, and builds
    # the same simulator as the replay's four files with the modules found in rtl/ and tb/
    found = [*INCLUDE_DIR.glob("*.vh"), *INCLUDE_DIR.glob("*.v"), *TB_DIR.glob("*.v")]
    sources = {_shown(f): f for f in [*files, *extra, *found]}
    for shown in sorted(sources):
        h.update(shown.encode())
        h.update(sources[shown].read_bytes())
    return h.hexdigest()[:16]


@contextmanager
def _locked(key: str) -> Iterator[None]:
    """Hold the build lock of `key` (other processes building the same key wait here)."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".lock-{key}", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check(cmd: list[str], what: str) -> None:
    proc = run_command(cmd, cwd=ROOT)
    if proc.returncode != 0:
        raise BuildFailed(f"{what} failed:\n{proc.stdout}{proc.stderr}")


def build_icarus(files: Iterable[str | os.PathLike], top: str, defines: Sequence[str] = ()) -> Path:
    """Compile with iverilog (cached); returns the .vvp file."""
    require("iverilog")
    paths = _abs(files)
    key = build_key("iverilog", paths, top, defines)
    out = cache_dir() / f"icarus-{top}-{key}.vvp"
    if out.exists():
        return out
    with _locked(key):
        if not out.exists():
            with runs.atomic_path(out) as tmp:
                _check(["iverilog", "-g2005", "-Wall", "-Wno-timescale", "-I", str(INCLUDE_DIR), "-y",
                        str(INCLUDE_DIR), "-y", str(TB_DIR), "-s", top, "-o", str(tmp), *(f"-D{d}" for d in defines),
                        *map(str, paths)], "iverilog")
    return out


def build_verilator(files: Iterable[str | os.PathLike], top: str, defines: Sequence[str] = ()) -> Path:
    """Build a Verilator --binary simulator (cached); returns the executable."""
    require("verilator")
    paths = _abs(files)
    key = build_key("verilator", paths, top, defines)
    obj = cache_dir() / f"verilator-{top}-{key}"
    exe = obj / f"V{top}"
    if exe.exists():
        return exe
    with _locked(key):
        if exe.exists():
            return exe
        work = obj.with_name(f"{obj.name}.tmp{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        note(f"building the Verilator simulator of {top} (once per change of RTL or defines; "
             "under half a minute)")
        try:
            main = _main_of(top)
            _check(["verilator", "--cc", "--exe", "--timing", *([] if main else ["--main"]), "-O2",
                    "--default-language", "1364-2005", "--top-module", top, f"-I{INCLUDE_DIR}", "-y",
                    str(INCLUDE_DIR), "-y", str(TB_DIR), "--Mdir", str(work), "-o", f"V{top}", *VERILATOR_FLAGS,
                    *(f"-D{d}" for d in defines), *map(str, paths), str(VERILATOR_HOOKS), *map(str, main)],
                   "verilator")
            runtime = cache_dir() / f"verilator-runtime-{_runtime_key(work, top)}"
            kept = sorted(runtime.glob("*.o"))
            for obj_file in kept:  # newer than the makefile, so make takes them as built
                shutil.copyfile(obj_file, work / obj_file.name)
            _check(["make", "-C", str(work), "-f", f"V{top}.mk", "-j", "2", *VERILATOR_MAKE, f"V{top}"],
                   "verilator (make)")
            if not kept:
                _keep_runtime(work, top, runtime)
            if not (work / f"V{top}").exists():
                raise BuildFailed(f"verilator built no V{top}")
            shutil.rmtree(obj, ignore_errors=True)  # a folder without its executable (an interrupted older build)
            os.replace(work, obj)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return exe


def _main_of(top: str) -> list[Path]:
    """The main a Verilator build of `top` links, when the testbench brings its own (a list of one)."""
    return [VERILATOR_MAINS[top]] if top in VERILATOR_MAINS else []


def _runtime_objects(work: Path, top: str) -> list[str]:
    """The object files of Verilator's runtime and of tb/sim_hooks.cpp a build in `work` links: the
    same for every design built with the same switches (a testbench's own main, compiled against
    the design's header, is not one of them)."""
    mains = {f"{m.stem}.o" for m in _main_of(top)}
    names = []
    for mk in (work / f"V{top}_classes.mk", work / f"V{top}.mk"):
        listing = None
        for line in mk.read_text().splitlines():
            if line.startswith(("VM_GLOBAL_FAST", "VM_GLOBAL_SLOW", "VM_USER_CLASSES")):
                listing = []
            elif listing is not None and line.startswith("\t") and line.rstrip().endswith("\\"):
                name = line.strip().rstrip("\\").strip() + ".o"
                if name not in mains:
                    names.append(name)
            else:
                listing = None
    return names


def _runtime_key(work: Path, top: str) -> str:
    """What the runtime's objects are compiled from: the Verilator and C++ compiler versions, the
    flags, the numeric build switches the generated makefiles set (timing, trace, coverage, ...),
    the objects' names and tb/sim_hooks.cpp."""
    switches = [line for mk in (work / f"V{top}_classes.mk", work / f"V{top}.mk")
                for line in mk.read_text().splitlines() if re.fullmatch(r"VM_\w+ = \d+", line)]
    text = "|".join([_version("verilator"), _version("g++"), *VERILATOR_FLAGS, *VERILATOR_MAKE, *switches,
                     *_runtime_objects(work, top)])
    return hashlib.sha256(text.encode() + VERILATOR_HOOKS.read_bytes()).hexdigest()[:16]


def _keep_runtime(work: Path, top: str, runtime: Path) -> None:
    """Keep the runtime's objects of the build in `work` for later builds (made under a temporary
    name and renamed, so a half-copied folder is never used; another process keeping the same
    objects first is fine)."""
    names = _runtime_objects(work, top)
    if not names or not all((work / n).exists() for n in names):
        return
    tmp = runtime.with_name(f"{runtime.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for n in names:
        shutil.copyfile(work / n, tmp / n)
    try:
        os.replace(tmp, runtime)
    except OSError:  # kept by another process meanwhile
        shutil.rmtree(tmp, ignore_errors=True)


def _run(cmd: list[str], timeout: float | None, cwd: str | os.PathLike) -> tuple[int, str]:
    proc = run_command(cmd, cwd=cwd, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def sim_icarus(files: Iterable[str | os.PathLike], top: str, defines: Sequence[str] = (),
               plusargs: Sequence[str] = (), timeout: float | None = 3600,
               cwd: str | os.PathLike = ROOT) -> tuple[int, str]:
    """Compile (if needed) and run `top` in Icarus, in `cwd` (where relative paths it opens resolve);
    returns (exit status, everything it printed)."""
    return _run(["vvp", "-n", str(build_icarus(files, top, defines)), *plusargs], timeout, cwd)


def sim_verilator(files: Iterable[str | os.PathLike], top: str, defines: Sequence[str] = (),
                  plusargs: Sequence[str] = (), timeout: float | None = 3600,
                  cwd: str | os.PathLike = ROOT) -> tuple[int, str]:
    """Build (if needed) and run `top` with Verilator, in `cwd`; returns (exit status, output)."""
    return _run([str(build_verilator(files, top, defines)), *plusargs], timeout, cwd)


@dataclass(frozen=True)
class Simulator:
    """One of the two simulators, as a replay names and runs it."""

    name: str  # as reports print it
    tool: str  # the executable that must be installed
    build: object  # build_icarus or build_verilator
    run: object  # sim_icarus or sim_verilator


ICARUS = Simulator("Icarus", "iverilog", build_icarus, sim_icarus)
VERILATOR = Simulator("Verilator", "verilator", build_verilator, sim_verilator)
SIMULATORS = (ICARUS, VERILATOR)
BY_NAME = {s.name.lower(): s for s in SIMULATORS}
