"""Per-layer page groups: the mixed windowed/global model's KV cache in one pool of pages.

The host-side twin of ``inference.generate.MixedKVCache``. That cache stores each layer of the
mixed model the way the layer attends (a ring of W slots for a windowed layer, a growing array for
a global one) for one batch. Here the same rows live in pages of one pool, shared by many requests:

* the layers are split into *groups* by their window (``group_layers``): every layer of a group
  needs exactly the same rows at every step, so a group has one block table per request, and a
  row of the pool holds one token's K and V for every layer of one group;
* a global group keeps every page; a windowed group keeps only the pages its window can still
  reach and releases the rest as the sequence grows (``LayerGroup.keep_from``: the window rule of
  ``paged_lm.context_size``, the same rule as ``PagedChip`` and the serving engine);
* ``fork`` shares every group's pages (no row copied); a later append into a shared tail page
  copies that page, in each group whose tail is shared and nowhere else (``PageTable.append``'s
  copy-on-write).

The pool is one ``paged_lm.ArrayPageTable``; each (request, group) pair is a request of that table
(its id is ``(rid, group.name)``), so the page lookup, copy-on-write, trim, fork, release and the
errors are the page table's own. What this class adds is the groups, the window rule per group,
and operations that are atomic over the groups: ``append`` checks, for every group, whether the
row takes a page (``append_takes_page``) and raises ``OutOfPages`` before any group changes when
the pool cannot give them all.

The invariants are in ``PageGroups``'s docstring; tests/test_page_groups.py checks them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from paged_lm import (
    ArrayPageTable,
    BadRow,
    OutOfPages,
    PagedError,
    PageTable,
    RequestExists,
    UnknownRequest,
    context_size,
)

from .block_manager import pages_needed

__all__ = ["LayerGroup", "PageGroups", "UnknownLayer", "append_takes_page", "group_layers"]


class UnknownLayer(PagedError, IndexError):
    """A layer index that is not one of the model's layers."""


@dataclass(frozen=True)
class LayerGroup:
    """Layers that attend alike: the same window (None: global), one block table per request.

    Invariants (``group_layers`` makes them so): ``layers`` is not empty and ascending, every group
    of a model has the same number of layers, and each layer is in exactly one group."""

    name: str
    window: int | None
    layers: tuple[int, ...]

    def keep_from(self, length: int) -> int:
        """With `length` rows cached, the first row the next token can attend (the one at position
        `length` sees the min(length + 1, W) tokens ending with itself); pages wholly before it go."""
        step = length + 1
        return step - context_size(step, self.window)


def group_layers(layer_windows: Sequence[int | None]) -> tuple[LayerGroup, ...]:
    """The layers grouped by window, every group the same size so that one row shape fits them all.

    The layers of one window are split into groups of g layers, g the greatest common divisor of
    the counts per window (the mixed model's 2 windowed and 2 global layers are two groups of two;
    1 windowed and 3 global layers would be four groups of one). A group is named after its kind,
    "global" or "windowed" (with the window when the model has several), and numbered when its
    kind is split.
    """
    windows = list(layer_windows)
    if not windows:
        raise ValueError("layer_windows is empty: the model needs at least one layer")
    for i, W in enumerate(windows):
        if W is not None and (isinstance(W, bool) or not isinstance(W, int | np.integer) or W < 1):
            raise ValueError(f"layer {i}: window {W!r} is not None (global) or an integer >= 1")
    by_window: dict[int | None, list[int]] = {}
    for i, W in enumerate(windows):
        by_window.setdefault(None if W is None else int(W), []).append(i)
    size = math.gcd(*(len(layers) for layers in by_window.values()))
    several = sum(W is not None for W in by_window) > 1
    groups = []
    for W, layers in by_window.items():
        kind = "global" if W is None else f"windowed W={W}" if several else "windowed"
        parts = [tuple(layers[i:i + size]) for i in range(0, len(layers), size)]
        for j, part in enumerate(parts):
            groups.append(LayerGroup(kind if len(parts) == 1 else f"{kind} #{j}", W, part))
    return tuple(groups)


