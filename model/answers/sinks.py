"""Exercise 3 of Chapter 15, worked: attention sinks on the paged host.

With a window of W tokens and S sink rows (1 <= S <= W - 1), step L reads min(L, W) - 1 previous
rows: all of rows 0 .. L-2 while L <= W, and after that the sink rows 0 .. S-1 and the last
W - 1 - S rows, L-1-(W-1-S) .. L-2. No row is read twice, and the context is still min(L, W), so
the compiled programs are the window's own. The four places the exercise names:

(a) the gather: ``gather_rows`` reads the two ranges of ``read_ranges`` through the block table
    and joins them into one array, the ``kc`` / ``vc`` of the step (``SinkChip.generate``);
(b) the release: ``PageTable.trim`` drops pages from the front of the block table only, and the
    sink rows live in its first page, so front-only trim can release nothing at all (the pages
    grow as with no window: ``SinkChip(release="front")``). ``SinkPageTable.release_rows`` releases
    the whole pages lying strictly between the sink rows and the first recent row instead
    (``release="middle"``, the default), keeping the reference counts and the free list right;
(c) the float reference: ``sink_rows`` (``paged_lm.window_rows`` with sinks), ``float_sinks`` and
    ``float_generate_sinks``;
(d) the calibration: ``calibrate_sinks`` gives ``host.calibrate`` the same row rule
    (``pick_rows``), so each program is calibrated on the rows the gather will give it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Hashable, Iterable, Sequence

import host
import numpy as np
import paged_lm as PL
import tiny_lm as T
from capra.checks import integer

RELEASES = ("middle", "front")  # where SinkChip releases pages: between sinks and recent rows, or front only


def check_sinks(W, S) -> tuple[int, int]:
    """(W, S) as ints: a window W >= 2 and 1 <= S <= W - 1 sink rows (the sinks and at least the
    new token fit in the window), else ValueError naming the one that does not."""
    W = integer(W, "window W", 2)
    S = integer(S, "sinks S", 1)
    if S > W - 1:
        raise ValueError(f"sinks S={S} do not fit a window W={W}: a step reads at most W - 1 = {W - 1} previous rows")
    return W, S


# ---- (a) and (c): which rows a step reads --------------------------------------------------------


def read_ranges(L: int, W: int, S: int) -> list[tuple[int, int]]:
    """The previous rows step L (from 1) reads, as ranges lo .. hi-1 in the order they are joined:
    rows 0 .. L-2 while L <= W, else the sinks 0 .. S-1 and the recent rows L-W+S .. L-2."""
    if L <= W:
        return [(0, L - 1)]
    return [(0, S), (L - W + S, L - 1)]


def pick_rows(cached: Sequence, count: int, S: int) -> list:
    """`count` of the cached rows (a list, oldest first): all of them when there are no more,
    else the first S and the last count - S."""
    if len(cached) <= count:
        return list(cached)
    return list(cached[:S]) + list(cached[len(cached) - (count - S):])


def sink_rows(kc: Sequence, W: int, S: int) -> list:
    """``paged_lm.window_rows`` with sinks: of the whole cache, the rows a step may attend."""
    W, S = check_sinks(W, S)
    return pick_rows(kc, W - 1, S)


def float_sinks(m: dict, tok: int, kc, vc, W: int, S: int):
    """One float decode step over the sink rows and the recent ones (given the whole cache);
    the same result as ``tiny_lm.float_step`` (logits, k, v, info)."""
    return T.float_step(m, tok, sink_rows(kc, W, S), sink_rows(vc, W, S))


def float_generate_sinks(m: dict, start: int, n: int, W: int, S: int) -> list[int]:
    """Greedy float decode of n tokens after start with window W and S sinks: [start, t1, ..., tn]."""
    toks = [start]
    kc: list = []
    vc: list = []
    for _ in range(n):
        logits, k, v, _ = float_sinks(m, toks[-1], kc, vc, W, S)
        kc.append(k)
        vc.append(v)
        toks.append(logits.index(max(logits)))
    return toks


def gather_rows(cache: PL.ArrayPageTable, rid: Hashable, L: int, W: int, S: int) -> np.ndarray:
    """(a) The rows step L reads, gathered through the block table: one gather per range of
    ``read_ranges``, joined in that order (sinks first)."""
    parts = [cache.gather(rid, lo, hi) for lo, hi in read_ranges(L, W, S) if hi > lo]
    return np.concatenate(parts)


# ---- (b) the release -----------------------------------------------------------------------------


class SinkPageTable(PL.ArrayPageTable):
    """An ArrayPageTable that can also release whole pages from the middle of a block table.

    ``released[rid]`` lists, in order, the logical pages of rid that were given back (by
    ``release_rows`` or ``trim``); ``dropped[rid]`` counts them all, so a block table still holds
    exactly ``ceil(length / page) - dropped`` pages (paged_tests.pool_invariants). Logical page q
    is entry ``q - (released pages before q)`` of the block table; reading a row of a released page
    raises RowsReleased. Every operation still checks first and commits second.
    """

    def __init__(self, n_pages: int, page: int = 4, row_shape: Sequence[int] = (), dtype=np.float64) -> None:
        super().__init__(n_pages, page, row_shape, dtype)
        self.released: dict[Hashable, list[int]] = {}

    def new(self, rid: Hashable) -> None:
        super().new(rid)
        self.released[rid] = []

    def fork(self, src: Hashable, dst: Hashable) -> None:
        super().fork(src, dst)
        self.released[dst] = list(self.released[src])

    def release(self, rid: Hashable) -> None:
        super().release(rid)
        del self.released[rid]

    def release_rows(self, rid: Hashable, lo: int, hi: int) -> list[int]:
        """Give back every held page whose rows all lie in lo .. hi-1, in block-table order (the
        oldest first, as trim does); returns their logical page numbers. A page holding one row
        outside the range stays. RowOutOfRange if lo .. hi is not a range within 0 .. length."""
        self._require(rid)
        if not (PL._is_int(lo) and PL._is_int(hi)) or not 0 <= lo <= hi <= self.length[rid]:
            raise PL.RowOutOfRange(f"request {rid!r}: release rows {lo!r}..{hi!r} outside 0..{self.length[rid]}")
        first = -(-lo // self.page)  # the first page that starts at or after lo
        gone = [q for q in range(first, hi // self.page) if q not in self.released[rid]]
        for q in gone:
            position = q - bisect_left(self.released[rid], q)
            self._unref(self.table[rid].pop(position))
            insort(self.released[rid], q)
            self.dropped[rid] += 1
        return gone

    def trim(self, rid: Hashable, keep_from: int) -> None:
        """PageTable.trim, for a table that may have a hole: the pages entirely before keep_from."""
        self._require(rid)
        integer(keep_from, f"request {rid!r}: trim keep_from", 0, PL.RowOutOfRange)
        if not 0 <= keep_from <= self.length[rid]:
            raise PL.RowOutOfRange(f"request {rid!r}: trim keep_from={keep_from} outside 0..{self.length[rid]}")
        self.release_rows(rid, 0, keep_from)

    def _span(self, rid: Hashable, lo: int, hi: int) -> tuple[list[int], int]:
        if lo == hi:
            return [], 0
        gone = self.released[rid]
        pages = [self.table[rid][q - bisect_left(gone, q)] for q in range(lo // self.page, (hi - 1) // self.page + 1)]
        return pages, lo % self.page

    def _check_range(self, rid: Hashable, lo: int, hi: int) -> None:
        self._require(rid)
        if not (PL._is_int(lo) and PL._is_int(hi)):
            raise PL.RowOutOfRange(f"request {rid!r}: rows {lo!r}..{hi!r} asked for; row indices are integers")
        n = self.length[rid]
        if not 0 <= lo <= hi <= n:
            raise PL.RowOutOfRange(f"request {rid!r}: rows {lo}..{hi - 1} asked for, it has rows 0..{n - 1}")
        if lo == hi:
            return
        gone = self.released[rid]
        i = bisect_left(gone, lo // self.page)
        if i < len(gone) and gone[i] <= (hi - 1) // self.page:
            q = gone[i]
            raise PL.RowsReleased(f"request {rid!r}: rows {q * self.page}..{(q + 1) * self.page - 1} "
                                  f"(page {q} of its table) were released")


def first_recent(L: int, W: int, S: int) -> int:
    """After step L, the first recent row step L + 1 reads (rows S .. that - 1 may be released)."""
    return max(S, L + 1 - W + S)


# ---- (d) the calibration -------------------------------------------------------------------------


def calibrate_sinks(m: dict, steps: int, W: int, S: int, starts: Iterable[int] = range(T.V)):
    """``paged_lm.calibrate`` with sinks: the float decode with the sinks' row rule, so the input
    sets of the program of context n hold the rows the gather gives it. (calib, ranges)."""
    W, S = check_sinks(W, S)
    cal = host.calibrate(m, steps, [W], starts, attended=lambda cached, n: pick_rows(cached, n - 1, S))
    return cal.feeds, {group: cal.ranges[group] for group in PL.SHARED_RANGES}


# ---- the host ------------------------------------------------------------------------------------


class SinkChip(PL.PagedChip):
    """``paged_lm.PagedChip`` with S sink rows: the same programs (context min(L, W)), a gather of
    two ranges, a calibration on those rows, and the release ``release`` names:

        "middle"  after step L, the pages lying entirely in rows S .. first_recent(L) - 1 go
        "front"   ``trim`` as the chapter's host calls it: the first row step L + 1 reads is row 0,
                  so nothing is ever released

    ``generate`` is PagedChip's, step for step: what changes is the page table it opens
    (``TABLE``), the rows a step reads (``gather_step``) and what goes after it (``release_after``).
    """

    TABLE = SinkPageTable

    def __init__(self, m: dict, steps: int, W: int, S: int, page: int = 4, n_pages: int = 64,
                 starts: Iterable[int] = range(T.V), paged: bool = True, release: str = "middle") -> None:
        W, S = check_sinks(W, S)
        if release not in RELEASES:
            raise ValueError(f"release={release!r}: use one of {', '.join(RELEASES)}")
        starts = list(starts)
        super().__init__(m, steps, W, page, n_pages, starts, paged)
        self.S = S
        self.release = release
        # PagedChip calibrated on the window's last rows; the programs must see the sinks' rows.
        self.calib, self.ranges = calibrate_sinks(m, self.steps, W, S, starts)

    def trim_point(self, L: int) -> int:
        """After step L, the first row the next step reads: row 0, a sink, at every step."""
        return 0

    def gather_step(self, cache: SinkPageTable, plain: list[np.ndarray], L: int, nc: int) -> np.ndarray:
        """(a) The rows step L reads: the sinks, then the most recent rows (``gather_rows``; the
        reference host picks the same from its plain list with ``sink_rows``)."""
        if self.paged:
            return gather_rows(cache, 0, L, self.W, self.S)
        return np.asarray(sink_rows(plain, self.W, self.S))

    def release_after(self, cache: SinkPageTable, L: int) -> None:
        """(b) After step L: the pages no later step reads go, as far as ``release`` allows."""
        if self.release == "front":
            cache.trim(0, self.trim_point(L))
        else:
            hi = min(first_recent(L, self.W, self.S), L)  # L rows are written after step L
            cache.release_rows(0, min(self.S, hi), hi)
