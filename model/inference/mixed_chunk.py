"""Chunked prefill of the mixed model on GA2: C prompt tokens after a cached prefix, one chain of
programs per layer for all C rows at once.

A decode step (``mixed_chip.MixedChip.step``) runs a layer's projection and output programs for one
row: their weights (24,576 words a layer) cross the external port for every prompt token, four
times the words the 4 x 4 array's multiplies need for one row. A chunk program runs the same
arithmetic for C rows, so the weights load once per chunk. Per layer L and KV group g:

    cproj{L}g{g}c{C}   the decode projection program with x of C rows: Q (rep*C x head_dim, head-major:
                       head 0's C rows, then head 1's), k and v (C x head_dim); rotated on the chip at
                       each row's absolute position (the host's C and S rows, one per token)
    cattn{L}g{g}c{C}.. the group's attention for the chunk's rows that a decode step would run one-shot
                       (at most ``one_shot_rows`` visible keys): Q position-major (row rep*i + h), K and V
                       the keys the rows see (the cached prefix, within the window in a windowed layer,
                       then the chunk's own rotated keys)
    cout{L}c{C}        x + sum_h A_h @ Wo_h for C rows; after the last layer the logits and each row's argmax

Causal lengths. Row i of the chunk (absolute position p) sees keys [p + 1 - n_i, p + 1), n_i =
``visible_rows``: a different span of K for every row. Rather than masking a shared score matrix
(the ISA has no mask, and a masked logit is exactly zero in the softmax only when it lies 16 below
the row's maximum, which depends on the data), every row gets its own three instructions over its
own span: an MM of the row's rep query rows against ``rows(K, lo_i, hi_i)`` (a view: the span's
first key row is a word address, K's rows being head_dim / 4 words each), one SMAX per sink group
over exactly n_i logits with the head's sink, and an MM of the weights with ``rows(V, lo_i, hi_i)``.
These are the decode one-shot program's instructions with K and V loaded once for the chunk, so each
row's A is word for word the decode step's (the same multipliers, from the same calibrated ranges).
Each such MM has rep = 2 rows, which use half of the 4 x 4 array (an MM's passes give 4 x rt MACs a
cycle for rt rows up to 4): the price of exact per-row spans, small beside the projections' cycles
while the spans are short (docs/inference.md gives the measured split).

Rows a decode step would run tiled (a global layer past ``one_shot_rows`` keys) run the decode's
tiled arithmetic for several rows at once: ``ctiled{L}g{g}r{G}n{T}`` (``rows_tiled_code``) streams K
and V once, in the decode's tiles of ``tile`` keys from key 0, for G query rows (rep per position),
row r over its own first lengths[r] keys. Per tile: one MM of the rows that see a key of it (a
suffix: lengths grow along the chunk), a ``smax.step`` per row over the keys it sees, one MM of the
weights with V for the rows that see the whole tile and one per row that sees part of it (its own
reduction length: the A rows of an MM are packed at its K), a ``smax.acc`` per row; a ``smax.norm``
per row at the end. Each row's integers are the decode tiled program's over its keys (the same
tiles, the last cut at its length, the head's sink as its initial state). A row's working set
(q, state, two tiles' logits, two int32 weighted values, the running output, the output) lives in
the top bank group beside the K and V double buffers, so a program takes as many positions as fit
(``rows_tiled_fits``: 6 with tiles of 192 keys), and a chunk runs several. (A window longer than
the one-shot rows would need per-row first keys: such rows run ``MixedChip.attention`` one at a
time.) The host reorders Q from head-major (as the projection program writes it) to position-major,
and A back, between programs: int8 rows it hands on anyway.

The chunk's rotated k and v rows go to the host's cache as a decode step appends them (a windowed
layer keeps its last ``window`` rows). Every program's result is, row for row, the decode step's,
so the chunked prefill gives the per-token prefill's cache, residuals, logits and tokens word for
word, and equals ``mixed_prefill.VectorisedPrefill`` (an independent numpy evaluation of the decode
arithmetic); tests/test_mixed_chunk.py holds it to both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from capra import Graph, asm, compile_graph, config, isa
from capra import tiled_attention as ta
from capra.compiler import Program, _Emitter
from capra.machine import Machine

from .mixed_chip import (
    ChipRun,
    MixedChip,
    MixedChipError,
    out_graph,
    proj_graph,
    rotation_rows,
    sink_groups,
    visible_rows,
)

# rows of a chunk program: the most whose projection and output programs fit the mixed chip's
# 16,384-word scratchpad (at 20 the logits no longer do; tests/test_mixed_chunk.py compiles both sides)
CHUNK_MAX = 19


# ---- the graphs -------------------------------------------------------------------------------------


def chunk_proj_graph(model, layer: int, group: int, rows: int) -> Graph:
    """Q (rep*rows x head_dim, head-major, rotated), k (rotated) and v (rows x head_dim) of one KV
    group from x (rows x d_model): ``mixed_chip.proj_graph`` with `rows` rows of x."""
    return proj_graph(model, layer, group, rows, f"cproj{layer}g{group}c{rows}")


def chunk_attn_graph(model, layer: int, group: int, keys: int, spans: Sequence[tuple[int, int]]) -> Graph:
    """A (rep*len(spans) x head_dim, position-major) of one KV group: query row i's rep heads (rows
    rep*i .. rep*i + rep - 1 of q) against keys lo_i .. hi_i - 1 of K and V (`keys` rows each)."""
    rep = model.n_heads // model.n_kv_heads
    hd = model.head_dim
    n = len(spans)
    g = Graph(f"cattn{layer}g{group}c{n}k{keys}")
    q = g.input("q", (rep * n, hd), range_group=f"q{layer}")
    kk = g.input("K", (keys, hd), range_group=f"k{layer}")
    vv = g.input("V", (keys, hd), range_group=f"v{layer}")
    out = None
    for i, (lo, hi) in enumerate(spans):
        if not 0 <= lo < hi <= keys:
            raise MixedChipError(f"chunk attention row {i}: keys {lo}..{hi - 1} outside the {keys} rows of K")
        ki = g.rows(f"K{i}", kk, lo, hi)
        vi = g.rows(f"V{i}", vv, lo, hi)
        scores = g.matmul(f"scores{i}", g.rows(f"q{i}", q, rep * i, rep * i + rep), ki, transpose_b=True,
                          scale=1.0 / math.sqrt(hd), range_group=f"s{layer}")
        for heads, sink in sink_groups(model, layer, group):
            if len(heads) == rep:
                src, tag = scores, ""
            else:
                src = g.rows(f"scores{i}_{heads[0]}", scores, heads[0], heads[0] + 1)
                tag = f"_{heads[0]}"
            p = g.softmax(f"p{i}{tag}", src, sink=sink)
            a = g.matmul(f"a{i}{tag}", p, vi, range_group=f"a{layer}")
            out = a if out is None else g.concat(f"acat{i}{tag}", out, a)
    g.set_outputs([out])
    return g


def chunk_out_graph(model, layer: int, rows: int) -> Graph:
    """x + sum_h A_h @ Wo_h for `rows` rows (A of group g head-major: head i's rows at i*rows); after
    the last layer the logits and each row's argmax: ``mixed_chip.out_graph`` with `rows` rows."""
    return out_graph(model, layer, rows, f"cout{layer}c{rows}")


# ---- tiled attention for several query rows, each over its own causal length ---------------------


class RowsTiledTooLong(MixedChipError):
    """A rows-tiled attention whose code would not fit the instruction memory (one program, no parts)."""


@dataclass
class RowsTiled:
    """A tiled attention program for G query rows, row r over keys 0 .. lengths[r] - 1."""

    code: list[int]
    lengths: tuple[int, ...]
    k: int  # external word addresses: K rows, V rows, q rows, the row states, the int8 output
    v: int
    q: int
    state: int
    out: int
    words: int


def rows_tiled_fits(g: int, d: int, tile: int) -> bool:
    """Whether G rows' working set fits the top bank group (the K and V tiles fill the other three):
    q, a state, two tiles' logits, two tiles' int32 weighted values, the running output and the output."""
    dw, sw = d // 4, isa.words_for(tile)
    return g * (dw + ta.STATE_WORDS + 2 * sw + 3 * d + dw) <= isa.SRAM_GROUP_WORDS


def rows_tiled_code(lengths: Sequence[int], d: int, qa: int, qs: int, smul: int, tile: int,
                    out_shift: int) -> RowsTiled:
    """The program of ``tiled_attention``'s decode attention for G query rows at once, row r over
    its first lengths[r] keys (non-decreasing): tiles of `tile` keys from key 0, streamed through two
    K and two V buffers. Per tile one MM of the rows that see a key of it against its K, per row one
    ``smax.step`` over the keys it sees, one MM of the weights with V for the rows that see the whole
    tile and one per row that sees part of it (its own reduction length), per row one ``smax.acc``;
    at the end one ``smax.norm`` per row. Each row's integers are the decode program's over its keys
    (the same tiles, the last cut at its length): the chunk's global rows share the K/V stream.
    Raises MixedChipError when the rows' working set does not fit, RowsTiledTooLong when the code
    does not (about 27 instructions a tile for 12 rows: some 7,000 keys)."""
    g, t = len(lengths), max(lengths)
    if list(lengths) != sorted(lengths) or min(lengths) < 1:
        raise MixedChipError(f"row lengths must be positive and non-decreasing, got {list(lengths)}")
    if not rows_tiled_fits(g, d, tile):
        raise MixedChipError(f"{g} query rows' tiled attention does not fit the scratchpad's top bank group")
    dw, sw = d // 4, isa.words_for(tile)
    k_x, v_x = 0, t * dw
    q_x = 2 * t * dw
    st_x = q_x + g * dw
    out_x = st_x + ta.STATE_WORDS * g
    words = out_x + g * dw
    kb, vb = [0, tile * dw], [2 * tile * dw, 3 * tile * dw]
    q_s = isa.SRAM_WORDS - isa.SRAM_GROUP_WORDS
    st_s = q_s + g * dw
    s_s = [st_s + ta.STATE_WORDS * g, st_s + ta.STATE_WORDS * g + g * sw]
    t_s = [s_s[1] + g * sw, s_s[1] + g * sw + g * d]
    o_s = t_s[1] + g * d
    out_s = o_s + g * d
    cfg = config.active()
    with config.use(replace(cfg, ext_memory=max(cfg.ext_memory, words))):
        code = _emit_rows_tiled(lengths, d, qa, qs, smul, tile, out_shift, (k_x, v_x, q_x, st_x, out_x),
                                (kb, vb, q_s, st_s, s_s, t_s, o_s, out_s))
    if len(code) // 4 > isa.IMEM_INSTRS:
        raise RowsTiledTooLong(f"the tiled attention of {g} rows over {t} keys needs {len(code) // 4} instructions, "
                             f"more than the instruction memory's {isa.IMEM_INSTRS}")
    return RowsTiled(code, tuple(lengths), k_x, v_x, q_x, st_x, out_x, words)


def _emit_rows_tiled(lengths, d, qa, qs, smul, tile, out_shift, ext_at, sram_at) -> list[int]:
    g, t = len(lengths), max(lengths)
    dw = d // 4
    k_x, v_x, q_x, st_x, out_x = ext_at
    kb, vb, q_s, st_s, s_s, t_s, o_s, out_s = sram_at
    ntiles = -(-t // tile)
    e = _Emitter()
    e.emit(asm.qcfg(qa=qa, qb=0, shift=qs), "qcfg: the logits' scale")
    head = [e.transfer(asm.load(q_s, q_x, g, dw), "load q"),
            e.transfer(asm.load(st_s, st_x, 1, ta.STATE_WORDS * g), "load the states")]

    def fetch(j: int) -> None:
        n = min(tile, t - j * tile)
        e.transfer(asm.load(kb[j % 2], k_x + j * tile * dw, 1, n * dw), f"load K tile {j}")
        e.transfer(asm.load(vb[j % 2], v_x + j * tile * dw, 1, n * dw), f"load V tile {j}")

    ta.start_tiles(e, fetch, ntiles, head, "q and the states")
    for j in range(ntiles):
        j0, b = j * tile, j % 2
        n = min(tile, t - j0)
        nw = isa.words_for(n)
        live = next(r for r in range(g) if lengths[r] > j0)  # rows that see a key of this tile: a suffix
        full = next((r for r in range(g) if lengths[r] >= j0 + n), g)  # rows that see all of it
        dst = o_s if j == 0 else t_s[b]  # the first tile's weighted values are the running output
        e.compute(asm.mm(q_s + live * dw, kb[b], s_s[b] + live * nw, g - live, d, n, out8=True),
                  f"logits of tile {j}")
        for r in range(live, g):
            e.compute(asm.smax_step(s_s[b] + r * nw, st_s + ta.STATE_WORDS * r, s_s[b] + r * nw,
                                    min(n, lengths[r] - j0), smul), f"step {j} row {r}")
        if full < g:
            e.compute(asm.mm(s_s[b] + full * nw, vb[b], dst + full * d, g - full, n, d, brows=True,
                             stride=d if g - full > 1 else 0), f"weights x V, tile {j}")
        for r in range(live, full):
            e.compute(asm.mm(s_s[b] + r * nw, vb[b], dst + r * d, 1, lengths[r] - j0, d, brows=True),
                      f"weights x V, tile {j} row {r}")
        if j + 2 < ntiles:
            fetch(j + 2)
        if j > 0:
            for r in range(live, g):
                e.compute(asm.smax_acc(t_s[b] + r * d, st_s + ta.STATE_WORDS * r, o_s + r * d, d), f"acc {j} row {r}")
    for r in range(g):
        e.compute(asm.smax_norm(o_s + r * d, st_s + ta.STATE_WORDS * r, out_s + r * dw, d, shift=out_shift),
                  f"norm row {r}")
    e.transfer(asm.store(out_s, out_x, g, dw), "store the output")
    e.emit(asm.halt(), "halt")
    return e.code


def rows_tiled_image(prog: RowsTiled, q8: np.ndarray, k8: np.ndarray, v8: np.ndarray,
                     sinks: Sequence[int]) -> list[int]:
    """The program's external memory: K and V rows (max length), q (G rows), each row's initial
    state (its head's sink logit, ``tiled_attention.state_init``)."""
    ext = np.zeros(prog.words, dtype=np.uint32)
    ext[prog.k:prog.v] = isa.pack_int8_rows(k8)
    ext[prog.v:prog.q] = isa.pack_int8_rows(v8)
    ext[prog.q:prog.state] = isa.pack_int8_rows(q8)
    for r, sink in enumerate(sinks):
        words = ta.state_init(sink)
        ext[prog.state + ta.STATE_WORDS * r:prog.state + ta.STATE_WORDS * r + len(words)] = words
    return [int(x) for x in ext]


# ---- the host loop ----------------------------------------------------------------------------------


@dataclass
class ChunkTrace:
    """One chunk on the chip: its first position, its tokens, each layer's residual out (rows x
    d_model, float), the logits (rows x vocab), each row's greedy token, the programs run (for a
    replay), the cycles of each (machine model only) and the words the host wrote into the chip's
    external memory for them (every program's inputs, the K/V copies among them)."""

    position: int
    tokens: list[int]
    residuals: list[np.ndarray] = field(default_factory=list)
    logits: np.ndarray = field(default_factory=lambda: np.zeros(0))
    next_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    runs: list[ChipRun] = field(default_factory=list)
    cycles: list[int] = field(default_factory=list)
    host_words: int = 0


def key_spans(model, layer: int, start: int, rows: int, cached: int) -> list[tuple[int, int]]:
    """Each chunk row's keys as (lo, hi) indices into the cache's `cached` rows followed by the
    chunk's `rows` keys: the row at position start + i sees ``visible_rows`` keys ending at itself."""
    spans = []
    for i in range(rows):
        n = visible_rows(model, layer, start + i + 1)
        hi = cached + i + 1
        if n > hi:
            raise MixedChipError(f"layer {layer}: the row at position {start + i} sees {n} keys, the cache holds "
                                 f"{cached} before the chunk")
        spans.append((hi - n, hi))
    return spans


class ChunkedPrefill:
    """Prefill a ``MixedChip`` C tokens at a time, after whatever its cache already holds.

    ``executor`` as ``MixedChip``'s: "reference" (the programs' integer semantics), "machine" (the
    machine model, cycle-exact) or "both" (both, a differing word an error)."""

    def __init__(self, chip: MixedChip, chunk: int) -> None:
        if not 1 <= chunk <= CHUNK_MAX:
            raise MixedChipError(f"chunk must lie in 1..{CHUNK_MAX}, got {chunk}")
        if chip.kv != "contiguous":
            raise MixedChipError(f"the chunked prefill fills a contiguous K/V cache; the chip's is {chip.kv!r}")
        self.chip = chip
        self.chunk = chunk
        self._programs: dict[tuple, Program] = {}
        self._codes: dict[tuple, RowsTiled] = {}

    def program(self, kind: str, layer: int, group: int, rows: int,
                spans: tuple[tuple[int, int], ...] = (), keys: int = 0) -> Program:
        """A chunk program, compiled on first use (the scales come from the chip's ranges)."""
        key = (kind, layer, group, rows, spans, keys)
        if key not in self._programs:
            m = self.chip.model
            if kind == "proj":
                g = chunk_proj_graph(m, layer, group, rows)
            elif kind == "attn":
                g = chunk_attn_graph(m, layer, group, keys, spans)
            else:
                g = chunk_out_graph(m, layer, rows)
            feed = {n: np.zeros(g.shape(n)) for n in g.inputs}
            with config.use(self.chip.cfg):
                self._programs[key] = compile_graph(g, [feed], ranges=self.chip.ranges)
        return self._programs[key]

    def _attention(self, layer: int, grp: int, q: np.ndarray, keys: np.ndarray, values: np.ndarray,
                   spans: list[tuple[int, int]], executor: str, trace: ChunkTrace) -> np.ndarray:
        """A (rows x rep x head_dim, int8) of one group: the rows a decode step runs one-shot in one
        chunk program, the others each through the decode's tiled attention."""
        chip = self.chip
        rows, rep, hd = q.shape
        out = np.zeros((rows, rep, hd), dtype=np.int64)
        shot = [i for i, (lo, hi) in enumerate(spans) if hi - lo <= chip.one_shot_rows]
        if shot:
            first = min(spans[i][0] for i in shot)
            last = max(spans[i][1] for i in shot)
            # one program per run of consecutive one-shot rows (they are a prefix of the chunk's rows:
            # the visible count only grows along a chunk)
            sub = tuple((spans[i][0] - first, spans[i][1] - first) for i in shot)
            P = self.program("attn", layer, grp, len(shot), sub, last - first)
            feeds = {"q": q[shot].reshape(-1, hd) * chip._scale(f"q{layer}"),
                     "K": keys[first:last] * chip._scale(f"k{layer}"),
                     "V": values[first:last] * chip._scale(f"v{layer}")}
            a = chip._run(P, feeds, executor, trace)[P.outputs[0]]
            out[shot] = a.reshape(len(shot), rep, hd)
        tiled = [i for i, (lo, hi) in enumerate(spans) if hi - lo > chip.one_shot_rows]
        with config.use(chip.cfg):
            per = next((n for n in range(len(tiled), 0, -1) if rows_tiled_fits(rep * n, hd, chip.tile)), 1)
        for at in range(0, len(tiled), per):
            run_rows = tiled[at:at + per]
            if any(spans[i][0] for i in run_rows):  # a window past the one-shot rows: each row on its own
                for i in run_rows:
                    lo, hi = spans[i]
                    out[i] = chip.attention(layer, grp, q[i], keys[lo:hi], values[lo:hi], executor, trace)
                continue
            try:
                out[run_rows] = self._rows_tiled(layer, grp, q[run_rows], keys, values,
                                                 [spans[i][1] for i in run_rows], executor, trace)
            except RowsTiledTooLong:  # past the instruction memory: the decode's parts, row by row
                for i in run_rows:
                    lo, hi = spans[i]
                    out[i] = chip.attention(layer, grp, q[i], keys[lo:hi], values[lo:hi], executor, trace)
        return out

    def _rows_tiled(self, layer: int, grp: int, q: np.ndarray, keys: np.ndarray, values: np.ndarray,
                    ends: list[int], executor: str, trace: ChunkTrace) -> np.ndarray:
        """A (positions x rep x head_dim) of chunk rows each over keys 0 .. end - 1, with the decode's
        tiled arithmetic: one ``rows_tiled_code`` program for all of them."""
        chip = self.chip
        n, rep, hd = q.shape
        p = chip.tiled_params(layer, grp)
        lengths = [e for e in ends for _h in range(rep)]
        key = ("tiled", tuple(lengths), p)
        if key not in self._codes:
            with config.use(chip.cfg):
                self._codes[key] = rows_tiled_code(lengths, hd, p.qa, p.qs, p.smul, chip.tile, p.out_shift)
        prog = self._codes[key]
        q8 = q.reshape(n * rep, hd)
        sinks = [p.sinks[r % rep] for r in range(n * rep)]
        k8, v8 = keys[:max(ends)], values[:max(ends)]
        ext = rows_tiled_image(prog, q8, k8, v8, sinks)
        name = f"ctiled{layer}g{grp}r{n * rep}n{max(ends)}"
        trace.runs.append(ChipRun(name, lambda code=prog.code: code, lambda ext=ext: ext, prog.words))
        if executor in ("reference", "both"):
            want = np.stack([ta.reference(q8[r:r + 1], k8[:lengths[r]], v8[:lengths[r]], p.qa, p.qs, p.smul,
                                          chip.tile, sinks[r], p.out_shift)[0] for r in range(n * rep)])
        if executor in ("machine", "both"):
            with config.use(chip.ext_config(prog.words)):
                m = Machine.with_ext(ext, prog.words)
                m.run(prog.code)
            trace.cycles.append(m.counters.cycles)
            got = isa.unpack_int8_rows(m.ext[prog.out:prog.out + n * rep * hd // 4], n * rep, hd)
            if executor == "both" and not np.array_equal(got, want):
                raise AssertionError(f"{name}: the machine model's output differs from the decode's tiled arithmetic")
            want = got
        return np.asarray(want, dtype=np.int64).reshape(n, rep, hd)

    def run_chunk(self, ids: Sequence[int], executor: str = "reference") -> ChunkTrace:
        """Prefill the tokens `ids` (at most ``chunk``) at the chip's next positions: every chunk
        program in order, the cache appended."""
        chip, m = self.chip, self.chip.model
        if executor not in ("reference", "machine", "both"):
            raise MixedChipError(f"executor must be 'reference', 'machine' or 'both', got {executor!r}")
        ids = [int(t) for t in ids]
        if not 1 <= len(ids) <= self.chunk:
            raise MixedChipError(f"a chunk holds 1..{self.chunk} tokens, got {len(ids)}")
        if min(ids) < 0 or max(ids) >= m.vocab_size:
            raise MixedChipError(f"token ids must lie in [0, {m.vocab_size})")
        rows = len(ids)
        rep = m.n_heads // m.n_kv_heads
        hd = m.head_dim
        start = chip.position
        trace = ChunkTrace(start, ids)
        # the host's C and S rows, one position at a time as a decode step makes them (same floats)
        rot_rows = [rotation_rows(m, np.array([start + i])) for i in range(rows)]
        c = np.vstack([r[0] for r in rot_rows])
        s = np.vstack([r[1] for r in rot_rows])
        rot = {"rot_c": np.tile(c, (rep, 1)), "rot_s": np.tile(s, (rep, 1))}  # head-major, as Q
        x = m.embed[np.array(ids)].astype(np.float64)
        new_cache = []
        for layer in range(m.n_layers):
            a_out = {}
            for grp in range(m.n_kv_heads):
                out = chip._run(self.program("proj", layer, grp, rows), {"x": x, **rot}, executor, trace)
                q = out["q"].reshape(rep, rows, hd).transpose(1, 0, 2)  # position-major
                keys = np.vstack([chip.keys[layer][grp], out["k"]])
                values = np.vstack([chip.values[layer][grp], out["v"]])
                spans = key_spans(m, layer, start, rows, chip.keys[layer][grp].shape[0])
                a = self._attention(layer, grp, q, keys, values, spans, executor, trace)
                a_out[f"a{grp}"] = a.transpose(1, 0, 2).reshape(rep * rows, hd) * chip._scale(f"a{layer}")
                n = visible_rows(m, layer, start + rows)
                new_cache.append((keys[-n:], values[-n:]))
            out = chip._run(self.program("out", layer, 0, rows), {"x": x, **a_out}, executor, trace)
            x = out["y"] * chip._scale(f"x{layer + 1}")
            trace.residuals.append(x.copy())
            if layer == m.n_layers - 1:
                trace.logits = out["logits"] * chip._scale("logits")
                trace.next_tokens = out["tok"][:, 0].copy()
        i = 0
        for layer in range(m.n_layers):
            for grp in range(m.n_kv_heads):
                chip.keys[layer][grp], chip.values[layer][grp] = new_cache[i]
                i += 1
        chip.position += rows
        return trace

    def prefill(self, ids: Sequence[int], executor: str = "reference",
                progress: Callable[[int], None] | None = None) -> list[ChunkTrace]:
        """Every token of `ids` in chunks of ``chunk`` (the last may be shorter), after the cache;
        `progress` is told the tokens done after each chunk (a long prompt takes minutes)."""
        traces = []
        for i in range(0, len(ids), self.chunk):
            traces.append(self.run_chunk(ids[i:i + self.chunk], executor))
            if progress is not None:
                progress(min(i + self.chunk, len(ids)))
        return traces
