"""What nextpnr-ecp5 says about a placed and routed GA2, read into numbers and named paths.

Why a module of its own: the whole-chip flow (``capra fpga``, tools/capra_cli/fpga.py) takes minutes a
seed, while reading its reports takes a second; the readers here are tested on small captured
reports (tests/test_fpga_report.py) without running any tool.

* ``DEVICES``: the ECP5 parts the flow targets, with the resources nextpnr counts on each (its own
  "Device utilisation" figures), so a device can be chosen from the synthesized netlist's counts.
* ``utilization(report)``: the ``--report`` JSON's used / available counts of logic cells
  (TRELLIS_COMB), flip-flops (TRELLIS_FF), block RAMs (DP16KD) and multipliers (MULT18X18D).
* ``fmax(report)`` and ``critical_path(report)``: nextpnr's achieved frequency and the one path it
  reports per clock (the worst).
* ``worst_paths(sdf, netlist, count)``: nextpnr reports one path per clock, so the next worst are
  found here by a static timing analysis of the routed design's SDF (every cell delay and every
  routed net's delay, as nextpnr computed them). The worst path it finds must be nextpnr's own
  (``fpga.py`` checks the two delays agree), and each path is named by the RTL registers it starts
  and ends on: the names of the nets those registers drive, from nextpnr's routed netlist.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Device:
    """An ECP5 part: nextpnr's device flag and what it has of each resource the table shows."""

    label: str  # "45k", "85k": the nextpnr-ecp5 flag without its dashes
    part: str  # the part number
    comb: int  # TRELLIS_COMB: logic cells, each a LUT4 (or half a CCU2C carry, or part of a LUT RAM)
    ff: int  # TRELLIS_FF
    bram: int  # DP16KD: 18-kbit true dual-port block RAMs
    dsp: int  # MULT18X18D: 18 x 18 multipliers


# nextpnr-ecp5's "Device utilisation" totals for the two parts the flow uses.
DEVICES = {
    "45k": Device("45k", "LFE5U-45F", comb=43848, ff=43848, bram=108, dsp=72),
    "85k": Device("85k", "LFE5U-85F", comb=83640, ff=83640, bram=208, dsp=156),
}
PACKAGE = "CABGA381"
SPEED = 6
# A design whose logic needs more than this share of a part's logic cells is given the larger part:
# a placer near 100 % spends long and routes badly.
COMB_HEADROOM = 0.85

# The table's rows: (column name, nextpnr bel type, what it is).
RESOURCES = (
    ("LUT4", "TRELLIS_COMB", "logic cells: a LUT4 each, or half a CCU2C carry cell, or part of a LUT RAM"),
    ("FF", "TRELLIS_FF", "flip-flops"),
    ("BRAM", "DP16KD", "18-kbit block RAMs"),
    ("DSP", "MULT18X18D", "18 x 18 multipliers"),
)


class ReportError(ValueError):
    """A report or netlist that is not what nextpnr writes (damaged, cut short, another tool's)."""


# ---- choosing the part ----------------------------------------------------------------------------


def netlist_counts(netlist: dict, top: str) -> dict[str, int]:
    """The synthesized netlist's cells by type (Yosys JSON of synth_ecp5)."""
    try:
        cells = netlist["modules"][top]["cells"]
    except KeyError:
        raise ReportError(f"the netlist has no module {top!r}") from None
    counts: dict[str, int] = {}
    for cell in cells.values():
        counts[cell["type"]] = counts.get(cell["type"], 0) + 1
    return counts


def logic_cells_estimate(counts: dict[str, int]) -> int:
    """Logic cells (TRELLIS_COMB) the netlist will take before packing: a LUT4 each, two for a
    CCU2C (a carry cell spans two), four for a 16 x 4 LUT RAM. nextpnr's own count after packing is
    the one reported; this only chooses the part."""
    return counts.get("LUT4", 0) + 2 * counts.get("CCU2C", 0) + 4 * counts.get("TRELLIS_DPR16X4", 0)


