"""Autoregressive decoding with a heterogeneous per-layer KV cache.

``MixedKVCache`` stores each layer the way that layer attends:

* a windowed layer only ever looks ``window`` tokens back, so it keeps a ring buffer of exactly
  ``window`` slots -- O(window) memory and an in-place write per decode step, whatever the length;
* a global layer needs the whole prefix, so it keeps a growing array with 1.5x amortised growth,
  up to a hard cap past which appending is a loud error (never a silent truncation).

``generate`` runs the prompt through the model once (prefill), then one token per step (decode),
reading history from the cache. ``use_cache=False`` recomputes the whole prefix every step; it is
slow on purpose and serves as the reference the cached path must match token for token.

All arrays are shaped (batch, kv_heads, tokens, head_dim); keys arrive already rotated.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass

import numpy as np

DEFAULT_GLOBAL_CAP_TOKENS = 4_000_000


class CacheCapacityError(RuntimeError):
    """Appending would take a global layer past the cache's hard cap; the cache is unchanged."""


@dataclass
class _Ring:
    k: np.ndarray       # (B, H_kv, window, D)
    v: np.ndarray
    head: int           # slot the next token is written to
    count: int          # valid tokens, <= window


@dataclass
class _Growing:
    k: np.ndarray       # (B, H_kv, capacity, D); slots past `length` are slack
    v: np.ndarray
    length: int


