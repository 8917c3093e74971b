"""The host's cost of one decode step's gather, through the block table against a plain copy.

For a window of W rows (8 .. 4096) a request of 2 W rows is stored in a pool of pages of 16 rows
(K and V of width 16, float64, like the chip host's rows), its block table deliberately scattered
over the pool (pages handed out in a shuffled order, as after a long run of frees and reuses) and
the front half trimmed, as the window rule does. Then, side by side in one run:

  contiguous   ``cache[L - W:L].copy()`` on one contiguous numpy array (what a host without pages does)
  paged numpy  ``ArrayPageTable.gather``: the block-table lookup, then one slice (rows within one
               page) or one ``np.take`` of the pages the rows span
  paged list   ``PageTable.rows`` on a pool of Python lists (the book's pool; the rows of those
               pages are joined into one list and sliced)

Each is timed as the median of repeats; per row and as a ratio to the contiguous copy.

Usage: python tools/gather_bench.py [--repeats N]       (``make bench`` runs it; also ``capra gather``)
"""

from __future__ import annotations

import random
import statistics
import time

import numpy as np
import paged_lm as PL

from .common import Parser, int_range, report_only

PAGE = 16
ROW_SHAPE = (2, 16)  # a (k, v) pair of width D = 16
WINDOWS = (8, 32, 128, 512, 1024, 4096)


def median_seconds(fn, repeats: int) -> float:
    """Median wall time of one call, each sample timing enough calls to last about 0.2 ms."""
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(2e-4 / once))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def scattered_tables(n_rows: int, seed: int):
    """One request of n_rows in a numpy pool, in a list pool and in one contiguous array; the
    pools hand out their pages in the same shuffled order, so the block table is scattered."""
    rows = np.random.default_rng(seed).standard_normal((n_rows, *ROW_SHAPE))
    n_pages = -(-n_rows // PAGE) + 8
    arrayed = PL.ArrayPageTable(n_pages, PAGE, row_shape=ROW_SHAPE)
    listed = PL.PageTable(n_pages, PAGE)
    for pt in (arrayed, listed):
        random.Random(seed).shuffle(pt.free)
        pt.new(0)
        for row in rows:
            pt.append(0, row)
    return arrayed, listed, rows


def measure(W: int, repeats: int) -> tuple[float, float, float]:
    """Seconds for one gather of the last W rows of a 2 W-row request: contiguous, numpy pool, list pool."""
    length = 2 * W
    keep_from = length - W
    arrayed, listed, contiguous = scattered_tables(length, seed=W)
    for pt in (arrayed, listed):
        pt.trim(0, keep_from)  # the window rule: rows before keep_from are released
    if not np.array_equal(arrayed.gather(0, keep_from, length), contiguous[keep_from:length]):
        raise SystemExit("the paged gather and the contiguous copy disagree")
    t_plain = median_seconds(lambda: contiguous[keep_from:length].copy(), repeats)
    t_numpy = median_seconds(lambda: arrayed.gather(0, keep_from, length), repeats)
    t_list = median_seconds(lambda: listed.rows(0, keep_from, length), repeats)
    return t_plain, t_numpy, t_list


def arguments(ap: Parser) -> None:
    ap.add_argument("--repeats", type=int_range(1, 1000), default=15,
                    help="timing samples per measurement, 1..1000 (default 15)")


def main(args) -> int:
    print("one step's gather of the last W rows (k and v, 2 x 16 float64 per row), pages of "
          f"{PAGE} rows, block table scattered; median of {args.repeats} repeats")
    print(f"{'W':>6} {'contiguous':>12} {'paged numpy':>12} {'ratio':>7} {'paged list':>12} {'ratio':>7}"
          f"   (ns per row)")
    for W in WINDOWS:
        t_plain, t_numpy, t_list = measure(W, args.repeats)
        per_row = [1e9 * t / W for t in (t_plain, t_numpy, t_list)]
        print(f"{W:6d} {per_row[0]:12.1f} {per_row[1]:12.1f} {t_numpy / t_plain:6.1f}x {per_row[2]:12.1f} "
              f"{t_list / t_plain:6.1f}x")
    print("ratio = time of the gather / time of the contiguous copy of the same rows, measured in this run")
    return report_only("make test checks that the gather returns the rows of the block table")
