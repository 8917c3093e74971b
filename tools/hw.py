"""Build and run the GA2 simulators: Icarus Verilog and Verilator, with cached builds.

``sim_icarus(files, top, defines=())`` and ``sim_verilator(...)`` return ``(rc, output)``.
Files are paths relative to the repository root (or absolute). A compiled simulator is kept under
``out/sim/`` keyed by a hash of every source's contents (and of every ``rtl/*.v`` and ``rtl/*.vh``: modules
and includes the simulators find in rtl/ by name), the top
and the defines, so it is rebuilt only when one of them changes. Simulators run with the
repository root as the working directory, so ``out/ga2_programs.hex`` resolves there.

Every build and run is a child in a process group of its own (``cli.run_command``): a timeout,
Ctrl-C or SIGTERM kills the whole group (verilator, the make it starts and every g++), and a build
is made in a temporary name and renamed when complete, so an interrupted build leaves neither a
process nor a half-built simulator that a later run would take for a finished one.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from pathlib import Path

import cli

ROOT = str(Path(__file__).resolve().parents[1])
SIM_DIR = Path(ROOT) / "out" / "sim"
INCLUDE_DIR = Path(ROOT) / "rtl"

INSTALL_HINT = {
    "iverilog": "Icarus Verilog is not installed: apt-get install iverilog",
    "verilator": "Verilator is not installed: apt-get install verilator",
}


class SimulatorMissing(cli.ToolError, RuntimeError):
    """A simulator executable is not on PATH; the message says what to install."""


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise SimulatorMissing(INSTALL_HINT[tool])
    return path


def require_simulators(*tools: str) -> None:
    """For a tool to call before any work: SimulatorMissing (one line, exit 2) naming every one of
    `tools` (default: both simulators) that is not on PATH, instead of output, files and a failed
    replay first."""
    missing = [INSTALL_HINT[t] for t in (tools or tuple(INSTALL_HINT)) if shutil.which(t) is None]
    if missing:
        raise SimulatorMissing("; ".join(missing))


def _abs(files: Iterable[str]) -> list[Path]:
    return [Path(f) if os.path.isabs(f) else Path(ROOT) / f for f in files]


# Verilator's runtime turns a string argument ($fopen's file name) into text in a 256-character
# stack buffer and overruns it on a longer one; room for ga2_tb's PATH_MAX + 1 characters.
# VL_USER_STOP with tb/sim_exit.cpp: Verilog $stop exits with status 1 instead of aborting.
# OPT_FAST: the model's C++ at -O2 (Verilator's default -Os runs the replay about 25% slower).
VERILATOR_FLAGS = ("-CFLAGS", "-DVL_VALUE_STRING_MAX_WORDS=1040", "-CFLAGS", "-DVL_USER_STOP",
                   "-MAKEFLAGS", "OPT_FAST=-O2")
VERILATOR_EXIT = Path(ROOT) / "tb" / "sim_exit.cpp"


def _build_key(kind: str, files: Sequence[Path], top: str, defines: Sequence[str]) -> str:
    flags = "|".join(VERILATOR_FLAGS) if kind == "verilator" else ""  # a flag change is a new build
    h = hashlib.sha256(f"{kind}|{top}|{'|'.join(defines)}|{flags}".encode())
    extra = [VERILATOR_EXIT] if kind == "verilator" else []
    for f in list(files) + extra + sorted(INCLUDE_DIR.glob("*.vh")) + sorted(INCLUDE_DIR.glob("*.v")):
        h.update(str(f).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _run(cmd: list[str], timeout: float | None, cwd: str | os.PathLike = ROOT) -> tuple[int, str]:
    """Run in `cwd` (the repository root), in a process group of its own; (exit code, stdout + stderr)."""
    proc = cli.run_command(cmd, cwd=cwd, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def build_icarus(files: Iterable[str], top: str, defines: Sequence[str] = ()) -> Path:
    """Compile with iverilog (cached); returns the .vvp file."""
    _require("iverilog")
    paths = _abs(files)
    out = SIM_DIR / f"icarus-{top}-{_build_key('icarus', paths, top, defines)}.vvp"
    if not out.exists():
        SIM_DIR.mkdir(parents=True, exist_ok=True)
        with cli.atomic_path(out) as tmp:
            cmd = ["iverilog", "-g2005", "-Wall", "-Wno-timescale", "-I", str(INCLUDE_DIR), "-y", str(INCLUDE_DIR),
                   "-s", top, "-o", str(tmp)]
            cmd += [f"-D{d}" for d in defines] + [str(p) for p in paths]
            rc, log = _run(cmd, None)
            if rc != 0:
                raise RuntimeError(f"iverilog failed:\n{log}")
    return out


def build_verilator(files: Iterable[str], top: str, defines: Sequence[str] = ()) -> Path:
    """Build a Verilator --binary simulator (cached); returns the executable.

    The build runs in a temporary folder renamed to its final name only when the executable is
    there, so the cache never holds a half-built simulator."""
    _require("verilator")
    paths = _abs(files)
    obj = SIM_DIR / f"verilator-{top}-{_build_key('verilator', paths, top, defines)}"
    exe = obj / f"V{top}"
    if not exe.exists():
        SIM_DIR.mkdir(parents=True, exist_ok=True)
        work = obj.with_name(f"{obj.name}.tmp{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        cli.note(f"building the Verilator simulator of {top} (once per change of RTL or defines; up to a minute)")
        try:
            cmd = ["verilator", "--binary", "-O2", "--default-language", "1364-2005", "--top-module", top,
                   "-I" + str(INCLUDE_DIR), "-y", str(INCLUDE_DIR), "--Mdir", str(work), "-o", f"V{top}",
                   "-j", "2", *VERILATOR_FLAGS]
            cmd += [f"-D{d}" for d in defines] + [str(p) for p in paths] + [str(VERILATOR_EXIT)]
            rc, log = _run(cmd, None)
            if rc != 0 or not (work / f"V{top}").exists():
                raise RuntimeError(f"verilator build failed:\n{log}")
            if not exe.exists():  # else another process finished the same build first: keep its
                shutil.rmtree(obj, ignore_errors=True)  # a folder without its executable (an older hw.py's)
                with suppress(OSError):
                    os.replace(work, obj)
            if not exe.exists():
                raise RuntimeError(f"verilator build: could not move {work} to {obj}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return exe


def sim_icarus(files: Iterable[str], top: str, defines: Sequence[str] = (),
               plusargs: Sequence[str] = (), timeout: float | None = 3600,
               cwd: str | os.PathLike = ROOT) -> tuple[int, str]:
    """Compile (if needed) and run `top` in Icarus (in `cwd`, where the files it writes go);
    returns (exit code, everything it printed)."""
    vvp = build_icarus(files, top, defines)
    return _run(["vvp", "-n", str(vvp), *plusargs], timeout, cwd)


def sim_verilator(files: Iterable[str], top: str, defines: Sequence[str] = (),
                  plusargs: Sequence[str] = (), timeout: float | None = 3600,
                  cwd: str | os.PathLike = ROOT) -> tuple[int, str]:
    """Build (if needed) and run `top` with Verilator (in `cwd`, where the files it writes go);
    returns (exit code, everything it printed)."""
    exe = build_verilator(files, top, defines)
    return _run([str(exe), *plusargs], timeout, cwd)


# The replay testbench. The simulators find the modules ga2 instantiates in rtl/ by name ("-y"), so
# a new module in its own file needs no change here.
GA2_FILES = ["rtl/ga2.v", "tb/extmem_rw.v", "tb/ga2_tb.v"]
SIMULATORS = (("Icarus", sim_icarus), ("Verilator", sim_verilator))


def tb_maxwords() -> int | None:
    """The replay testbench's default image size limit (`define MAXWORDS in tb/ga2_tb.v), or None
    if the testbench no longer states one."""
    match = re.search(r"`define\s+MAXWORDS\s+(\d+)", (Path(ROOT) / "tb" / "ga2_tb.v").read_text())
    return int(match.group(1)) if match else None


def replay_defines(image_words: int, extw: int, *extra: str) -> tuple[str, ...]:
    """The testbench defines for an image of `image_words` words: EXTW, and MAXWORDS raised to the
    next power of two only when the image is larger than the testbench's default (so the usual
    images share the cached build, and a long decode is not refused by a buffer size)."""
    defines = [f"EXTW={extw}", *extra]
    default = tb_maxwords()
    if default is None or image_words > default:
        defines.append(f"MAXWORDS={1 << max(image_words - 1, 1).bit_length()}")
    return tuple(defines)


def _active_config():
    if str(Path(ROOT) / "model") not in sys.path:
        sys.path.insert(0, str(Path(ROOT) / "model"))
    from capra import config

    return config.active()


def config_defines() -> tuple[str, ...]:
    """The active configuration's chip defines (capra/config.py; none at the default, so the
    default builds keep their cache keys)."""
    return _active_config().rtl_defines()


def latency_plusarg(latency: int | None = None) -> str:
    """The replay testbench's +LATENCY: `latency`, or the active configuration's ext_latency."""
    return f"+LATENCY={_active_config().ext_latency if latency is None else latency}"


def replay(image: Path, programs: int, extw: int, extra_defines: Sequence[str] = (), dump: bool = True,
           timeout: float | None = 3600, latency: int | None = None) -> list[cli.Replay]:
    """Replay an image of `programs` programs in Icarus and in Verilator; one judged Replay each
    (``cli.replay_verdict``). A simulator that cannot be built or run is a failed replay, named.
    The chip is built for the active configuration (``config_defines``), and the external memory
    answers after `latency` cycles (default: the active configuration's)."""
    words = sum(1 for _ in open(image))
    defines = replay_defines(words, extw, *(["DUMP"] if dump else []), *extra_defines, *config_defines())
    rel = image.relative_to(ROOT) if image.is_relative_to(ROOT) else image
    results = []
    for name, simulate in SIMULATORS:
        if programs > 64:  # a long replay: say what is running
            cli.note(f"replaying {programs} programs ({words} words) in {name}")
        start = time.perf_counter()
        try:
            rc, output = simulate(GA2_FILES, "ga2_tb", defines=defines,
                                  plusargs=(f"+PROG={rel}", latency_plusarg(latency)), timeout=timeout)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:  # missing tool, failed build
            rc, output = -1, f"FAIL: could not run {name}: " + " | ".join(str(error).strip().splitlines()[:3])
        results.append(cli.replay_verdict(name, rc, output, programs, dump=dump))
        results[-1].seconds = time.perf_counter() - start
    return results
