"""Write a waveform (out/ga2.vcd) of one decode step of the structured model on Icarus.

Usage: waves.py [--context N]   (also ``capra waves``) then open out/ga2.vcd in a viewer such as
GTKWave: ``gtkwave out/ga2.vcd tb/ga2.gtkw`` opens it on the signals that matter (docs/waveforms.md).
The listing of the program is printed first, so the instructions can be matched with the
sequencer's pc.

The step is replayed like every other: the waveform is kept only when the testbench PASSes the
program (exit 0); the testbench runs in this run's own folder and the waveform is renamed into
place, so out/ga2.vcd is always a whole waveform. Exit 1 when the replay fails, 2 for a bad
argument (a context past the largest the chip can run, a bad GA2_EXT or GA2_CONFIG)."""

from __future__ import annotations

import os

import paged_lm as PL
import replay
import tiny_lm as T
from capra import asm, config
from replay import image, runs
from replay.simulators import GA2_FILES, GA2_TOP, sim_icarus
from replay.verdict import judge

from .common import Parser, ToolError, at_least, check_context, finish

VCD = runs.OUT / "ga2.vcd"


def arguments(ap: Parser) -> None:
    ap.add_argument("--context", type=at_least(1), default=4, metavar="N",
                    help="the decode step to record: its context (default 4); at most the largest context the "
                         "chip can run")


def main(args) -> int:
    m = T.make_model("structured")
    check_context("--context", args.context, m)
    if VCD.is_dir():  # found before the replay, not at the rename after it
        raise ToolError(f"{VCD} is a folder, where the waveform is to be written: move it away")
    runs.make_folder(VCD.parent)
    replay.require("iverilog")
    pages = -(-args.context // 4) + 1  # the host's pool, pages of 4 rows: enough for the whole context
    _toks, steps = PL.PagedChip(m, args.context, paged=False, n_pages=pages).generate(0, args.context)
    step = steps[-1]
    print(asm.listing(step.code))
    record = image.record(step.code, step.ext)
    # the testbench writes out/ga2.vcd relative to where it runs: run it in this run's folder and
    # move the waveform into place only when the replay passed
    with runs.run_folder("waves") as run:
        path = run / "waves.hex"
        image.write_image([record], path)
        (run.path / "out").mkdir()
        defines = (*replay.testbench_defines(0, config.active()), "WAVES")
        rc, out = sim_icarus(GA2_FILES, GA2_TOP, defines=defines, cwd=run.path,
                             plusargs=(f"+PROG={path}", f"+LATENCY={config.active().ext_latency}",
                                       *replay.memory_plusargs(config.active())))  # the memory the model ran on
        verdict = judge("Icarus", rc, out, programs=1, expected=[record.counters])
        print(verdict.line)
        written = run.path / "out" / VCD.name
        if verdict.passed and written.exists():
            VCD.parent.mkdir(parents=True, exist_ok=True)
            os.replace(written, VCD)
            print(f"wrote {VCD} ({step.cycles} cycles)")
            shown = VCD.relative_to(runs.ROOT) if VCD.is_relative_to(runs.ROOT) else VCD
            print(f"open it from {runs.ROOT.name}/ on the signals docs/waveforms.md reads: gtkwave {shown} tb/ga2.gtkw")
        elif verdict.passed:
            verdict.problems.append(f"Icarus wrote no {VCD.name}")
    return finish(verdict.problems, checks=1, passed=f"the step of context {args.context} replayed; waveform in "
                                                     f"{VCD}")
