"""Decode attention of one grouped-query group over a paged K/V cache, read where the pages lie.

The host keeps a layer's keys and values in pages of one pool (``serving.page_groups``): a page
holds `page` rows, a row one token's K and V for every layer of a group and every KV head, and a
request's block table names its pages in order, scattered over the pool. ``capra.tiled_attention``
streams K and V from one contiguous run of rows, so a host that pages its cache must first gather
the rows a step attends into such a run: every step, every attended row of every layer. Here the
chip does it instead: each K or V tile is one GATHER (docs/isa.md) that reads the tile's rows
through the block table, from the pages where they lie, so the host writes only the new token's
row and, when a page is taken, one descriptor.

The program is ``capra.tiled_attention``'s own (``tiled_attention.emit``: an MM of the queries
against the tile's keys, one ``smax.step`` per query row, an MM of the weights with the tile's
values, one ``smax.acc`` per row, one ``smax.norm`` per row at the end); this module gives it the
fetch of a tile: two GATHERs (a ``PagedKV`` source) or two LOADs from a contiguous copy (a
``Contiguous`` one), so the two can be checked word for word against each other and their cycles
compared exactly. A context longer than the
instruction memory holds is split into *segments* of whole tiles, one program each, that hand the
running state (m, l, alpha) and the running output O (int32) on through external memory: the
arithmetic is that of one long program, so the results are the same words.

Scratchpad: the K and V tile buffers (two each) in bank groups 0 and 1, the block table's slice in
group 2 (only the DMA reads it, on its own read port, so it never meets a compute instruction at a
bank), what compute writes in group 3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import asm, config, isa
from . import tiled_attention as ta
from .machine import Machine

TILE = 32  # keys per tile: four tile buffers of 64-dimensional rows fill bank groups 0 and 1


@dataclass(frozen=True)
class PagedKV:
    """Where a paged K/V of one GQA group lies in external memory.

    Descriptor i (the page that holds logical rows i * 2^page_shift ..) is the external word
    ``table_ext + i``: the address of the page's first row. Row r of a page starts
    ``r * row_stride`` words after it; the group's keys are at ``k_off`` words into a row and its
    values at ``v_off``, ``head_dim / 4`` words each (int8, packed)."""

    table_ext: int
    pages: int  # descriptors in the table
    page_shift: int
    row_stride: int
    k_off: int
    v_off: int
    head_dim: int

    @property
    def rows_per_page(self) -> int:
        return 1 << self.page_shift


@dataclass(frozen=True)
class Contiguous:
    """A contiguous copy of the attended rows (what a host gather builds): K row i at
    ``k_ext + i * head_dim / 4``, V row i at ``v_ext + ...``, for rows lo .. hi - 1 from index 0."""

    k_ext: int
    v_ext: int
    head_dim: int


@dataclass
class Segment:
    code: list[int]
    tiles: tuple[int, int]  # its tiles first .. last - 1


@dataclass
class PagedAttention:
    segments: list[Segment]
    ext: np.ndarray  # the external memory the first segment starts from
    out_ext: int  # G rows of D/4 words of int8 output
    groups: int
    head_dim: int
    context: int  # keys attended
    tile: int
    gather: bool
    state_ext: int  # the rows' states, STATE_WORDS a row: in; out of every segment but the last
    o_ext: int  # the running output (G x D int32): in and out between segments


def choose_tile(head_dim: int) -> int:
    """The largest multiple of 16 keys whose two K and two V buffers fit two bank groups (the
    block table takes the third, what compute writes the fourth), and at most MM_MAX_K."""
    return min(isa.MM_MAX_K, isa.SRAM_GROUP_WORDS // (2 * isa.words_for(head_dim)) // 16 * 16)


def _scratch(g: int, d: int, tile: int) -> ta.Scratch:
    """The K buffers in bank group 0, the V buffers in group 1, the working set in group 3 (the
    block table goes to group 2, ``TABLE_GROUP``)."""
    dw = d // 4
    gw = isa.SRAM_GROUP_WORDS
    if 2 * tile * dw > gw:
        raise ValueError(f"paged attention: two tiles of {tile} keys do not fit a bank group")
    return ta.scratch(g, d, tile, (0, tile * dw), (gw, gw + tile * dw))


TABLE_GROUP = 2  # the bank group of the block table's slice: compute never reads it


def build(q8: np.ndarray, ext: np.ndarray, source: PagedKV | Contiguous, lo: int, hi: int, qa: int, qs: int,
          smul: int, *, sink=None, out_shift: int = 0, tile: int = TILE,
          max_tiles: int | None = None) -> PagedAttention:
    """The programs for q8 (G x D int8) attending rows lo .. hi - 1 of `source` in external memory
    `ext` (the words from 0 the programs start from; this adds the queries, the states and room for
    the running output and the result after them). With a PagedKV every tile is fetched by two
    GATHERs through its block table; with a Contiguous copy by two LOADs. logits = requant(q.k, qa,
    qs), int8 of scale smul / 2^14; the output is int8 with V's scale times 2^-out_shift. `sink`:
    None, one int8 sink logit for every row, or one (or None) per row. max_tiles caps a segment's
    tiles (default: as many as the instruction memory holds)."""
    g, d = q8.shape
    if d != source.head_dim or d % 4 or not 0 <= lo < hi:
        raise ValueError(f"paged attention: q {q8.shape}, head_dim {source.head_dim}, rows {lo}..{hi - 1}")
    gather = isinstance(source, PagedKV)
    if gather and (hi - 1) >> source.page_shift >= source.pages:
        raise ValueError(f"paged attention: row {hi - 1} lies past the block table's {source.pages} pages")
    t = hi - lo
    ntiles = -(-t // tile)
    sp = _scratch(g, d, tile)
    dw = d // 4
    # external memory after the caller's words: q, the states (4 words a row), O (int32), the output
    q_ext = len(ext)
    st_ext = q_ext + g * dw
    o_ext = st_ext + 4 * g
    out_ext = o_ext + g * d
    image = np.zeros(out_ext + g * dw, dtype=np.uint32)
    image[:len(ext)] = ext
    image[q_ext:st_ext] = isa.pack_int8_rows(q8)
    for r, row_sink in enumerate(ta._sinks(sink, g)):
        image[st_ext + ta.STATE_WORDS * r : st_ext + ta.STATE_WORDS * r + isa.SM_STATE_WORDS] = \
            [w & 0xFFFFFFFF for w in ta.state_init(row_sink)]
    cfg = dataclasses.replace(config.active(), ext_memory=max(config.active().ext_memory, len(image)))
    segments = []
    with config.use(cfg):
        first = 0
        # a gathering segment's descriptors fit the block table's bank group (a page less, for a
        # segment that starts inside a page)
        table_tiles = max(1, ((isa.SRAM_GROUP_WORDS - 1) << source.page_shift) // tile) if gather else ntiles
        while first < ntiles:
            cap = min(ntiles - first, max_tiles or ntiles, table_tiles)
            while True:
                code = _emit(q8.shape, source, lo, hi, tile, first, first + cap, ntiles, sp,
                             ta.Addresses(q_ext, st_ext, o_ext, out_ext), qa, qs, smul, out_shift, image)
                if len(code) // isa.WORDS_PER_INSTR <= isa.IMEM_INSTRS:
                    break
                cap = max(1, cap * isa.IMEM_INSTRS * 9 // (10 * (len(code) // isa.WORDS_PER_INSTR)))
            segments.append(Segment(code, (first, first + cap)))
            first += cap
    return PagedAttention(segments, image, out_ext, g, d, t, tile, gather, st_ext, o_ext)


def _emit(shape, source, lo, hi, tile, j0, j1, ntiles, sp, ext, qa, qs, smul, out_shift, image) -> list[int]:
    """One segment: tiles j0 .. j1 - 1 of the ntiles over rows lo .. hi - 1, the program of
    ``tiled_attention.emit`` with a fetch of its own."""
    g, d = shape
    dw = d // 4
    gather = isinstance(source, PagedKV)
    table = TABLE_GROUP * isa.SRAM_GROUP_WORDS
    state = {}

    def load_table(e) -> None:  # the block table's slice for this segment's rows, in bank group 2
        p0 = (lo + j0 * tile) >> source.page_shift
        p1 = (lo + min(hi - lo, j1 * tile) - 1) >> source.page_shift
        if p1 - p0 + 1 > isa.SRAM_GROUP_WORDS:
            raise ValueError(f"paged attention: a segment needs {p1 - p0 + 1} descriptors, the table holds "
                             f"{isa.SRAM_GROUP_WORDS}")
        state["base"] = p0 << source.page_shift  # the gathers count rows from page p0's first
        tbl = e.transfer(asm.load(table, source.table_ext + p0, 1, p1 - p0 + 1), "load the block table")
        e.wait_for(tbl, "the descriptors, before a gather reads them")
        sram = np.zeros(isa.SRAM_WORDS, dtype=np.uint32)
        sram[table : table + p1 - p0 + 1] = image[source.table_ext + p0 : source.table_ext + p1 + 1]
        state["sram"] = sram

    def fetch(e, j: int, n: int, k_buf: int, v_buf: int) -> None:
        row = lo + (j0 + j) * tile
        if gather:
            for buf, off, what in ((k_buf, source.k_off, "K"), (v_buf, source.v_off, "V")):
                e.transfer(asm.gather(buf, table, n, dw, first=row - state["base"], page_shift=source.page_shift,
                                      ext_stride=source.row_stride, offset=off),
                           f"gather {what} tile {j0 + j}", sram=state["sram"])
        else:
            e.transfer(asm.load(k_buf, source.k_ext + (row - lo) * dw, 1, n * dw), f"load K tile {j0 + j}")
            e.transfer(asm.load(v_buf, source.v_ext + (row - lo) * dw, 1, n * dw), f"load V tile {j0 + j}")

    n_keys = min(hi - lo, j1 * tile) - j0 * tile
    return ta.emit(g, d, n_keys, tile, sp, ext, fetch, qa, qs, smul, out_shift, j0 == 0, j1 == ntiles,
                   before_fetch=load_table if gather else None, parity=j0 % 2)


@dataclass
class Run:
    out: np.ndarray  # G x D int8
    cycles: int  # c0 over every segment
    counters: list[list[int]]  # each segment's seven counters
    instructions: int


def run(prog: PagedAttention, ext_latency: int | None = None) -> Run:
    """Run the segments one after another on the machine model, each from the external memory the
    one before left: the output and the cycles (the sum of the segments' c0)."""
    ext = prog.ext
    cfg = dataclasses.replace(config.active(), ext_memory=max(config.active().ext_memory, len(ext)))
    counters = []
    with config.use(cfg):
        for seg in prog.segments:
            m = Machine(ext=ext.copy(), ext_latency=ext_latency)
            m.run(seg.code)
            ext = m.ext
            counters.append(m.counters.with_holds())
    words = ext[prog.out_ext : prog.out_ext + prog.groups * prog.head_dim // 4]
    return Run(isa.unpack_int8_rows(words, prog.groups, prog.head_dim), sum(c[0] for c in counters), counters,
               sum(len(s.code) for s in prog.segments) // isa.WORDS_PER_INSTR)
