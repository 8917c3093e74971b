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
The per-row MMs cost what one MM of all rows would: in the dot form (scores) and with BROWS (P @ V)
a 4 x 4 array's passes give 4 x rt MACs a cycle for rt rows, and rt = rep = 2 here.

Rows a decode step would run tiled (a global layer past ``one_shot_rows`` keys) run the decode's own
tiled attention (``MixedChip.attention``), one row at a time: the chunk's projections and output
programs still batch them. The host reorders Q from head-major (as the projection program writes
it) to position-major, and A back, between programs: int8 rows it hands on anyway.

The chunk's rotated k and v rows go to the host's cache as a decode step appends them (a windowed
layer keeps its last ``window`` rows). Every program's result is, row for row, the decode step's,
so the chunked prefill gives the per-token prefill's cache, residuals, logits and tokens word for
word, and equals ``mixed_prefill.VectorisedPrefill`` (an independent numpy evaluation of the decode
arithmetic); tests/test_mixed_chunk.py holds it to both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from capra import Graph, compile_graph, config
from capra.compiler import Program

from .mixed_chip import (
    ChipRun,
    MixedChip,
    MixedChipError,
    _head_cols,
    _rotate,
    rotation_rows,
    sink_groups,
    swap_matrix,
    visible_rows,
)

CHUNK_MAX = 32  # rows of a chunk program (the attention's scores and weights grow with C x keys)


# ---- the graphs -------------------------------------------------------------------------------------


def chunk_proj_graph(model, layer: int, group: int, rows: int) -> Graph:
    """Q (rep*rows x head_dim, head-major, rotated), k (rotated) and v (rows x head_dim) of one KV
    group from x (rows x d_model): ``mixed_chip.proj_graph`` with `rows` rows of x."""
    lw = model.layers[layer]
    rep = model.n_heads // model.n_kv_heads
    hd = model.head_dim
    g = Graph(f"cproj{layer}g{group}c{rows}")
    x = g.input("x", (rows, model.d_model), range_group=f"x{layer}")
    c = g.input("rot_c", (rep * rows, hd), range_group="rot_c")
    s = g.input("rot_s", (rep * rows, hd), range_group="rot_s")
    swap = g.const("swap", swap_matrix(hd, model.rotary_dims))
    qraw = None
    for i in range(rep):
        h = group * rep + i
        qh = g.matmul(f"q_raw{i}", x, g.const(f"wq{i}", lw.wq[:, _head_cols(model, h)].astype(np.float64)),
                      range_group=f"qraw{layer}")
        qraw = qh if qraw is None else g.concat(f"q_raw_0_{i}", qraw, qh)
    q = _rotate(g, "q", qraw, swap, c, s, layer, "q")
    kv = _head_cols(model, group)
    kraw = g.matmul("k_raw", x, g.const("wk", lw.wk[:, kv].astype(np.float64)), range_group=f"kraw{layer}")
    k = _rotate(g, "k", kraw, swap, g.rows("rot_c0", c, 0, rows), g.rows("rot_s0", s, 0, rows), layer, "k")
    v = g.matmul("v", x, g.const("wv", lw.wv[:, kv].astype(np.float64)), range_group=f"v{layer}")
    g.set_outputs([q, k, v])
    return g


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
    lw = model.layers[layer]
    rep = model.n_heads // model.n_kv_heads
    hd = model.head_dim
    g = Graph(f"cout{layer}c{rows}")
    x = g.input("x", (rows, model.d_model), range_group=f"x{layer}")
    acc = None
    for grp in range(model.n_kv_heads):
        a = g.input(f"a{grp}", (rep * rows, hd), range_group=f"a{layer}")
        for i in range(rep):
            h = grp * rep + i
            o = g.matmul(f"o{h}", g.rows(f"a{grp}_{i}", a, i * rows, (i + 1) * rows),
                         g.const(f"wo{h}", lw.wo[_head_cols(model, h), :].astype(np.float64)),
                         range_group=f"o{layer}")
            acc = o if acc is None else g.add(f"osum{h}", acc, o, range_group=f"osum{layer}_{h}")
    y = g.add("y", x, acc, range_group=f"x{layer + 1}")
    outputs = [y]
    if layer == model.n_layers - 1:
        logits = g.matmul("logits", y, g.const("unembed", model.unembed.astype(np.float64)), range_group="logits")
        g.argmax("tok", logits)
        outputs += [logits, "tok"]
    g.set_outputs(outputs)
    return g


# ---- the host loop ----------------------------------------------------------------------------------


@dataclass
class ChunkTrace:
    """One chunk on the chip: its first position, its tokens, each layer's residual out (rows x
    d_model, float), the logits (rows x vocab), each row's greedy token, the programs run (for a
    replay) and the cycles of each (machine model only)."""

    position: int
    tokens: list[int]
    residuals: list[np.ndarray] = field(default_factory=list)
    logits: np.ndarray = field(default_factory=lambda: np.zeros(0))
    next_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    runs: list[ChipRun] = field(default_factory=list)
    cycles: list[int] = field(default_factory=list)


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
        self.chip = chip
        self.chunk = chunk
        self._programs: dict[tuple, Program] = {}

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
        for i, (lo, hi) in enumerate(spans):
            if hi - lo > chip.one_shot_rows:
                out[i] = chip.attention(layer, grp, q[i], keys[lo:hi], values[lo:hi], executor, trace)
        return out

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

    def prefill(self, ids: Sequence[int], executor: str = "reference") -> list[ChunkTrace]:
        """Every token of `ids` in chunks of ``chunk`` (the last may be shorter), after the cache."""
        return [self.run_chunk(ids[i:i + self.chunk], executor) for i in range(0, len(ids), self.chunk)]
