"""The chip reads the KV pages where they lie: the host's per-step gather it removes, and what it costs.

    python tools/paged_attention.py                          # contexts 1024 2048 4096 8192 16384
    python tools/paged_attention.py --contexts 1024 4096     # (also ``capra paged-attention``)

One request of the mixed model's shape (layers windowed, global, windowed, global; W = 128; two KV
heads of 64) grows token by token in a pool of per-layer page groups (``serving.page_groups``,
pages of 16 rows), beside a second request that takes a page now and then, so its pages lie
scattered over the pool. The chip's external memory holds the pool page for page (int8, a row
being one token's K and V for both layers of a group and both heads) and the request's block
tables, one descriptor (a page's address) a word.

Host words per decode step, averaged over the 16 steps (one page) that end at the context:

  host copy      what the host writes when the chip reads contiguous K and V: the new token's row
                 into its page, and every row each layer attends gathered into a contiguous copy
                 (what the chapter's PagedChip does for the tiny LM), for all four layers
  chip gather    what it writes when the chip gathers through the block table: the new row, and
                 the descriptors that changed (a page taken; a windowed table that moved on)

Chip cycles of one global layer's decode attention for one GQA group (two query heads, one KV head)
at that context, on the machine model (``capra.paged_attention``; a context longer than the
instruction memory holds runs as several programs that hand the running state on):

  LOADs          K and V tiles loaded from the host's contiguous copy
  GATHERs        the same tiles gathered from the pages through the block table (three cycles per
                 page for its descriptor)

The two outputs must be equal word for word (and equal to ``capra.tiled_attention``'s own program
at the same tile where that fits the instruction memory); that is the check. Exit status 0 when
every context's outputs agree, 1 when one does not, 2 for a bad argument. Each program runs with
an external memory of its own size (the pool and the copies), so a memory size asked for in
GA2_CONFIG or GA2_EXT is refused; the chip's other settings hold.
"""

from __future__ import annotations

import time

import numpy as np
from capra import config, isa
from capra import paged_attention as pa
from capra import tiled_attention as ta
from replay import runs
from serving.page_groups import PageGroups

from .common import Parser, Progress, distinct, finish, int_range, memory_per_program

CONTEXTS = (1024, 2048, 4096, 8192, 16384)
WINDOWS = (128, None, 128, None)  # the mixed model's layer pattern
KV_HEADS, HEAD_DIM, GROUP = 2, 64, 2  # two KV heads of 64, two query heads per KV head
PAGE = 16
LAYER, HEAD = 1, 0  # the global layer and the KV head whose attention runs on the chip
NEIGHBOUR_EVERY = 4  # the second request appends one token for every four of the first


