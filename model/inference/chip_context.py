"""Cycles of a decode step of the mixed model on GA2 against the context, for three layouts of the
same four layers: as the model is (windowed / global / windowed / global), every layer global, and
every layer windowed (W = 128). The hardware version of the chapter's KV-cache benchmark.

A step is the programs ``MixedChip.step`` runs (per layer and KV group a projection and an
attention program, per layer an output program). The cycles a program takes on the machine model
depend on its code and never on its data (no instruction's timing reads a value, and the external
memory answers after a fixed latency), so each distinct program is run once, on a zero image, and
its cycles are reused: the projection and output programs per layer and group, the one-shot
attention per layer, group and visible rows, the tiled attention per part shape (rows, first, last;
its layers' programs differ only in immediates: the logits' multiplier, smul, the output shift).
``tests/test_chip_context.py`` checks that independence on random data.

The word bound of a step is the words it must move through the external port at one a cycle: every
weight (the projections, the rotary pair swap, the output projections, the unembedding) and every
K and V row the attention reads; the KV memory is the rows each layout keeps (a windowed layer at
most W per KV head).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from capra import config, isa, run
from capra import paged_attention as pa
from capra import tiled_attention as ta

from .chip_pages import ChipPages
from .mixed_chip import MixedChip, attn_graph, out_graph, proj_graph

LAYOUTS = ("mixed", "all-global", "all-windowed")


@dataclass
class StepCost:
    """One decode step of one layout at one context."""

    layout: str
    context: int
    cycles: int
    word_bound: int
    kv_rows: int  # K/V rows kept, over every layer and KV head
    kv_words: int  # their words: K and V, head_dim / 4 each
    programs: int
    host_words: int = 0  # words the host writes into the chip's external memory for the step (not weights)

    @property
    def efficiency(self) -> float:
        return self.word_bound / self.cycles


def windowed_layers(chip: MixedChip, layout: str) -> list[bool]:
    """Which layers attend through the window in `layout`."""
    if layout == "mixed":
        return [lw.windowed for lw in chip.model.layers]
    if layout in LAYOUTS:
        return [layout == "all-windowed"] * chip.model.n_layers
    raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")


class StepCycles:
    """Cycles of a decode step's programs on the machine model, each distinct program run once."""

    def __init__(self, chip: MixedChip, fetch: str = "gather") -> None:
        if fetch not in ("gather", "load"):
            raise ValueError(f"fetch must be 'gather' or 'load', got {fetch!r}")
        self.chip = chip
        self.fetch = fetch  # a paged chip's attention: its tiles gathered, or (to compare) loaded contiguous
        self._cycles: dict[tuple, int] = {}

    def _machine(self, key: tuple, P, shapes: dict) -> int:
        if key not in self._cycles:
            with config.use(self.chip.cfg):
                _out, mach = run(P, {n: np.zeros(s) for n, s in shapes.items()}, machine=True)
            self._cycles[key] = mach.counters.cycles
        return self._cycles[key]

    def dense(self, kind: str, layer: int, group: int = 0) -> int:
        """A projection (kind "proj") or output ("out") program."""
        g = proj_graph(self.chip.model, layer, group) if kind == "proj" else out_graph(self.chip.model, layer)
        return self._machine((kind, layer, group), self.chip.program(kind, layer, group),
                             {n: g.shape(n) for n in g.inputs})

    def attention(self, layer: int, group: int, rows: int, lo: int = 0) -> tuple[int, int]:
        """(cycles, programs) of one KV group's attention over `rows` visible rows, the first of
        them row `lo` of the context (with a paged K/V the gathers' pages depend on where it starts)."""
        chip = self.chip
        if chip.kv == "paged":
            return self._gathered(layer, group, rows, lo)
        if rows <= chip.one_shot_rows:
            g = attn_graph(chip.model, layer, group, rows)
            return self._machine(("attn", layer, group, rows), chip.program("attn", layer, group, rows),
                                 {n: g.shape(n) for n in g.inputs}), 1
        parts = chip.tiled_parts(rows)
        total = 0
        for i, (lo, hi) in enumerate(parts):
            first, last = i == 0, i == len(parts) - 1
            key = ("tiled", hi - lo, first, last)
            if key not in self._cycles:
                rep = chip.model.n_heads // chip.model.n_kv_heads
                hd = chip.model.head_dim
                p = chip.tiled_params(layer, group)
                zeros = np.zeros((hi - lo, hd), dtype=np.int64)
                o32 = None if first else np.zeros((rep, hd), dtype=np.int64)
                prog = ta.build_part(np.zeros((rep, hd), dtype=np.int64), zeros, zeros, p.qa, p.qs, p.smul,
                                     chip.tile, [ta.state_init(s) for s in p.sinks], o32, last=last,
                                     out_shift=p.out_shift, code=chip.tiled_code(layer, group, hi - lo, first, last))
                with config.use(chip.ext_config(len(prog.ext))):
                    self._cycles[key] = ta.run(prog)[1].counters.cycles
            total += self._cycles[key]
        return total, len(parts)

    def _gathered(self, layer: int, group: int, rows: int, lo: int) -> tuple[int, int]:
        """The gathered attention's (cycles, programs): over rows lo .. lo + rows - 1 of pages of
        ``chip_pages.PAGE`` rows, laid out in order on a zero image. Its timing depends on the pages
        its gathers touch (three cycles a page) and never on where the pages lie, so the pool here
        holds just this layer's K and V of one head (a row stride of two K/V rows, not the pool's).
        With ``fetch="load"`` the same programs LOAD each tile from a contiguous copy instead: the
        difference is what the gathers cost."""
        chip = self.chip
        page = ChipPages.page_of(chip)
        shift = page.bit_length() - 1
        key = (self.fetch, rows, lo % page)
        if key not in self._cycles:
            hd = chip.model.head_dim
            dw = isa.words_for(hd)
            first, last = lo >> shift, (lo + rows - 1) >> shift
            n_pages = last - first + 1
            if self.fetch == "gather":
                image = np.zeros(n_pages + n_pages * page * 2 * dw, dtype=np.uint32)
                image[:n_pages] = n_pages + np.arange(n_pages) * page * 2 * dw
                where = pa.PagedKV(-first, last + 1, shift, 2 * dw, 0, dw, hd)
            else:  # the same programs with each tile LOADed from a contiguous copy of the rows
                image = np.zeros(2 * rows * dw, dtype=np.uint32)
                where = pa.Contiguous(0, rows * dw, hd)
            p = chip.tiled_params(layer, group)
            with config.use(chip.cfg):
                prog = pa.build(np.zeros((len(p.sinks), hd), dtype=np.int64), image, where, lo, lo + rows, p.qa, p.qs,
                                p.smul, sink=list(p.sinks), out_shift=p.out_shift, tile=chip.paged_tile)
            with config.use(chip.ext_config(len(prog.ext))):
                got = pa.run(prog)
            self._cycles[key] = (got.cycles, len(prog.segments))
        return self._cycles[key]