class MixedKVCache:
    """Per-layer KV storage: ring buffers for windowed layers, growing arrays for global layers.

    Invariants (checked by tests/test_inference.py against a plain list model):

    * ``get`` returns the last ``seq_len(layer)`` appended tokens in the order they were appended;
    * a windowed layer's ``seq_len`` is ``min(window, tokens appended)``; a global layer's is the
      number of tokens appended; both are 0 before the first append;
    * a failed ``append`` (bad shape or dtype, wrong kind, past the cap) raises and changes nothing,
      and so does a failed forward pass: ``check_appends`` validates every layer's append of a
      pass before the first one writes.

    Every append is validated first (``_plan``, which touches nothing) and written second (by code
    that cannot fail on its arguments); keeping the two apart is what makes "changes nothing" hold
    for every error, not just the ones someone thought to check early.
    """

    def __init__(self, global_cap_tokens: int = DEFAULT_GLOBAL_CAP_TOKENS):
        if not _is_int(global_cap_tokens) or global_cap_tokens < 1:
            raise ValueError(f"global_cap_tokens must be an integer >= 1, got {global_cap_tokens!r}")
        self.global_cap_tokens = int(global_cap_tokens)
        self._rings: dict[int, _Ring] = {}
        self._growing: dict[int, _Growing] = {}

    # ---- bookkeeping -----------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every layer; required between independent requests."""
        self._rings.clear()
        self._growing.clear()

    def __len__(self) -> int:
        """Number of layers holding cached tokens."""
        return len(self._rings) + len(self._growing)

    def seq_len(self, layer_idx: int) -> int:
        """Tokens this layer will return from ``get``: the ring's count or the global length, else 0."""
        if layer_idx in self._rings:
            return self._rings[layer_idx].count
        if layer_idx in self._growing:
            return self._growing[layer_idx].length
        return 0

    def allocated_bytes(self) -> int:
        """Bytes of every K/V buffer as allocated, slack included (what the process really holds)."""
        rings = sum(r.k.nbytes + r.v.nbytes for r in self._rings.values())
        growing = sum(g.k.nbytes + g.v.nbytes for g in self._growing.values())
        return rings + growing

    def stored_bytes(self) -> int:
        """Bytes of the valid tokens only (the analytical figure: ring count or global length)."""
        total = 0
        for ring in self._rings.values():
            total += 2 * ring.k[:, :, :ring.count].nbytes
        for grow in self._growing.values():
            total += 2 * grow.k[:, :, :grow.length].nbytes
        return total

    # ---- validation ------------------------------------------------------------------------

    def _plan(self, layer_idx, shape: tuple, is_windowed, window, dtypes: tuple = ()) -> int:
        """Check one append of a chunk of ``shape`` against the cache as it is; return the window
        (an int) for a windowed layer, 0 for a global one. Raises and touches nothing."""
        if not _is_int(layer_idx) or layer_idx < 0:
            raise ValueError(f"layer index must be an integer >= 0, got {layer_idx!r}")
        if not isinstance(is_windowed, bool | np.bool_):
            raise ValueError(f"layer {layer_idx}: is_windowed must be a bool, got {is_windowed!r}")
        if len(shape) != 4 or min(shape[0], shape[1], shape[3]) < 1:
            raise ValueError(f"layer {layer_idx}: k_rot and v must both be (batch, kv_heads, tokens, head_dim) "
                             f"with batch, kv_heads and head_dim >= 1, got {shape}")
        for name, dtype in dtypes:
            if np.dtype(dtype).kind != "f":
                raise ValueError(f"layer {layer_idx}: {name} must be a floating-point array, got dtype {dtype}")
        t_new = shape[2]
        if is_windowed:
            if layer_idx in self._growing:
                raise ValueError(f"layer {layer_idx} is cached as global, cannot append as windowed")
            if not _is_int(window) or window < 1:
                raise ValueError(f"layer {layer_idx}: window must be an integer >= 1, got {window!r}")
            ring = self._rings.get(layer_idx)
            if ring is not None:
                self._check_same_rows(layer_idx, ring.k.shape, shape)
                if ring.k.shape[2] != window:
                    raise ValueError(f"layer {layer_idx}: window changed from {ring.k.shape[2]} to {window}")
            return int(window)
        if layer_idx in self._rings:
            raise ValueError(f"layer {layer_idx} is cached as windowed, cannot append as global")
        grow = self._growing.get(layer_idx)
        length = 0 if grow is None else grow.length
        if grow is not None:
            self._check_same_rows(layer_idx, grow.k.shape, shape)
        if length + t_new > self.global_cap_tokens:
            raise CacheCapacityError(
                f"layer {layer_idx}: appending {t_new} tokens to {length} would need {length + t_new}, "
                f"past the global cap of {self.global_cap_tokens} tokens"
            )
        return 0

    def check_appends(self, appends) -> None:
        """Validate a whole forward pass before its first write: ``appends`` lists, per layer,
        (layer_idx, chunk shape (batch, kv_heads, tokens, head_dim), is_windowed, window).

        A pass appends layer by layer; without this, the cap reached in layer 3 would raise after
        layers 0-2 had already advanced, leaving the cache holding a chunk in some layers only."""
        seen = set()
        for layer_idx, shape, is_windowed, window in appends:
            if layer_idx in seen:
                raise ValueError(f"layer {layer_idx} appears twice in one pass")
            seen.add(layer_idx)
            self._plan(layer_idx, tuple(shape), is_windowed, window)

    @staticmethod
    def _check_same_rows(layer_idx: int, stored: tuple, new: tuple) -> None:
        b, h, _, d = stored
        if (new[0], new[1], new[3]) != (b, h, d):
            raise ValueError(
                f"layer {layer_idx}: cached (batch, kv_heads, head_dim) is {(b, h, d)}, "
                f"new chunk has {(new[0], new[1], new[3])}"
            )

    # ---- append / get ----------------------------------------------------------------------

    def append(self, layer_idx: int, k_rot: np.ndarray, v: np.ndarray, is_windowed: bool, window: int) -> None:
        """Add T_new tokens (``k_rot``, ``v`` shaped (B, H_kv, T_new, D), floating point) to one layer.

        Raises ValueError for inconsistent shapes, a non-float dtype, a NaN or an infinity (as it
        would be stored), a layer used as both kinds or a changed window, and CacheCapacityError
        when a global layer would exceed ``global_cap_tokens``; in every error case the cache is left
        exactly as it was.
        """
        k_rot = np.asarray(k_rot)
        v = np.asarray(v)
        if k_rot.shape != v.shape:
            raise ValueError(
                f"layer {layer_idx}: k_rot and v must both be (batch, kv_heads, tokens, head_dim), "
                f"got {k_rot.shape} and {v.shape}"
            )
        window = self._plan(layer_idx, k_rot.shape, is_windowed, window,
                            (("k_rot", k_rot.dtype), ("v", v.dtype)))
        if k_rot.shape[2] == 0:
            return
        kept = self._rings.get(layer_idx) or self._growing.get(layer_idx)
        for name, x in (("k_rot", k_rot), ("v", v)):
            if not np.isfinite(x).all():
                raise ValueError(f"layer {layer_idx}: {name} holds a NaN or an infinity")
            if kept is not None and x.dtype != kept.k.dtype:  # as stored: 1e300 into float32 is an infinity
                with np.errstate(over="ignore"):
                    if not np.isfinite(x.astype(kept.k.dtype)).all():
                        raise ValueError(f"layer {layer_idx}: {name} holds a value past the range of the "
                                         f"layer's {kept.k.dtype}")
        # Validated: nothing below can fail on the arguments (float into float never does).
        if is_windowed:
            self._write_ring(layer_idx, k_rot, v, window)
        else:
            self._write_growing(layer_idx, k_rot, v)

    def _write_ring(self, layer_idx, k_rot, v, window):
        batch, heads, t_new, dim = k_rot.shape
        ring = self._rings.get(layer_idx)
        if ring is None:
            buf_shape = (batch, heads, window, dim)
            ring = _Ring(np.zeros(buf_shape, k_rot.dtype), np.zeros(buf_shape, v.dtype), head=0, count=0)
            self._rings[layer_idx] = ring
        if t_new >= window:
            # Only the last `window` tokens can ever be attended again: keep those, oldest at slot 0.
            ring.k[...] = k_rot[:, :, -window:]
            ring.v[...] = v[:, :, -window:]
            ring.head = 0
            ring.count = window
            return
        first = min(t_new, window - ring.head)          # slots before the wrap
        ring.k[:, :, ring.head:ring.head + first] = k_rot[:, :, :first]
        ring.v[:, :, ring.head:ring.head + first] = v[:, :, :first]
        rest = t_new - first
        if rest:
            ring.k[:, :, :rest] = k_rot[:, :, first:]
            ring.v[:, :, :rest] = v[:, :, first:]
        ring.head = (ring.head + t_new) % window
        ring.count = min(window, ring.count + t_new)

    def _write_growing(self, layer_idx, k_rot, v):
        batch, heads, t_new, dim = k_rot.shape
        grow = self._growing.get(layer_idx)
        length = 0 if grow is None else grow.length
        needed = length + t_new
        if grow is None:
            shape = (batch, heads, max(needed, 1), dim)
            grow = _Growing(np.empty(shape, k_rot.dtype), np.empty(shape, v.dtype), length=0)
        capacity = grow.k.shape[2]
        if needed > capacity:
            # 1.5x growth: amortised O(1) copies per token, at most a third of the buffer is slack.
            new_capacity = min(max(needed, int(capacity * 1.5) + 1), self.global_cap_tokens)
            shape = (batch, heads, new_capacity, dim)
            new_k = np.empty(shape, grow.k.dtype)
            new_v = np.empty(shape, grow.v.dtype)
            new_k[:, :, :length] = grow.k[:, :, :length]
            new_v[:, :, :length] = grow.v[:, :, :length]
            grow.k, grow.v = new_k, new_v
        grow.k[:, :, length:needed] = k_rot
        grow.v[:, :, length:needed] = v
        grow.length = needed
        self._growing[layer_idx] = grow

    def get(self, layer_idx: int, is_windowed: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Return (K, V) of the cached tokens in chronological order, or (None, None) if empty.

        A global layer returns a view of its valid prefix (no copy); a wrapped ring is unrolled
        into a new array of ``window`` tokens (a copy of O(window), not O(context)).
        """
        if layer_idx in (self._growing if is_windowed else self._rings):
            kind = "global" if is_windowed else "windowed"
            raise ValueError(f"layer {layer_idx} is cached as {kind}, cannot read it as the other kind")
        if is_windowed:
            ring = self._rings.get(layer_idx)
            if ring is None or ring.count == 0:
                return None, None
            if ring.count < ring.k.shape[2]:
                return ring.k[:, :, :ring.count], ring.v[:, :, :ring.count]
            if ring.head == 0:
                return ring.k, ring.v
            order = np.r_[ring.head:ring.count, 0:ring.head]
            return ring.k[:, :, order], ring.v[:, :, order]
        grow = self._growing.get(layer_idx)
        if grow is None or grow.length == 0:
            return None, None
        return grow.k[:, :, :grow.length], grow.v[:, :, :grow.length]


def _is_int(value) -> bool:
    """An integer that is not a bool (True is 1 to Python, never a layer or a window)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# Sampling and generation
# --------------------------------------------------------------------------------------------

def _validate_generate_args(model, input_ids, max_new_tokens, temperature, top_p) -> np.ndarray:
    ids = np.asarray(input_ids)
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise ValueError(f"input_ids must be a non-empty (batch, T_prompt) array, got shape {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"input_ids must hold integer token ids, got dtype {ids.dtype}")
    if ids.min() < 0 or ids.max() >= model.vocab_size:
        raise ValueError(f"input_ids must lie in [0, {model.vocab_size}), got [{ids.min()}, {ids.max()}]")
    if not _is_int(max_new_tokens) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    _check_sampling(temperature, top_p)
    return ids.astype(np.int64)


def _check_sampling(temperature, top_p) -> None:
    """temperature: a finite number (0 or below is greedy, as the chapter defines it); top_p: a
    number in (0, 1]. NaN fails every comparison, so it is named explicitly rather than left to
    slip past a comparison."""
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number, got {temperature!r}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


def sample_next(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> np.ndarray:
    """Pick one token per row of ``logits`` (batch, V).

    temperature <= 0: argmax, and the generator is not touched. Otherwise divide by the
    temperature, softmax, keep the smallest set of most-likely tokens whose mass reaches ``top_p``
    (the nucleus is chosen *after* temperature, so a colder distribution gives a smaller set),
    renormalise and draw with one uniform number per row.

    Every temperature > 0 is valid, however small: the row's largest logit is subtracted *before*
    the division, so the scaled logits lie in [-inf, 0] with a 0 at the maximum and the softmax
    cannot overflow (dividing first made ``logits / 5e-324`` infinite and every probability NaN,
    which picked token 0). A temperature so small that every other logit underflows is sampling
    from the limit of the tempered distribution: the argmax, or one of the tied maxima drawn with
    the generator. Raises ValueError for a temperature or top_p that ``generate`` would refuse, and
    for logits with a NaN, a +inf or a row without a finite value (-inf, a masked token, is fine).
    """
    _check_sampling(temperature, top_p)
    logits = np.asarray(logits)
    if logits.ndim != 2 or logits.shape[-1] < 1 or logits.dtype.kind not in "iuf":
        raise ValueError(f"logits must be a (batch, V) array of real numbers, got shape {logits.shape}, "
                         f"dtype {logits.dtype}")
    top = logits.max(axis=-1, keepdims=True)
    if not np.isfinite(top).all():  # a NaN anywhere in a row, a +inf, or a row of -inf
        row = int(np.flatnonzero(~np.isfinite(top[:, 0]))[0])
        raise ValueError(f"logits row {row} has no finite maximum (a NaN, a +inf, or nothing but -inf)")
    if temperature <= 0:
        return np.argmax(logits, axis=-1)
    with np.errstate(over="ignore"):  # a tiny temperature sends the non-maxima to -inf: exp gives 0
        scaled = (logits.astype(np.float64) - top) / temperature
    probs = np.exp(scaled)
    probs /= probs.sum(axis=-1, keepdims=True)
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    cumulative = np.cumsum(sorted_probs, axis=-1)
    # Keep token r when the mass before it is still short of top_p (the first token always stays).
    keep = (cumulative - sorted_probs) < top_p
    sorted_probs = np.where(keep, sorted_probs, 0.0)
    sorted_probs /= sorted_probs.sum(axis=-1, keepdims=True)
    draws = rng.random(logits.shape[0])
    cdf = np.cumsum(sorted_probs, axis=-1)
    picks = np.minimum((cdf < draws[:, None]).sum(axis=-1), logits.shape[-1] - 1)
    return order[np.arange(logits.shape[0]), picks]


def generate(
    model,
    input_ids,
    max_new_tokens: int = 64,
    temperature: float = 0.7,
    top_p: float = 0.9,
    use_cache: bool = True,
    seed: int | None = None,
) -> np.ndarray:
    """Continue each prompt row by ``max_new_tokens`` tokens; return (batch, T_prompt + max_new_tokens).

    Greedy when ``temperature <= 0``, otherwise temperature then top-p sampling drawn from
    ``numpy.random.default_rng(seed)``, so a seed reproduces a run exactly. Any finite temperature
    > 0 samples, however small (no overflow: see ``sample_next``); one far below the logits' gaps
    picks the argmax as greedy does, still drawing from the generator (so cached and uncached runs
    stay in step). With ``use_cache`` the
    prompt is prefilled once and each step feeds one token at its absolute position; without it
    every step reruns the whole prefix (the reference). The sink clamp is memoised once per call.

    Raises ValueError naming the argument for a bad shape, token id, ``max_new_tokens``,
    ``temperature`` (NaN, infinite or not a number) or ``top_p`` (outside (0, 1], NaN or
    not a number).
    """
    ids = _validate_generate_args(model, input_ids, max_new_tokens, temperature, top_p)
    if seed is not None and (not _is_int(seed) or seed < 0):  # numpy's own error names no argument
        raise ValueError(f"seed must be None or an integer >= 0, got {seed!r}")
    batch, t_prompt = ids.shape
    out = np.empty((batch, t_prompt + max_new_tokens), dtype=np.int64)
    out[:, :t_prompt] = ids
    if max_new_tokens == 0:
        return out
    rng = np.random.default_rng(seed)
    sink_memo: dict = {}
    cache = MixedKVCache() if use_cache else None
    logits = model.forward(ids, np.arange(t_prompt), cache=cache, sink_memo=sink_memo, last_only=True)
    for step in range(max_new_tokens):
        position = t_prompt + step
        out[:, position] = sample_next(logits, temperature, top_p, rng)
        if step == max_new_tokens - 1:
            break
        if use_cache:
            # The new token sits at absolute position `position`: its key is rotated for that
            # position and stored; history keys keep the rotations they were stored with.
            logits = model.forward(out[:, position:position + 1], np.array([position]), cache=cache,
                                   sink_memo=sink_memo, last_only=True)
        else:
            logits = model.forward(out[:, :position + 1], np.arange(position + 1), cache=None,
                                   sink_memo=sink_memo, last_only=True)
    return out


# --------------------------------------------------------------------------------------------
# Helpers for benchmarks: a filled cache and the cost of one decode step
# --------------------------------------------------------------------------------------------

def fill_cache(model, input_ids, decode_steps: int = 0, cache: MixedKVCache | None = None) -> MixedKVCache:
    """Prefill ``input_ids`` into a cache, then decode ``decode_steps`` greedy tokens; return the cache.

    This is the cached path of ``generate`` stopped with its cache in hand, so a benchmark can read
    the real allocations (ring slots, global capacity with its 1.5x slack).
    """
    ids = _validate_generate_args(model, input_ids, decode_steps, 0.0, 1.0)
    cache = MixedKVCache() if cache is None else cache
    memo: dict = {}
    t_prompt = ids.shape[1]
    logits = model.forward(ids, np.arange(t_prompt), cache=cache, sink_memo=memo, last_only=True)
    for step in range(decode_steps):
        token = np.argmax(logits, axis=-1)[:, None]
        logits = model.forward(token, np.array([t_prompt + step]), cache=cache, sink_memo=memo, last_only=True)
    return cache


def time_decode_steps(model, context_len: int, n_steps: int = 8, seed: int = 0) -> dict[str, float]:
    """Seconds per decode step spent in windowed and in global layers at a given context length.

    The cache is filled with random (already rotated) keys and values of the right shapes --
    the cost of a decode step does not depend on what the keys say -- and then ``n_steps`` single
    tokens are decoded at absolute positions ``context_len + 1, ...`` after one untimed warm-up step. Returns the
    mean per step, summed over the layers of each kind, plus the per-layer mean for each kind.
    """
    rng = np.random.default_rng(seed)
    cache = MixedKVCache()
    shape = (1, model.n_kv_heads, context_len, model.head_dim)
    for layer_idx, layer in enumerate(model.layers):
        k = rng.standard_normal(shape).astype(model.dtype)
        v = rng.standard_normal(shape).astype(model.dtype)
        cache.append(layer_idx, k, v, layer.windowed, model.window)
    memo: dict = {}
    seconds: dict[int, float] = {}
    tokens = rng.integers(0, model.vocab_size, size=(1, 1))
    # One untimed step first: it triggers the global layers' 1.5x growth copy, a one-off cost
    # that would otherwise be charged to the first measured step.
    model.forward(tokens, np.array([context_len]), cache=cache, sink_memo=memo, last_only=True)
    start = time.perf_counter()
    for step in range(n_steps):
        model.forward(tokens, np.array([context_len + 1 + step]), cache=cache, sink_memo=memo,
                      last_only=True, layer_seconds=seconds)
    total = time.perf_counter() - start
    kinds = {"windowed": [], "global": []}
    for layer_idx, layer in enumerate(model.layers):
        kinds["windowed" if layer.windowed else "global"].append(seconds[layer_idx] / n_steps)
    return {
        "windowed": sum(kinds["windowed"]),
        "global": sum(kinds["global"]),
        "windowed_per_layer": sum(kinds["windowed"]) / max(1, len(kinds["windowed"])),
        "global_per_layer": sum(kinds["global"]) / max(1, len(kinds["global"])),
        "step": total / n_steps,
    }
