"""KV rows the paged host holds for the mixed model, against MixedKVCache and an all-global cache.

One request of the mixed model's layer pattern (windowed, global, windowed, global; W = 128) grows
token by token in a pool of per-layer page groups (``serving.page_groups.PageGroups``): the
windowed group releases the pages its window can no longer reach, the global group keeps all.
The same tokens go into ``MixedKVCache`` (a ring of W slots per windowed layer, a growing array
per global layer) and into a MixedKVCache whose layers are all global. At each context it prints,
summed over the four layers:

  MixedKVCache     rows the numpy cache holds (``seq_len`` per layer: its stored rows, not its
                   allocation)
  paged held       rows the page groups still hold: from the first row of each group's first page
                   to the end (``rows_held``)
  on pages         the capacity of the pages held, the last page's empty rows included
  all-global       rows an all-global MixedKVCache holds
  saving           all-global / paged held
  analytical       kv-bench's formula for this pattern: 2T / (min(W, T) + T)

It is bookkeeping, no attention: a row is one number per K and V (the counts do not depend on
what a row holds).

Usage: python tools/page_groups_bench.py [--contexts N ...] [--page P]     (also ``capra page-groups``)
"""

from __future__ import annotations

import dataclasses

import numpy as np
from inference.generate import MixedKVCache
from inference.mixed_lm import make_mixed_model
from replay import runs
from serving.page_groups import PageGroups

from .common import Parser, Progress, distinct, int_range, report_only
from .kv_bench import FULL_SIZE_ARCH, analytical_bytes

CONTEXTS = (1024, 4096, 16384, 65536, 131072)
MAX_CONTEXT = 1 << 20


def cache_rows(cache: MixedKVCache, n_layers: int) -> int:
    return sum(cache.seq_len(layer) for layer in range(n_layers))


def measure(contexts: list[int], page: int) -> list[dict]:
    """Grow one request to the largest context; the counts at each context asked for."""
    model = make_mixed_model()
    windows = [model.window if layer.windowed else None for layer in model.layers]
    all_global = dataclasses.replace(model, layers=[dataclasses.replace(w, windowed=False) for w in model.layers])
    last = max(contexts)
    probe = PageGroups(windows, 1, page)
    pg = PageGroups(windows, probe.pages_needed(last), page)
    pg.new(0)
    caches = {"mixed": (MixedKVCache(), model), "global": (MixedKVCache(), all_global)}
    kv = np.zeros(pg.row_shape)
    progress = Progress("tokens appended", last)
    results = []
    fed = 0
    for context in sorted(contexts):
        chunk = np.zeros((1, 1, context - fed, 1), dtype=np.float32)
        for cache, m in caches.values():
            for layer, weights in enumerate(m.layers):
                cache.append(layer, chunk, chunk, weights.windowed, m.window)
        for _ in range(context - fed):
            pg.append(0, kv)
            progress.step()
        fed = context
        results.append({
            "tokens": context,
            "mixed": cache_rows(caches["mixed"][0], model.n_layers),
            "paged": sum(pg.rows_held(0, layer) for layer in range(model.n_layers)),
            "on_pages": sum(pg.pages_held(0, g) * page * len(g.layers) for g in pg.groups),
            "global": cache_rows(caches["global"][0], model.n_layers),
            "analytical": analytical_ratio(context, model.n_layers, sum(w is not None for w in windows),
                                           model.window),
        })
    return results


def analytical_ratio(tokens: int, layers: int, windowed: int, window: int) -> float:
    full, mixed = analytical_bytes(tokens, layers, windowed, window, 1)
    return full / mixed


def arguments(ap: Parser) -> None:
    ap.add_argument("--contexts", type=int_range(1, MAX_CONTEXT), nargs="+", default=list(CONTEXTS),
                    metavar="N",
                    help=f"context lengths in tokens, 1..{MAX_CONTEXT} (default {' '.join(map(str, CONTEXTS))})")
    ap.add_argument("--page", type=int_range(1, 1024), default=16, help="rows per page, 1..1024 (default 16)")


def main(args) -> int:
    distinct("--contexts", args.contexts)
    model = make_mixed_model()
    kinds = ", ".join(model.layer_kinds)
    print(f"KV rows held, summed over the mixed model's {model.n_layers} layers ({kinds}; W = {model.window}), "
          f"one request, pages of {args.page} rows")
    print(f"{'tokens':>8} {'MixedKVCache':>13} {'paged held':>11} {'vs cache':>9} {'on pages':>9} "
          f"{'all-global':>11} {'saving':>7} {'analytical':>11}")
    for r in measure(args.contexts, args.page):
        print(f"{r['tokens']:>8} {r['mixed']:>13,} {r['paged']:>11,} {r['paged'] / r['mixed'] - 1:>+8.2%} "
              f"{r['on_pages']:>9,} {r['global']:>11,} {r['global'] / r['paged']:>6.2f}x {r['analytical']:>10.2f}x")
    arch = FULL_SIZE_ARCH
    chapter = analytical_ratio(131072, arch["layers"], arch["windowed"], arch["window"])
    print(f"vs cache = paged held / MixedKVCache - 1; saving = all-global / paged held; analytical = 2T / (min(W, T) "
          f"+ T), kv-bench's formula; the chapter's full-size design ({arch['layers']} layers, {arch['windowed']} "
          f"windowed, W = {arch['window']}) gives {chapter:.2f}x at 131072 tokens (tools/kv_cache_benchmark.py)")
    print(runs.footer({**runs.provenance(), "chip": "host bookkeeping, no chip run"}))
    return report_only("make test checks the page groups against a shadow model and MixedKVCache")
