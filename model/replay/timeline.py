"""The RTL's timeline: the events the replay testbench prints when it runs with +TIMELINE,
read into the machine model's ``Event`` list, so the two can be compared cycle by cycle.

The counters (c0..c4) say how many cycles a program took and how busy each unit was; the timeline
says when each instruction was taken, when each compute unit finished and when each transfer set
up and ended. Equal timelines mean the machine model's account of where the cycles go is the
RTL's, event by event, not only in total.

The testbench prints ``EVENT <program> <cycle> go <pc>``, ``... done <pc>``, ``... setup`` and
``... end``; a transfer's setup and end carry no pc in the RTL, but transfers set up and end in
the order they were issued, so the n-th setup (and the n-th end) of a program belongs to its n-th
LOAD or STORE.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from capra import config as capra_config
from capra import isa
from capra.machine import Event

from .image import Record, write_image
from .runs import run_folder
from .simulators import GA2_FILES, GA2_TOP, Simulator
from .verdict import Verdict, judge

EVENT_RE = re.compile(r"^EVENT (\d+) (\d+) (go|done|setup|end)(?: (\d+))?$", re.M)
TIMELINE_PLUSARG = "+TIMELINE"


def _unit(code: Sequence[int], pc: int) -> str:
    words = code[4 * pc : 4 * pc + 4]
    op = isa.Instr.decode(words).op if len(words) == 4 else isa.OP_HALT  # past the code: the HALT the testbench adds
    return {isa.OP_LOAD: "dma", isa.OP_STORE: "dma", isa.OP_MM: "mm", isa.OP_VEC: "vec",
            isa.OP_SMAX: "smax"}.get(op, "seq")


def parse_events(output: str, codes: Sequence[Sequence[int]]) -> list[list[Event]]:
    """Per program (whose code is codes[i]), its events in the order printed. ValueError if a line
    names a program outside the image, or a transfer event has no LOAD or STORE to belong to."""
    found: list[list[Event]] = [[] for _ in codes]
    transfers: list[list[int]] = [[] for _ in codes]  # each program's DMA go pcs, in order
    seen = {"setup": [0] * len(codes), "end": [0] * len(codes)}
    for m in EVENT_RE.finditer(output):
        p, cycle, kind = int(m.group(1)), int(m.group(2)), m.group(3)
        if not 0 <= p < len(codes):
            raise ValueError(f"an event of program {p}: the image holds {len(codes)}")
        if kind in ("go", "done"):
            pc = int(m.group(4))
            unit = _unit(codes[p], pc)
            if kind == "go" and unit == "dma":
                transfers[p].append(pc)
        else:
            n = seen[kind][p]
            if n >= len(transfers[p]):
                raise ValueError(f"program {p}: transfer {kind} {n} in cycle {cycle} before its LOAD or STORE")
            seen[kind][p] += 1
            pc, unit = transfers[p][n], "dma"
        found[p].append(Event(cycle, kind, pc, unit))
    return found


def rtl_events(records: Sequence[Record], sim: Simulator, folder_name: str = "timeline",
               cfg: capra_config.Config | None = None, latency: int | None = None
               ) -> tuple[Verdict, list[list[Event]]]:
    """Replay `records` in `sim` with +TIMELINE (in the build every replay uses); the verdict and
    each program's events."""
    from . import memory_plusargs, testbench_defines  # the package's, defined beside replay_all

    cfg = capra_config.active() if cfg is None else cfg
    latency = cfg.ext_latency if latency is None else latency
    with run_folder(folder_name) as run:
        path = run / "timeline.hex"
        words = write_image(records, path)
        defines = testbench_defines(len(words), cfg)
        plusargs = (f"+PROG={path}", f"+LATENCY={latency}", *memory_plusargs(cfg), TIMELINE_PLUSARG)
        rc, output = sim.run(GA2_FILES, GA2_TOP, defines=defines, plusargs=plusargs)
    verdict = judge(sim.name, rc, output, len(records), dump=True, expected=[r.counters for r in records])
    return verdict, parse_events(output, [r.code for r in records])


def ordered(events: Sequence[Event]) -> list[Event]:
    """Events in one order both sides agree on: by cycle, then kind, then pc."""
    return sorted(events)