def choose_device(counts: dict[str, int]) -> tuple[Device | None, str]:
    """The smaller part that holds the netlist's multipliers and block RAMs, with its logic under
    COMB_HEADROOM of the part's cells; (None, why) when neither does."""
    need = {"dsp": counts.get("MULT18X18D", 0), "bram": counts.get("DP16KD", 0), "comb": logic_cells_estimate(counts)}
    for device in DEVICES.values():
        short = [f"{need['dsp']} MULT18X18D > {device.dsp}" if need["dsp"] > device.dsp else "",
                 f"{need['bram']} DP16KD > {device.bram}" if need["bram"] > device.bram else "",
                 f"about {need['comb']} logic cells > {COMB_HEADROOM:.0%} of {device.comb}"
                 if need["comb"] > COMB_HEADROOM * device.comb else ""]
        short = [s for s in short if s]
        if not short:
            return device, (f"{need['dsp']} MULT18X18D, {need['bram']} DP16KD, about {need['comb']} logic cells "
                            f"fit the {device.part}")
        last = f"the {device.part} is too small ({', '.join(short)})"
    return None, last


# ---- the --report JSON ----------------------------------------------------------------------------


def load_report(text: str) -> dict:
    """The --report JSON, checked for the keys read here."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(f"the report is not JSON: {error}") from None
    if not isinstance(report, dict) or not isinstance(report.get("utilization"), dict):
        raise ReportError("the report has no 'utilization' table")
    return report


@dataclass(frozen=True)
class Use:
    """One row of the utilization table."""

    name: str
    bel: str
    used: int
    available: int

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.available if self.available else 0.0


def utilization(report: dict) -> list[Use]:
    """The four resources of RESOURCES, used and available, as nextpnr counted them after packing."""
    table = report["utilization"]
    rows = []
    for name, bel, _what in RESOURCES:
        entry = table.get(bel)
        if not isinstance(entry, dict) or "used" not in entry or "available" not in entry:
            raise ReportError(f"the report's utilization has no {bel}")
        rows.append(Use(name, bel, int(entry["used"]), int(entry["available"])))
    return rows


def fmax(report: dict, clock: str = "clk") -> float:
    """The frequency (MHz) nextpnr achieved for `clock` after routing."""
    entry = report.get("fmax", {}).get(clock)
    if not isinstance(entry, dict) or "achieved" not in entry:
        raise ReportError(f"the report has no Fmax for clock {clock!r} (clocks: {', '.join(report.get('fmax', {}))})")
    return float(entry["achieved"])


@dataclass(frozen=True)
class Segment:
    """One step of a reported path: a cell's delay ("clk-to-q", "logic", "setup") or a net's ("routing")."""

    kind: str
    delay: float  # ns
    source: str  # cell/port
    sink: str  # cell/port
    net: str = ""


def critical_path(report: dict, clock: str = "clk") -> list[Segment]:
    """nextpnr's critical path for `clock` (launch and capture on its rising edge), as segments."""
    for entry in report.get("critical_paths", []):
        if entry.get("from") == f"posedge {clock}" and entry.get("to") == f"posedge {clock}":
            return [Segment(s["type"], float(s["delay"]), f"{s['from']['cell']}/{s['from']['port']}",
                            f"{s['to']['cell']}/{s['to']['port']}", s.get("net", "")) for s in entry["path"]]
    raise ReportError(f"the report has no critical path from posedge {clock} to posedge {clock}")


# ---- names ----------------------------------------------------------------------------------------

_BIT = re.compile(r"\[\d+\]$")
# Yosys's autoname calls a cell or net it made after what it connects: "u_sm.state_TRELLIS_FF_Q_2" is a
# flip-flop whose Q drives u_sm.state, "x_LUT4_Z" a LUT whose output is x. Such a name is made up
# from the cell's type after its RTL part.
_MADE_UP = re.compile(r"_(TRELLIS_FF|TRELLIS_COMB|TRELLIS_DPR16X4|LUT4|CCU2C|PFUMX|L6MUX21|DP16KD|MULT18X18D|ALU54B)"
                      r"(_|$)")
