"""A multi-layer tiny decoder whose layers alternate windowed and global attention.

This is the model the inference path (``generate.py``) and the passkey evaluation (``long_context.py``)
run on. It is small enough to read in one sitting and has every feature the long-context path has
to get right:

* layers alternate sliding-window attention (even layers) and full causal attention (odd layers);
* grouped-query attention: ``n_heads`` query heads share ``n_kv_heads`` key/value heads, and the
  sharing is a broadcast inside :func:`attention` -- the cache only ever stores ``n_kv_heads``;
* rotary positions on the last ``rotary_dims`` dimensions of every head (the first dimensions are
  left unrotated: a partial rotary); keys are rotated once, at the
  absolute position where they are computed, and stored rotated;
* a per-head attention sink: an extra logit with a zero value, clamped to ``[SINK_MIN, SINK_MAX]``
  and memoised once per ``generate`` call;
* masks built from ``query index = arange(Tq) + (Tk - Tq)`` so that one code path is right for a
  whole-prompt prefill, a one-token decode step and a chunk prefilled into a cached prefix.

The weights of ``kind="mixed"`` and ``kind="windowed"`` are *constructed*, not trained: a
previous-token circuit in layer 0 (windowed) feeds an induction head in layer 1, which finds the
earlier place where the current three-token context occurred and copies the token that followed
it. That is enough to read a passkey back digit by digit. ``docs/inference.md`` explains the
construction; :func:`make_mixed_model` builds it. ``kind="random"`` gives random weights with the
same shapes, for tests that want ordinary, unpeaked logits.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

SINK_MIN = -10.0
SINK_MAX = 15.0

# The vocabulary of the constructed model. Digits are single tokens so that a passkey is read
# back one digit per decode step; the words are those of the filler, the needle and the question.
VOCAB: tuple[str, ...] = (
    "<pad>", "<unk>",
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    ".", "?", "the", "passkey", "is", "what",
    "grass", "green", "sky", "blue", "sun", "yellow",
    "here", "we", "go", "there", "and", "back", "again", "day",
)

# Tokens the induction head can match on. Every other token (filler words, punctuation) has a zero
# image in the match subspace, so no filler key can look like the needle's context.
MATCH_TOKENS: tuple[str, ...] = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "is", "passkey")

INDUCTION_CONTEXT = 3       # tokens of context the induction head compares (current + 2 previous)
INDUCTION_LAYER = 1         # where the constructed model keeps its induction head ...
INDUCTION_HEAD = 0          # ... and which query head it is


class ModelConfigError(ValueError):
    """The requested model shape cannot be built (names the parameter and the limit)."""


@dataclass
class LayerWeights:
    """One attention layer: projections, output map and the raw (unclamped) sink logits."""

    wq: np.ndarray          # (d_model, n_heads * head_dim)
    wk: np.ndarray          # (d_model, n_kv_heads * head_dim)
    wv: np.ndarray          # (d_model, n_kv_heads * head_dim)
    wo: np.ndarray          # (n_heads * head_dim, d_model)
    sink_raw: np.ndarray    # (n_heads,)
    windowed: bool


@dataclass
class MixedLM:
    """The tiny decoder: token embedding, a residual stack of attention layers, an unembedding.

    There are no MLPs and no norms: every computation the passkey circuit needs is done by
    attention, and leaving the residual stream unnormalised keeps the construction exact.
    """

    vocab: tuple[str, ...]
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rotary_dims: int
    rope_base: float
    window: int
    embed: np.ndarray           # (V, d_model)
    layers: list[LayerWeights]
    unembed: np.ndarray         # (d_model, V)
    dtype: type = np.float32
    notes: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        return tuple("windowed" if layer.windowed else "global" for layer in self.layers)

    def clamped_sink(self, layer_idx: int, memo: dict | None) -> np.ndarray:
        """Return the layer's sink logits clamped to [SINK_MIN, SINK_MAX], computed once per memo.

        ``generate`` passes one fresh dict per call, so the clamp runs once per layer per call
        (not once per step) and still reflects the current raw values on the next call.
        """
        if memo is not None and layer_idx in memo:
            return memo[layer_idx]
        clamped = clamp_sink_logits(self.layers[layer_idx].sink_raw).astype(self.dtype)
        if memo is not None:
            memo[layer_idx] = clamped
        return clamped

    def forward(
        self,
        ids: np.ndarray,
        positions: np.ndarray,
        cache=None,
        sink_memo: dict | None = None,
        last_only: bool = False,
        layer_seconds: dict | None = None,
    ) -> np.ndarray:
        """Run a chunk of tokens through every layer and return logits.

        ``ids`` is (batch, T) and ``positions`` the T absolute positions of those tokens. With a
        ``MixedKVCache`` the chunk attends to everything cached before it and is appended to the
        cache; without one the chunk is the whole history. ``last_only`` returns the logits of the
        last position only, shape (batch, V); otherwise (batch, T, V). When ``layer_seconds`` is a
        dict, the wall time spent in each layer is added to it (for the decode benchmark).

        Everything is validated before the first layer runs -- the ids (integers in [0, V): numpy
        would read -1 as the last row of the embedding), the positions (integers >= 0) and, with a
        cache, every layer's append (``MixedKVCache.check_appends``) -- so a pass that raises
        leaves the cache exactly as it was, in every layer.
        """
        ids = np.asarray(ids)
        positions = np.asarray(positions)
        if ids.ndim != 2 or positions.shape != (ids.shape[1],):
            raise ValueError(f"ids must be (batch, T) and positions (T,), got {ids.shape} and {positions.shape}")
        if ids.dtype.kind not in "iu":
            raise ValueError(f"ids must be integer token ids, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"ids must lie in [0, {self.vocab_size}), got [{ids.min()}, {ids.max()}]")
        if positions.dtype.kind not in "iu" or (positions.size and positions.min() < 0):
            raise ValueError(f"positions must be integers >= 0, got {positions.tolist()[:8]!r} "
                             f"(dtype {positions.dtype})")
        if cache is not None:
            batch, t_new = ids.shape
            cache.check_appends([(i, (batch, self.n_kv_heads, t_new, self.head_dim), layer.windowed, self.window)
                                 for i, layer in enumerate(self.layers)])
        x = self.embed[ids]
        cos, sin = rotary_tables(positions, self.rotary_dims, self.rope_base, self.dtype)
        for layer_idx in range(self.n_layers):
            start = time.perf_counter()
            x = self._layer(layer_idx, x, cos, sin, cache, sink_memo)
            if layer_seconds is not None:
                layer_seconds[layer_idx] = layer_seconds.get(layer_idx, 0.0) + time.perf_counter() - start
        if last_only:
            return x[:, -1, :] @ self.unembed
        return x @ self.unembed

    def last_query_attention(self, ids: np.ndarray, layer_idx: int) -> np.ndarray:
        """Attention probabilities of the last position in ``layer_idx``: (batch, n_heads, T + 1).

        Column j < T is the weight on key j, the last column the weight on the sink. Layers before
        ``layer_idx`` run in full; only one query row of ``layer_idx`` is formed, so this is cheap
        enough to inspect the induction head at contexts far longer than a full prefill allows.
        """
        ids = np.asarray(ids)
        t = ids.shape[1]
        cos, sin = rotary_tables(np.arange(t), self.rotary_dims, self.rope_base, self.dtype)
        x = self.embed[ids]
        for idx in range(layer_idx):
            x = self._layer(idx, x, cos, sin, None, None)
        layer = self.layers[layer_idx]
        q = apply_rotary(self._heads(x[:, -1:] @ layer.wq, self.n_heads), cos[-1:], sin[-1:], self.rotary_dims)
        k = apply_rotary(self._heads(x @ layer.wk, self.n_kv_heads), cos, sin, self.rotary_dims)
        k = np.repeat(k, self.n_heads // self.n_kv_heads, axis=1)
        scores = (q @ np.swapaxes(k, -1, -2))[:, :, 0, :].astype(np.float64) / math.sqrt(self.head_dim)
        if layer.windowed:
            scores[:, :, : max(0, t - self.window)] = -np.inf
        sink = np.broadcast_to(self.clamped_sink(layer_idx, None)[None, :, None], (ids.shape[0], self.n_heads, 1))
        logits = np.concatenate([scores, sink], axis=-1)
        logits -= logits.max(axis=-1, keepdims=True)
        probs = np.exp(logits)
        return probs / probs.sum(axis=-1, keepdims=True)

    def _layer(self, layer_idx, x, cos, sin, cache, sink_memo):
        layer = self.layers[layer_idx]
        batch, t_new, _ = x.shape
        q = self._heads(x @ layer.wq, self.n_heads)
        k = self._heads(x @ layer.wk, self.n_kv_heads)
        v = self._heads(x @ layer.wv, self.n_kv_heads)
        q = apply_rotary(q, cos, sin, self.rotary_dims)
        k = apply_rotary(k, cos, sin, self.rotary_dims)     # rotated once, here, at its own position
        keys, values = k, v
        if cache is not None and layer.windowed:
            # The ring holds at most `window` earlier keys; read it before this chunk overwrites
            # slots, then attend to history + chunk under the band mask.
            past_k, past_v = cache.get(layer_idx, True)
            if past_k is not None:
                keys = np.concatenate([past_k, k], axis=2)
                values = np.concatenate([past_v, v], axis=2)
            cache.append(layer_idx, k, v, True, self.window)
        elif cache is not None:
            # A global layer keeps everything: append in place, then read a view of the prefix.
            cache.append(layer_idx, k, v, False, self.window)
            keys, values = cache.get(layer_idx, False)
        sink = self.clamped_sink(layer_idx, sink_memo)
        window = self.window if layer.windowed else None
        out = attention(q, keys, values, sink, window=window)
        out = out.transpose(0, 2, 1, 3).reshape(batch, t_new, self.n_heads * self.head_dim)
        return x + out @ layer.wo

    def _heads(self, projected: np.ndarray, n: int) -> np.ndarray:
        batch, t, _ = projected.shape
        return projected.reshape(batch, t, n, self.head_dim).transpose(0, 2, 1, 3)


def clamp_sink_logits(raw: np.ndarray) -> np.ndarray:
    """Clamp sink logits to [SINK_MIN, SINK_MAX] (a module-level function so tests can count calls)."""
    return np.clip(raw, SINK_MIN, SINK_MAX)


def rotary_tables(positions: np.ndarray, rotary_dims: int, base: float, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin tables (T, rotary_dims // 2) for absolute ``positions``.

    The angles are formed in float64 and cast afterwards: at position 4,096 and frequency 1 the
    angle itself carries 12 integer bits, and float32 would lose the fraction that matters.
    """
    half = rotary_dims // 2
    inv_freq = base ** (-np.arange(half, dtype=np.float64) / half)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def apply_rotary(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, rotary_dims: int) -> np.ndarray:
    """Rotate the last ``rotary_dims`` dims of ``x`` (batch, heads, T, head_dim) pairwise.

    Pair m is (dim r0 + m, dim r0 + half + m) with r0 = head_dim - rotary_dims; the first r0 dims
    pass through untouched, which is where position-free content matching lives.
    """
    if rotary_dims == 0:
        return x
    head_dim = x.shape[-1]
    half = rotary_dims // 2
    r0 = head_dim - rotary_dims
    x1 = x[..., r0:r0 + half]
    x2 = x[..., r0 + half:]
    out = x.copy()
    out[..., r0:r0 + half] = x1 * cos - x2 * sin
    out[..., r0 + half:] = x1 * sin + x2 * cos
    return out


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    sink: np.ndarray,
    window: int | None = None,
    max_block_elements: int = 1 << 22,
) -> np.ndarray:
    """Causal (optionally sliding-window) attention with grouped KV heads and a per-head sink.

    Shapes: q (B, H, Tq, D); k, v (B, Hkv, Tk, D) with Tk >= Tq; sink (H,). The queries are the last
    Tq of the Tk positions, so query i has index ``i + (Tk - Tq)`` and may see key j when
    ``j <= i + Tk - Tq`` and, with a window, ``i + Tk - Tq - j < window``. Query head h reads KV head
    ``h // (H // Hkv)``; that expansion happens here, by folding the query heads of a group into
    one matrix product against their shared K and V -- the cache never holds repeated heads.

    The sink is one more logit per head whose value vector is zero: it joins the softmax
    denominator and absorbs probability mass when no key scores well.

    Queries are processed in blocks, and each block only looks at the key range its mask can
    reach (keys after the block are skipped; with a window, keys too far back are skipped), so a
    windowed prefill costs O(T * window) and a global prefill does about half the dense work.
    """
    batch, n_heads, t_q, dim = q.shape
    n_kv = k.shape[1]
    t_k = k.shape[2]
    if n_heads % n_kv:
        raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv}")
    if t_k < t_q:
        raise ValueError(f"attention needs Tk >= Tq, got Tk={t_k}, Tq={t_q}")
    rep = n_heads // n_kv
    offset = t_k - t_q
    grouped_q = q.reshape(batch, n_kv, rep, t_q, dim) * q.dtype.type(1.0 / math.sqrt(dim))
    sink_logit = np.asarray(sink, dtype=q.dtype).reshape(1, n_kv, rep, 1)
    out = np.empty_like(grouped_q)
    if window is None:
        block = max_block_elements // max(1, batch * n_heads * t_k)
    else:
        block = min(window, max_block_elements // max(1, batch * n_heads * 2 * window))
    block = int(max(1, min(t_q, block)))
    k_t = np.swapaxes(k, -1, -2)                                    # (B, Hkv, D, Tk), a view
    for start in range(0, t_q, block):
        stop = min(t_q, start + block)
        rows = stop - start
        key_hi = offset + stop
        key_lo = 0 if window is None else max(0, offset + start - window + 1)
        n_keys = key_hi - key_lo
        q_blk = grouped_q[:, :, :, start:stop, :].reshape(batch, n_kv, rep * rows, dim)
        scores = (q_blk @ k_t[:, :, :, key_lo:key_hi]).reshape(batch, n_kv, rep, rows, n_keys)
        scores += _mask_bias(offset + start, rows, key_lo, key_hi, window, q.dtype)
        top = np.maximum(scores.max(axis=-1), sink_logit)
        scores -= top[..., None]
        np.exp(scores, out=scores)
        denom = scores.sum(axis=-1) + np.exp(sink_logit - top)
        weighted = scores.reshape(batch, n_kv, rep * rows, n_keys) @ v[:, :, key_lo:key_hi, :]
        out[:, :, :, start:stop, :] = weighted.reshape(batch, n_kv, rep, rows, dim) / denom[..., None]
    return out.reshape(batch, n_heads, t_q, dim)


def _mask_bias(first_query: int, rows: int, key_lo: int, key_hi: int, window: int | None, dtype) -> np.ndarray:
    """Additive mask (rows, key_hi - key_lo): 0 where the query may see the key, -inf elsewhere."""
    q_idx = first_query + np.arange(rows)[:, None]
    k_idx = np.arange(key_lo, key_hi)[None, :]
    allowed = k_idx <= q_idx
    if window is not None:
        allowed &= (q_idx - k_idx) < window
    return np.where(allowed, 0.0, -np.inf).astype(dtype)


# --------------------------------------------------------------------------------------------
# Construction
# --------------------------------------------------------------------------------------------

def _positional_kernel(rotary_dims: int, base: float, distance: int, window: int) -> np.ndarray:
    """Score, up to scale, that a prev-token head with target ``distance`` gives each key offset."""
    half = rotary_dims // 2
    inv_freq = base ** (-np.arange(half) / half)
    offsets = np.arange(window)
    return np.cos((offsets[:, None] - distance) * inv_freq[None, :]).sum(axis=1)


def make_mixed_model(
    seed: int = 0,
    kind: str = "mixed",
    n_layers: int = 4,
    window: int = 128,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    head_dim: int = 64,
    rotary_dims: int = 16,
    rope_base: float = 10000.0,
    dtype=np.float32,
) -> MixedLM:
    """Build the tiny decoder.

    ``kind="mixed"``: even layers windowed, odd layers global, with the passkey circuit in layers 0
    and 1 and the remaining layers parked (small seeded random weights, sinks that take the mass).
    ``kind="windowed"``: the very same weights with every layer windowed -- the control that shows
    what a window alone cannot retrieve. ``kind="random"``: the mixed layer pattern with random
    weights everywhere (ordinary logits, for tests of the decode machinery).

    Raises ModelConfigError naming the parameter when the shape cannot hold the circuit.
    """
    if kind not in ("mixed", "windowed", "random"):
        raise ModelConfigError(f"kind must be 'mixed', 'windowed' or 'random', got {kind!r}")
    if n_layers < 2:
        raise ModelConfigError(f"n_layers must be >= 2 (one windowed, one global), got {n_layers}")
    if window < 1:
        raise ModelConfigError(f"window must be >= 1, got {window}")
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ModelConfigError(f"n_heads={n_heads} must be a positive multiple of n_kv_heads={n_kv_heads}")
    if rotary_dims % 2 or not 0 <= rotary_dims <= head_dim:
        raise ModelConfigError(f"rotary_dims must be even and <= head_dim={head_dim}, got {rotary_dims}")
    rng = np.random.default_rng(seed)
    windowed = [kind == "windowed" or i % 2 == 0 for i in range(n_layers)]
    if kind == "random":
        return _random_model(rng, windowed, window, n_heads, n_kv_heads, head_dim, rotary_dims, rope_base, dtype)
    return _constructed_model(rng, windowed, window, n_heads, n_kv_heads, head_dim, rotary_dims, rope_base, dtype)


def _random_model(rng, windowed, window, n_heads, n_kv_heads, head_dim, rotary_dims, rope_base, dtype):
    d_model = 64
    vocab_size = len(VOCAB)

    def normal(*shape, std):
        return (rng.standard_normal(shape) * std).astype(dtype)

    layers = [
        LayerWeights(
            wq=normal(d_model, n_heads * head_dim, std=d_model ** -0.5),
            wk=normal(d_model, n_kv_heads * head_dim, std=d_model ** -0.5),
            wv=normal(d_model, n_kv_heads * head_dim, std=d_model ** -0.5),
            wo=normal(n_heads * head_dim, d_model, std=(n_heads * head_dim) ** -0.5),
            # Spread past both clamp bounds so that the clamp changes results.
            sink_raw=rng.uniform(-20.0, 25.0, size=n_heads),
            windowed=w,
        )
        for w in windowed
    ]
    return MixedLM(
        vocab=VOCAB, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        rotary_dims=rotary_dims, rope_base=rope_base, window=window,
        embed=normal(vocab_size, d_model, std=1.0), layers=layers,
        unembed=normal(d_model, vocab_size, std=d_model ** -0.5), dtype=dtype,
    )


@dataclass(frozen=True)
class ResidualLayout:
    """Where each piece of information lives in the residual stream of the constructed model."""

    vocab_size: int
    n_match: int

    @property
    def token(self) -> slice:           # one-hot of the current token
        return slice(0, self.vocab_size)

    @property
    def bias(self) -> int:              # a dimension that is always 1
        return self.vocab_size

    def previous(self, distance: int) -> slice:
        """Match-code of the token ``distance`` positions back (written by layer 0, head distance-1)."""
        start = self.vocab_size + 1 + (distance - 1) * self.n_match
        return slice(start, start + self.n_match)

    @property
    def output(self) -> slice:          # what the induction head copied (read by the unembedding)
        start = self.vocab_size + 1 + INDUCTION_CONTEXT * self.n_match
        return slice(start, start + self.vocab_size)

    @property
    def width(self) -> int:
        return self.output.stop


PREV_PEAK = 20.0          # score of the key a previous-token head is meant to attend to
PREV_MARGIN = 35.0        # minimum gap to any other key inside the window
INDUCTION_UNIT = 12.0     # score for matching the oldest context token; newer ones weigh 2x, 4x
INDUCTION_SINK = 20.0     # raw sink logit of the induction head (clamped to SINK_MAX = 15)
PARKED_SINK = 30.0        # raw sink logit of parked heads (clamped to 15): they attend to nothing
OUTPUT_GAIN = 10.0        # logit gap the copied token gets over the rest
PARKED_STD = 0.02         # scale of the random weights of parked layers


def _constructed_model(rng, windowed, window, n_heads, n_kv_heads, head_dim, rotary_dims, rope_base, dtype):
    vocab_size = len(VOCAB)
    n_match = len(MATCH_TOKENS)
    layout = ResidualLayout(vocab_size, n_match)
    needs = {
        "n_heads": (n_heads, INDUCTION_CONTEXT),                 # one prev-token head per distance
        "head_dim - rotary_dims": (head_dim - rotary_dims, INDUCTION_CONTEXT * n_match),
        "head_dim (value)": (head_dim, vocab_size),
        "rotary_dims": (rotary_dims, 2),
    }
    for name, (have, need) in needs.items():
        if have < need:
            raise ModelConfigError(f"{name} = {have} is too small for the passkey circuit (needs >= {need})")
    shape = _Shape(max(128, layout.width), n_heads, n_kv_heads, head_dim, rotary_dims)

    embed = np.zeros((vocab_size, shape.d_model))
    embed[:, layout.token] = np.eye(vocab_size)
    embed[:, layout.bias] = 1.0
    prev, sharpness = _previous_token_layer(layout, shape, rope_base, window, windowed[0])
    layers = [prev, _induction_layer(layout, shape, windowed[1])]
    for w in windowed[2:]:
        layers.append(_parked_layer(rng, shape.d_model, n_heads, n_kv_heads, head_dim, w))
    unembed = np.zeros((shape.d_model, vocab_size))
    unembed[layout.output, :] = np.eye(vocab_size)
    for layer in layers:
        for name in ("wq", "wk", "wv", "wo"):
            setattr(layer, name, getattr(layer, name).astype(dtype))
    return MixedLM(
        vocab=VOCAB, d_model=shape.d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        rotary_dims=rotary_dims, rope_base=rope_base, window=window,
        embed=embed.astype(dtype), layers=layers, unembed=unembed.astype(dtype), dtype=dtype,
        notes={"layout": layout, "prev_sharpness": sharpness},
    )


@dataclass(frozen=True)
class _Shape:
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rotary_dims: int


def _match_rows() -> dict[int, int]:
    """Token id -> row of its match code, for the tokens that have one."""
    return {VOCAB.index(tok): i for i, tok in enumerate(MATCH_TOKENS)}


def _previous_token_layer(layout: ResidualLayout, shape: _Shape, rope_base: float, window: int,
                          windowed: bool) -> tuple[LayerWeights, float]:
    """Layer 0: head h (h < INDUCTION_CONTEXT) copies the match code of the token h + 1 back.

    Keys are a constant vector in the rotary dims, so after rotation a key encodes only its
    position. Head h's query is that constant pre-rotated by distance d = h + 1, which makes its
    score a sum of cos((i - j - d) * theta_m): largest exactly at i - j = d. The smallest gap to
    any other offset in the window is measured and scaled to PREV_MARGIN logits; a constant key
    dimension then shifts the peak to PREV_PEAK so the sink (logit 0) wins when there is no key at
    distance d. Returns the layer and the scale used.
    """
    d_model, n_heads, n_kv, head_dim, rotary_dims = (
        shape.d_model, shape.n_heads, shape.n_kv_heads, shape.head_dim, shape.rotary_dims)
    half = rotary_dims // 2
    r0 = head_dim - rotary_dims
    inv_freq = rope_base ** (-np.arange(half) / half)
    worst_gap = min(
        kernel[d] - np.delete(kernel, d).max()
        for d in range(1, INDUCTION_CONTEXT + 1)
        for kernel in [_positional_kernel(rotary_dims, rope_base, d, max(window, INDUCTION_CONTEXT + 2))]
    )
    if worst_gap <= 0:
        raise ModelConfigError(f"rotary_dims={rotary_dims}, rope_base={rope_base} cannot single out one offset")
    sharpness = PREV_MARGIN / worst_gap
    root_d = math.sqrt(head_dim)            # attention divides scores by sqrt(head_dim)
    n_match = layout.n_match
    layer = _zero_layer(d_model, n_heads, n_kv, head_dim, windowed)
    for kv in range(n_kv):
        cols = kv * head_dim
        layer.wk[layout.bias, cols + r0:cols + r0 + half] = 1.0
        layer.wk[layout.bias, cols] = 1.0                      # constant key dim -> score offset
        for tok, row in _match_rows().items():
            layer.wv[tok, cols + row] = 1.0
    for h in range(n_heads):
        cols = h * head_dim
        if h >= INDUCTION_CONTEXT:
            layer.sink_raw[h] = PARKED_SINK
            continue
        distance = h + 1
        pre_rotated = np.concatenate([np.cos(distance * inv_freq), -np.sin(distance * inv_freq)])
        layer.wq[layout.bias, cols + r0:cols + r0 + rotary_dims] = sharpness * pre_rotated * root_d
        layer.wq[layout.bias, cols] = (PREV_PEAK - sharpness * half) * root_d
        layer.wo[cols:cols + n_match, layout.previous(distance)] = np.eye(n_match)
    return layer, float(sharpness)


def _induction_layer(layout: ResidualLayout, shape: _Shape, windowed: bool) -> LayerWeights:
    """Layer 1: query head INDUCTION_HEAD finds where the current 3-token context occurred before.

    Query: match codes of the current token and of the two before it. Key: match codes of the
    three tokens *before* the key. Agreement at distance 0, 1, 2 adds 4u, 2u, u -- lexicographic
    weights, so the key whose context agrees furthest wins by at least u. Only unrotated dims are
    used, so the score does not depend on how far back the key is. The value is the key's own
    token, written with gain OUTPUT_GAIN where the unembedding reads.
    """
    n_match, vocab_size = layout.n_match, layout.vocab_size
    root_d = math.sqrt(shape.head_dim)
    layer = _zero_layer(shape.d_model, shape.n_heads, shape.n_kv_heads, shape.head_dim, windowed)
    weights = [INDUCTION_UNIT * 2 ** (INDUCTION_CONTEXT - 1 - i) for i in range(INDUCTION_CONTEXT)]
    for tok, row in _match_rows().items():
        layer.wq[tok, row] = weights[0] * root_d
    for i in range(1, INDUCTION_CONTEXT):
        block = slice(i * n_match, (i + 1) * n_match)
        layer.wq[layout.previous(i), block] = np.eye(n_match) * weights[i] * root_d
    for i in range(INDUCTION_CONTEXT):
        block = slice(i * n_match, (i + 1) * n_match)
        layer.wk[layout.previous(i + 1), block] = np.eye(n_match)
    layer.wv[layout.token, 0:vocab_size] = np.eye(vocab_size)
    layer.wo[0:vocab_size, layout.output] = np.eye(vocab_size) * OUTPUT_GAIN
    layer.sink_raw[:] = PARKED_SINK
    layer.sink_raw[INDUCTION_HEAD] = INDUCTION_SINK
    return layer


def _zero_layer(d_model, n_heads, n_kv_heads, head_dim, windowed) -> LayerWeights:
    return LayerWeights(
        wq=np.zeros((d_model, n_heads * head_dim)),
        wk=np.zeros((d_model, n_kv_heads * head_dim)),
        wv=np.zeros((d_model, n_kv_heads * head_dim)),
        wo=np.zeros((n_heads * head_dim, d_model)),
        sink_raw=np.zeros(n_heads),
        windowed=windowed,
    )


def _parked_layer(rng, d_model, n_heads, n_kv_heads, head_dim, windowed) -> LayerWeights:
    """A layer that is present (it has a cache, it costs time) but whose sinks take the attention."""
    layer = _zero_layer(d_model, n_heads, n_kv_heads, head_dim, windowed)
    for name in ("wq", "wk", "wv", "wo"):
        shape = getattr(layer, name).shape
        setattr(layer, name, rng.standard_normal(shape) * PARKED_STD)
    layer.sink_raw[:] = PARKED_SINK
    return layer
