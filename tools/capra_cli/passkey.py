"""Passkey retrieval on the tiny mixed (or windowed-only) model: accuracy table and verdict.

    python tools/passkey_eval.py                       # mixed model, all three depths
    python tools/passkey_eval.py --model windowed      # the control: every layer windowed
    python tools/passkey_eval.py --n-trials 50 --context-lengths 256 1024 4096 --position middle
    python tools/passkey_eval.py --chip --quick        # the int8 chip path next to the float model
    python tools/passkey_eval.py --chip                # the full table on the chip path, 40 trials a cell

Prints one row per (context length, depth) with the 95% Wilson interval, the induction head's
attention on the needle at each length (and at longer lengths than the full decode runs), and a
verdict line against the >= 90% target. Exit status 0 when every cell reaches the target, 1 when
one does not (the windowed-only control is expected to: that is what it shows), 2 for a bad
argument: sizes are checked before any work, a context shorter than the needle and the question,
longer than the cache can hold or than this machine's memory (estimated from the model's shapes: a
window's rings and tables count too), more trials than there are distinct passkeys.
"""

from __future__ import annotations

import os
import time

import numpy as np
from inference.generate import DEFAULT_GLOBAL_CAP_TOKENS
from inference.long_context import (
    CHANCE_ACCURACY,
    POSITIONS,
    TARGET_ACCURACY,
    PasskeyEvaluator,
    needle_attention,
    shortest_prompt,
)
from inference.mixed_lm import ModelConfigError, make_mixed_model

from . import passkey_chip
from .common import BadArgument, Parser, Progress, at_least, distinct, finish, int_range, own_chip

BATCH = 2  # prompts decoded together in a trial batch
PASSKEYS = round(1 / CHANCE_ACCURACY)  # distinct 5-digit passkeys: a cell's trials use distinct ones
GIB = 2**30
CHIP_MAX_LENGTH = 8192  # the chip path's longest prompt (the tiled attention's parts are planned up to it)


