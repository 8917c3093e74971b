"""Build and run the GA2 simulators: Icarus Verilog and Verilator, with cached builds.

``sim_icarus(files, top, defines=())`` and ``sim_verilator(...)`` return ``(rc, output)``.
Files are paths relative to the repository root (or absolute). A compiled simulator is kept under
``out/sim/`` keyed by a hash of every source's contents (and of every ``rtl/*.v`` and ``rtl/*.vh``: modules
and includes the simulators find in rtl/ by name), the top
and the defines, so it is rebuilt only when one of them changes. Simulators run with the
repository root as the working directory, so ``out/ga2_programs.hex`` resolves there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
SIM_DIR = Path(ROOT) / "out" / "sim"
INCLUDE_DIR = Path(ROOT) / "rtl"

INSTALL_HINT = {
    "iverilog": "Icarus Verilog is not installed: apt-get install iverilog",
    "verilator": "Verilator is not installed: apt-get install verilator",
}


class SimulatorMissing(RuntimeError):
    """A simulator executable is not on PATH; the message says what to install."""


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise SimulatorMissing(INSTALL_HINT[tool])
    return path


def _abs(files: Iterable[str]) -> list[Path]:
    return [Path(f) if os.path.isabs(f) else Path(ROOT) / f for f in files]


def _build_key(kind: str, files: Sequence[Path], top: str, defines: Sequence[str]) -> str:
    h = hashlib.sha256(f"{kind}|{top}|{'|'.join(defines)}".encode())
    for f in list(files) + sorted(INCLUDE_DIR.glob("*.vh")) + sorted(INCLUDE_DIR.glob("*.v")):
        h.update(str(f).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _run(cmd: list[str], timeout: float | None) -> tuple[int, str]:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def build_icarus(files: Iterable[str], top: str, defines: Sequence[str] = ()) -> Path:
    """Compile with iverilog (cached); returns the .vvp file."""
    _require("iverilog")
    paths = _abs(files)
    out = SIM_DIR / f"icarus-{top}-{_build_key('icarus', paths, top, defines)}.vvp"
    if not out.exists():
        SIM_DIR.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        cmd = ["iverilog", "-g2005", "-Wall", "-Wno-timescale", "-I", str(INCLUDE_DIR), "-y", str(INCLUDE_DIR),
               "-s", top, "-o", str(tmp)]
        cmd += [f"-D{d}" for d in defines] + [str(p) for p in paths]
        rc, log = _run(cmd, None)
        if rc != 0:
            raise RuntimeError(f"iverilog failed:\n{log}")
        tmp.rename(out)
    return out


def build_verilator(files: Iterable[str], top: str, defines: Sequence[str] = ()) -> Path:
    """Build a Verilator --binary simulator (cached); returns the executable."""
    _require("verilator")
    paths = _abs(files)
    obj = SIM_DIR / f"verilator-{top}-{_build_key('verilator', paths, top, defines)}"
    exe = obj / f"V{top}"
    if not exe.exists():
        SIM_DIR.mkdir(parents=True, exist_ok=True)
        cmd = ["verilator", "--binary", "-O2", "--default-language", "1364-2005", "--top-module", top,
               "-I" + str(INCLUDE_DIR), "-y", str(INCLUDE_DIR), "--Mdir", str(obj), "-o", f"V{top}", "-j", "2",
               # Verilator's runtime turns a string argument ($fopen's file name) into text in a 256-character
               # stack buffer and overruns it on a longer one; room for ga2_tb's PATH_MAX + 1 characters
               "-CFLAGS", "-DVL_VALUE_STRING_MAX_WORDS=1040"]
        cmd += [f"-D{d}" for d in defines] + [str(p) for p in paths]
        rc, log = _run(cmd, None)
        if rc != 0 or not exe.exists():
            raise RuntimeError(f"verilator build failed:\n{log}")
    return exe


def sim_icarus(files: Iterable[str], top: str, defines: Sequence[str] = (),
               plusargs: Sequence[str] = (), timeout: float | None = 3600) -> tuple[int, str]:
    """Compile (if needed) and run `top` in Icarus; returns (exit code, everything it printed)."""
    vvp = build_icarus(files, top, defines)
    return _run(["vvp", "-n", str(vvp), *plusargs], timeout)


def sim_verilator(files: Iterable[str], top: str, defines: Sequence[str] = (),
                  plusargs: Sequence[str] = (), timeout: float | None = 3600) -> tuple[int, str]:
    """Build (if needed) and run `top` with Verilator; returns (exit code, everything it printed)."""
    exe = build_verilator(files, top, defines)
    return _run([str(exe), *plusargs], timeout)


# The replay testbench. The simulators find the modules ga2 instantiates in rtl/ by name ("-y"), so
# a new module in its own file needs no change here.
GA2_FILES = ["rtl/ga2.v", "tb/extmem_rw.v", "tb/ga2_tb.v"]