_MEMORY_PIECE = re.compile(r"(\.\d+)+$")  # a memory Yosys split over block RAMs: mem.0.1 is a piece of mem


def is_public(name: str) -> bool:
    """A name from the RTL: not one Yosys or nextpnr made up ($..., or autoname's x_LUT4_Z)."""
    return bool(name) and not name.startswith("$") and not _MADE_UP.search(name)


def register_name(cell: str, cell_type: str, net: str = "") -> str:
    """The RTL name of a register a path starts or ends on: a block RAM's memory array (its cell
    without Yosys's piece numbers), a flip-flop's register (autoname calls it after the net its Q
    drives), else the RTL net the path's pin drives, else the RTL part of the cell's name. A LUT RAM
    is a memory too: nextpnr splits each 16 x 4 piece into cells named <piece>$DPRAM_COMB<i>."""
    if (cell_type == "DP16KD" or "$DPRAM" in cell) and not cell.startswith("$"):
        return _MEMORY_PIECE.sub("", cell.split("$", 1)[0])
    made_up = _MADE_UP.search(cell)
    if made_up and cell[made_up.start():].startswith("_TRELLIS_FF_Q") and made_up.start() > 0:
        return cell[:made_up.start()]
    if is_public(net):
        return net
    if made_up and made_up.start() > 0 and not cell.startswith("$"):
        return cell[:made_up.start()]
    return cell


def block_and_signal(name: str, top: str = "ga2") -> tuple[str, str]:
    """``u_mm.u_sys.acc[3]`` -> (``u_mm.u_sys``, ``acc[3]``); a name at the top -> (`top`, name).
    A dot inside brackets (a generate block's index) does not split."""
    depth, cut = 0, -1
    for i, ch in enumerate(name):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "." and depth == 0:
            cut = i
    return (top, name) if cut < 0 else (name[:cut], name[cut + 1:])


def any_copy(block: str) -> str:
    """A block with its generate indices starred: g_imem[2].u_ram -> g_imem[*].u_ram."""
    return re.sub(r"\[[^\]]*\]", "[*]", block)


def without_bit(name: str) -> str:
    """A bus's name without the bit: ``acc[3]`` -> ``acc``, so the 32 bits of a bus count once."""
    return _BIT.sub("", name)


# ---- static timing of the routed design -----------------------------------------------------------

_TRIPLE = re.compile(r"\(([-\d.]*):([-\d.]*):([-\d.]*)\)")
_ESCAPED = re.compile(r"\\(.)")


def _unescape(name: str) -> str:
    return _ESCAPED.sub(r"\1", name)


def _max_delay(text: str) -> float:
    """The largest max of an SDF delay's (min:typ:max) triples, in the file's unit."""
    return max(float(m.group(3)) for m in _TRIPLE.finditer(text))


def _split_pin(text: str) -> tuple[str, str]:
    cell, _slash, port = _unescape(text).rpartition("/")
    return cell, port


def _tokens(line: str) -> list[str]:
    """The names of an SDF line (an escaped space never occurs in nextpnr's names)."""
    return line.strip().strip("()").split()


@dataclass
class Timing:
    """A routed design's timing graph from nextpnr's SDF, in ns.

    ``edges[sink] = [(source, delay)]``: a routed net from a driver pin to a sink pin, or a cell's
    combinational path from an input pin to an output pin. ``launch[pin]``: a register output's
    clock-to-out delay (paths start there). ``setup[pin]``: a register input's setup time (paths end
    there). The clock itself is ideal: its net's delays are left out."""

    edges: dict[tuple[str, str], list[tuple[tuple[str, str], float]]] = field(default_factory=dict)
    launch: dict[tuple[str, str], float] = field(default_factory=dict)
    setup: dict[tuple[str, str], float] = field(default_factory=dict)
    cell_types: dict[str, str] = field(default_factory=dict)


