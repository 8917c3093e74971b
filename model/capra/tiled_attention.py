"""Decode attention of one grouped-query group over a context in external memory, tiled.

The G query rows that share one K/V head (head_dim D) attend to T keys whose K and V rows (int8,
D/4 words each) lie in external memory. K and V stream through the scratchpad in tiles of `tile`
keys, two buffers each, so the longest context is bounded by external memory, not the scratchpad.
Per tile: an MM of the queries against the tile's keys (int8 logits), per row one `smax.step`
(the unnormalised weights and the running max and sum), an MM of the weights with the tile's
values (int32), and per row one `smax.acc` (the running output rescaled by exp(m_old - m), plus
the tile's). The first tile's weighted values go to the running output directly; at the end one
`smax.norm` per row divides by the running sum. The instruction stream comes from the compiler's
emitter, which places every WAIT, OVERLAP and CHAIN from the instructions' effects.

Each row starts from a state of its own (``state_init``): no keys, or a sink logit, so two query
rows of one group with different sinks share every K and V tile all the same.

A context whose program would not fit the instruction memory is split into *parts* (``plan``), a
program each over a run of whole tiles. A part that is not the last stores its rows' states and
the int32 running output to external memory; the next part's image starts with them (the host
hands the words on: the machine model runs each program on its own, an unwritten scratchpad word
being an error to read, and every program of a replay starts from its own image). Parts split at
tile boundaries, so the tiles,
and with them every rounding, are those of one long program: ``reference`` is the same integer
function however the context is split.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import asm, config, isa
from .compiler import _Emitter
from .machine import Machine

STATE_WORDS = 4  # a row's state in memory: m, l, alpha (isa.SM_STATE_WORDS) and a spare word


@dataclass
class Layout:
    """Where one part's tensors lie in external memory (word addresses)."""

    k: int
    v: int
    q: int
    state: int  # G x STATE_WORDS: in; out unless the part is the last
    out: int  # G rows of D/4 words of int8 output (the last part)
    o: int  # G x D int32 words of running output: in unless the part is the first; out unless the last
    words: int  # the image's size


@dataclass
class TiledAttention:
    code: list[int]
    ext: list[int]
    out_ext: int  # G rows of D/4 words of int8 output (scale out_scale)
    tile: int
    groups: int
    head_dim: int
    context: int
    layout: Layout | None = None
    first: bool = True
    last: bool = True