def append_takes_page(pool: PageTable, key: Hashable) -> bool:
    """Whether ``pool.append(key, row)`` takes a page from the free list: when the row starts a new
    page, or when the last page is shared and must be copied first. ``PageTable.append``'s rule,
    read from outside so that several appends can be checked before any is made
    (tests/test_page_groups.py checks it before every append against a shadow model's count)."""
    starts_page = pool.length[key] % pool.page == 0
    return starts_page or pool.ref[pool.table[key][-1]] > 1


class PageGroups:
    """One pool of pages, and for every request a block table per group of layers (module docstring).

    ``layer_windows[l]`` is layer l's window (None: global); the mixed model's is
    ``(128, None, 128, None)``. The pool has ``n_pages`` pages of ``page`` rows; a row is one
    token's K and V for the layers of one group, shape ``(group size, 2, kv_heads, head_dim)``.

    Invariants (tests/test_page_groups.py checks them against a from-scratch shadow model after every
    random operation):

    * a live request has a block table in every group, and all of them have the request's length;
    * the rows of layer l that a request holds are the rows ``keep_from(length) .. length - 1`` of
      its group, rounded out to whole pages: a group holds exactly
      ``ceil(length / page) - floor(keep_from / page)`` pages, whatever happened before;
    * ``gather(rid, l)`` returns the rows the request's next token attends in layer l, in order,
      equal to the K and V that were appended for them;
    * the pool's own invariants hold (``paged_tests.pool_invariants``): a page is free exactly when no
      block table names it, and two block tables name the same page only where one was forked from
      the other and neither has written into it since;
    * every operation that raises leaves the pool, every block table and every length as they were.
    """

    def __init__(self, layer_windows: Sequence[int | None], n_pages: int, page: int = 16, kv_heads: int = 1,
                 head_dim: int = 1, dtype=np.float64) -> None:
        if np.dtype(dtype).kind != "f":
            raise ValueError(f"dtype={np.dtype(dtype)}: keys and values are floating point")
        self.groups = group_layers(layer_windows)
        self.n_layers = len(layer_windows)
        size = len(self.groups[0].layers)
        self.pool = ArrayPageTable(n_pages, page, row_shape=(size, 2, kv_heads, head_dim), dtype=dtype)
        self.page = self.pool.page
        self.row_shape = (self.n_layers, 2, kv_heads, head_dim)
        self._where = {layer: (group, i) for group in self.groups for i, layer in enumerate(group.layers)}
        self.lengths: dict[Hashable, int] = {}

    # -- the operations ------------------------------------------------------------------------------

    def new(self, rid: Hashable) -> None:
        """Start request rid with an empty block table in every group (no page is taken yet).
        Raises RequestExists if rid is live."""
        if rid in self.lengths:
            raise RequestExists(f"request {rid!r} already exists; release it first")
        for group in self.groups:
            self.pool.new((rid, group.name))
        self.lengths[rid] = 0

    def append(self, rid: Hashable, kv) -> None:
        """Append one token of rid: ``kv`` of shape (n_layers, 2, kv_heads, head_dim), layer l's key
        in ``kv[l, 0]`` and value in ``kv[l, 1]``. Each group writes its layers' part (copying its
        tail page first if that page is shared), then releases the pages its window can no longer
        reach.

        Raises UnknownRequest, BadRow (a wrong shape, a value that is not a finite real number) or
        OutOfPages, when the groups that need a page (a new one, or the private copy of a shared
        tail) need more than the pool has free; the pages the window releases after the write do
        not count. Every error is raised before any group changes.
        """
        self._require(rid)
        row = self._check_row(rid, kv)
        keys = [(rid, group.name) for group in self.groups]
        taking = [group.name for group, key in zip(self.groups, keys) if append_takes_page(self.pool, key)]
        if len(taking) > len(self.pool.free):
            raise OutOfPages(f"request {rid!r}: token {self.lengths[rid]} needs {len(taking)} free pages (groups "
                             f"{', '.join(taking)}), the pool has {len(self.pool.free)} of {len(self.pool.ref)} "
                             f"pages of {self.page} rows free")
        for group, key in zip(self.groups, keys):
            self.pool.append(key, row[list(group.layers)])
        self.lengths[rid] += 1
        for group, key in zip(self.groups, keys):
            self.pool.trim(key, group.keep_from(self.lengths[rid]))

    def fork(self, src: Hashable, dst: Hashable) -> None:
        """Make dst a copy of src that shares every page of every group (no row is copied).
        Raises UnknownRequest for src and RequestExists for dst."""
        self._require(src)
        if dst in self.lengths:
            raise RequestExists(f"cannot fork {src!r} onto {dst!r}: request {dst!r} already exists")
        for group in self.groups:
            self.pool.fork((src, group.name), (dst, group.name))
        self.lengths[dst] = self.lengths[src]

    def release(self, rid: Hashable) -> None:
        """Drop rid in every group; a page goes back to the pool when its last owner lets go."""
        self._require(rid)
        for group in self.groups:
            self.pool.release((rid, group.name))
        del self.lengths[rid]

    # -- reading -------------------------------------------------------------------------------------

    def attended(self, rid: Hashable, layer: int) -> tuple[int, int]:
        """(lo, hi): the cached rows lo .. hi - 1 that rid's next token attends in `layer`."""
        self._require(rid)
        group, _ = self._locate(layer)
        length = self.lengths[rid]
        return group.keep_from(length), length

    def gather(self, rid: Hashable, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """The keys and values rid's next token attends in `layer`, each (rows, kv_heads, head_dim),
        oldest first, gathered through the group's block table (``ArrayPageTable.gather``)."""
        lo, hi = self.attended(rid, layer)
        group, index = self._locate(layer)
        rows = self.pool.gather((rid, group.name), lo, hi)[:, index]
        return rows[:, 0], rows[:, 1]

    def rows_held(self, rid: Hashable, layer: int) -> int:
        """Rows of `layer` that rid still holds: from the first row of its first page to its length
        (the rows its window can no longer reach but that share a page with one it can included)."""
        self._require(rid)
        group, _ = self._locate(layer)
        key = (rid, group.name)
        return self.lengths[rid] - self.pool.dropped[key] * self.page

    def pages_held(self, rid: Hashable, group: LayerGroup) -> int:
        """Pages in rid's block table of `group`."""
        self._require(rid)
        return len(self.pool.table[(rid, group.name)])

    def used(self) -> int:
        """Pages of the pool in use (each counted once, however many block tables share it)."""
        return self.pool.used()

    def pages_needed(self, rows: int) -> int:
        """The most pages a request can hold at once while `rows` rows are appended: each group's
        ``block_manager.pages_needed`` (the window rule's count), summed. A request with that many
        pages to itself never meets OutOfPages."""
        return sum(pages_needed(rows, group.window, self.page) for group in self.groups)

    # -- helpers -------------------------------------------------------------------------------------

    def _locate(self, layer: int) -> tuple[LayerGroup, int]:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or layer not in self._where:
            raise UnknownLayer(f"layer {layer!r} is not a layer of the model (0..{self.n_layers - 1})")
        return self._where[layer]

    def _check_row(self, rid: Hashable, kv) -> np.ndarray:
        """kv as the pool's dtype, or BadRow: the whole token is checked before any group takes its part."""
        try:
            raw = np.asarray(kv)
        except ValueError as error:
            raise BadRow(f"request {rid!r}: kv is not an array of numbers ({error})") from None
        if raw.shape != self.row_shape:
            raise BadRow(f"request {rid!r}: kv of shape {raw.shape}, a token is {self.row_shape} "
                         "(layers, key and value, kv_heads, head_dim)")
        if raw.dtype.kind not in "biuf":
            raise BadRow(f"request {rid!r}: kv holds {raw.dtype} values, not real numbers")
        with np.errstate(over="ignore"):
            value = raw.astype(self.pool.dtype)
        if not np.isfinite(value).all():
            raise BadRow(f"request {rid!r}: kv holds NaN or infinity (or a value past {self.pool.dtype})")
        return value

    def _require(self, rid: Hashable) -> None:
        if rid not in self.lengths:
            raise UnknownRequest(f"request {rid!r} is not in the pool (never created, or already released)")
