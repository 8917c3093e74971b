#!/usr/bin/env python3
"""Write a waveform (out/ga2.vcd) of one decode step of the structured model on Icarus.

Usage: waves.py [--context N]   then open out/ga2.vcd in a viewer such as GTKWave. The listing of
the program is printed first, so the instructions can be matched with the sequencer's pc."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("GA2_EXT", "8192")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "model"), str(ROOT / "tools")]

import decode  # noqa: E402
import ga2_progs  # noqa: E402
import hw  # noqa: E402
import tiny_lm as T  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--context", type=int, default=4)
    args = ap.parse_args()
    _toks, records = decode.ChipHost(T.make_model("structured"), args.context).generate(0, args.context)
    step = records[-1]
    print(decode.capra.asm.listing(step.code))
    image = Path(hw.ROOT) / "out" / "waves.hex"
    ga2_progs.write_image([ga2_progs.record(step.code, step.ext)], image)
    rc, out = hw.sim_icarus(hw.GA2_FILES, "ga2_tb", defines=(f"EXTW={ga2_progs.ext_words()}", "WAVES"),
                            plusargs=(f"+PROG={image}",))
    print(out.strip().splitlines()[-1])
    print(f"wrote {Path(hw.ROOT) / 'out' / 'ga2.vcd'} ({step.counters.cycles} cycles)")
    return 0 if "PASS" in out else 1


if __name__ == "__main__":
    sys.exit(main())
