"""Chapter 15: a paged KV cache and sliding-window attention for the tiny language model.

The page table (host side)
    The cache is stored in fixed-size *pages* of ``page`` rows; one row is whatever the host keeps
    per token (for the chip, the token's key and value). A request owns a *block table*: the list of
    physical pages that hold its rows, in logical order. Pages come from one shared pool, so
    requests of different lengths share memory without reserving a contiguous block each. A page
    can be *shared* by several requests (a common prompt) and carries a reference count; a request
    that must write into a shared page first copies it (*copy-on-write*). Pages that lie entirely
    before the attention window are given back (*trim*) and reused.

    Every operation checks first and commits second: a call that raises (``OutOfPages``, an unknown
    request, rows already released, ...) leaves every attribute exactly as it was.

The host (``PagedChip``)
    The chip never sees a page. For each decode step the host gathers the rows the window needs
    through the block table into the contiguous ``kc`` / ``vc`` inputs of the compiled program of
    Chapters 11-12. With a window of W tokens the contexts that occur are 1 .. W, so W programs are
    compiled and every step after the window fills runs the same program: the cost of a step stops
    growing.

The chapter's listings call ``OutOfPages``, ``PageTable``, ``float_windowed``, ``float_generate``,
``calibrate`` and ``PagedChip`` by these names; docs/paged_host.md describes them and the exercises.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterable, Sequence

import capra as C
import host
import numpy as np
import tiny_lm as T
from capra.checks import flag, integer

# ---- errors --------------------------------------------------------------------------------------


class PagedError(Exception):
    """Base of every page-table error; the table is unchanged when one is raised."""


class OutOfPages(PagedError):
    """The pool has no free page for an append (or for the private copy of a shared page)."""


class UnknownRequest(PagedError, LookupError):
    """The request id was never created, or has already been released."""


class RequestExists(PagedError):
    """``new`` or ``fork`` onto an id that is already in the table (it would leak its pages)."""


class RowsReleased(PagedError):
    """A read asked for rows whose pages were already given back by ``trim``."""


class RowOutOfRange(PagedError, IndexError):
    """A row index outside 0 .. length, or a range with lo > hi."""


class BadRow(PagedError, ValueError):
    """A row that does not fit an ArrayPageTable's fixed row shape."""


# ---- the page table ------------------------------------------------------------------------------

MAX_POOL_ROWS = 1 << 22  # n_pages * page: 4M rows; a larger pool is a mistake, not a cache to build
MAX_POOL_BYTES = 1 << 30  # an ArrayPageTable's numpy pool