def pool_pages(context: int) -> int:
    """Pages of the pool for a run up to `context`: the request's and its neighbour's, and two spare."""
    probe = PageGroups(WINDOWS, 1, PAGE)
    return probe.pages_needed(context) + probe.pages_needed(context // NEIGHBOUR_EVERY + 1) + 2


def image_words(context: int) -> int:
    """The external memory of the largest program at `context` (``Host.image`` and ``pa.build``):
    the pool page for page, one descriptor a page at most, then the queries, the rows' states,
    the int32 output and the int8 result."""
    dw = HEAD_DIM // 4
    pages = pool_pages(context)
    return pages * Host(1, 0).page_words + pages + GROUP * dw + ta.STATE_WORDS * GROUP + GROUP * HEAD_DIM + GROUP * dw


def largest_context() -> int:
    """The longest context whose programs' external memory the chip can address
    (``config.EXT_MEMORY_MAX`` words), in whole pages: image_words grows with the context, so a
    bisection over the pages finds it in a few dozen sizes (a Host each)."""
    lo, hi = 1, config.EXT_MEMORY_MAX // PAGE  # lo pages fit; hi pages cannot (a word a row at least)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if image_words(mid * PAGE) <= config.EXT_MEMORY_MAX else (lo, mid)
    return lo * PAGE


class Host:
    """The host side of the chip's external memory: the pool's pages (int8) and the block tables,
    with a count of every word the host writes into it."""

    def __init__(self, n_pages: int, seed: int) -> None:
        self.pg = PageGroups(WINDOWS, n_pages, PAGE, kv_heads=KV_HEADS, head_dim=HEAD_DIM, dtype=np.float32)
        self.dw = HEAD_DIM // 4
        self.row_words = len(self.pg.groups[0].layers) * 2 * KV_HEADS * self.dw
        self.page_words = PAGE * self.row_words
        self.tables: dict[tuple[int, str], list[int]] = {}  # what the chip's memory holds of each table
        self.rng = np.random.default_rng(seed)
        for rid in (0, 1):
            self.pg.new(rid)
        self.written = 0  # words the host wrote into the chip's memory

    def append(self, rid: int) -> None:
        kv = self.rng.integers(-127, 128, self.pg.row_shape)
        self.pg.append(rid, kv)
        self.written += len(self.pg.groups) * self.row_words  # the row, in each group's page
        for group in self.pg.groups:  # a descriptor is rewritten where the table changed
            key = (rid, group.name)
            now = list(self.pg.pool.table[key])
            old = self.tables.get(key, [])
            self.written += sum(1 for i, p in enumerate(now) if i >= len(old) or old[i] != p)
            self.tables[key] = now

    def host_copy_words(self, rid: int) -> int:
        """Gather every row each layer attends into a contiguous copy, as a host must when the chip
        reads K and V contiguous; returns the words written (K and V, both heads, int8 packed)."""
        words = 0
        for layer in range(self.pg.n_layers):
            k, v = self.pg.gather(rid, layer)
            for x in (k, v):
                words += len(isa.pack_int8_rows(x.reshape(-1, HEAD_DIM).astype(np.int64)))
        return words

    def image(self, rid: int, layer: int, head: int) -> tuple[np.ndarray, pa.PagedKV]:
        """The chip's external memory: the pool page for page, then the layer's block table."""
        pool = self.pg.pool
        ext = isa.pack_int8_rows(pool.pool.reshape(-1, HEAD_DIM).astype(np.int64))
        group, index = self.pg._locate(layer)
        key = (rid, group.name)
        table = np.asarray(pool.table[key], dtype=np.int64) * self.page_words
        dropped = pool.dropped[key]
        table_ext = len(ext)
        ext = np.concatenate([ext, table.astype(np.uint32)])
        k_off = ((index * 2 + 0) * KV_HEADS + head) * self.dw
        v_off = ((index * 2 + 1) * KV_HEADS + head) * self.dw
        # descriptor i of logical page i: the table starts at the first page not dropped
        return ext, pa.PagedKV(table_ext - dropped, dropped + len(table), PAGE.bit_length() - 1, self.row_words,
                               k_off, v_off, HEAD_DIM)


MAX_CONTEXT = largest_context()


def arguments(ap: Parser) -> None:
    ap.add_argument("--contexts", type=int_range(PAGE, MAX_CONTEXT), nargs="+", default=list(CONTEXTS), metavar="T",
                    help=f"context lengths in tokens, {PAGE}..{MAX_CONTEXT} (default {' '.join(map(str, CONTEXTS))})")
    ap.add_argument("--seed", type=int_range(0, 2**31), default=0, help="the tokens' and queries' seed (default 0)")


def main(args) -> int:
    memory_per_program("paged-attention")
    distinct("--contexts", args.contexts)
    contexts = sorted(args.contexts)
    last = contexts[-1]
    host = Host(pool_pages(last), args.seed)
    rng = np.random.default_rng(args.seed + 1)
    q8 = rng.integers(-127, 128, (GROUP, HEAD_DIM))
    qa, qs, smul = 7803, 24, isa.SM_SCALE_ONE  # int8 logits of std about 20 in steps of 1/16
    kinds = ", ".join("global" if w is None else f"windowed W={w}" for w in WINDOWS)
    print(f"one request of the mixed model's layers ({kinds}), "
          f"{KV_HEADS} KV heads of {HEAD_DIM}, pages of {PAGE} rows in one pool with a second request")
    print(f"{'T':>6} | {'host words/step':>15} {'chip gather':>11} {'removed':>8} | {'LOADs':>9} {'GATHERs':>9} "
          f"{'extra':>6} {'extra %':>7} {'pages':>6} {'progs':>5} {'equal':>5}")
    problems, checks = [], 0
    fed = 0
    progress = Progress("tokens appended", last - PAGE)
    for context in contexts:
        start = time.time()
        while fed < context - PAGE:  # up to one page before the context: then measure each step
            host.append(0)
            fed += 1
            if fed % NEIGHBOUR_EVERY == 0:
                host.append(1)
            progress.step()
        with_gather = host_copy = 0
        steps = context - fed
        while fed < context:  # the steps that bring the context to T: the row, the table, the copy
            before = host.written
            host.append(0)
            fed += 1
            with_gather += host.written - before
            host_copy += host.written - before + host.host_copy_words(0)
        ext, paged = host.image(0, LAYER, HEAD)
        k, v = host.pg.gather(0, LAYER)
        lo, hi = host.pg.attended(0, LAYER)
        kc = isa.pack_int8_rows(k[:, HEAD].astype(np.int64))
        vc = isa.pack_int8_rows(v[:, HEAD].astype(np.int64))
        prog_g = pa.build(q8, ext, paged, lo, hi, qa, qs, smul)
        prog_c = pa.build(q8, np.concatenate([kc, vc]), pa.Contiguous(0, len(kc), HEAD_DIM), lo, hi, qa, qs, smul)
        rg, rc = pa.run(prog_g), pa.run(prog_c)
        equal = bool((rg.out == rc.out).all())
        tiled = ta.build(q8, k[:, HEAD].astype(np.int64), v[:, HEAD].astype(np.int64), qa, qs, smul, tile=pa.TILE)
        if len(tiled.code) // isa.WORDS_PER_INSTR <= isa.IMEM_INSTRS:  # tiled_attention's own program agrees too
            equal = equal and bool((ta.run(tiled)[0] == rg.out).all())
        checks += 1
        if not equal:
            problems.append(f"T={context}: the gathered attention differs from the contiguous one")
        n_pages = ((hi - 1) // PAGE) - (lo // PAGE) + 1
        extra = rg.cycles - rc.cycles
        print(f"{context:>6} | {host_copy / steps:>15,.0f} {with_gather / steps:>11,.1f} "
              f"{1 - with_gather / host_copy:>7.2%} | {rc.cycles:>9,} {rg.cycles:>9,} {extra:>6,} "
              f"{extra / rc.cycles:>7.2%} {n_pages:>6} {len(prog_g.segments):>5} {'yes' if equal else 'NO':>5}   "
              f"({time.time() - start:.1f} s)", flush=True)
    print("host words/step: the new row into its page and every attended row of the four layers copied "
          "contiguous; chip gather: the new row and the descriptors that changed (means over the 16 steps "
          "ending at T). LOADs / GATHERs: exact cycles (c0, summed over the programs) of layer 1's attention "
          f"for one GQA group, tiles of {pa.TILE} keys; extra = GATHERs - LOADs; pages = descriptors read.")
    print(runs.footer({**runs.provenance(), "chip": "machine model"}))
    return finish(problems, checks,
                  f"{checks} contexts: the gathered attention equals the contiguous one word for word")
