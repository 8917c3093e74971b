"""Prefill of ``MixedChip`` for a whole prompt at once: the decode programs' integer semantics,
evaluated for every prompt position together.

``MixedChip.prefill`` runs each prompt token as a decode step (about twenty programs), which is
exact but takes minutes for a few thousand tokens. Nothing in a decode step's arithmetic depends on
the other positions except attention, so the same integers come out when

* the row-wise programs (``proj{L}g{g}``, ``out{L}``) run once per layer with the positions stacked
  on a leading axis: ``run_rows`` is ``capra.reference.run_reference`` (the programs' own
  multipliers, shifts and saturation, node by node) with that axis added;
* attention runs for every position against the rows that position's decode step would see
  (causal, and within the window for a windowed layer): up to ``one_shot_rows`` visible rows the
  one-shot program's semantics (``isa.softmax_int8`` with the head's sink, the program's own
  requantizations), past it the tiled program's (``tiled_attention.reference_part``: the logits
  requantized with the tiled multiplier, one ``softmax_step`` and ``softmax_acc`` per tile of
  ``tile`` keys from the first visible key, the last tile cut at the position, one
  ``softmax_norm``). Keys a position does not see are masked out of each maximum and sum, which is
  the same integer as leaving them out.

Integer matrix products go through float32/float64 BLAS: every product here is of int8 values with
fewer than 2^24 / 127^2 terms (float32) or is computed in float64, so the float sums are exact
integers. The result is the K/V cache, each position's residuals, logits and greedy token, equal
word for word to ``MixedChip.prefill`` with the reference executor (tests/test_mixed_prefill.py
holds them to it); ``executor="both"`` there checks the reference against the machine model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from capra import isa
from capra.compiler import Program
from capra.quant import quantize
from capra.reference import evaluate

from .mixed_chip import MixedChip, MixedChipError, rotation_rows, sink_groups, visible_rows

QUERY_CHUNK = 128  # query positions whose attention is computed together (bounds the logits' memory)


def _requantize(acc: np.ndarray, mult: int, shift: int) -> np.ndarray:
    """``isa.requantize`` in int64: exact here, since |acc| < 2^31 (wrapped) and mult < 2^16."""
    p = np.asarray(acc, dtype=np.int64) * int(mult)
    if shift > 0:
        p = (p + (1 << (shift - 1))) >> shift
    return np.clip(p, isa.INT8_MIN, isa.INT8_MAX)


def _wrap32(x: np.ndarray) -> np.ndarray:
    """``isa.wrap32`` with a mask in place of the modulo (the same two's-complement wrap, int64)."""
    return ((np.asarray(x, dtype=np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _imatmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The int32 accumulator of an MM of int8-valued operands (any leading axes on `a`; `b` two-
    dimensional or with `a`'s leading axes), through BLAS. Every operand the chip multiplies is an
    int8 (|x| <= 128), so a sum of k products is below k * 2^14: exact in float32 for k < 1,024,
    else in float64 (exact below 2^53), and within int32 (no wrap) for k < 2^17."""
    k = a.shape[-1]
    if k >= 1 << 17:
        raise MixedChipError(f"an MM reduction of {k} terms could wrap its int32 accumulator")
    dtype = np.float32 if k < 1024 else np.float64
    if b.ndim == 2:  # one BLAS call over every row of every leading index
        out = a.reshape(-1, k).astype(dtype) @ b.astype(dtype)
        return out.astype(np.int64).reshape(a.shape[:-1] + (b.shape[1],))
    return np.matmul(a.astype(dtype), b.astype(dtype)).astype(np.int64)


def _softmax_rows(x: np.ndarray, sink: int | None, smul: int, mask: np.ndarray | None = None) -> np.ndarray:
    """``isa.softmax_int8`` of every row of x (last axis), keys outside `mask` left out (weight 0)."""
    x = np.asarray(x, dtype=np.int64)
    low = np.iinfo(np.int64).min // 4
    xm = x if mask is None else np.where(mask, x, low)
    m = xm.max(axis=-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, sink)
    e = isa.EXP_TABLE[isa.table_index(np.where(mask, m - x, 0) if mask is not None else m - x, smul)]
    if mask is not None:
        e = np.where(mask, e, 0)
    total = e.sum(axis=-1, keepdims=True)
    if sink is not None:
        total = total + isa.EXP_TABLE[isa.table_index(m - sink, smul)]
    recip = (1 << isa.SM_RECIP_BITS) // total
    p = np.minimum(isa.SM_OUT_MAX, (e * recip + (1 << (isa.SM_OUT_SHIFT - 1))) >> isa.SM_OUT_SHIFT)
    return p if mask is None else np.where(mask, p, 0)


def run_rows(P: Program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``capra.reference.run_reference`` with a leading axis of independent runs on every input
    (each input B x rows x cols, the program's rows and cols): the integer value of every node."""
    vals: dict[str, np.ndarray] = {}
    for name in P.inputs:
        t = P.tensors[name]
        value = np.asarray(inputs[name], dtype=np.float64)
        if value.shape[1:] != (t.rows, t.cols):
            raise MixedChipError(f"program {P.name!r}: input {name!r} has rows of shape {value.shape[1:]}, the "
                                 f"program expects {t.rows} x {t.cols}")
        vals[name] = quantize(value, t.scale, f"program {P.name!r}: input {name!r}")
    return evaluate(P, vals, matmul=_imatmul, requant=_requantize, softmax=_softmax_rows)


@dataclass
class PrefillResult:
    """What a prefill of T tokens gives: each layer's residual out (T x d_model, float, as a decode
    step's ``residuals``), the logits (T x vocab) and each position's greedy token."""

    residuals: list[np.ndarray]
    logits: np.ndarray
    next_tokens: np.ndarray
    executor: str = "vectorised"


class VectorisedPrefill:
    """Prefill a ``MixedChip`` from an empty cache with every position of a layer at once."""

    def __init__(self, chip: MixedChip) -> None:
        m = chip.model
        if chip.kv != "contiguous":
            raise MixedChipError(f"the vectorised prefill fills a contiguous cache; the chip's is {chip.kv!r}")
        if any(lw.windowed for lw in m.layers) and m.window > chip.one_shot_rows:
            raise MixedChipError(f"a window of {m.window} rows is past the one-shot attention's {chip.one_shot_rows}: "
                                 "the vectorised prefill tiles global layers only")
        self.chip = chip
        self._rot: tuple[np.ndarray, np.ndarray] = (np.zeros((0, m.head_dim)), np.zeros((0, m.head_dim)))

    def rotation(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """The host's C and S rows of positions 0 .. t-1, each made as a decode step makes it (one
        position at a time, so every float is the step's own), kept for the next prompt."""
        c, s = self._rot
        if c.shape[0] < t:
            m = self.chip.model
            rows = [rotation_rows(m, np.array([p])) for p in range(c.shape[0], t)]
            c = np.vstack([c] + [r[0] for r in rows])
            s = np.vstack([s] + [r[1] for r in rows])
            self._rot = (c, s)
        return c[:t], s[:t]

    def _one_shot(self, layer: int, grp: int, q: np.ndarray, keys: np.ndarray, values: np.ndarray,
                  qpos: np.ndarray, kpos: np.ndarray) -> np.ndarray:
        """The one-shot program's A (C x rep x hd) for query positions `qpos` against the keys at
        `kpos` (each query sees the keys at or before it, within the window in a windowed layer)."""
        chip, m = self.chip, self.chip.model
        # the program of the longest visible run among these queries (its integers are every row count's:
        # the scales come from the calibrated ranges, not from the shape)
        P = chip.program("attn", layer, grp, min(chip.one_shot_rows, visible_rows(m, layer, int(qpos.max()) + 1)))
        qi = quantize(q * chip._scale(f"q{layer}"), P.tensors["q"].scale)
        ki = quantize(keys * chip._scale(f"k{layer}"), P.tensors["K"].scale)
        vi = quantize(values * chip._scale(f"v{layer}"), P.tensors["V"].scale)
        sp = P.params["scores"]
        scores = _requantize(_imatmul(qi, ki.T), sp["qa"], sp["qs"])  # C x rep x n
        visible = kpos[None, :] <= qpos[:, None]
        if m.layers[layer].windowed:
            visible &= (qpos[:, None] - kpos[None, :]) < m.window
        rep = m.n_heads // m.n_kv_heads
        out = np.zeros((len(qpos), rep, m.head_dim), dtype=np.int64)
        for heads, _sink in sink_groups(m, layer, grp):
            tag = "" if len(heads) == rep else str(heads[0])
            pp, ap = P.params[f"p{tag}"], P.params[f"a{tag}"]
            probs = _softmax_rows(scores[:, heads, :], pp["sink"], pp["smul"], visible[:, None, :])
            out[:, heads, :] = _requantize(_imatmul(probs, vi), ap["qa"], ap["qs"])
        return out

    def _tiled(self, layer: int, grp: int, q: np.ndarray, keys: np.ndarray, values: np.ndarray,
               qpos: np.ndarray) -> np.ndarray:
        """The tiled program's A (C x rep x hd) for query positions `qpos` of a global layer against
        keys 0 .. max(qpos): tiles of ``tile`` keys from key 0, the last one cut at the position."""
        chip = self.chip
        p = chip.tiled_params(layer, grp)
        tile = chip.tile
        n = int(qpos.max()) + 1
        logits = _requantize(_imatmul(q, keys[:n].T), p.qa, p.qs)  # C x rep x n
        c, rep, hd = q.shape
        m_run = np.broadcast_to(np.array(p.sinks, dtype=np.int64), (c, rep)).copy()  # state_init with a sink
        l_run = np.full((c, rep), isa.SM_OUT_MAX, dtype=np.int64)
        o_run = np.zeros((c, rep, hd), dtype=np.int64)
        half_a = 1 << (isa.SM_ALPHA_BITS - 1)
        for j0 in range(0, n, tile):
            live = qpos >= j0  # queries with at least one visible key in this tile
            if not live.any():
                break
            j1 = min(j0 + tile, n)
            x = logits[live, :, j0:j1]
            seen = (np.arange(j0, j1)[None, :] <= qpos[live, None])[:, None, :]
            low = np.iinfo(np.int64).min // 4
            m_old = m_run[live]
            m_new = np.maximum(m_old, np.where(seen, x, low).max(axis=-1))
            e = isa.EXP_TABLE[isa.table_index(np.where(seen, m_new[..., None] - x, 0), p.smul)]
            w = np.where(seen, np.minimum(isa.SM_OUT_MAX, (e + (1 << (isa.SM_STEP_SHIFT - 1))) >> isa.SM_STEP_SHIFT), 0)
            alpha = isa.EXP_TABLE[isa.table_index(m_new - m_old, p.smul)]
            l_run[live] = ((((l_run[live] & 0xFFFFFFFF) * alpha + half_a) >> isa.SM_ALPHA_BITS) + w.sum(axis=-1)) \
                & 0xFFFFFFFF
            m_run[live] = m_new
            t32 = _imatmul(w, values[j0:j1])
            o_run[live] = _wrap32(((o_run[live] * (alpha[..., None] & 0xFFFF) + half_a) >> isa.SM_ALPHA_BITS) + t32)
        # NORM: clamp((O * floor(2^31 / l) + 2^(30-k)) >> (31-k)); l > 0 (the sink's weight)
        recip = np.where(l_run > 0, (1 << isa.SM_RECIP_BITS) // np.maximum(l_run, 1), 0xFFFFFFFF)
        sh = isa.SM_NORM_SHIFT - (p.out_shift & 0xF)
        if np.abs(o_run).max(initial=0) * int(recip.max(initial=0)) < 2**62:
            out = (o_run * recip[..., None] + (1 << (sh - 1))) >> sh
        else:  # past int64: Python integers, as isa.softmax_norm
            out = (o_run.astype(object) * recip[..., None].astype(object) + (1 << (sh - 1))) >> sh
        return np.clip(out, isa.INT8_MIN, isa.INT8_MAX).astype(np.int64)

    def _attention(self, layer: int, grp: int, q: np.ndarray, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """A (T x rep x hd, int8) of one KV group for every position, as each decode step gets it."""
        chip, m = self.chip, self.chip.model
        t = q.shape[0]
        out = np.zeros(q.shape, dtype=np.int64)
        windowed = m.layers[layer].windowed
        for a in range(0, t, QUERY_CHUNK):
            b = min(a + QUERY_CHUNK, t)
            qpos = np.arange(a, b)
            vis = np.array([visible_rows(m, layer, p + 1) for p in qpos])
            shot = vis <= chip.one_shot_rows
            if shot.any():
                qs = qpos[shot]
                lo = max(0, int(qs.min()) - m.window + 1) if windowed else 0
                kpos = np.arange(lo, int(qs.max()) + 1)
                out[qs] = self._one_shot(layer, grp, q[qs], keys[kpos], values[kpos], qs, kpos)
            if (~shot).any():
                if windowed:
                    raise MixedChipError("a windowed layer's attention past the one-shot rows is not vectorised")
                qs = qpos[~shot]
                out[qs] = self._tiled(layer, grp, q[qs], keys, values, qs)
        return out

    def prefill(self, ids: Sequence[int], progress: Callable[[int], None] | None = None) -> PrefillResult:
        """Prefill `ids` into the chip's cache from an empty one (``chip.reset()`` first): the cache,
        position, residuals, logits and tokens ``chip.prefill(ids, "reference")`` gives.
        ``progress(layer)`` after each layer."""
        chip, m = self.chip, self.chip.model
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0:
            raise MixedChipError("prefill needs a non-empty list of token ids")
        if ids.min() < 0 or ids.max() >= m.vocab_size:
            raise MixedChipError(f"token ids must lie in [0, {m.vocab_size})")
        t = len(ids)
        rep = m.n_heads // m.n_kv_heads
        chip.reset()
        c, s = self.rotation(t)
        rot = {"rot_c": np.repeat(c[:, None, :], rep, axis=1), "rot_s": np.repeat(s[:, None, :], rep, axis=1)}
        x = m.embed[ids][:, None, :].astype(np.float64)  # T x 1 x d_model: each step's host lookup
        residuals = []
        logits = tokens = None
        for layer in range(m.n_layers):
            a_out = {}
            for grp in range(m.n_kv_heads):
                out = run_rows(chip.program("proj", layer, grp), {"x": x, **rot})
                q, k, v = out["q"], out["k"][:, 0, :], out["v"][:, 0, :]
                a_int = self._attention(layer, grp, q, k, v)
                a_out[f"a{grp}"] = a_int * chip._scale(f"a{layer}")
                n = visible_rows(m, layer, t)
                chip.keys[layer][grp], chip.values[layer][grp] = k[-n:].copy(), v[-n:].copy()
            P = chip.program("out", layer)
            out = run_rows(P, {"x": x, **a_out})
            x = out["y"] * chip._scale(f"x{layer + 1}")
            residuals.append(x[:, 0, :].copy())
            if layer == m.n_layers - 1:
                logits = out["logits"][:, 0, :] * chip._scale("logits")
                tokens = out["tok"][:, 0, 0].copy()
            if progress is not None:
                progress(layer + 1)
        chip.position = t
        return PrefillResult(residuals, logits, tokens)
