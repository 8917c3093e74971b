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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import asm, config, isa
from .compiler import _Emitter
from .machine import Machine


@dataclass
class TiledAttention:
    code: list[int]
    ext: list[int]
    out_ext: int  # G rows of D/4 words of int8 output (scale out_scale)
    tile: int
    groups: int
    head_dim: int
    context: int


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


def build(q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, qa: int, qs: int, smul: int,
          tile: int | None = None, sink: int | None = None, out_shift: int = 0) -> TiledAttention:
    """The program for q8 (G x D int8) against k8, v8 (T x D int8): logits = requant(q.k, qa, qs),
    an int8 of scale smul / 2^14; the output is int8 with V's scale times 2^-out_shift."""
    g, d = q8.shape
    t = k8.shape[0]
    if k8.shape != (t, d) or v8.shape != (t, d) or d % 4:
        raise ValueError(f"tiled attention: q {q8.shape}, k {k8.shape}, v {v8.shape} (D a multiple of 4)")
    tile = tile or choose_tile(d)
    dw = d // 4
    ntiles = -(-t // tile)
    # external memory: K rows, V rows, q, the initial states, then the output
    k_ext, v_ext = 0, t * dw
    q_ext = 2 * t * dw
    st_ext = q_ext + g * dw
    out_ext = st_ext + 4 * g
    ext = np.zeros(out_ext + g * dw, dtype=np.uint32)
    ext[k_ext:v_ext] = isa.pack_int8_rows(k8)
    ext[v_ext:q_ext] = isa.pack_int8_rows(v8)
    ext[q_ext:st_ext] = isa.pack_int8_rows(q8)
    for r in range(g):
        ext[st_ext + 4 * r : st_ext + 4 * r + 3] = state_init(sink)
    # scratchpad: K and V buffers below the last bank group, what compute writes in it
    kb = [0, tile * dw]
    vb = [2 * tile * dw, 3 * tile * dw]
    top = isa.SRAM_WORDS - isa.SRAM_GROUP_WORDS
    if 4 * tile * dw > top:
        raise ValueError(f"tiled attention: a tile of {tile} keys does not fit the scratchpad")
    sw = isa.words_for(tile)
    q_s = top
    st_s = q_s + g * dw
    s_s = [st_s + 4 * g, st_s + 4 * g + g * sw]
    t_s = [s_s[1] + g * sw, s_s[1] + g * sw + g * d]
    o_s = t_s[1] + g * d
    out_s = o_s + g * d
    if out_s + g * dw > isa.SRAM_WORDS:
        raise ValueError("tiled attention: the working set does not fit the last bank group")

    cfg = config.active()
    with config.use(dataclasses.replace(cfg, ext_memory=max(cfg.ext_memory, len(ext)))):
        code = _emit(g, d, t, tile, dw, ntiles, kb, vb, q_s, st_s, s_s, t_s, o_s, out_s,
                     k_ext, v_ext, q_ext, st_ext, out_ext, qa, qs, smul, out_shift)
    return TiledAttention(code, [int(x) for x in ext], out_ext, tile, g, d, t)


def ext_config(prog: TiledAttention) -> config.Config:
    """The active configuration with an external memory large enough for the program."""
    cfg = config.active()
    return dataclasses.replace(cfg, ext_memory=max(cfg.ext_memory, len(prog.ext)))


def _emit(g, d, t, tile, dw, ntiles, kb, vb, q_s, st_s, s_s, t_s, o_s, out_s,
          k_ext, v_ext, q_ext, st_ext, out_ext, qa, qs, smul, out_shift) -> list[int]:
    e = _Emitter()
    e.emit(asm.qcfg(qa=qa, qb=0, shift=qs), "qcfg: the logits' scale")
    head = [e.transfer(asm.load(q_s, q_ext, g, dw), "load q"),
            e.transfer(asm.load(st_s, st_ext, 1, 4 * g), "load the states")]

    def fetch(j: int) -> None:
        n = min(tile, t - j * tile)
        b = j % 2
        (e.transfer(asm.load(kb[b], k_ext + j * tile * dw, 1, n * dw), f"load K tile {j}"),
                    e.transfer(asm.load(vb[b], v_ext + j * tile * dw, 1, n * dw), f"load V tile {j}"))

    fetch(0)
    if ntiles > 1:
        fetch(1)
    for w in head:
        e.wait_for(w, "q and the states")
    for j in range(ntiles):
        n = min(tile, t - j * tile)
        b = j % 2
        nw = isa.words_for(n)  # the logits' rows packed (a shorter last tile too: the MM reads them so)
        e.compute(asm.mm(q_s, kb[b], s_s[b], g, d, n, out8=True), f"logits of tile {j}")
        for r in range(g):
            e.compute(asm.smax_step(s_s[b] + r * nw, st_s + 4 * r, s_s[b] + r * nw, n, smul), f"step {j} row {r}")
        dst = o_s if j == 0 else t_s[b]
        e.compute(asm.mm(s_s[b], vb[b], dst, g, n, d, brows=True, stride=d if g > 1 else 0),
                  f"weights x V, tile {j}")
        if j + 2 < ntiles:  # the buffers of tile j are free once its last reader has been issued
            fetch(j + 2)
        if j:
            for r in range(g):
                e.compute(asm.smax_acc(t_s[b] + r * d, st_s + 4 * r, o_s + r * d, d), f"acc {j} row {r}")
    for r in range(g):
        e.compute(asm.smax_norm(o_s + r * d, st_s + 4 * r, out_s + r * dw, d, shift=out_shift), f"norm row {r}")
    e.transfer(asm.store(out_s, out_ext, g, dw), "store the output")
    e.emit(asm.halt(), "halt")
    return e.code


def run(prog: TiledAttention, ext_latency: int | None = None) -> tuple[np.ndarray, Machine]:
    """Run on the machine model: (the G x D int8 output, the machine)."""
    with config.use(ext_config(prog)):
        m = Machine.with_ext(prog.ext, len(prog.ext), ext_latency=ext_latency)
        m.run(prog.code)
    words = m.ext[prog.out_ext : prog.out_ext + prog.groups * prog.head_dim // 4]
    return isa.unpack_int8_rows(words, prog.groups, prog.head_dim), m


def word_bound(prog: TiledAttention) -> int:
    """Cycles the K/V stream needs at one word a cycle: two rows of D/4 words per key."""
    return 2 * prog.context * (prog.head_dim // 4)
