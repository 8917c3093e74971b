"""Decode attention of one GQA group tiled over the context (capra.tiled_attention) on the machine
model: per context length, the error against the float softmax attention of the same int8 q, K, V,
and the cycles against the word bound of the K/V stream. Exits 1 when an error exceeds --max-rel.

    python tools/tiled_attention.py --contexts 128 1024 4096 16384
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import bootstrap

bootstrap.need("numpy", "capra")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
from capra import isa  # noqa: E402
from capra import tiled_attention as ta  # noqa: E402

IMEM = isa.IMEM_INSTRS


def case(t: int, needle: bool, seed: int, groups: int = 2, dim: int = 64):
    """Random q, K, V (a needle key aligned with the first query when asked), quantized to int8;
    the float reference softmax attention of the dequantized values."""
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", type=int, nargs="+", default=[128, 1024, 4096, 16384])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logit-scale", type=float, default=1 / 8, help="the int8 logits' scale (default 1/8)")
    ap.add_argument("--max-rel", type=float, default=0.05, help="largest relative L2 error accepted")
    args = ap.parse_args(argv)
    if any(not 1 <= t <= 65536 for t in args.contexts):
        ap.error("argument --contexts: each must be in 1..65536")
    if not 1 / 64 <= args.logit_scale < 4:
        ap.error("argument --logit-scale: must be in [1/64, 4)")
    smul = int(round(2**14 * args.logit_scale))
    print(f"{'T':>6} {'keys':>6} {'tile':>5} {'rel err':>8} {'max err':>8} {'cycles':>9} {'word bound':>10} "
          f"{'bound/cycles':>12}", flush=True)
    worst = 0.0
    for t in args.contexts:
        for needle in (True, False):
            start = time.time()
            q8, k8, v8, mult, sv, ref = case(t, needle, args.seed + t)
            qs = 24
            qa = int(round(mult / args.logit_scale * 2**qs))
            shift = int(min(15, np.floor(np.log2(127 / max(np.abs(ref).max() / sv, 1e-9)))))
            prog = ta.build(q8, k8, v8, qa, qs, smul=smul, out_shift=shift)
            words = len(prog.code) // 4
            if words > IMEM:
                print(f"{t:>6} {'needle' if needle else 'random':>6} {prog.tile:>5}  not run: {words} instructions, "
                      f"the instruction memory holds {IMEM}", flush=True)
                continue
            out, m = ta.run(prog)
            got = out * sv / 2**shift
            rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            worst = max(worst, rel)
            bound = ta.word_bound(prog)
            print(f"{t:>6} {'needle' if needle else 'random':>6} {prog.tile:>5} {rel:>8.4f} "
                  f"{np.abs(got - ref).max():>8.4f} {m.counters.cycles:>9} {bound:>10} "
                  f"{bound / m.counters.cycles:>12.3f}   ({time.time() - start:.1f} s)", flush=True)
    if worst > args.max_rel:
        print(f"FAIL: relative error {worst:.4f} > {args.max_rel}")
        return 1
    print(f"PASS: every relative error <= {args.max_rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
