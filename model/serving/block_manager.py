"""The block manager: every request's pages in one pool, reserved up front, shared by prefix.

It owns the pool (a ``paged_lm.ArrayPageTable`` of (key, value) rows) and the accounting on top of
it. A sequence is admitted only with a *reservation*: the most pages its block table can hold at
once (``pages_needed``: from its length, its window and the page size). A *prefix* is a prompt's
rows kept for a waiting request with the same prompt and window: the pool holds them under a
``Prefix`` id of their own (a fork, no row copied), and they stay reserved until the prefix is
released; a request that forks a prefix starts generating at once, and its first append into the
shared tail page copies that page (copy-on-write, ``PageTable.append``).

Invariants (tests/test_serving.py checks them after every step):
* the reservations of running sequences and of prefixes together never exceed the pool, so no
  append ever finds the pool empty and no request fails half-way;
* a running sequence's block table never holds more pages than it reserved;
* the pool's own invariants hold (``paged_tests.pool_invariants``), and when every request has left
  and every prefix is released, every page is free.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import tiny_lm as T
from paged_lm import ArrayPageTable, context_size

from .sequence import Request, Sequence

MAX_POOL_ROWS = 1 << 20  # n_pages * page: far past any batch the chip can hold (8 x 1024 rows)


@functools.lru_cache(maxsize=4096)
def pages_needed(rows: int, W: int | None, page: int) -> int:
    """The most pages a block table holds at once while `rows` rows are appended with window W
    (after each append, pages wholly before row L + 1 - W are released).

    With a window, the pages held after the append of row L are ceil(L / page) minus the pages
    released, floor((L - W) / page): from L = W on that repeats every `page` rows, so the rows up
    to W + 2 * page show the most (a request of a billion tokens is checked as fast as a short one).
    """
    if W is None:
        return -(-rows // page)
    most = 0
    dropped = 0
    for L in range(1, min(rows, W + 2 * page) + 1):
        most = max(most, -(-L // page) - dropped)  # after the append, before the trim
        dropped = max(dropped, max(0, L + 1 - W) // page)
    return most


@dataclass(frozen=True)
class Prefix:
    """The pool's id for a shared prompt's pages. A type of its own, so that no request id, which
    is whatever hashable value the caller chose, can ever be equal to it."""

    key: tuple


@dataclass(frozen=True)
class KeptPrefix:
    """A prompt's rows kept for a waiting request: what its first generated token was, the int8
    logits behind it, and the pages the prefix holds (and reserves)."""

    token: int
    logits: list[int]
    pages: int


class BlockManager:
    """Pages of one pool for many sequences (module docstring)."""

    def __init__(self, n_pages: int, page: int) -> None:
        if n_pages * page > MAX_POOL_ROWS:
            raise ValueError(f"n_pages={n_pages} x page={page} is a pool of {n_pages * page} rows, more than "
                             f"{MAX_POOL_ROWS}")
        self.page = page
        self.pool = ArrayPageTable(n_pages, page, row_shape=(2, T.D))
        self.prefixes: dict[tuple, KeptPrefix] = {}  # (prompt, window) -> the prefix's first token and pages
        self.reservations: dict[Hashable, int] = {}  # running sequence -> pages reserved

    @property
    def n_pages(self) -> int:
        return len(self.pool.ref)

    def needed(self, req: Request) -> int:
        """The pages `req` must reserve: the most its block table can hold at once."""
        return pages_needed(req.rows, req.window, self.page)

    def reserved(self) -> int:
        """Pages reserved by running sequences and by kept prefixes."""
        return sum(self.reservations.values()) + sum(p.pages for p in self.prefixes.values())

    def has_room(self, need: int, handed: int = 0) -> bool:
        """Whether a reservation of `need` pages fits, when `handed` pages of a prefix pass to it."""
        return self.reserved() - handed + need <= self.n_pages

    # -- sequences ----------------------------------------------------------------------------------

    def allocate(self, seq: Sequence, need: int) -> None:
        """Start `seq` with an empty block table and a reservation of `need` pages."""
        self.pool.new(seq.rid)
        self._reserve(seq, need)

    def fork(self, seq: Sequence, key: tuple, need: int) -> KeptPrefix:
        """Start `seq` on the kept prefix `key` (sharing its pages); the prefix it forked."""
        self.pool.fork(Prefix(key), seq.rid)
        self._reserve(seq, need)
        return self.prefixes[key]

    def _reserve(self, seq: Sequence, need: int) -> None:
        seq.reserved = need
        self.reservations[seq.rid] = need

    def window_rows(self, seq: Sequence) -> tuple[np.ndarray, np.ndarray]:
        """The cached keys and values the next step of `seq` attends: rows lo .. fed - 1, where the
        step at length L = fed + 1 attends min(L, W) tokens (the window rule), gathered through
        its block table."""
        L = seq.fed + 1
        lo = L - context_size(L, seq.req.window)
        rows = self.pool.gather(seq.rid, lo, seq.fed)
        return rows[:, 0], rows[:, 1]

    def append(self, seq: Sequence, k: np.ndarray, v: np.ndarray) -> None:
        """Write the row of the token `seq` just fed (copy-on-write if its tail page is shared),
        then release the pages that fell out of its window."""
        self.pool.append(seq.rid, np.array([k, v]))
        if seq.req.window is not None:
            self.pool.trim(seq.rid, max(0, seq.fed + 1 - seq.req.window))

    def free(self, seq: Sequence) -> None:
        """`seq` has left: its pages go back (each when its last owner lets go), and its reservation."""
        self.pool.release(seq.rid)
        del self.reservations[seq.rid]

    def held(self, rid: Hashable) -> int:
        """Pages in the block table of `rid`."""
        return len(self.pool.table[rid])

    # -- prefixes -----------------------------------------------------------------------------------

    def keep_prefix(self, seq: Sequence, key: tuple) -> bool:
        """Keep the prompt rows `seq` has just fed under `key` (a fork of its block table), with
        its first generated token; False (nothing kept) when their pages do not fit the pool's
        reservations."""
        held = self.held(seq.rid)
        if self.reserved() + held > self.n_pages:
            return False
        self.pool.fork(seq.rid, Prefix(key))
        self.prefixes[key] = KeptPrefix(seq.tokens[0], seq.logits[0], held)
        return True

    def release_prefix(self, key: tuple) -> None:
        self.pool.release(Prefix(key))
        del self.prefixes[key]