def const_words(chip: MixedChip, kind: str, layer: int, group: int = 0) -> int:
    """Words of a program's constants (its weights and the rotary swap), as compiled."""
    g = proj_graph(chip.model, layer, group) if kind == "proj" else out_graph(chip.model, layer)
    P = chip.program(kind, layer, group)
    return sum(P.tensors[n].words for n, node in g.nodes.items() if node.op == "const")


def weight_words(chip: MixedChip) -> int:
    """Words of every weight a decode step reads: each program's constants, once."""
    m = chip.model
    return sum(const_words(chip, "proj", layer, grp) for layer in range(m.n_layers) for grp in range(m.n_kv_heads)) \
        + sum(const_words(chip, "out", layer) for layer in range(m.n_layers))


def kv_rows(chip: MixedChip, layout: str, context: int) -> int:
    """K/V rows `layout` keeps at `context` tokens, over every layer and KV head."""
    m = chip.model
    return sum((min(context, m.window) if w else context) * m.n_kv_heads for w in windowed_layers(chip, layout))


def largest_context(chip: MixedChip, layout: str, words: int = config.EXT_MEMORY_MAX) -> int:
    """The longest context whose weights and KV (K and V rows of every layer) fit `words` of
    external memory, by bisection (0 when the weights alone do not fit)."""
    per_row = 2 * isa.words_for(chip.model.head_dim)
    weights = weight_words(chip)

    def fits(t: int) -> bool:
        return weights + per_row * kv_rows(chip, layout, t) <= words

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
        if hi > words:  # no layout grows this slowly but the all-windowed, bounded by the window
            return words
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def step_cost(costs: StepCycles, layout: str, context: int) -> StepCost:
    """Cycles, word bound and KV memory of the decode step at `context` tokens (the new one included)."""
    chip = costs.chip
    m = chip.model
    row_words = isa.words_for(m.head_dim)
    cycles = bound = rows_kept = programs = host = 0
    for layer, windowed in enumerate(windowed_layers(chip, layout)):
        rows = min(context, m.window) if windowed else context
        for grp in range(m.n_kv_heads):
            c, n = costs.attention(layer, grp, rows, context - rows)
            cycles += costs.dense("proj", layer, grp) + c
            bound += const_words(chip, "proj", layer, grp) + 2 * rows * row_words
            rows_kept += rows
            programs += 1 + n
            host += input_words(chip, "proj", layer, grp) + attention_input_words(chip, layer, grp, rows)
        cycles += costs.dense("out", layer)
        bound += const_words(chip, "out", layer)
        programs += 1
        host += input_words(chip, "out", layer)
    if chip.kv == "paged":
        host += paged_step_words(chip, layout, context)
    return StepCost(layout, context, cycles, bound, rows_kept, 2 * rows_kept * row_words, programs, host)


