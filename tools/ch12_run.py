#!/usr/bin/env python3
"""Chapter 12: decode 32 tokens from token 0 with the structured model, one program per context
size, and replay all 32 programs on Icarus and Verilator. Usage: ch12_run.py [--steps N] [--start T]"""

from __future__ import annotations

import argparse
import os
import sys
import time
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
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()

    m = T.make_model("structured")
    host = decode.ChipHost(m, args.steps)
    toks, records = host.generate(args.start, args.steps)
    expected = [args.start]
    for _ in range(args.steps):
        expected.append(T.f_next(expected[-1]))
    print(f"tokens: {toks}")
    print(f"rule f(t) = 5t + 3 mod 16 holds on the machine model: {toks == expected}; "
          f"programs compiled: {len(host.progs)}")

    path = Path(hw.ROOT) / "out" / "ga2_programs.hex"
    ga2_progs.write_image([ga2_progs.record(r.code, r.ext) for r in records], path)
    found = {}
    for name, sim in (("Icarus", hw.sim_icarus), ("Verilator", hw.sim_verilator)):
        t0 = time.perf_counter()
        rc, out = sim(hw.GA2_FILES, "ga2_tb", defines=(f"EXTW={ga2_progs.ext_words()}", "DUMP"))
        print(f"{name:10s} {ga2_progs.verdict_line(out)} ({time.perf_counter() - t0:.1f} s)")
        counters = ga2_progs.parse_counters(out)
        found[name] = [counters[i] for i in sorted(counters)]
    model = [r.counters.as_list() for r in records]
    same = found["Icarus"] == found["Verilator"] == model
    print(f"counters identical in Icarus, Verilator and the machine model: {same}")
    return 0 if same and toks == expected else 1


if __name__ == "__main__":
    sys.exit(main())
