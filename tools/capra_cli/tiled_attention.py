"""Decode attention of one GQA group tiled over the context, on the machine model.

    python tools/tiled_attention.py                          # contexts 128 1024 4096 16384
    python tools/tiled_attention.py --contexts 128 1024      # (also ``capra tiled-attention``)

For each context T, two cases (a needle key aligned with the first query, and random keys): the
query rows, K and V are drawn, quantized to int8, and the program of ``capra.tiled_attention``
streams K and V from external memory in tiles with the online-softmax modes of SMAX. It prints the
relative error against the float softmax attention of the same int8 values, the cycles, and the
word bound of the K/V stream (the cycles the external port needs to bring every K and V word
once). A program longer than the instruction memory is reported as not run, not as a pass.
Each program runs with an external memory of its own size (K and V alone take 2 T D / 4 words),
so a memory size asked for in GA2_CONFIG or GA2_EXT is refused; the chip's other settings hold.

Exit status 0 when every case that ran is within --max-rel, 1 when one is not or none ran, 2 for a
bad argument.
"""

from __future__ import annotations

import time

import numpy as np
from capra import isa
from capra import tiled_attention as ta

from .common import Parser, distinct, finish, in_range, int_range, memory_per_program

CONTEXTS = (128, 1024, 4096, 16384)
MAX_CONTEXT = 65536


def case(t: int, needle: bool, seed: int, groups: int = 2, dim: int = 64):
    """Random q, K, V (with `needle`, one key aligned with the first query), quantized to int8, and
    the float softmax attention of the dequantized values: the reference the chip is held to."""
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((groups, dim)), rng.standard_normal((t, dim)), rng.standard_normal((t, dim))
    if needle:
        k[t // 3] = 2.5 * q[0] / np.linalg.norm(q[0]) * np.sqrt(dim)
    scales = [np.abs(x).max() / 127 for x in (q, k, v)]
    q8, k8, v8 = [np.clip(np.round(x / s), -127, 127).astype(np.int64) for x, s in zip((q, k, v), scales)]
    sq, sk, sv = scales
    logits = (q8 * sq) @ (k8 * sk).T / np.sqrt(dim)
    p = np.exp(logits - logits.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ (v8 * sv)
    return q8, k8, v8, sq * sk / np.sqrt(dim), sv, ref


def arguments(ap: Parser) -> None:
    ap.add_argument("--contexts", type=int_range(1, MAX_CONTEXT), nargs="+", default=list(CONTEXTS), metavar="T",
                    help=f"context lengths in keys, 1..{MAX_CONTEXT} (default {' '.join(map(str, CONTEXTS))})")
    ap.add_argument("--seed", type=int_range(0, 2**31), default=0, help="the cases' seed (default 0)")
    ap.add_argument("--logit-scale", type=in_range(float, 1 / 64, 3.99), default=1 / 8,
                    help="the int8 logits' scale, 0.015625..3.99 (1/64 .. 3.99; default 0.125)")
    ap.add_argument("--max-rel", type=in_range(float, 0.0, 1.0), default=0.05,
                    help="the largest relative L2 error accepted, 0..1 (default 0.05)")


def main(args) -> int:
    memory_per_program("tiled-attention")
    distinct("--contexts", args.contexts)
    smul = int(round(2**14 * args.logit_scale))
    print(f"{'T':>6} {'case':>6} {'tile':>5} {'rel err':>8} {'max err':>8} {'cycles':>9} {'word bound':>10} "
          f"{'bound/cycles':>12}", flush=True)
    problems, checks = [], 0
    for t in args.contexts:
        for needle in (True, False):
            kind = "needle" if needle else "random"
            start = time.time()
            q8, k8, v8, mult, sv, ref = case(t, needle, args.seed + t)
            qs = 24
            qa = int(round(mult / args.logit_scale * 2**qs))
            # The output shift stands in for a calibrated output scale: taken from the reference.
            shift = int(min(15, np.floor(np.log2(127 / max(np.abs(ref).max() / sv, 1e-9)))))
            prog = ta.build(q8, k8, v8, qa, qs, smul=smul, out_shift=shift)
            instrs = len(prog.code) // 4
            if instrs > isa.IMEM_INSTRS:
                print(f"{t:>6} {kind:>6} {prog.tile:>5}  not run: {instrs} instructions, the instruction memory "
                      f"holds {isa.IMEM_INSTRS}", flush=True)
                continue
            out, m = ta.run(prog)
            got = out * sv / 2**shift
            rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            checks += 1
            if rel > args.max_rel:
                problems.append(f"T={t} {kind}: relative error {rel:.4f} > {args.max_rel}")
            bound = ta.word_bound(prog)
            print(f"{t:>6} {kind:>6} {prog.tile:>5} {rel:>8.4f} {np.abs(got - ref).max():>8.4f} "
                  f"{m.counters.cycles:>9} {bound:>10} {bound / m.counters.cycles:>12.3f}   "
                  f"({time.time() - start:.1f} s)", flush=True)
    return finish(problems, checks, f"{checks} cases within a relative error of {args.max_rel}")