def input_words(chip: MixedChip, kind: str, layer: int, group: int = 0, rows: int = 0) -> int:
    """Words of a compiled program's inputs (what the host writes into its image; its constants,
    the weights, are not counted: they stay)."""
    P = chip.program(kind, layer, group, rows)
    return sum(P.tensors[n].words for n in P.inputs)


def attention_input_words(chip: MixedChip, layer: int, group: int, rows: int) -> int:
    """Words the host writes for one KV group's attention over `rows` rows: a contiguous K/V's
    one-shot program's inputs (q, K, V), or its tiled parts' images (K and V rows, q, the states,
    and O after the first part); a paged K/V's q and states only (the rows are in the pages)."""
    rep = chip.model.n_heads // chip.model.n_kv_heads
    hd = chip.model.head_dim
    if chip.kv == "paged":
        return rep * isa.words_for(hd) + ta.STATE_WORDS * rep
    if rows <= chip.one_shot_rows:
        return input_words(chip, "attn", layer, group, rows)
    return sum(ta.layout(rep, hd, hi - lo).out + (rep * hd if i else 0)
               for i, (lo, hi) in enumerate(chip.tiled_parts(rows)))


def paged_step_words(chip: MixedChip, layout: str, context: int) -> int:
    """Words the host writes into a paged K/V at the step that brings the context to `context`:
    the new token's row in each group's page and the descriptors that changed, counted by the
    host's own bookkeeping (``chip_pages.ChipPages``) run from an empty cache to that step."""
    windows = [chip.model.window if w else None for w in windowed_layers(chip, layout)]
    pages = ChipPages(chip.model, context, windows=windows)
    rows = np.zeros((chip.model.head_dim,), dtype=np.int64)
    for _ in range(context):
        before = pages.written
        pages.begin_step()
        for layer in range(chip.model.n_layers):
            for head in range(chip.model.n_kv_heads):
                pages.write_row(layer, head, rows, rows)
        pages.end_step()
    return pages.written - before
