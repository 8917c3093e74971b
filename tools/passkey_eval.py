"""Passkey retrieval on the tiny mixed (or windowed-only) model: accuracy table and verdict.

    python tools/passkey_eval.py                       # mixed model, all three depths
    python tools/passkey_eval.py --model windowed      # the control: every layer windowed
    python tools/passkey_eval.py --n-trials 50 --context-lengths 256 1024 4096 --position middle

Prints one row per (context length, depth) with the 95% Wilson interval, the induction head's
attention on the needle at each length (and at longer lengths than the full decode runs), and a
verdict line against the >= 90% target. The exit code is 0 whichever way the verdict goes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "model"))

from long_context import (  # noqa: E402
    CHANCE_ACCURACY,
    POSITIONS,
    TARGET_ACCURACY,
    PasskeyEvaluator,
    needle_attention,
)
from mixed_lm import make_mixed_model  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-trials", type=int, default=10, help="distinct passkeys per cell (default 10)")
    parser.add_argument("--context-lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096],
                        help="prompt lengths in tokens (default 256 512 1024 2048 4096)")
    parser.add_argument("--position", choices=[*POSITIONS, "all"], default="all",
                        help="needle depth (default: all three)")
    parser.add_argument("--seed", type=int, default=42, help="base seed: passkeys use Random(seed + length)")
    parser.add_argument("--model", choices=["mixed", "windowed"], default="mixed",
                        help="mixed: windowed/global alternating; windowed: every layer windowed")
    parser.add_argument("--window", type=int, default=128, help="window of the windowed layers (default 128)")
    parser.add_argument("--probe-lengths", type=int, nargs="*", default=[16384, 65536],
                        help="extra lengths where only the induction head's attention is measured")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    model = make_mixed_model(seed=0, kind=args.model, window=args.window)
    evaluator = PasskeyEvaluator(model, base_seed=args.seed)
    positions = POSITIONS if args.position == "all" else (args.position,)
    kinds = ", ".join(model.layer_kinds)
    print(f"passkey retrieval, model={args.model} ({model.n_layers} layers: {kinds}; window {model.window}; "
          f"{model.n_heads} query heads, {model.n_kv_heads} KV heads)")
    print(f"{args.n_trials} distinct passkeys per cell from random.Random({args.seed} + length); greedy decode; "
          f"95% interval: Wilson score; chance = {CHANCE_ACCURACY:.3%}")
    print()
    print(f"{'context':>8}  {'depth':<7} {'correct':>9}  {'accuracy':>8}  {'95% interval':>17}  {'seconds':>7}")
    results = []
    for length in args.context_lengths:
        for position in positions:
            start = time.perf_counter()
            result = evaluator.run_trials(length, args.n_trials, position)
            elapsed = time.perf_counter() - start
            results.append(result)
            interval = f"[{result.low:6.1%}, {result.high:6.1%}]"
            print(f"{length:>8}  {position:<7} {result.correct:>4}/{result.n_trials:<4}  {result.accuracy:>8.1%}  "
                  f"{interval:>17}  {elapsed:>7.1f}")
    print()
    print("induction head (layer 1, head 0) at the question's last token, needle at the start:")
    print(f"{'context':>8}  {'on needle':>12}  {'on sink':>9}  {'largest other key':>17}  {'all others':>10}")
    for length in sorted(set(args.context_lengths) | set(args.probe_lengths)):
        probe = needle_attention(model, evaluator, length)
        print(f"{length:>8}  {probe['needle']:>12.9f}  {probe['sink']:>9.2e}  {probe['largest_other']:>17.2e}  "
              f"{probe['others']:>10.2e}")
    print()
    worst = min(results, key=lambda r: (r.accuracy, r.low))
    lowest_bound = min(r.low for r in results)
    if all(r.accuracy >= TARGET_ACCURACY for r in results):
        print(f"verdict: PASS - accuracy >= {TARGET_ACCURACY:.0%} at every length and depth "
              f"(lowest {worst.accuracy:.1%}; lowest 95% bound {lowest_bound:.1%})")
    else:
        failing = [f"{r.context_length}/{r.position}" for r in results if r.accuracy < TARGET_ACCURACY]
        print(f"verdict: BELOW TARGET - accuracy < {TARGET_ACCURACY:.0%} at {len(failing)} of {len(results)} cells "
              f"({', '.join(failing)}); lowest {worst.accuracy:.1%} at {worst.context_length}/{worst.position}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
