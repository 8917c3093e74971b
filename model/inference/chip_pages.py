"""The mixed model's K/V cache in pages of the chip's external memory, read where it lies.

``MixedChip`` with ``kv="paged"`` keeps its int8 keys and values here instead of handing the chip a
contiguous copy of every attended row each step. The bookkeeping is the host's per-layer page
groups (``serving.page_groups.PageGroups``: the windowed layers one group, which releases the pages
its window can no longer reach, the global layers another, which keeps every page), for one
request; this class adds the chip's external memory those pages live in, as one array the host
writes into:

    words 0 .. G * pages - 1     a block table per group (G groups), one descriptor a word: the
                                 external address of a page's first row, the table's first
                                 descriptor being the group's first page not released
    from pool_ext on             the pool, page for page: a row is one token's K and V for the
                                 layers of one group and every KV head (int8, packed), so a page
                                 holds page x row_words words

A decode step writes, per group, the new token's row (each layer's part as its projection
program returns it) and the descriptors that changed (a page taken; a table whose first pages
were released, rewritten from the start), and counts every word it writes (``written``). An
attention program reads its layer's K or V of one KV head through the table
(``capra.paged_attention.PagedKV``: the page offset picks the layer and head inside a row, the row
stride steps over the rest) from the pages where they lie.

Within a step the new row lies in its page before ``PageGroups.append`` runs: ``begin_step``
finds where the pool will put it (the group's last page, or the page the pool hands out next) and
``end_step`` appends the row to the page groups, checking that it went where the chip read it.
A step that raises before ``end_step`` leaves the page groups without the row (the next
``begin_step`` writes the slot again).
"""

from __future__ import annotations

import numpy as np
from capra import isa
from capra import paged_attention as pa
from paged_lm import OutOfPages
from serving.page_groups import PageGroups

from .mixed_lm import MixedLM

PAGE = 16  # rows of a page
RID = 0  # the one request the chip decodes


