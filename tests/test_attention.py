"""The attention of the mixed model: the sliding-window and causal masks, the sink and GQA (the
chapter's sliding-window oracle: run these after a change to the masks).

Expected values come from a loop-by-loop attention (an explicit mask per query and key, the sink
appended, a math.exp softmax) and from recomputing the whole sequence without a cache.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from inference.generate import fill_cache
from inference.mixed_lm import attention, make_mixed_model


@pytest.fixture(scope="module")
def random_model():
    return make_mixed_model(seed=3, kind="random", window=4, dtype=np.float64)


def manual_attention(q, k, v, sink, window=None):
    """Loop-by-loop reference: explicit mask per (query, key), sink appended, math.exp softmax."""
    batch, n_heads, t_q, dim = q.shape
    n_kv, t_k = k.shape[1], k.shape[2]
    out = np.zeros_like(q)
    for b in range(batch):
        for h in range(n_heads):
            kv = h // (n_heads // n_kv)
            for i in range(t_q):
                qi = i + t_k - t_q
                logits, rows = [], []
                for j in range(t_k):
                    if j > qi or (window is not None and qi - j >= window):
                        continue
                    logits.append(float(q[b, h, i] @ k[b, kv, j]) / math.sqrt(dim))
                    rows.append(v[b, kv, j])
                logits.append(float(sink[h]))
                top = max(logits)
                weights = [math.exp(x - top) for x in logits]
                total = sum(weights)
                for w, row in zip(weights[:-1], rows, strict=True):
                    out[b, h, i] += w / total * row
    return out


@pytest.mark.parametrize("window", [None, 3])
@pytest.mark.parametrize("t_q,t_k", [(6, 6), (1, 7), (3, 8)])   # prefill, decode, chunk into a prefix
def test_sink_path_matches_manual_at_prefill(window, t_q, t_k):
    """Prefill, decode and a chunk into a cached prefix, each with and without a window."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, t_q, 5))
    k = rng.standard_normal((2, 2, t_k, 5))
    v = rng.standard_normal((2, 2, t_k, 5))
    sink = np.array([-10.0, 0.5, 3.0, 15.0])
    got = attention(q, k, v, sink, window=window, max_block_elements=16)   # tiny blocks: many edges
    np.testing.assert_allclose(got, manual_attention(q, k, v, sink, window), rtol=1e-12, atol=1e-12)


def test_sliding_window_blocks_past_keys_at_prefill():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 10, 4))
    k = rng.standard_normal((1, 1, 10, 4))
    v = rng.standard_normal((1, 1, 10, 4))
    sink = np.zeros(2)
    base = attention(q, k, v, sink, window=3)
    k2, v2 = k.copy(), v.copy()
    k2[:, :, 2] += 100.0                         # key 2 is out of reach for queries 5..9
    v2[:, :, 2] -= 100.0
    changed = attention(q, k2, v2, sink, window=3)
    np.testing.assert_array_equal(changed[:, :, 5:], base[:, :, 5:])
    assert not np.allclose(changed[:, :, 2:5], base[:, :, 2:5]), "queries 2..4 do see key 2"


def test_gqa_expansion_equals_repeated_heads():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 6, 4, 8))
    k = rng.standard_normal((1, 2, 9, 8))
    v = rng.standard_normal((1, 2, 9, 8))
    sink = rng.uniform(-3, 3, size=6)
    grouped = attention(q, k, v, sink)
    repeated = attention(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1), sink)
    np.testing.assert_allclose(grouped, repeated, rtol=1e-12)


def test_causal_attention_chunk_prefill_cached_prefix_is_causal(random_model):
    """1 < T_q < T_k: a chunk prefilled into a cached prefix sees no later token of the chunk."""
    rng = np.random.default_rng(5)
    ids = rng.integers(0, random_model.vocab_size, size=(2, 14))
    full = random_model.forward(ids, np.arange(14))
    cache = fill_cache(random_model, ids[:, :8])                  # cached prefix of 8 tokens
    chunk = random_model.forward(ids[:, 8:], np.arange(8, 14), cache=cache)
    np.testing.assert_allclose(chunk, full[:, 8:], rtol=1e-9, atol=1e-10)
    altered = ids.copy()
    altered[:, 12] = (altered[:, 12] + 1) % random_model.vocab_size   # change a later token of the chunk
    cache = fill_cache(random_model, altered[:, :8])
    chunk2 = random_model.forward(altered[:, 8:], np.arange(8, 14), cache=cache)
    np.testing.assert_array_equal(chunk2[:, :4], chunk[:, :4], err_msg="earlier outputs must not see token 12")
    assert not np.allclose(chunk2[:, 4:], chunk[:, 4:])
