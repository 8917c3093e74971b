#!/usr/bin/env python3
"""Chapter 12: decode 32 tokens from token 0 with the structured model, one program per context
size, and replay all 32 programs on Icarus and Verilator.

Usage: ch12_run.py [--steps N] [--start T]

Passes (exit 0) only when the rule f(t) = 5t + 3 mod 16 holds on the machine model, both
simulators PASS the replay of every program, and their counters equal the machine model's; exits 1
otherwise, 2 for a bad argument (a start token outside the vocabulary, more steps than the largest
context the chip can run, a bad GA2_EXT)."""

from __future__ import annotations

import os
import sys
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


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--steps", type=cli.at_least(1), default=32, metavar="N",
                    help="decode steps = programs replayed (default 32; at most the largest context "
                         "the chip can run, checked by compiling it)")
    ap.add_argument("--start", type=cli.int_range(0, T.V - 1), default=0, metavar="T",
                    help=f"the first token, 0..{T.V - 1} (default 0)")
    args = ap.parse_args(argv)
    extw = cli.ext_words()
    m = T.make_model("structured")
    limits.check_context(ap, "--steps", args.steps, m)
    hw.require_simulators()

    if args.steps > 64:
        cli.note(f"decoding {args.steps} steps on the machine model")
    host = decode.ChipHost(m, args.steps)
    toks, records = host.generate(args.start, args.steps)
    expected = [args.start]
    for _ in range(args.steps):
        expected.append(T.f_next(expected[-1]))
    print(f"tokens: {toks}")
    print(f"rule f(t) = 5t + 3 mod 16 holds on the machine model: {toks == expected}; "
          f"programs compiled: {len(host.progs)}")
    problems = [] if toks == expected else ["the rule f(t) = 5t + 3 mod 16 does not hold on the machine model"]

    path = Path(hw.ROOT) / "out" / "ga2_programs.hex"
    ga2_progs.write_image([ga2_progs.record(r.code, r.ext, extw) for r in records], path)
    replays = hw.replay(path, len(records), extw)
    for r in replays:
        print(f"{r.simulator:10s} {r.line} ({r.seconds:.1f} s)")
        problems += r.problems
    model = [r.counters.as_list() for r in records]
    same = all(r.counters == model for r in replays)
    print(f"counters identical in Icarus, Verilator and the machine model: {same}")
    if not same:
        problems.append("the simulators' counters differ from the machine model's")
    return cli.finish(problems, checks=len(records) * len(replays),
                      passed=f"{len(records)} programs replayed in both simulators, counters equal to the "
                             "machine model's")


if __name__ == "__main__":
    sys.exit(cli.run(main))