def choose_tile(head_dim: int, sram_words: int | None = None) -> int:
    """The largest multiple of 16 keys whose two K and two V buffers fit the scratchpad's bank
    groups but one (that one holds what compute writes), and at most MM_MAX_K."""
    words = sram_words or isa.SRAM_WORDS
    room = words - isa.SRAM_GROUP_WORDS
    per_key = isa.words_for(head_dim)
    return min(isa.MM_MAX_K, (room // (4 * per_key)) // 16 * 16)


def state_init(sink: int | None) -> list[int]:
    """A row's (m, l, alpha) before the first tile: no keys (m = -128, l = 0), or a sink logit
    (m = sink, l = 127: its own weight at the running maximum), with a zero value."""
    if sink is None:
        return [0xFFFFFF80, 0, 0]
    return [sink & 0xFFFFFFFF, isa.SM_OUT_MAX, 0]


def _sinks(sink, g: int) -> list[int | None]:
    if sink is None or isinstance(sink, (int, np.integer)):
        return [None if sink is None else int(sink)] * g
    sinks = [None if s is None else int(s) for s in sink]
    if len(sinks) != g:
        raise ValueError(f"tiled attention: {len(sinks)} sinks for {g} query rows")
    return sinks


def layout(g: int, d: int, t: int) -> Layout:
    """External memory of a part over t keys: K rows, V rows, q, the states, the output, O."""
    dw = d // 4
    k, v, q = 0, t * dw, 2 * t * dw
    state = q + g * dw
    out = state + STATE_WORDS * g
    o = out + g * dw
    return Layout(k, v, q, state, out, o, o + g * d)


def part_image(q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, states: list[list[int]],
               o32: np.ndarray | None = None) -> list[int]:
    """A part's external memory: its keys' K and V rows, q, each row's state words, and (a part
    after the first) the running output O, G x D int32."""
    g, d = q8.shape
    lay = layout(g, d, k8.shape[0])
    ext = np.zeros(lay.words, dtype=np.uint32)
    ext[lay.k:lay.v] = isa.pack_int8_rows(k8)
    ext[lay.v:lay.q] = isa.pack_int8_rows(v8)
    ext[lay.q:lay.state] = isa.pack_int8_rows(q8)
    for r, words in enumerate(states):
        ext[lay.state + STATE_WORDS * r: lay.state + STATE_WORDS * r + len(words)] = [w & 0xFFFFFFFF for w in words]
    if o32 is not None:
        ext[lay.o:lay.words] = (np.asarray(o32, dtype=np.int64).reshape(-1) & 0xFFFFFFFF).astype(np.uint32)
    return [int(x) for x in ext]


def part_code(g: int, d: int, t: int, qa: int, qs: int, smul: int, tile: int | None = None,
              first: bool = True, last: bool = True, out_shift: int = 0) -> list[int]:
    """The code of a part over t keys (a program of its own; the code depends on shapes and
    scales only, never on the data)."""
    if d % 4 or t < 1 or g < 1:
        raise ValueError(f"tiled attention: G={g}, D={d}, T={t} (D a multiple of 4, G and T at least 1)")
    tile = tile or choose_tile(d)
    dw = d // 4
    lay = layout(g, d, t)
    if 4 * tile * dw > isa.SRAM_WORDS - isa.SRAM_GROUP_WORDS:
        raise ValueError(f"tiled attention: a tile of {tile} keys does not fit the scratchpad")
    sp = scratch(g, d, tile, (0, tile * dw), (2 * tile * dw, 3 * tile * dw))

    def fetch(e: _Emitter, j: int, n: int, k_buf: int, v_buf: int) -> None:
        e.transfer(asm.load(k_buf, lay.k + j * tile * dw, 1, n * dw), f"load K tile {j}")
        e.transfer(asm.load(v_buf, lay.v + j * tile * dw, 1, n * dw), f"load V tile {j}")

    cfg = config.active()
    with config.use(dataclasses.replace(cfg, ext_memory=max(cfg.ext_memory, lay.words))):
        return emit(g, d, t, tile, sp, Addresses(lay.q, lay.state, lay.o, lay.out), fetch, qa, qs, smul,
                    out_shift, first, last)


def build(q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, qa: int, qs: int, smul: int,
          tile: int | None = None, sink=None, out_shift: int = 0) -> TiledAttention:
    """The program for q8 (G x D int8) against k8, v8 (T x D int8): logits = requant(q.k, qa, qs),
    an int8 of scale smul / 2^14; the output is int8 with V's scale times 2^-out_shift. `sink`: None,
    one int8 sink logit for every row, or one (or None) per row."""
    g, d = q8.shape
    t = k8.shape[0]
    if k8.shape != (t, d) or v8.shape != (t, d) or d % 4:
        raise ValueError(f"tiled attention: q {q8.shape}, k {k8.shape}, v {v8.shape} (D a multiple of 4)")
    tile = tile or choose_tile(d)
    return build_part(q8, k8, v8, qa, qs, smul, tile, [state_init(s) for s in _sinks(sink, g)],
                      out_shift=out_shift)


def build_part(q8, k8, v8, qa: int, qs: int, smul: int, tile: int, states: list[list[int]],
               o32: np.ndarray | None = None, last: bool = True, out_shift: int = 0,
               code: list[int] | None = None) -> TiledAttention:
    """One part: the keys k8, v8 (whole tiles of the context, from a tile boundary) from the row
    states `states`, and the running output `o32` of the parts before (None: the first part).
    `code`: the part's code if made before (``part_code`` with the same arguments)."""
    g, d = q8.shape
    t = k8.shape[0]
    first = o32 is None
    if code is None:
        code = part_code(g, d, t, qa, qs, smul, tile, first, last, out_shift)
    lay = layout(g, d, t)
    return TiledAttention(code, part_image(q8, k8, v8, states, o32), lay.out, tile, g, d, t, lay, first, last)


def plan(t: int, tile: int, instructions) -> list[tuple[int, int]]:
    """The parts of a context of t keys: (first key, end key) each, whole tiles, as few parts as
    the instruction memory allows. ``instructions(n_keys, first, last)`` counts a part's."""
    ntiles = -(-t // tile)
    for parts in range(1, ntiles + 1):
        per = -(-ntiles // parts)
        bounds = [(i * per * tile, min(t, (i + 1) * per * tile)) for i in range(parts) if i * per * tile < t]
        n = len(bounds)
        if all(instructions(e - s, i == 0, i == n - 1) <= isa.IMEM_INSTRS for i, (s, e) in enumerate(bounds)):
            return bounds
    raise ValueError(f"tiled attention: one tile of {tile} keys does not fit the instruction memory")


def ext_config(prog: TiledAttention) -> config.Config:
    """The active configuration with an external memory large enough for the program."""
    cfg = config.active()
    return dataclasses.replace(cfg, ext_memory=max(cfg.ext_memory, len(prog.ext)))


@dataclass(frozen=True)
class Scratch:
    """Where a tiled program keeps its words in the scratchpad: two K and two V tile buffers (where
    the fetch writes), and in the last bank group what compute writes: q, the rows' states, the
    logits and weights of two tiles (s), the weighted values of two tiles (t), the running output
    O and the int8 output."""

    k: tuple[int, int]
    v: tuple[int, int]
    q: int
    state: int
    s: tuple[int, int]
    t: tuple[int, int]
    o: int
    out: int


def scratch(g: int, d: int, tile: int, k: tuple[int, int], v: tuple[int, int]) -> Scratch:
    """The tile buffers `k`, `v` (two each, placed by the caller) and the working set at the start
    of the last bank group; raises ValueError when the working set does not fit that group."""
    dw = d // 4
    sw = isa.words_for(tile)
    q_s = isa.SRAM_WORDS - isa.SRAM_GROUP_WORDS
    st_s = q_s + g * dw
    s_s = (st_s + STATE_WORDS * g, st_s + STATE_WORDS * g + g * sw)
    t_s = (s_s[1] + g * sw, s_s[1] + g * sw + g * d)
    o_s = t_s[1] + g * d
    out_s = o_s + g * d
    if out_s + g * dw > isa.SRAM_WORDS:
        raise ValueError("tiled attention: the working set does not fit the last bank group")
    return Scratch(tuple(k), tuple(v), q_s, st_s, s_s, t_s, o_s, out_s)


@dataclass(frozen=True)
class Addresses:
    """Where a program's small tensors lie in external memory: q (in), the rows' states (in; out
    unless the program is the last), the running output O (in unless the first; out unless the
    last) and the int8 output (out, the last)."""

    q: int
    state: int
    o: int
    out: int


# fetch(e, j, n, k_buf, v_buf): the transfers that bring the program's tile j (its n keys) into
# the K buffer k_buf and the V buffer v_buf: two LOADs from a contiguous run here, two GATHERs
# through a block table in capra.paged_attention.
Fetch = Callable[[_Emitter, int, int, int, int], None]


def start_tiles(e: _Emitter, fetch_tile: Callable[[int], None], ntiles: int, head: list[int], waited: str) -> None:
    """The start of a double-buffered tile loop: the first two tiles' K and V are fetched while
    the `head` transfers (q, the states: issued before) land, and only then waited for, so the
    first MM finds all of them. Tile j + 2's fetch is the loop's, once tile j's buffers are free."""
    fetch_tile(0)
    if ntiles > 1:
        fetch_tile(1)
    for w in head:
        e.wait_for(w, waited)


def emit(g: int, d: int, t: int, tile: int, sp: Scratch, ext: Addresses, fetch: Fetch, qa: int, qs: int,
         smul: int, out_shift: int, first: bool, last: bool, before_fetch: Callable[[_Emitter], None] | None = None,
         parity: int = 0) -> list[int]:
    """The one tiled online-softmax program: t keys in tiles of `tile`, each tile's K and V brought
    in by ``fetch`` (the next tile's while this one computes). `first`: the program starts the
    context (its first tile's weighted values are O, no state to rescale); `last`: it ends it (the
    norm and the int8 output; else the states and O are stored for the next program).
    ``before_fetch`` emits what must precede the first fetch (a block table's load); `parity`: the
    buffer pair the first tile takes (a program that continues a context keeps its alternation)."""
    ntiles = -(-t // tile)
    dw = d // 4
    e = _Emitter()
    e.emit(asm.qcfg(qa=qa, qb=0, shift=qs), "qcfg: the logits' scale")
    head = [e.transfer(asm.load(sp.q, ext.q, g, dw), "load q"),
            e.transfer(asm.load(sp.state, ext.state, 1, STATE_WORDS * g), "load the states")]
    if not first:
        head.append(e.transfer(asm.load(sp.o, ext.o, 1, g * d), "load the running output"))
    if before_fetch is not None:
        before_fetch(e)

    def fetch_tile(j: int) -> None:
        b = (j + parity) % 2
        fetch(e, j, min(tile, t - j * tile), sp.k[b], sp.v[b])

    start_tiles(e, fetch_tile, ntiles, head, "q, the states and the running output")
    for j in range(ntiles):
        n = min(tile, t - j * tile)
        b = (j + parity) % 2
        kb, vb, s_b, t_b = sp.k[b], sp.v[b], sp.s[b], sp.t[b]
        nw = isa.words_for(n)  # the logits' rows packed (a shorter last tile too: the MM reads them so)
        direct = first and j == 0  # the first tile of the context: its weighted values are O
        e.compute(asm.mm(sp.q, kb, s_b, g, d, n, out8=True), f"logits of tile {j}")
        for r in range(g):
            e.compute(asm.smax_step(s_b + r * nw, sp.state + STATE_WORDS * r, s_b + r * nw, n, smul),
                      f"step {j} row {r}")
        e.compute(asm.mm(s_b, vb, sp.o if direct else t_b, g, n, d, brows=True, stride=d if g > 1 else 0),
                  f"weights x V, tile {j}")
        if j + 2 < ntiles:  # the buffers of tile j are free once its last reader has been issued
            fetch_tile(j + 2)
        if not direct:
            for r in range(g):
                e.compute(asm.smax_acc(t_b + r * d, sp.state + STATE_WORDS * r, sp.o + r * d, d), f"acc {j} row {r}")
    if last:
        for r in range(g):
            e.compute(asm.smax_norm(sp.o + r * d, sp.state + STATE_WORDS * r, sp.out + r * dw, d, shift=out_shift),
                      f"norm row {r}")
        e.transfer(asm.store(sp.out, ext.out, g, dw), "store the output")
    else:
        e.transfer(asm.store(sp.state, ext.state, 1, STATE_WORDS * g), "store the states")
        e.transfer(asm.store(sp.o, ext.o, 1, g * d), "store the running output")
    e.emit(asm.halt(), "halt")
    return e.code


def run(prog: TiledAttention, ext_latency: int | None = None) -> tuple[np.ndarray, Machine]:
    """Run on the machine model: (the G x D int8 output, the machine). A part that is not the last
    leaves its output in ``carry(prog, machine)``."""
    with config.use(ext_config(prog)):
        m = Machine.with_ext(prog.ext, len(prog.ext), ext_latency=ext_latency)
        m.run(prog.code)
    words = m.ext[prog.out_ext : prog.out_ext + prog.groups * prog.head_dim // 4]
    return isa.unpack_int8_rows(words, prog.groups, prog.head_dim), m


def carry(prog: TiledAttention, m: Machine) -> tuple[list[list[int]], np.ndarray]:
    """What a part that is not the last leaves for the next: each row's state words and O (G x D
    int32), read from the machine's external memory."""
    lay = prog.layout
    g, d = prog.groups, prog.head_dim
    ext = np.asarray(m.ext, dtype=np.int64)
    states = [[int(w) for w in ext[lay.state + STATE_WORDS * r: lay.state + STATE_WORDS * r + isa.SM_STATE_WORDS]]
              for r in range(g)]
    o = ext[lay.o:lay.o + g * d].astype(np.uint32).view(np.int32).astype(np.int64).reshape(g, d)
    return states, o


def reference_part(q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, qa: int, qs: int, smul: int, tile: int,
                   states: list[list[int]], o32: np.ndarray | None = None) -> tuple[list[list[int]], np.ndarray]:
    """The rows' states and running output (G x D int32) after the keys k8, v8 (whole tiles from a
    tile boundary), from `states` and `o32` (None: zero), in numpy with the chip's arithmetic
    (``isa``): what a part leaves in external memory, computed without its code."""
    g, d = q8.shape
    q8, k8, v8 = (np.asarray(a, dtype=np.int64) for a in (q8, k8, v8))
    logits = isa.requantize(q8 @ k8.T, qa, qs)  # G x T
    new_states, out = [], np.zeros((g, d), dtype=np.int64) if o32 is None else np.array(o32, dtype=np.int64)
    for r in range(g):
        m_word, l_word, alpha = states[r][:isa.SM_STATE_WORDS]
        for j0 in range(0, k8.shape[0], tile):
            p, m_word, l_word, alpha = isa.softmax_step(logits[r, j0:j0 + tile], m_word, l_word, smul)
            out[r] = isa.softmax_acc(out[r], isa.wrap32(p @ v8[j0:j0 + tile]), alpha)
        new_states.append([m_word, l_word, alpha])
    return new_states, out


def reference(q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, qa: int, qs: int, smul: int, tile: int,
              sink=None, out_shift: int = 0) -> np.ndarray:
    """The integer function every tiled program computes (G x D int8): independent of the code
    and of how the context is split into parts."""
    g = q8.shape[0]
    states, o = reference_part(q8, k8, v8, qa, qs, smul, tile, [state_init(s) for s in _sinks(sink, g)])
    return np.stack([isa.softmax_norm(o[r], states[r][1], out_shift) for r in range(g)])


def word_bound(prog: TiledAttention) -> int:
    """Cycles the K/V stream needs at one word a cycle: two rows of D/4 words per key."""
    return 2 * prog.context * (prog.head_dim // 4)