def physical_memory() -> int | None:
    """Bytes of RAM in this machine, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_needed(model, length: int, batch: int, cached: bool, window: int) -> int:
    """Bytes a run over a prompt of `length` tokens needs with a window of `window`, estimated from
    the model's shapes: building the model (a positional table of `window` rows per rotary
    frequency, three times over); per token and layer in flight the residual stream, q, the
    attention output, k and v, twice (numpy's temporaries); with the cache also every global
    layer's K and V row (with MixedKVCache's 1.5x growth slack) and every windowed layer's ring of
    `window` rows."""
    item = np.dtype(model.dtype).itemsize
    build = 3 * window * (model.rotary_dims // 2) * 8
    kv_row = 2 * model.n_kv_heads * model.head_dim * item
    stream = (model.d_model + 2 * model.n_heads * model.head_dim) * item + kv_row
    need = build + 2 * batch * length * stream
    if cached:
        n_global = sum(not layer.windowed for layer in model.layers)
        n_windowed = model.n_layers - n_global
        need += batch * (n_global * length * kv_row * 3 // 2 + n_windowed * window * kv_row)
    return need


def check_sizes(args, model) -> None:
    """Refuse, before any work, a size the cache, the model or this machine cannot take. `model`
    gives the shapes (any window): the window is args.window."""
    answer = PasskeyEvaluator(model).max_new_tokens
    cap = DEFAULT_GLOBAL_CAP_TOKENS - answer
    memory = physical_memory()
    need = memory_needed(model, 0, BATCH, True, args.window)
    if memory is not None and need > memory:
        raise BadArgument("--window", f"{args.window} would need about {need / GIB:.1f} GiB for the model and its "
                          f"rings alone (estimated from the model's shapes), more than this machine's "
                          f"{memory / GIB:.1f} GiB")
    for argument, lengths, batch, cached in (("--context-lengths", args.context_lengths, BATCH, True),
                                             ("--probe-lengths", args.probe_lengths, 1, False)):
        for length in lengths:
            if cached and length > cap:
                raise BadArgument(argument, f"{length} is past the cache's cap of {DEFAULT_GLOBAL_CAP_TOKENS} tokens "
                                  f"(inference.generate.DEFAULT_GLOBAL_CAP_TOKENS) less the {answer} the answer takes")
            need = memory_needed(model, length, batch, cached, args.window)
            if memory is not None and need > memory:
                raise BadArgument(argument, f"{length} tokens would need about {need / GIB:.1f} GiB (estimated from "
                                  f"the model's shapes), more than this machine's {memory / GIB:.1f} GiB")


def arguments(parser: Parser) -> None:
    shortest = shortest_prompt()
    parser.add_argument("--n-trials", type=int_range(1, PASSKEYS), default=None,
                        help=f"distinct passkeys per cell, 1..{PASSKEYS} (default 10; with --chip "
                             f"{passkey_chip.FULL_TRIALS}, with --quick {passkey_chip.QUICK_TRIALS})")
    parser.add_argument("--context-lengths", type=at_least(shortest), nargs="+",
                        default=None, metavar="TOKENS",
                        help=f"prompt lengths in tokens, at least {shortest} (the needle and the question) "
                             "(default 256 512 1024 2048 4096; with --quick "
                             f"{' '.join(map(str, passkey_chip.QUICK_LENGTHS))})")
    parser.add_argument("--position", choices=[*POSITIONS, "all"], default="all",
                        help="needle depth (default: all three)")
    parser.add_argument("--seed", type=int_range(0, 2**32 - 1), default=42,
                        help="base seed: passkeys use Random(seed + length)")
    parser.add_argument("--model", choices=["mixed", "windowed"], default=None,
                        help="mixed: windowed/global alternating; windowed: every layer windowed (default mixed; "
                             "not with --chip, whose table has both)")
    parser.add_argument("--window", type=at_least(1), default=128,
                        help="window of the windowed layers (default 128); its rings must fit in memory")
    parser.add_argument("--chip", action="store_true",
                        help="the table on the int8 chip path (GA2's programs; prefill vectorised, decode "
                             "MixedChip.step) next to the float model, for the mixed model and the windowed "
                             "control (--model is not used)")
    parser.add_argument("--quick", action="store_true",
                        help=f"with --chip: lengths {' '.join(map(str, passkey_chip.QUICK_LENGTHS))} and "
                             f"{passkey_chip.QUICK_TRIALS} trials unless given (under a minute on two cores)")
    parser.add_argument("--jobs", type=int_range(1, 8), default=None,
                        help="with --chip: worker processes running cells side by side (default 2)")
    parser.add_argument("--probe-lengths", type=at_least(shortest), nargs="*", default=None,
                        metavar="TOKENS", help="extra lengths where only the induction head's attention is measured "
                                               "(default 16384 65536; not with --chip)")


def main(args) -> int:
    if args.quick and not args.chip:
        raise BadArgument("--quick", "is for the chip path: give --chip too")
    if args.jobs is not None and not args.chip:
        raise BadArgument("--jobs", "is for the chip path: give --chip too")
    if args.chip and args.model is not None:
        raise BadArgument("--model", "the chip path's table has both models (mixed, and the windowed control)")
    if args.chip and args.probe_lengths is not None:
        raise BadArgument("--probe-lengths", "the chip path measures no probes")
    args.model = args.model or "mixed"
    args.jobs = 2 if args.jobs is None else args.jobs
    args.probe_lengths = [16384, 65536] if args.probe_lengths is None else args.probe_lengths
    if args.chip:
        own_chip("--chip")
    if args.context_lengths is None:
        args.context_lengths = list(passkey_chip.QUICK_LENGTHS if args.quick else (256, 512, 1024, 2048, 4096))
    distinct("--context-lengths", args.context_lengths)
    distinct("--probe-lengths", args.probe_lengths)
    if args.n_trials is None:
        args.n_trials = passkey_chip.QUICK_TRIALS if args.quick else passkey_chip.FULL_TRIALS if args.chip else 10
    if args.chip:
        if max(args.context_lengths) > CHIP_MAX_LENGTH:
            raise BadArgument("--context-lengths", f"{max(args.context_lengths)} is past the chip path's "
                              f"{CHIP_MAX_LENGTH} tokens")
        check_sizes(args, make_mixed_model(seed=0, kind="mixed"))
        return passkey_chip.main(args)
    check_sizes(args, make_mixed_model(seed=0, kind=args.model))  # the shapes, before any large array
    try:
        model = make_mixed_model(seed=0, kind=args.model, window=args.window)
    except ModelConfigError as error:
        raise BadArgument("--window", str(error)) from None
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
            progress = Progress(f"context {length}, {position}: trials", args.n_trials)
            result = evaluator.run_trials(length, args.n_trials, position, batch_size=BATCH, progress=progress.step)
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
    failing = [f"{r.context_length}/{r.position}" for r in results if r.accuracy < TARGET_ACCURACY]
    if not failing:
        print(f"verdict: PASS - accuracy >= {TARGET_ACCURACY:.0%} at every length and depth "
              f"(lowest {worst.accuracy:.1%}; lowest 95% bound {lowest_bound:.1%})")
    else:
        print(f"verdict: BELOW TARGET - accuracy < {TARGET_ACCURACY:.0%} at {len(failing)} of {len(results)} cells "
              f"({', '.join(failing)}); lowest {worst.accuracy:.1%} at {worst.context_length}/{worst.position}")
    problems = [f"accuracy below {TARGET_ACCURACY:.0%} at {len(failing)} of {len(results)} cells"] if failing else []
    return finish(problems, checks=sum(r.n_trials for r in results),
                  passed=f"{sum(r.n_trials for r in results)} trials in {len(results)} cells")
