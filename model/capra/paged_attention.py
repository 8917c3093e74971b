"""Decode attention of one grouped-query group over a paged K/V cache, read where the pages lie.

The host keeps a layer's keys and values in pages of one pool (``serving.page_groups``): a page
holds `page` rows, a row one token's K and V for every layer of a group and every KV head, and a
request's block table names its pages in order, scattered over the pool. ``capra.tiled_attention``
streams K and V from one contiguous run of rows, so a host that pages its cache must first gather
the rows a step attends into such a run: every step, every attended row of every layer. Here the
chip does it instead: each K or V tile is one GATHER (docs/isa.md) that reads the tile's rows
through the block table, from the pages where they lie, so the host writes only the new token's
row and, when a page is taken, one descriptor.

The program is the same online-softmax attention as ``capra.tiled_attention`` (an MM of the
queries against the tile's keys, one ``smax.step`` per query row, an MM of the weights with the
tile's values, one ``smax.acc`` per row, one ``smax.norm`` per row at the end), with the same
instruction stream from the compiler's emitter; only the fetch of a tile differs: two GATHERs
(``gather=True``) or two LOADs from a contiguous copy (``gather=False``), so the two can be checked
word for word against each other and their cycles compared exactly. A context longer than the
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
from .compiler import _Emitter
from .machine import Machine
from .tiled_attention import state_init

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


def _layout(g: int, d: int, tile: int, sram_words: int, group_words: int) -> dict[str, object]:
    dw = d // 4
    sw = isa.words_for(tile)
    kb = [0, tile * dw]
    vb = [group_words, group_words + tile * dw]
    if 2 * tile * dw > group_words:
        raise ValueError(f"paged attention: two tiles of {tile} keys do not fit a bank group")
    table = 2 * group_words
    top = sram_words - group_words
    q_s = top
    st_s = q_s + g * dw
    s_s = [st_s + 4 * g, st_s + 4 * g + g * sw]
    t_s = [s_s[1] + g * sw, s_s[1] + g * sw + g * d]
    o_s = t_s[1] + g * d
    out_s = o_s + g * d
    if out_s + g * dw > sram_words:
        raise ValueError("paged attention: the working set does not fit the last bank group")
    return dict(kb=kb, vb=vb, table=table, table_room=group_words, q_s=q_s, st_s=st_s, s_s=s_s, t_s=t_s,
                o_s=o_s, out_s=out_s, sw=sw, dw=dw)


def build(q8: np.ndarray, ext: np.ndarray, source: PagedKV | Contiguous, lo: int, hi: int, qa: int, qs: int,
          smul: int, *, sink: int | None = None, out_shift: int = 0, tile: int = TILE,
          max_tiles: int | None = None) -> PagedAttention:
    """The programs for q8 (G x D int8) attending rows lo .. hi - 1 of `source` in external memory
    `ext` (the words from 0 the programs start from; this adds the queries, the states and room for
    the running output and the result after them). With a PagedKV every tile is fetched by two
    GATHERs through its block table; with a Contiguous copy by two LOADs. logits = requant(q.k, qa,
    qs), int8 of scale smul / 2^14; the output is int8 with V's scale times 2^-out_shift.
    max_tiles caps a segment's tiles (default: as many as the instruction memory holds)."""
    g, d = q8.shape
    if d != source.head_dim or d % 4 or not 0 <= lo < hi:
        raise ValueError(f"paged attention: q {q8.shape}, head_dim {source.head_dim}, rows {lo}..{hi - 1}")
    gather = isinstance(source, PagedKV)
    if gather and (hi - 1) >> source.page_shift >= source.pages:
        raise ValueError(f"paged attention: row {hi - 1} lies past the block table's {source.pages} pages")
    t = hi - lo
    ntiles = -(-t // tile)
    lay = _layout(g, d, tile, isa.SRAM_WORDS, isa.SRAM_GROUP_WORDS)
    dw = lay["dw"]
    # external memory after the caller's words: q, the states (4 words a row), O (int32), the output
    q_ext = len(ext)
    st_ext = q_ext + g * dw
    o_ext = st_ext + 4 * g
    out_ext = o_ext + g * d
    image = np.zeros(out_ext + g * dw, dtype=np.uint32)
    image[:len(ext)] = ext
    image[q_ext:st_ext] = isa.pack_int8_rows(q8)
    for r in range(g):
        image[st_ext + 4 * r : st_ext + 4 * r + 3] = state_init(sink)
    cfg = dataclasses.replace(config.active(), ext_memory=max(config.active().ext_memory, len(image)))
    segments = []
    with config.use(cfg):
        first = 0
        while first < ntiles:
            cap = min(ntiles - first, max_tiles or ntiles)
            while True:
                code = _emit(q8.shape, source, lo, hi, tile, first, first + cap, ntiles, lay,
                             q_ext, st_ext, o_ext, out_ext, qa, qs, smul, out_shift, image)
                if len(code) // isa.WORDS_PER_INSTR <= isa.IMEM_INSTRS:
                    break
                cap = max(1, cap * isa.IMEM_INSTRS * 9 // (10 * (len(code) // isa.WORDS_PER_INSTR)))
            segments.append(Segment(code, (first, first + cap)))
            first += cap
    return PagedAttention(segments, image, out_ext, g, d, t, tile, gather)


def _emit(shape, source, lo, hi, tile, j0, j1, ntiles, lay, q_ext, st_ext, o_ext, out_ext, qa, qs, smul,
          out_shift, image) -> list[int]:
    """One segment: tiles j0 .. j1 - 1 of the ntiles over rows lo .. hi - 1."""
    g, d = shape
    dw, kb, vb = lay["dw"], lay["kb"], lay["vb"]
    q_s, st_s, s_s, t_s, o_s, out_s = (lay[k] for k in ("q_s", "st_s", "s_s", "t_s", "o_s", "out_s"))
    gather = isinstance(source, PagedKV)
    e = _Emitter()
    e.emit(asm.qcfg(qa=qa, qb=0, shift=qs), "qcfg: the logits' scale")
    head = [e.transfer(asm.load(q_s, q_ext, g, dw), "load q"),
            e.transfer(asm.load(st_s, st_ext, 1, 4 * g), "load the states")]
    if j0:
        head.append(e.transfer(asm.load(o_s, o_ext, 1, g * d), "load the running output"))
    sram = None
    if gather:  # the block table's slice for this segment's rows, in bank group 2
        p0 = (lo + j0 * tile) >> source.page_shift
        p1 = (lo + min(hi - lo, j1 * tile) - 1) >> source.page_shift
        if p1 - p0 + 1 > lay["table_room"]:
            raise ValueError(f"paged attention: a segment needs {p1 - p0 + 1} descriptors, the table holds "
                             f"{lay['table_room']}")
        base = p0 << source.page_shift  # the gathers count rows from page p0's first, descriptor p0 at lay["table"]
        tbl = e.transfer(asm.load(lay["table"], source.table_ext + p0, 1, p1 - p0 + 1), "load the block table")
        e.wait_for(tbl, "the descriptors, before a gather reads them")
        sram = np.zeros(isa.SRAM_WORDS, dtype=np.uint32)
        sram[lay["table"] : lay["table"] + p1 - p0 + 1] = image[source.table_ext + p0 : source.table_ext + p1 + 1]

    def fetch(j: int) -> None:
        n = min(tile, hi - lo - j * tile)
        b = j % 2
        row = lo + j * tile
        if gather:
            for buf, off, what in ((kb[b], source.k_off, "K"), (vb[b], source.v_off, "V")):
                e.transfer(asm.gather(buf, lay["table"], n, dw, first=row - base, page_shift=source.page_shift,
                                      ext_stride=source.row_stride, offset=off),
                           f"gather {what} tile {j}", sram=sram)
        else:
            e.transfer(asm.load(kb[b], source.k_ext + (row - lo) * dw, 1, n * dw), f"load K tile {j}")
            e.transfer(asm.load(vb[b], source.v_ext + (row - lo) * dw, 1, n * dw), f"load V tile {j}")

    fetch(j0)
    if j1 - j0 > 1:
        fetch(j0 + 1)
    for w in head:
        e.wait_for(w, "q, the states and the running output")
    for j in range(j0, j1):
        n = min(tile, hi - lo - j * tile)
        b = j % 2
        nw = isa.words_for(n)
        e.compute(asm.mm(q_s, kb[b], s_s[b], g, d, n, out8=True), f"logits of tile {j}")
        for r in range(g):
            e.compute(asm.smax_step(s_s[b] + r * nw, st_s + 4 * r, s_s[b] + r * nw, n, smul), f"step {j} row {r}")
        dst = o_s if j == 0 else t_s[b]
        e.compute(asm.mm(s_s[b], vb[b], dst, g, n, d, brows=True, stride=d if g > 1 else 0),
                  f"weights x V, tile {j}")
        if j + 2 < j1:
            fetch(j + 2)
        if j:
            for r in range(g):
                e.compute(asm.smax_acc(t_s[b] + r * d, st_s + 4 * r, o_s + r * d, d), f"acc {j} row {r}")
    if j1 == ntiles:
        for r in range(g):
            e.compute(asm.smax_norm(o_s + r * d, st_s + 4 * r, out_s + r * dw, d, shift=out_shift),
                      f"norm row {r}")
        e.transfer(asm.store(out_s, out_ext, g, dw), "store the output")
    else:  # the running state and output for the next segment
        e.transfer(asm.store(st_s, st_ext, 1, 4 * g), "store the states")
        e.transfer(asm.store(o_s, o_ext, 1, g * d), "store the running output")
    e.emit(asm.halt(), "halt")
    return e.code


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
