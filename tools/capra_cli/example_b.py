"""Chapter 15, example B: what paging, sharing and windows buy.

(1) memory waste: a contiguous reservation per request against pages of several sizes;
(2) prefix sharing with copy-on-write; (3) what a window costs in accuracy on random models;
(4) serving arithmetic (derived, not measured). Writes out/ch15_example_b.json (read by
tools/ch15_figures.py).

Usage: python tools/ch15_example_b.py      (also ``capra example-b``)
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import paged_lm as PL
import tiny_lm as T
from replay import runs

from .common import Parser, report_only

POOL_ROWS = 8192
LONGEST = 2048
PAGE_SIZES = (1, 4, 16, 64, 256)


# ---- (1) memory ----------------------------------------------------------------------------------


def sample_lengths(n: int = 400, seed: int = 11) -> list[int]:
    """Long-tailed request lengths (log-normal), between 16 rows and the longest allowed."""
    R = random.Random(seed)
    return [min(LONGEST, max(16, int(R.lognormvariate(5.2, 0.9)))) for _ in range(n)]


def admit_contiguous(lengths: list[int]) -> tuple[int, int, int]:
    """Requests in order, each reserving the longest allowed length: (held, rows used, rows reserved)."""
    held = min(len(lengths), POOL_ROWS // LONGEST)
    return held, sum(lengths[:held]), held * LONGEST


def admit_paged(lengths: list[int], page: int) -> tuple[int, int, int]:
    """Requests in order, each taking pages as it grows, until one runs out of pages."""
    pt = PL.PageTable(POOL_ROWS // page, page)
    held = used = 0
    for i, length in enumerate(lengths):
        pt.new(i)
        try:
            for _ in range(length):
                pt.append(i, None)
        except PL.OutOfPages:
            pt.release(i)
            break
        held += 1
        used += length
    return held, used, pt.used() * page


def study_memory() -> dict:
    print(f"== 1. memory: how many requests fit?  Pool of {POOL_ROWS:,} cache rows. Request lengths are drawn from "
          f"a long-tailed distribution (mean about 260 rows, longest allowed {LONGEST:,}). The CONTIGUOUS scheme "
          "must reserve the longest allowed length per request because the final length is unknown when the "
          "request starts; the PAGED scheme takes pages as it goes.")
    lengths = sample_lengths()
    print(f"   {len(lengths)} sample lengths: mean {sum(lengths) / len(lengths):.0f}, "
          f"median {sorted(lengths)[len(lengths) // 2]}, max {max(lengths)}")
    print(f"{'scheme':22s} {'requests held':>14s} {'rows used':>10s} {'rows reserved':>14s} {'wasted':>8s}")

    def show(name: str, held: int, used: int, reserved: int) -> None:
        print(f"{name:22s} {held:14d} {used:10d} {reserved:14d} {100 * (reserved - used) / reserved:7.1f}%")

    result = {"contig": list(admit_contiguous(lengths)), "paged": {}}
    show(f"contiguous (reserve {LONGEST})", *result["contig"])
    for page in PAGE_SIZES:
        result["paged"][page] = list(admit_paged(lengths, page))
        show(f"paged, page = {page}", *result["paged"][page])
    print("   (the waste of the paged schemes is the unused tail of each request's last page, on average half a page)")
    return result


# ---- (2) prefix sharing --------------------------------------------------------------------------


def share_prefix(prompt: int, page: int, requests: int = 8, own: int = 40) -> list[int]:
    """Pages used when each request copies the prompt, when it forks a shared one, and the number
    of copy-on-write copies (appends that took a page although the tail page had room)."""
    copied = PL.PageTable(400, page)
    for i in range(requests):
        copied.new(i)
        for _ in range(prompt + own):
            copied.append(i, None)
    shared = PL.PageTable(400, page)
    shared.new("prompt")
    for _ in range(prompt):
        shared.append("prompt", None)
    copies = 0
    for i in range(requests):
        shared.fork("prompt", i)
        for _ in range(own):
            tail_has_room = shared.length[i] % page != 0
            before = shared.used()
            shared.append(i, None)
            copies += tail_has_room and shared.used() > before
    shared.release("prompt")
    return [copied.used(), shared.used(), copies]


def study_sharing() -> dict:
    print("\n== 2. prefix sharing: 8 requests share a system prompt, each then generates 40 rows of its own")
    print(f"{'prompt rows':>12s} {'page':>5s} {'pages, copied':>14s} {'pages, shared':>14s} {'saved':>7s} "
          f"{'copy-on-write copies':>21s}")
    result = {}
    for prompt in (96, 100, 250):
        for page in (16, 40):
            copied, shared, copies = result[f"{prompt}/{page}"] = share_prefix(prompt, page)
            print(f"{prompt:12d} {page:5d} {copied:14d} {shared:14d} {100 * (copied - shared) / copied:6.0f}% "
                  f"{copies:21d}")
    print("   a prompt that ends in the middle of a page (100 rows, page 16 or 40) costs one extra page per "
          "request: the first append copies the shared tail page")
    return result


# ---- (3) accuracy cost of a window ---------------------------------------------------------------


def window_agreement(W: int, seeds=(1, 2, 3), starts=range(16), steps: int = 24) -> list:
    """Teacher-forced on the full-context float tokens: (agreeing argmaxes, decisions, mean logit error)."""
    agree = total = 0
    errors = []
    for seed in seeds:
        m = T.make_model("random", seed)
        for s in starts:
            toks = PL.float_generate(m, s, steps, None)
            kc: list = []
            vc: list = []
            for L in range(1, steps + 1):
                full, k, v, _ = T.float_step(m, toks[L - 1], kc, vc)
                windowed = PL.float_windowed(m, toks[L - 1], kc, vc, W)[0]
                kc.append(k)
                vc.append(v)
                agree += full.index(max(full)) == windowed.index(max(windowed))
                total += 1
                errors.append(math.sqrt(sum((a - b) ** 2 for a, b in zip(full, windowed, strict=True))
                                        / sum(a * a for a in full)))
    return [agree, total, sum(errors) / len(errors)]


def study_window() -> dict:
    print("\n== 3. what a window costs in accuracy: random models, teacher-forced on the full-context float tokens "
          "(3 models x 16 starts x 24 steps); window W against no window")
    print(f"{'W':>4s} {'agreement':>14s} {'mean logit error':>17s}")
    result = {}
    for W in (2, 4, 8, 16, 24):
        agree, total, error = result[W] = window_agreement(W)
        print(f"{W:4d} {agree:6d}/{total} ({100 * agree / total:5.1f}%) {100 * error:16.1f}%")
    print("   W = 24 is the full context here (24 steps), so it is exact by construction")
    return result


# ---- (4) serving arithmetic ----------------------------------------------------------------------

HBM_BYTES = 80e9  # ASSUMED chip memory
WEIGHT_BYTES = 7e9  # ASSUMED 7B-class model in int8
KV_BYTES_PER_TOKEN = 256 * 1024  # ASSUMED, as in Chapters 9 and 14
SERVE_WINDOW = 4096


def study_serving() -> dict:
    print("\n== 4. serving arithmetic (DERIVED, ASSUMED chip: 80 GB; 7B-class model, 7 GB int8 weights, "
          "256 KiB of cache per token, as in Chapters 9 and 14)")
    print(f"{'context':>8s} {'KV GiB, full':>13s} {'max batch, full':>16s} {'KV GiB, window 4096':>20s} "
          f"{'max batch, window':>18s}")

    def max_batch(bytes_per_request: int) -> int:
        return int((HBM_BYTES - WEIGHT_BYTES) // bytes_per_request)

    result = {}
    for context in (2048, 8192, 32768, 131072):
        full = KV_BYTES_PER_TOKEN * context
        windowed = KV_BYTES_PER_TOKEN * min(context, SERVE_WINDOW)
        result[context] = [full, windowed, max_batch(full), max_batch(windowed)]
        print(f"{context:8d} {full / 2**30:13.2f} {max_batch(full):16d} {windowed / 2**30:20.2f} "
              f"{max_batch(windowed):18d}")
    print("   with a window the cache of a request stops growing at the window: the batch the memory allows no "
          "longer shrinks with the context. The price is what a token outside the window can no longer say to a "
          "later one: the model must not need it (or must have been trained with the window).")
    return result


def json_keys(value):
    """JSON wants string keys (page sizes and windows are ints here)."""
    if isinstance(value, dict):
        return {str(k): json_keys(v) for k, v in value.items()}
    return value


def arguments(ap: Parser) -> None:
    """No options: the chapter's studies are fixed."""


def json_path() -> Path:
    """Where the studies' numbers go (out/ch15_example_b.json), for the figures to read."""
    return runs.OUT / "ch15_example_b.json"


def main(args) -> int:
    result = {**study_memory(), "share": study_sharing(), "win": study_window(), "serve": study_serving()}
    runs.write_json(json_path(), {**json_keys(result), "provenance": runs.provenance()})  # what made it
    return report_only("make test checks the page table, the window and the serving engine")