def read_sdf(lines: Iterable[str]) -> Timing:
    """The timing graph of an SDF file as nextpnr writes it (one statement a line, TIMESCALE 1ps)."""
    timing = Timing()
    scale = None
    cell = celltype = None
    clock_outputs: list[tuple[str, str, str, float]] = []  # (cell, from port, to port, delay)
    clocks: set[tuple[str, str]] = set()
    for line in lines:
        s = line.strip()
        if s.startswith("(TIMESCALE"):
            unit = s[len("(TIMESCALE"):].strip(" )")
            scale = {"1ps": 1e-3, "1ns": 1.0}.get(unit)
            if scale is None:
                raise ReportError(f"SDF timescale {unit!r} is not 1ps or 1ns")
        elif s.startswith("(CELLTYPE"):
            celltype = s[len("(CELLTYPE"):].strip(' )"')
        elif s.startswith("(INSTANCE"):
            cell = _unescape(s[len("(INSTANCE"):].strip(" )"))
            if cell:
                timing.cell_types[cell] = celltype or ""
        elif s.startswith("(INTERCONNECT"):
            words = _tokens(s)
            source, sink = _split_pin(words[1]), _split_pin(words[2])
            timing.edges.setdefault(sink, []).append((source, _max_delay(s) * (scale or 1e-3)))
        elif s.startswith("(IOPATH"):
            words = _tokens(s)
            clock_outputs.append((cell, _unescape(words[1]), _unescape(words[2]), _max_delay(s) * (scale or 1e-3)))
        elif s.startswith("(SETUPHOLD"):
            ports = re.findall(r"\((?:posedge|negedge) ([^)\s]+)\)", s)
            if len(ports) != 2:
                raise ReportError(f"unexpected SDF timing check: {s[:120]}")
            data, clk = (cell, _unescape(ports[0])), (cell, _unescape(ports[1]))
            clocks.add(clk)
            triples = _TRIPLE.findall(s)
            timing.setup[data] = max(timing.setup.get(data, 0.0), float(triples[0][2]) * (scale or 1e-3))
    if scale is None:
        raise ReportError("not an SDF file from nextpnr (no TIMESCALE)")
    clock_ports = {(timing.cell_types.get(c, ""), p) for c, p in clocks}
    for cell, source, sink, delay in clock_outputs:
        if (timing.cell_types.get(cell, ""), source) in clock_ports:  # clock to out: a path starts here
            pin = (cell, sink)
            timing.launch[pin] = max(timing.launch.get(pin, 0.0), delay)
        else:
            timing.edges.setdefault((cell, sink), []).append(((cell, source), delay))
    for pin in timing.launch:  # a register output's arrival is its clock-to-out, not a path through the cell
        timing.edges.pop(pin, None)
    return timing


def arrivals(timing: Timing) -> tuple[dict, dict]:
    """Latest arrival time of every pin a register launches into, and the pin it came from (the
    longest path through the graph: each pin's arrival is the largest over what drives it)."""
    arrival: dict[tuple[str, str], float] = dict(timing.launch)
    previous: dict[tuple[str, str], tuple[str, str] | None] = dict.fromkeys(timing.launch)
    state: dict[tuple[str, str], int] = {}  # 1: on the stack, 2: done
    for root in timing.edges:
        if state.get(root) == 2:
            continue
        stack = [(root, iter(timing.edges.get(root, ())))]
        state[root] = 1
        while stack:
            pin, todo = stack[-1]
            for source, _delay in todo:
                if source in timing.edges and state.get(source) is None:
                    state[source] = 1
                    stack.append((source, iter(timing.edges[source])))
                    break
            else:
                stack.pop()
                state[pin] = 2
                if pin in timing.launch:
                    continue
                best, came = None, None
                for source, delay in timing.edges.get(pin, ()):
                    if source in arrival and (best is None or arrival[source] + delay > best):
                        best, came = arrival[source] + delay, source
                if best is not None:
                    arrival[pin], previous[pin] = best, came
    return arrival, previous