class ChipPages:
    """The paged K/V of one request of `model` in the chip's external memory (module docstring).

    ``pages``: the pool's pages, enough for ``max_context`` tokens when not given
    (``PageGroups.pages_needed``). Invariants after every ``end_step``: the page groups hold the
    request's rows (``PageGroups``'s own invariants); every descriptor of every table in ``ext``
    names the page the group's block table names; every row of every page a table names holds, in
    ``ext``, the int8 K and V the host appended for it."""

    def __init__(self, model: MixedLM, max_context: int, page: int = PAGE, pages: int | None = None,
                 windows: list[int | None] | None = None) -> None:
        if page & (page - 1) or page < 1:
            raise ValueError(f"page={page}: a page holds a power of two rows (the GATHER's page shift)")
        self.model = model
        if windows is None:  # the model's own layers (another layout's for chip_context)
            windows = [model.window if lw.windowed else None for lw in model.layers]
        probe = PageGroups(windows, 1, page)
        self.pages = pages if pages is not None else probe.pages_needed(max_context)
        self.groups = PageGroups(windows, self.pages, page, kv_heads=model.n_kv_heads, head_dim=model.head_dim,
                                 dtype=np.float32)
        self.groups.new(RID)
        self.page = page
        self.dw = isa.words_for(model.head_dim)
        self.group_size = len(self.groups.groups[0].layers)
        self.row_words = self.group_size * 2 * model.n_kv_heads * self.dw
        self.page_words = page * self.row_words
        self.pool_ext = len(self.groups.groups) * self.pages
        self.ext = np.zeros(self.pool_ext + self.pages * self.page_words, dtype=np.uint32)
        self.in_ext: dict[str, list[int]] = {g.name: [] for g in self.groups.groups}  # the tables as ext holds them
        self.written = 0  # words the host has written into ext
        self._step: dict | None = None

    @staticmethod
    def page_of(chip) -> int:
        """The rows of a page of `chip`'s paged K/V."""
        return chip.cache.page if getattr(chip, "cache", None) is not None else PAGE

    @property
    def length(self) -> int:
        return self.groups.lengths[RID]

    def descriptor(self, page: int) -> int:
        """The external address of a page's first row."""
        return self.pool_ext + page * self.page_words

    def begin_step(self) -> None:
        """Place the next token's rows: per group, the slot its row takes, and the group's table
        (with the page the row takes, if it starts one) written into ext where it changed."""
        pool = self.groups.pool
        length = self.length
        free = len(pool.free)  # the pool hands out pool.free[-1] first, then [-2] (PageTable's stack)
        tables, slots = {}, {}
        for gi, group in enumerate(self.groups.groups):
            key = (RID, group.name)
            table = list(pool.table[key])
            if length % self.page == 0:
                if not free:
                    raise OutOfPages(f"the chip's paged K/V: token {length} needs a page in group {group.name}, "
                                     f"the pool's {self.pages} pages are in use")
                free -= 1
                table.append(pool.free[free])
            slots[group.name] = (table[-1], length % self.page)
            tables[group.name] = table
            old = self.in_ext[group.name]
            # a table changes at its end (a page taken, a shared last page copied) or, when pages were
            # released, everywhere (it moved up); in between an entry never changes
            start = len(old) - 1 if old and table[0] == old[0] and len(table) >= len(old) else 0
            changed = [i for i in range(max(start, 0), len(table)) if i >= len(old) or old[i] != table[i]]
            for i in changed:
                self.ext[gi * self.pages + i] = self.descriptor(table[i])
            self.written += len(changed)
            self.in_ext[group.name] = table
        self._step = {"tables": tables, "slots": slots, "rows": np.zeros(self.groups.row_shape, dtype=np.float32)}

    def _locate(self, layer: int):
        group, index = self.groups._locate(layer)
        return group, index, [g.name for g in self.groups.groups].index(group.name)

    def write_row(self, layer: int, head: int, k8: np.ndarray, v8: np.ndarray) -> None:
        """The new token's key and value of `layer` and KV `head` (int8, one row each) into its page."""
        group, index, _gi = self._locate(layer)
        page, slot = self._step["slots"][group.name]
        at = self.descriptor(page) + slot * self.row_words
        for kv, x in ((0, k8), (1, v8)):
            off = ((index * 2 + kv) * self.model.n_kv_heads + head) * self.dw
            self.ext[at + off : at + off + self.dw] = isa.pack_int8_rows(np.asarray(x).reshape(1, -1))
            self._step["rows"][layer, kv, head] = np.asarray(x).reshape(-1)
        self.written += 2 * self.dw

    def source(self, layer: int, head: int) -> tuple[pa.PagedKV, int, int]:
        """(where, lo, hi): the rows lo .. hi - 1 the new token attends in `layer` (itself the last)
        and where its K and V of KV `head` lie, through the group's table in ext."""
        group, index, gi = self._locate(layer)
        dropped = self.groups.pool.dropped[(RID, group.name)]
        table = self._step["tables"][group.name]
        where = pa.PagedKV(gi * self.pages - dropped, dropped + len(table), self.page.bit_length() - 1,
                           self.row_words, ((index * 2) * self.model.n_kv_heads + head) * self.dw,
                           ((index * 2 + 1) * self.model.n_kv_heads + head) * self.dw, self.model.head_dim)
        return where, group.keep_from(self.length), self.length + 1

    def image(self) -> np.ndarray:
        """The external memory the attention programs of this step start from: the tables and the
        pool up to the highest page a table names (the pool hands out its lowest pages first)."""
        top = max(max(t) for t in self._step["tables"].values())
        return self.ext[: self.descriptor(top + 1)]

    def end_step(self) -> None:
        """Append the step's row to the page groups (which then release what the windows passed)."""
        self.groups.append(RID, self._step["rows"])
        for group in self.groups.groups:
            page, slot = self._step["slots"][group.name]
            got = self.groups.pool.table[(RID, group.name)][-1]
            if got != page:
                raise AssertionError(f"group {group.name}: the row went to page {got}, the chip read page {page}")
        self._step = None
