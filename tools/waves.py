#!/usr/bin/env python3
"""Write a waveform (out/ga2.vcd) of one decode step of the structured model on Icarus.

Usage: waves.py [--context N]   then open out/ga2.vcd in a viewer such as GTKWave. The listing of
the program is printed first, so the instructions can be matched with the sequencer's pc.

The step is replayed like every other: the waveform is kept only when the testbench PASSes the
program (exit 0); it is written under a temporary name and renamed, so out/ga2.vcd is always a
whole waveform. Exit 1 when the replay fails, 2 for a bad argument (a context past the largest the
chip can run, a bad GA2_EXT)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import bootstrap

bootstrap.need("numpy")

os.environ.setdefault("GA2_EXT", "8192")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "model"), str(ROOT / "tools")]

import cli  # noqa: E402
import decode  # noqa: E402
import ga2_progs  # noqa: E402
import hw  # noqa: E402
import limits  # noqa: E402
import tiny_lm as T  # noqa: E402

VCD = Path(hw.ROOT) / "out" / "ga2.vcd"


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--context", type=cli.at_least(1), default=4, metavar="N",
                    help="the decode step to record: its context (default 4); at most the largest context the "
                         "chip can run")
    args = ap.parse_args(argv)
    extw = cli.ext_words()
    m = T.make_model("structured")
    limits.check_context(ap, "--context", args.context, m)
    hw.require_simulators("iverilog")
    _toks, records = decode.ChipHost(m, args.context).generate(0, args.context)
    step = records[-1]
    print(decode.capra.asm.listing(step.code))
    image = Path(hw.ROOT) / "out" / "waves.hex"
    ga2_progs.write_image([ga2_progs.record(step.code, step.ext, extw)], image)
    # the testbench writes out/ga2.vcd relative to where it runs: run it in a scratch folder under
    # out/ and move the waveform into place only when the replay passed
    with tempfile.TemporaryDirectory(dir=VCD.parent, prefix=".waves-") as scratch:
        (Path(scratch) / "out").mkdir()
        rc, out = hw.sim_icarus(hw.GA2_FILES, "ga2_tb", defines=(f"EXTW={extw}", "WAVES"),
                                plusargs=(f"+PROG={image}",), cwd=scratch)
        replay = cli.replay_verdict("Icarus", rc, out, programs=1)
        print(replay.line)
        written = Path(scratch) / "out" / VCD.name
        if replay.passed and written.exists():
            os.replace(written, VCD)
            print(f"wrote {VCD} ({step.counters.cycles} cycles)")
        elif replay.passed:
            replay.problems.append(f"Icarus wrote no {VCD.name}")
    return cli.finish(replay.problems, checks=1, passed=f"the step of context {args.context} replayed; waveform in "
                                                         f"{VCD}")


if __name__ == "__main__":
    sys.exit(cli.run(main))