@dataclass(frozen=True)
class Path:
    """A register-to-register path: its delay (arrival plus setup, ns), its pins from the launching
    register's output to the capturing register's input, and the RTL names of both registers."""

    delay: float
    pins: tuple[tuple[str, str], ...]
    start: str  # RTL name of the launching register (register_name)
    end: str  # RTL name of the capturing register
    cells: int  # cells the path passes through between the two registers

    @property
    def mhz(self) -> float:
        return 1000.0 / self.delay

    def blocks(self) -> tuple[str, str]:
        return block_and_signal(self.start)[0], block_and_signal(self.end)[0]


@dataclass
class Names:
    """RTL names from nextpnr's routed netlist (--write): the net each cell output drives."""

    driven: dict[tuple[str, str], str] = field(default_factory=dict)  # (cell, output port) -> net name
    outputs: dict[str, list[str]] = field(default_factory=dict)  # cell -> its output ports, in order

    def launching(self, pin: tuple[str, str], cell_type: str) -> str:
        """The RTL name of the register whose output `pin` is."""
        return register_name(pin[0], cell_type, self.driven.get(pin, ""))

    def capturing(self, cell: str, cell_type: str) -> str:
        """The RTL name of the register `cell` is (named by what its first RTL-named output drives)."""
        nets = [self.driven.get((cell, port), "") for port in self.outputs.get(cell, ())]
        return register_name(cell, cell_type, next((n for n in nets if is_public(n)), ""))


def read_names(netlist: dict) -> Names:
    """The net each cell output drives, from a routed netlist written by nextpnr (--write)."""
    try:
        [module] = netlist["modules"].values()
    except (KeyError, ValueError):
        raise ReportError("the routed netlist does not hold exactly one module") from None
    bit_name: dict[int, str] = {}
    for name, net in module.get("netnames", {}).items():
        bits = net.get("bits", [])
        if len(bits) == 1 and isinstance(bits[0], int):
            # nextpnr's nets are one bit each, one name each; an RTL name wins over a made-up one
            if bits[0] not in bit_name or (is_public(name) and not is_public(bit_name[bits[0]])):
                bit_name[bits[0]] = name
    names = Names()
    for cell_name, cell in module.get("cells", {}).items():
        directions = cell.get("port_directions", {})
        for port, bits in cell.get("connections", {}).items():
            if directions.get(port) == "output" and bits and isinstance(bits[0], int) and bits[0] in bit_name:
                names.driven[(cell_name, port)] = bit_name[bits[0]]
                names.outputs.setdefault(cell_name, []).append(port)
    return names


def worst_paths(timing: Timing, names: Names, count: int, by: str = "registers") -> list[Path]:
    """The `count` worst register-to-register paths, worst first: the worst of each pair of registers
    (a bus counts as one register, so the paths are not 32 bits of one bus), or with by="start" the
    worst path from each launching block (the copies of a generate loop count as one block), which
    shows where the paths lie once the very worst start is fixed."""
    if by not in ("registers", "start"):
        raise ValueError(f"by={by!r}: registers or start")
    arrival, previous = arrivals(timing)
    ends = sorted(((arrival[pin] + setup, pin) for pin, setup in timing.setup.items() if pin in arrival),
                  reverse=True)
    paths: list[Path] = []
    seen: set[object] = set()
    for delay, end in ends:
        pins = list(_walk_back(end, previous))
        start = names.launching(pins[0], timing.cell_types.get(pins[0][0], ""))
        finish = names.capturing(end[0], timing.cell_types.get(end[0], ""))
        path = Path(delay, tuple(pins), start, finish, len({cell for cell, _port in pins[1:-1]}))
        pair = (without_bit(start), without_bit(finish)) if by == "registers" else any_copy(path.blocks()[0])
        if pair in seen:
            continue
        seen.add(pair)
        paths.append(path)
        if len(paths) == count:
            break
    return paths


def _walk_back(end: tuple[str, str], previous: dict) -> Iterator[tuple[str, str]]:
    chain = [end]
    while previous.get(chain[-1]) is not None:
        chain.append(previous[chain[-1]])
    return reversed(chain)