def _is_int(value) -> bool:
    """An index or a size: an int or a numpy integer, never a bool (capra.checks.integer's rule)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


class PageTable:
    """A pool of ``n_pages`` pages of ``page`` rows, and one block table per request.

    Attributes (the book reads them directly):
        page      rows per page
        pool      the physical pages: ``pool[p][off]`` is one row (any Python object)
        ref       ``ref[p]``: how many block-table entries name page p (0 means free)
        free      the free list, used as a stack: the next page handed out is ``free[-1]`` and a
                  freed page is pushed there, so the page freed last is the first one reused
        table     ``table[rid]``: the physical pages of request rid that are still held, in order
        length    ``length[rid]``: rows ever appended to rid (released rows included)
        dropped   ``dropped[rid]``: pages released from the front of rid's table by ``trim``

    Where a row lives (``_span`` is the one place this is computed): logical row i of rid is at
    offset ``i % page`` of physical page ``table[rid][i // page - dropped[rid]]``.

    Invariants (checked by paged_tests after every random operation): ref[p] equals the number of
    block-table entries naming p; a page is on the free list exactly when ref[p] == 0, and at most
    once.
    """

    def __init__(self, n_pages: int, page: int = 4) -> None:
        if not (_is_int(n_pages) and _is_int(page)) or n_pages < 1 or page < 1:
            raise ValueError(f"PageTable needs n_pages >= 1 and page >= 1, got n_pages={n_pages!r}, page={page!r}")
        if n_pages * page > MAX_POOL_ROWS:
            raise ValueError(f"a pool of n_pages={n_pages} x page={page} = {n_pages * page} rows is more than "
                             f"{MAX_POOL_ROWS} rows")
        n_pages, page = int(n_pages), int(page)
        self.page = page
        self.pool = [[None] * page for _ in range(n_pages)]
        self.ref = [0] * n_pages
        self.free = list(range(n_pages - 1, -1, -1))  # page 0 on top: handed out first
        self.table: dict[Hashable, list[int]] = {}
        self.length: dict[Hashable, int] = {}
        self.dropped: dict[Hashable, int] = {}

    # -- the operations --

    def new(self, rid: Hashable) -> None:
        """Start request rid with an empty block table (no page is taken until its first append).

        Raises RequestExists if rid is live.
        """
        if rid in self.table:
            raise RequestExists(f"request {rid!r} already exists; release it first")
        self.table[rid] = []
        self.length[rid] = 0
        self.dropped[rid] = 0

    def append(self, rid: Hashable, row) -> None:
        """Write the next row of rid.

        A new page is taken when the last page is full (or there is none). If the last page is
        shared, it is first copied into a private page (copy-on-write), so the other owners never
        see the write. Either way needs one free page: if there is none, OutOfPages is raised and
        nothing changes.
        """
        self._require(rid)
        t = self.table[rid]
        off = self.length[rid] % self.page
        starts_page = off == 0
        shared_tail = not starts_page and self.ref[t[-1]] > 1
        if (starts_page or shared_tail) and not self.free:
            raise OutOfPages(f"request {rid!r}: no free page for row {self.length[rid]} "
                             f"(pool of {len(self.ref)} pages of {self.page} rows, all in use)")
        if starts_page:
            t.append(self._alloc())
        elif shared_tail:
            shared = t[-1]
            private = self._alloc()
            self.pool[private][:] = self.pool[shared]
            self._unref(shared)
            t[-1] = private
        self.pool[t[-1]][off] = row
        self.length[rid] += 1

    def rows(self, rid: Hashable, lo: int, hi: int) -> list:
        """The rows with logical indices lo <= i < hi, read through the block table.

        Raises UnknownRequest, RowOutOfRange (outside 0 .. length) or RowsReleased (below the
        first row still held).
        """
        self._check_range(rid, lo, hi)
        pages, start = self._span(rid, lo, hi)
        held = [row for p in pages for row in self.pool[p]]  # every row of those pages, in order
        return held[start : start + hi - lo]

    def trim(self, rid: Hashable, keep_from: int) -> None:
        """Release the pages that lie entirely before logical row keep_from.

        A page is released only when every row on it is below keep_from, i.e. when
        ``(dropped + 1) * page <= keep_from``: a page that still holds one needed row stays.
        keep_from must lie in 0 .. length (RowOutOfRange otherwise); asking to keep from a row
        already released is not an error, there is simply nothing left to release.
        """
        self._require(rid)
        integer(keep_from, f"request {rid!r}: trim keep_from", 0, RowOutOfRange)
        if not 0 <= keep_from <= self.length[rid]:
            raise RowOutOfRange(f"request {rid!r}: trim keep_from={keep_from} outside 0..{self.length[rid]}")
        t = self.table[rid]
        while t and (self.dropped[rid] + 1) * self.page <= keep_from:
            self._unref(t.pop(0))
            self.dropped[rid] += 1

    def fork(self, src: Hashable, dst: Hashable) -> None:
        """Make dst a copy of src that shares all of src's pages (no row is copied).

        Raises UnknownRequest for src and RequestExists for dst.
        """
        self._require(src)
        if dst in self.table:
            raise RequestExists(f"cannot fork {src!r} onto {dst!r}: request {dst!r} already exists")
        self.table[dst] = list(self.table[src])
        self.length[dst] = self.length[src]
        self.dropped[dst] = self.dropped[src]
        for p in self.table[dst]:
            self.ref[p] += 1

    def release(self, rid: Hashable) -> None:
        """Drop request rid; each of its pages goes back to the free list when its last owner lets go."""
        self._require(rid)
        for p in self.table.pop(rid):
            self._unref(p)
        del self.length[rid]
        del self.dropped[rid]

    def used(self) -> int:
        """Physical pages in use (referenced by at least one block table)."""
        return len(self.ref) - len(self.free)

    # -- helpers --

    def _span(self, rid: Hashable, lo: int, hi: int) -> tuple[list[int], int]:
        """The physical pages that hold rows lo .. hi-1 of rid, and the offset of row lo in the first.

        The block-table lookup: row i is on entry ``i // page - dropped`` of the table (the pages
        trim released are gone from its front), at offset ``i % page``.
        """
        if lo == hi:
            return [], 0
        drop = self.dropped[rid]
        first = lo // self.page - drop
        last = (hi - 1) // self.page - drop
        return self.table[rid][first : last + 1], lo % self.page

    def _alloc(self) -> int:
        """Take the page on top of the free list (append has checked that there is one)."""
        p = self.free.pop()
        self.ref[p] = 1
        return p

    def _unref(self, p: int) -> None:
        """One owner fewer; the last one out puts the page back on the free list."""
        self.ref[p] -= 1
        if self.ref[p] == 0:
            self.free.append(p)

    def _require(self, rid: Hashable) -> None:
        if rid not in self.table:
            raise UnknownRequest(f"request {rid!r} is not in the page table (never created, or already released)")

    def _check_range(self, rid: Hashable, lo: int, hi: int) -> None:
        self._require(rid)
        if not (_is_int(lo) and _is_int(hi)):
            raise RowOutOfRange(f"request {rid!r}: rows {lo!r}..{hi!r} asked for; row indices are integers")
        n, first_kept = self.length[rid], self.dropped[rid] * self.page
        if not 0 <= lo <= hi <= n:
            raise RowOutOfRange(f"request {rid!r}: rows {lo}..{hi - 1} asked for, it has rows 0..{n - 1}")
        if lo < first_kept:
            raise RowsReleased(f"request {rid!r}: row {lo} was released by trim (rows before {first_kept} are gone)")


class ArrayPageTable(PageTable):
    """A PageTable whose pool is one numpy array, for fixed-shape numeric rows (the K/V cache).

    ``pool`` has shape ``(n_pages, page, *row_shape)`` and rows are stored as ``dtype`` (float64 by
    default, which keeps the chip's dequantized k/v values exact). The bookkeeping, the lookup and
    the errors are PageTable's; what this class adds is ``gather``, which returns the rows as one
    new array in one or two numpy calls instead of one Python lookup per row, and a shape check
    on append.
    """

    def __init__(self, n_pages: int, page: int = 4, row_shape: Sequence[int] = (), dtype=np.float64) -> None:
        super().__init__(n_pages, page)
        if not isinstance(row_shape, Sequence) or isinstance(row_shape, str | bytes):
            raise ValueError(f"row_shape={row_shape!r}: give a tuple of dimensions, () for a row of one number")
        self.row_shape = tuple(integer(d, "a row_shape dimension", 1) for d in row_shape)
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "biuf":
            raise ValueError(f"dtype={self.dtype}: the pool holds numbers (bool, integer or float)")
        size = n_pages * page * math.prod(self.row_shape) * self.dtype.itemsize  # Python ints: no overflow
        if size > MAX_POOL_BYTES:
            raise ValueError(f"a pool of {n_pages} x {page} rows of shape {self.row_shape} ({self.dtype}) would take "
                             f"{size / 2**30:.1f} GiB, more than {MAX_POOL_BYTES >> 30} GiB")
        self.pool = np.zeros((n_pages, page, *self.row_shape), dtype=self.dtype)

    def append(self, rid: Hashable, row) -> None:
        # Convert before the table changes, so a bad row leaves everything as it was. A row must be
        # real numbers, finite, and survive the pool's dtype unchanged if that is an integer type.
        try:
            raw = np.asarray(row)
        except ValueError as error:  # a ragged nest of lists
            raise BadRow(f"request {rid!r}: row is not an array of numbers ({error})") from None
        if raw.shape != self.row_shape:
            raise BadRow(f"request {rid!r}: row of shape {raw.shape}, the pool holds rows of shape {self.row_shape}")
        if raw.dtype.kind not in "biuf":
            raise BadRow(f"request {rid!r}: row of {raw.dtype} values, the pool holds real numbers ({self.dtype})")
        if raw.dtype.kind == "f" and not np.isfinite(raw).all():
            raise BadRow(f"request {rid!r}: row holds NaN or infinity")
        with np.errstate(over="ignore"):
            value = raw.astype(self.dtype)
        if self.dtype.kind == "f" and not np.isfinite(value).all():  # 1e6 as float16 is an infinity
            raise BadRow(f"request {rid!r}: row holds a value past the range of the pool's {self.dtype}")
        if self.dtype.kind in "biu" and not np.array_equal(value, raw):
            raise BadRow(f"request {rid!r}: row does not fit the pool's {self.dtype} unchanged")
        super().append(rid, value)

    def gather(self, rid: Hashable, lo: int, hi: int) -> np.ndarray:
        """Rows lo <= i < hi of rid as one new array of shape (hi - lo, *row_shape).

        Same checks and errors as ``rows``. Rows within one page are one slice; rows across
        several pages take those pages whole (one ``np.take``) and slice the run out of them.
        """
        self._check_range(rid, lo, hi)
        pages, start = self._span(rid, lo, hi)
        stop = start + hi - lo
        if len(pages) == 1:
            return self.pool[pages[0], start:stop].copy()
        return self.pool.take(pages, axis=0).reshape(-1, *self.row_shape)[start:stop]

    def rows(self, rid: Hashable, lo: int, hi: int) -> list:
        """As PageTable.rows, each row a nested list of floats."""
        return self.gather(rid, lo, hi).tolist()


# ---- the windowed float reference ----------------------------------------------------------------


def _check_window(W) -> None:
    if W is not None and (not _is_int(W) or W < 1):
        raise ValueError(f"window W must be None or an int >= 1, got {W!r}")


def window_rows(kc: Sequence, W: int | None) -> Sequence:
    """The cached rows a step may attend with window W: the last W - 1 (all of them when W is None)."""
    _check_window(W)
    if W is None or len(kc) <= W - 1:
        return kc
    return kc[len(kc) - (W - 1):]


def _cache_rows(rows, name: str) -> int:
    """The number of cached rows in `rows` (k or v rows of D finite numbers each), or ValueError
    naming it: float_step reshapes what it is given, so a transposed or 3-D cache would be read as
    other rows without a word."""
    a = np.asarray(rows, dtype=np.float64) if len(rows) else np.zeros((0, T.D))
    if a.ndim != 2 or a.shape[1] != T.D:
        raise ValueError(f"{name} must be rows of {T.D} numbers, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} holds a NaN or an infinity")
    return a.shape[0]


def float_windowed(m: dict, tok: int, kc, vc, W: int | None):
    """One float decode step that attends the new token and at most W - 1 previous ones.

    Same result as ``tiny_lm.float_step`` (logits, k, v, info); with W None it *is* float_step.
    """
    _token(tok, "tok")
    if _cache_rows(kc, "kc") != _cache_rows(vc, "vc"):
        raise ValueError(f"kc has {len(kc)} rows and vc {len(vc)}: one of each per cached token")
    return T.float_step(m, tok, window_rows(kc, W), window_rows(vc, W))


def float_generate(m: dict, start: int, n: int, W: int | None = None) -> list[int]:
    """Greedy float decode of n tokens after start, with window W; returns [start, t1, ..., tn]."""
    start = _token(start, "start")
    n = integer(n, "n", 0)
    _check_window(W)
    toks = [start]
    kc: list = []
    vc: list = []
    for _ in range(n):
        logits, k, v, _ = float_windowed(m, toks[-1], kc, vc, W)
        kc.append(k)
        vc.append(v)
        toks.append(logits.index(max(logits)))
    return toks


def context_size(L: int, W: int | None) -> int:
    """Tokens attended at step L (1-based): the new one and min(L, W) - 1 previous ones."""
    integer(L, "step L", 1)
    _check_window(W)
    return L if W is None else min(L, W)


def calibrate(m: dict, steps: int, W: int | None, starts: Iterable[int] = range(T.V)):
    """Calibration data for every context size the window allows, and one range per group.

    The windowed float decode of ``steps`` tokens from every start token (``host.calibrate``):
    ``(calib, ranges)``, calib[n] the input sets of the program of context n, ranges the largest
    magnitude of "x", "k" and "v". Every program shares these ranges, so a row the chip writes as
    k_new is re-quantized exactly when a later program reads it back as a kc row.
    """
    _check_window(W)
    steps = integer(steps, "steps", 1)
    starts = [_token(t, "a start token") for t in starts]
    if not starts:
        raise ValueError("starts is empty: calibration needs at least one start token")
    cal = host.calibrate(m, steps, [W], starts)
    return cal.feeds, {group: cal.ranges[group] for group in SHARED_RANGES}


SHARED_RANGES = ("x", "k", "v")  # the groups every program of a decode shares


# ---- the host ------------------------------------------------------------------------------------


def _token(t, name: str) -> int:
    """t as a token 0 .. V-1, or ValueError naming it (a bool, a float, -1 or V are not tokens)."""
    if not _is_int(t) or not 0 <= t < T.V:
        raise ValueError(f"{name} {t!r} is not a token 0..{T.V - 1}")
    return int(t)


class PagedChip:
    """The host: a page table for the cache, the window rule, one compiled program per context size.

    ``generate(start, n)`` decodes n tokens on the machine model of GA2. Each step L:
      1. context ``nc = min(L, W)``; the previous rows it attends are ``lo .. L-2`` with lo = L - nc;
      2. gather those rows through the block table into ``kc`` / ``vc`` (``paged=False``: slice a
         plain Python list instead; the two hosts must give identical integers);
      3. run the program for context nc (compiled on first use, kept in ``progs``);
      4. append the chip's new (k, v) row, then ``trim`` the pages before row L + 1 - W, the first
         row step L + 1 will need.

    After ``generate``: ``peak`` is the most pages held at once and ``cache`` the page table used.
    """

    TABLE = ArrayPageTable  # the page table a decode keeps its rows in (new_cache)

    def __init__(self, m: dict, steps: int, W: int | None = None, page: int = 4, n_pages: int = 64,
                 starts: Iterable[int] = range(T.V), paged: bool = True) -> None:
        _check_window(W)
        steps = integer(steps, "steps", 1)
        if steps > C.isa.MM_MAX_K:  # calibrating for more would run for ever, and no such program runs
            raise ValueError(f"steps={steps}: no decode context past {C.isa.MM_MAX_K} can run on GA2")
        paged = flag(paged, "paged")
        PageTable(n_pages, page)  # the pool's sizes, checked now rather than at the first generate
        starts = list(starts)
        if not starts:
            raise ValueError("starts is empty: calibration needs at least one start token")
        for t in starts:
            _token(t, "a start token")
        self.m = m
        self.steps = steps
        self.W = W
        self.page = page
        self.n_pages = n_pages
        self.paged = paged
        self.calib, self.ranges = calibrate(m, steps, W, starts)
        self.progs: dict[int, C.Program] = {}
        self.peak = 0
        self.cache: ArrayPageTable | None = None

    def program(self, n: int) -> C.Program:
        """The compiled program for context n: compile_graph(build_graph(m, n), calib[n],
        ranges=ranges), from the program cache (host.PROGRAMS); ``progs`` holds those this chip used."""
        if n not in self.progs:
            if n not in self.calib:
                raise C.CompileError(f"no calibration for context {n}: the chip was calibrated for "
                                     f"{self.steps} steps with window {self.W}")
            self.progs[n] = host.PROGRAMS.get(self.m, [n], self.ranges, self.calib[n])
        return self.progs[n]

    def pages_held(self, n: int) -> int:
        """The most pages a decode of n steps holds at once: after step L's row is appended and
        before its release, rows trim_point(L - 1) .. L - 1 (the window rule's count)."""
        return max((-(-L // self.page) - self.trim_point(L - 1) // self.page for L in range(1, n + 1)), default=0)

    def trim_point(self, L: int) -> int:
        """After step L, the first row the next step needs (rows before it may be released)."""
        return 0 if self.W is None else max(0, L + 1 - self.W)

    def new_cache(self) -> ArrayPageTable:
        """The page table of a new decode, request 0 open in it; kept as ``self.cache``, and the
        peak of pages in use starts again from 0."""
        self.cache = self.TABLE(self.n_pages, self.page, row_shape=(2, T.D))
        self.cache.new(0)
        self.peak = 0
        return self.cache

    def gather_step(self, cache: ArrayPageTable, plain: list[np.ndarray], L: int, nc: int) -> np.ndarray:
        """The (k, v) rows step L reads (context nc > 1): rows L - nc .. L - 2, the window's, from
        the page table, or from the reference host's plain list when the chip is not paged."""
        lo = L - nc
        return cache.gather(0, lo, L - 1) if self.paged else np.asarray(plain[lo:L - 1])

    def release_after(self, cache: ArrayPageTable, L: int) -> None:
        """After step L (its row appended): the pages no later step reads go."""
        cache.trim(0, self.trim_point(L))

    def generate(self, start: int, n: int, force: Sequence[int] | None = None, after_step=None):
        """Decode n tokens after start; returns (tokens, records), one record per step.

        A record (``host.Step``, read like the book's dict) holds: L (step, from 1), ctx (context
        size), code and ext (the program and its memory image, for the RTL replay), logits (floats),
        ints (int8 logits), tok (the chip's argmax), pages (pages in use when the step starts) and
        counters (the machine model's seven cycle counters); beside the book's keys, ``read`` holds
        the (k, v) rows the step was given. ``force`` (a token list with force[0] = start) feeds
        force[L] as the next input instead of the chip's choice (teacher forcing). ``after_step(L,
        cache, plain)``, when given, is called after each step's release (cache: the page table;
        plain: the reference host's list of rows).

        Each step gathers its rows (``gather_step``), runs its context's program, appends its new
        row and releases what no later step reads (``release_after``); a host with another rule
        for which rows a step reads overrides those two (model/answers/sinks.py does).
        """
        start = _token(start, "start")
        n = integer(n, "n", 0)
        if force is not None:
            force = list(force)
            if len(force) < n + 1:
                raise ValueError(f"force has {len(force)} tokens, generate({start}, {n}) needs {n + 1}")
            if force[0] != start:
                raise ValueError(f"force[0] = {force[0]!r} is not the start token {start}")
            for i, t in enumerate(force[: n + 1]):
                _token(t, f"force[{i}]")
        if n and context_size(n, self.W) not in self.calib:  # the longest context this decode needs
            raise C.CompileError(f"no calibration for context {context_size(n, self.W)}: the chip was "
                                 f"calibrated for {self.steps} steps with window {self.W}")
        own_rule = (type(self).release_after is PagedChip.release_after
                    and type(self).trim_point is PagedChip.trim_point)
        if own_rule and self.pages_held(n) > self.n_pages:  # refused before a step runs, the chip as it was
            raise OutOfPages(f"generate({start}, {n}) holds up to {self.pages_held(n)} pages of {self.page} rows "
                             f"at once; the pool has {self.n_pages}")
        cache = self.new_cache()
        plain: list[np.ndarray] = []  # the reference host's cache: one (k, v) row per token
        toks = [start]
        records: list[host.Step] = []
        for L in range(1, n + 1):
            nc = context_size(L, self.W)
            inputs = {"x": [list(self.m["E"][toks[-1]])]}
            rows = np.zeros((0, 2, T.D))  # step 1 reads no row
            if nc > 1:
                rows = self.gather_step(cache, plain, L, nc)
                inputs["kc"] = rows[:, 0]
                inputs["vc"] = rows[:, 1]
            step = host.run_step(self.program(nc), inputs, [nc])
            step.L, step.pages, step.read = L, cache.used(), rows
            records.append(step)
            row = np.array([step.k[0], step.v[0]])
            cache.append(0, row)
            plain.append(row)
            self.release_after(cache, L)
            self.peak = max(self.peak, cache.used())
            if after_step is not None:
                after_step(L, cache, plain)
            toks.append(force[L] if force is not None else records[-1]["tok"])
        return toks, records


if __name__ == "__main__":
    model = T.make_model("structured")
    expected = [0]
    for _ in range(32):
        expected.append(T.f_next(expected[-1]))
    for window in (None, 8, 4):
        tokens, recs = PagedChip(model, 32, window).generate(0, 32)
        print(f"W={window}: rule ok {tokens == expected}; pages in use at the end {recs[-1]['pages']}")
