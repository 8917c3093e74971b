"""How closely the chip follows the float model on random models (Chapter 12).

For each seed, decode 16 steps from several start tokens, teacher-forced on the float model's own
tokens so both see the same inputs, and print per step the largest relative logit error
||chip - float|| / ||float|| over the starts, and how often the chip's token equals the float's.
The book's bound is 15% at every step.

Usage: ch12_accuracy.py [--seeds 1 2 3] [--steps 16] [--starts 16]

Exits 0 when every error is within the bound, 1 when one is not (or nothing was compared), 2 for a
bad argument (a start count outside 1..16, more steps than the largest context the chip can run)."""

from __future__ import annotations

import math

import paged_lm as PL
import tiny_lm as T

from .common import Parser, Progress, at_least, check_context, distinct, finish, int_range

BOUND = 0.15  # the book's bound on the relative logit error


def float_run(m: dict, start: int, steps: int) -> tuple[list[int], list[list[float]]]:
    toks, kc, vc, logits = [start], [], [], []
    for _ in range(steps):
        lg, k, v, _ = T.float_step(m, toks[-1], kc, vc)
        kc.append(k)
        vc.append(v)
        logits.append(lg)
        toks.append(lg.index(max(lg)))
    return toks, logits


def arguments(ap: Parser) -> None:
    ap.add_argument("--seeds", type=int_range(0, 2**32 - 1), nargs="+", default=[1, 2, 3, 4, 5], metavar="S",
                    help="random models to try, one per seed 0..2^32-1 (default 1 2 3 4 5)")
    ap.add_argument("--steps", type=at_least(1), default=16, metavar="N",
                    help="decode steps per start (default 16; at most the largest context the chip can run)")
    ap.add_argument("--starts", type=int_range(1, T.V), default=16, metavar="K",
                    help=f"start tokens 0..K-1, K in 1..{T.V} (default {T.V}: every token)")


def main(args) -> int:
    distinct("--seeds", args.seeds)
    check_context("--steps", args.steps, T.make_model("random", args.seeds[0]))
    worst_all, compared = 0.0, 0
    for seed in args.seeds:
        m = T.make_model("random", seed)
        host = PL.PagedChip(m, args.steps, paged=False, n_pages=-(-args.steps // 4) + 1)
        worst = [0.0] * args.steps
        agree = [0] * args.steps
        progress = Progress(f"seed {seed}: starts decoded", args.starts)
        for start in range(args.starts):
            toks, floats = float_run(m, start, args.steps)
            _chip_toks, records = host.generate(start, args.steps, force=toks)
            for i, (r, lg) in enumerate(zip(records, floats, strict=True)):
                err = math.sqrt(sum((a - b) ** 2 for a, b in zip(r["logits"], lg)) / sum(b * b for b in lg))
                worst[i] = max(worst[i], err)
                agree[i] += r["tok"] == lg.index(max(lg))
                compared += 1
            progress.step()
        worst_all = max(worst_all, max(worst))
        total, decisions = sum(agree), args.starts * args.steps
        print(f"seed {seed}: tokens agree {total}/{decisions} ({100 * total / decisions:.1f}%); "
              f"worst relative logit error per step (%):")
        print("   " + " ".join(f"{100 * e:4.1f}" for e in worst))
    verdict = "within" if worst_all < BOUND else "OUTSIDE"
    print(f"worst relative logit error over every seed, start and step: {100 * worst_all:.1f}% "
          f"({verdict} the book's {100 * BOUND:.0f}%)")
    problems = [] if worst_all < BOUND else [f"a relative logit error of {100 * worst_all:.1f}%, over the book's "
                                             f"{100 * BOUND:.0f}%"]
    return finish(problems, checks=compared,
                  passed=f"{compared} steps compared, every logit error within {100 * BOUND:.0f}%")
