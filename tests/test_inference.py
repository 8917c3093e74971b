"""MixedKVCache, the cache in the model, the sink clamp and generate(): the seed's contracts, in
numpy (the attention masks, the sink path and GQA: tests/test_attention.py).

Expected values come from independent computations: a plain Python list model for the cache, a
full recompute for the cached keys and the clamp, the uncached recompute for generate().
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inference import generate as gen
from inference import mixed_lm
from inference.generate import CacheCapacityError, MixedKVCache, fill_cache, generate, sample_next
from inference.mixed_lm import SINK_MAX, SINK_MIN, apply_rotary, make_mixed_model, rotary_tables

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def tagged(values, batch=1, heads=2, dim=3):
    """K and V chunks whose every element of token t equals values[t] (V is offset by 1000)."""
    vals = np.asarray(values, dtype=np.float64)
    k = np.broadcast_to(vals[None, None, :, None], (batch, heads, len(vals), dim)).copy()
    return k, k + 1000.0


def token_tags(array):
    """The per-token tag of a (B, H, T, D) array produced by ``tagged``."""
    return array[0, 0, :, 0].tolist()


def snapshot(cache: MixedKVCache):
    """Everything a cache holds, by value: per layer its kind, bookkeeping and the exact bytes of
    both buffers (slack included), plus the cap. Two equal snapshots mean nothing changed."""
    rings = {i: ("ring", r.head, r.count, r.k.dtype.str, r.k.shape, r.k.tobytes(), r.v.dtype.str, r.v.tobytes())
             for i, r in cache._rings.items()}
    grows = {i: ("growing", g.length, g.k.dtype.str, g.k.shape, g.k.tobytes(), g.v.dtype.str, g.v.tobytes())
             for i, g in cache._growing.items()}
    return cache.global_cap_tokens, rings, grows


@pytest.fixture(scope="module")
def random_model():
    return make_mixed_model(seed=3, kind="random", window=4, dtype=np.float64)


@pytest.fixture(scope="module")
def passkey_model():
    return make_mixed_model(seed=0, window=16, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# MixedKVCache: windowed ring
# ---------------------------------------------------------------------------------------------


def test_kv_cache_windowed_preserves_order_after_rollover():
    cache = MixedKVCache()
    for token in range(1, 8):                    # 7 single-token appends, tagged 1..7
        cache.append(0, *tagged([token]), is_windowed=True, window=3)
    k, v = cache.get(0, is_windowed=True)
    assert token_tags(k) == [5.0, 6.0, 7.0], "the ring must return the last three appended, oldest first"
    assert token_tags(v) == [1005.0, 1006.0, 1007.0]


def test_kv_cache_prefill_longer_than_window_keeps_last_window():
    cache = MixedKVCache()
    cache.append(0, *tagged(range(10)), is_windowed=True, window=4)
    assert token_tags(cache.get(0, True)[0]) == [6.0, 7.0, 8.0, 9.0]
    cache.append(0, *tagged([10]), is_windowed=True, window=4)    # decode writes at head
    assert token_tags(cache.get(0, True)[0]) == [7.0, 8.0, 9.0, 10.0]


def test_kv_cache_append_windowed():
    """One token at a time: seq_len counts up to the window and stays there, and get holds the
    last `window` tokens, oldest first (a Python list cut to its tail is the reference)."""
    cache, history, window = MixedKVCache(), [], 4
    for token in range(11):
        cache.append(0, *tagged([token]), is_windowed=True, window=window)
        history.append(float(token))
        assert cache.seq_len(0) == min(len(history), window)
        assert token_tags(cache.get(0, True)[0]) == history[-window:]


def test_kv_cache_seq_len_helper():
    """Both kinds of layer, and 0 before the first append."""
    cache = MixedKVCache()
    assert cache.seq_len(0) == 0 and cache.seq_len(1) == 0 and cache.seq_len(99) == 0
    assert cache.get(0, True) == (None, None) and cache.get(1, False) == (None, None)
    cache.append(0, *tagged(range(5)), is_windowed=True, window=3)
    cache.append(1, *tagged(range(5)), is_windowed=False, window=3)
    assert cache.seq_len(0) == 3, "a windowed layer's length is capped at its window"
    assert cache.seq_len(1) == 5, "a global layer keeps every token"
    cache.append(0, *tagged([5]), is_windowed=True, window=3)
    cache.append(1, *tagged([5]), is_windowed=False, window=3)
    assert (cache.seq_len(0), cache.seq_len(1)) == (3, 6)
    assert len(cache) == 2


def test_kv_cache_reset():
    """reset forgets every layer, and the cache is usable afterwards."""
    cache = MixedKVCache()
    cache.append(0, *tagged(range(4)), is_windowed=True, window=2)
    cache.append(1, *tagged(range(4)), is_windowed=False, window=2)
    cache.reset()
    assert len(cache) == 0
    assert cache.seq_len(0) == 0 and cache.seq_len(1) == 0
    assert cache.get(1, False) == (None, None)
    assert cache.allocated_bytes() == 0
    cache.append(1, *tagged([42]), is_windowed=False, window=2)
    assert token_tags(cache.get(1, False)[0]) == [42.0]


def test_kv_cache_global_growth_follows_one_and_a_half_rule():
    cache = MixedKVCache()
    capacities = []
    for token in range(12):
        cache.append(0, *tagged([token]), is_windowed=False, window=1)
        capacities.append(cache._growing[0].k.shape[2])
    expected, cap = [], 0
    for needed in range(1, 13):                  # independent replay of max(needed, int(cap*1.5)+1)
        if cap == 0:
            cap = max(needed, 1)
        elif needed > cap:
            cap = max(needed, int(cap * 1.5) + 1)
        expected.append(cap)
    assert capacities == expected
    assert token_tags(cache.get(0, False)[0]) == [float(t) for t in range(12)]


def test_kv_cache_cap_is_a_loud_error_and_leaves_cache_unchanged():
    cache = MixedKVCache(global_cap_tokens=10)
    cache.append(0, *tagged(range(8)), is_windowed=False, window=1)
    before_k, before_v = (a.copy() for a in cache.get(0, False))
    before_bytes = cache.allocated_bytes()
    with pytest.raises(CacheCapacityError, match="cap of 10"):
        cache.append(0, *tagged(range(8, 11)), is_windowed=False, window=1)
    assert cache.seq_len(0) == 8
    assert cache.allocated_bytes() == before_bytes
    after_k, after_v = cache.get(0, False)
    np.testing.assert_array_equal(after_k, before_k)
    np.testing.assert_array_equal(after_v, before_v)
    cache.append(0, *tagged([8, 9]), is_windowed=False, window=1)      # exactly at the cap is fine
    assert cache.seq_len(0) == 10 and cache._growing[0].k.shape[2] == 10
    with pytest.raises(CacheCapacityError):
        MixedKVCache(global_cap_tokens=3).append(0, *tagged(range(4)), is_windowed=False, window=1)
    assert issubclass(CacheCapacityError, RuntimeError)


def test_kv_cache_rejects_bad_shapes_and_kind_changes_without_changing_state():
    cache = MixedKVCache()
    cache.append(0, *tagged(range(3)), is_windowed=True, window=4)
    k, v = tagged([1])
    with pytest.raises(ValueError, match="k_rot and v"):
        cache.append(0, k[0], v[0], is_windowed=True, window=4)
    with pytest.raises(ValueError, match="cached as windowed"):
        cache.append(0, k, v, is_windowed=False, window=4)
    with pytest.raises(ValueError, match="kv_heads"):
        cache.append(0, *tagged([1], heads=3), is_windowed=True, window=4)
    with pytest.raises(ValueError, match="window changed"):
        cache.append(0, k, v, is_windowed=True, window=5)
    assert cache.seq_len(0) == 3 and token_tags(cache.get(0, True)[0]) == [0.0, 1.0, 2.0]


def _bad_appends():
    """(description, layer, k, v, is_windowed, window, error) for appends that must fail. Layer 0
    is a ring of window 4, layer 1 a global layer (cap 12), layer 2 does not exist yet."""
    k, v = tagged([7])
    return [
        ("string V on a ring: K used to be written first", 0, k, v.astype(str), True, 4, ValueError),
        ("complex V on a global layer", 1, k, v.astype(complex), False, 4, ValueError),
        ("integer K", 1, k.astype(np.int64), v, False, 4, ValueError),
        ("string V on a new layer: the layer used to be created", 2, k, v.astype(str), True, 4, ValueError),
        ("object V on a new global layer", 2, k, v.astype(object), False, 4, ValueError),
        ("a float window", 2, k, v, True, 2.5, ValueError),
        ("a negative layer", -1, k, v, True, 4, ValueError),
        ("a bool layer", True, k, v, True, 4, ValueError),
        ("is_windowed not a bool", 2, k, v, "yes", 4, ValueError),
        ("a changed window", 0, k, v, True, 5, ValueError),
        ("global onto a ring", 0, k, v, False, 4, ValueError),
        ("windowed onto a global layer", 1, k, v, True, 4, ValueError),
        ("a different head count", 1, *tagged([7], heads=3), False, 4, ValueError),
        ("an empty head_dim", 2, k[..., :0], v[..., :0], True, 4, ValueError),
        ("past the cap", 1, *tagged(range(6)), False, 4, CacheCapacityError),
    ]


@pytest.mark.parametrize("case", _bad_appends(), ids=lambda c: c[0])
def test_kv_cache_failed_append_leaves_the_whole_cache_unchanged(case):
    """Validate everything, then write: every failing append leaves every layer's bytes as they were."""
    _what, layer, k, v, is_windowed, window, error = case
    cache = MixedKVCache(global_cap_tokens=12)
    cache.append(0, *tagged(range(6)), is_windowed=True, window=4)    # wrapped ring
    cache.append(1, *tagged(range(7)), is_windowed=False, window=4)
    before = snapshot(cache)
    with pytest.raises(error):
        cache.append(layer, k, v, is_windowed, window)
    assert snapshot(cache) == before
    cache.append(0, *tagged([6]), is_windowed=True, window=4)         # and it still works
    assert token_tags(cache.get(0, True)[0]) == [3.0, 4.0, 5.0, 6.0]


def test_kv_cache_reading_a_layer_as_the_other_kind_is_an_error():
    cache = MixedKVCache()
    cache.append(0, *tagged([1, 2]), is_windowed=True, window=4)
    with pytest.raises(ValueError, match="layer 0 is cached as windowed"):
        cache.get(0, is_windowed=False)
    with pytest.raises(ValueError, match="global_cap_tokens"):
        MixedKVCache(global_cap_tokens=2.5)


@pytest.mark.parametrize("failure", ["cap in a global layer", "id outside the vocabulary", "negative position",
                                     "float positions"])
def test_a_failed_forward_pass_leaves_every_layer_as_it_was(random_model, failure):
    """The pass is validated before layer 0 writes: the cap of global layer 1 used to be found
    after windowed layer 0 had already taken the chunk."""
    rng = np.random.default_rng(9)
    ids = rng.integers(0, random_model.vocab_size, size=(2, 9))
    cache = MixedKVCache(global_cap_tokens=7)
    random_model.forward(ids[:, :5], np.arange(5), cache=cache)       # rings wrapped (window 4)
    before = snapshot(cache)
    chunk, positions = ids[:, 5:8], np.arange(5, 8)                   # 8 tokens: past the cap of 7
    if failure == "id outside the vocabulary":
        chunk, positions = np.array([[3], [random_model.vocab_size]]), np.array([5])
    elif failure == "negative position":
        chunk, positions = ids[:, 5:6], np.array([-5])
    elif failure == "float positions":
        chunk, positions = ids[:, 5:6], np.array([5.0])
    with pytest.raises(CacheCapacityError if failure.startswith("cap") else ValueError):
        random_model.forward(chunk, positions, cache=cache)
    assert snapshot(cache) == before
    # the cache goes on as if the failed pass had never been tried: equal to one uncached pass
    logits = random_model.forward(ids[:, 5:7], np.arange(5, 7), cache=cache)
    np.testing.assert_allclose(logits, random_model.forward(ids[:, :7], np.arange(7))[:, 5:], rtol=1e-9, atol=1e-10)


def test_forward_refuses_negative_ids_that_numpy_would_wrap(random_model):
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 32\), got \[-1, 2\]"):
        random_model.forward(np.array([[-1, 2]]), np.arange(2))


chunk_lists = st.lists(st.integers(min_value=1, max_value=13), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(window=st.integers(min_value=1, max_value=6), chunks=chunk_lists)
def test_kv_cache_windowed_matches_list_model(window, chunks):
    cache = MixedKVCache()
    history: list[float] = []
    next_tag = 0
    for size in chunks:                          # chunks both smaller and larger than the window
        tags = list(range(next_tag, next_tag + size))
        next_tag += size
        cache.append(0, *tagged(tags), is_windowed=True, window=window)
        history.extend(float(t) for t in tags)
        expected = history[-window:]
        k, v = cache.get(0, True)
        assert token_tags(k) == expected
        assert token_tags(v) == [t + 1000.0 for t in expected]
        assert cache.seq_len(0) == len(expected)
        assert cache.allocated_bytes() == 2 * window * 2 * 3 * 8


@settings(max_examples=150, deadline=None)
@given(cap=st.integers(min_value=1, max_value=40), chunks=chunk_lists)
def test_kv_cache_global_matches_list_model_up_to_the_cap(cap, chunks):
    cache = MixedKVCache(global_cap_tokens=cap)
    history: list[float] = []
    next_tag = 0
    for size in chunks:
        tags = [float(t) for t in range(next_tag, next_tag + size)]
        next_tag += size
        if len(history) + size > cap:
            with pytest.raises(CacheCapacityError):
                cache.append(0, *tagged(tags), is_windowed=False, window=1)
        else:
            cache.append(0, *tagged(tags), is_windowed=False, window=1)
            history.extend(tags)
        assert cache.seq_len(0) == len(history)
        if history:
            assert token_tags(cache.get(0, False)[0]) == history
            assert len(history) <= cache._growing[0].k.shape[2] <= cap


# ---------------------------------------------------------------------------------------------
# the cache in the model (the masks, the window, the sink and GQA: tests/test_attention.py)
# ---------------------------------------------------------------------------------------------


def test_cache_stores_kv_heads_not_query_heads(random_model):
    ids = np.arange(10)[None, :] % random_model.vocab_size
    cache = fill_cache(random_model, ids, decode_steps=2)
    for layer_idx, layer in enumerate(random_model.layers):
        k, v = cache.get(layer_idx, layer.windowed)
        assert k.shape[1] == v.shape[1] == random_model.n_kv_heads < random_model.n_heads


def test_cached_keys_are_rotated_once_at_their_absolute_position(random_model):
    """Keys stored by prefill + decode equal keys rotated in one pass over the full sequence."""
    rng = np.random.default_rng(4)
    ids = rng.integers(0, random_model.vocab_size, size=(1, 9))
    cache = fill_cache(random_model, ids[:, :6])
    random_model.forward(ids[:, 6:7], np.array([6]), cache=cache)
    random_model.forward(ids[:, 7:9], np.array([7, 8]), cache=cache)
    x = random_model.embed[ids]
    layer = random_model.layers[1]                               # global: keeps every key
    cos, sin = rotary_tables(np.arange(9), random_model.rotary_dims, random_model.rope_base, np.float64)
    for idx in range(1):
        x = random_model._layer(idx, x, cos, sin, None, None)
    k_ref = apply_rotary(random_model._heads(x @ layer.wk, random_model.n_kv_heads), cos, sin,
                         random_model.rotary_dims)
    np.testing.assert_allclose(cache.get(1, False)[0], k_ref, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# sink clamp
# ---------------------------------------------------------------------------------------------


def test_sink_clamp_is_applied(random_model, monkeypatch):
    raw = random_model.layers[0].sink_raw
    assert raw.min() < SINK_MIN or raw.max() > SINK_MAX, "fixture should exercise the clamp"
    np.testing.assert_array_equal(random_model.clamped_sink(0, None), np.clip(raw, -10.0, 15.0))
    ids = np.arange(12)[None, :] % random_model.vocab_size
    pre_clamped = dataclasses.replace(random_model, layers=[
        dataclasses.replace(layer, sink_raw=np.clip(layer.sink_raw, -10.0, 15.0)) for layer in random_model.layers
    ])
    clamped_out = random_model.forward(ids, np.arange(12))
    np.testing.assert_array_equal(clamped_out, pre_clamped.forward(ids, np.arange(12)))
    monkeypatch.setattr(mixed_lm, "clamp_sink_logits", lambda raw: raw)      # switch the clamp off
    assert not np.allclose(random_model.forward(ids, np.arange(12)), clamped_out), "the clamp must matter here"


@pytest.mark.parametrize("use_cache", [True, False])
def test_sink_clamp_is_memoised_once_per_generate_call(random_model, monkeypatch, use_cache):
    calls = []
    real = mixed_lm.clamp_sink_logits

    def counting(raw):
        calls.append(1)
        return real(raw)

    monkeypatch.setattr(mixed_lm, "clamp_sink_logits", counting)
    ids = np.arange(5)[None, :]
    generate(random_model, ids, max_new_tokens=9, temperature=0.0, use_cache=use_cache)
    assert len(calls) == random_model.n_layers, "one clamp per layer per call, not per step"
    generate(random_model, ids, max_new_tokens=3, temperature=0.0, use_cache=use_cache)
    assert len(calls) == 2 * random_model.n_layers, "a new call clamps afresh"


# ---------------------------------------------------------------------------------------------
# generate()
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_generate_use_cache_false_matches_cache_for_one_token(random_model, temperature):
    """One new token: the cached path is a prefill and one draw, the reference a full recompute."""
    ids = np.random.default_rng(12).integers(0, random_model.vocab_size, size=(3, 6))
    cached = generate(random_model, ids, max_new_tokens=1, temperature=temperature, seed=5)
    uncached = generate(random_model, ids, max_new_tokens=1, temperature=temperature, seed=5, use_cache=False)
    np.testing.assert_array_equal(cached, uncached)
    assert cached.shape == (3, 7) and (cached[:, :6] == ids).all()


def test_generate_use_cache_false_matches_cache_greedy_whole_generation(random_model):
    rng = np.random.default_rng(8)
    ids = rng.integers(0, random_model.vocab_size, size=(3, 7))
    cached = generate(random_model, ids, max_new_tokens=20, temperature=0.0, use_cache=True)
    uncached = generate(random_model, ids, max_new_tokens=20, temperature=0.0, use_cache=False)
    assert cached.shape == (3, 27)
    np.testing.assert_array_equal(cached, uncached)
    np.testing.assert_array_equal(cached[:, :7], ids)


def test_generate_use_cache_false_matches_cache_sampled_same_seed(random_model):
    ids = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    cached = generate(random_model, ids, max_new_tokens=20, temperature=1.3, top_p=0.95, use_cache=True, seed=11)
    uncached = generate(random_model, ids, max_new_tokens=20, temperature=1.3, top_p=0.95, use_cache=False, seed=11)
    np.testing.assert_array_equal(cached, uncached)


def test_generate_cached_matches_uncached_on_the_passkey_model(passkey_model):
    tokens = "the passkey is 7 0 4 1 9 . here we go . what is the passkey ? the passkey is".split()
    ids = np.array([[passkey_model.vocab.index(t) for t in tokens]])
    cached = generate(passkey_model, ids, max_new_tokens=6, temperature=0.0)
    uncached = generate(passkey_model, ids, max_new_tokens=6, temperature=0.0, use_cache=False)
    np.testing.assert_array_equal(cached, uncached)
    assert [passkey_model.vocab[t] for t in cached[0, -6:]] == ["7", "0", "4", "1", "9", "."]


def test_generate_is_reproducible_from_seed(random_model):
    ids = np.array([[1, 2, 3]])
    a = generate(random_model, ids, max_new_tokens=30, temperature=1.0, top_p=1.0, seed=5)
    b = generate(random_model, ids, max_new_tokens=30, temperature=1.0, top_p=1.0, seed=5)
    c = generate(random_model, ids, max_new_tokens=30, temperature=1.0, top_p=1.0, seed=6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_greedy_ignores_seed_and_zero_new_tokens_returns_prompt(random_model):
    ids = np.array([[1, 2, 3]])
    a = generate(random_model, ids, max_new_tokens=8, temperature=0.0, seed=1)
    b = generate(random_model, ids, max_new_tokens=8, temperature=0.0, seed=2)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(generate(random_model, ids, max_new_tokens=0), ids)


def test_top_p_keeps_only_the_nucleus():
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    logits = np.log(probs)[None, :].repeat(4000, axis=0)
    rng = np.random.default_rng(0)
    picks = sample_next(logits, temperature=1.0, top_p=0.75, rng=rng)
    assert set(picks.tolist()) == {0, 1}, "0.5 + 0.3 reaches 0.75: tokens 2 and 3 are cut"
    share = (picks == 0).mean()
    assert abs(share - 0.5 / 0.8) < 0.03, f"renormalised share of token 0 is {share}"
    tiny = sample_next(logits[:50], temperature=1.0, top_p=1e-9, rng=rng)
    assert (tiny == 0).all(), "a vanishing nucleus is greedy"


def test_temperature_sharpens_before_the_nucleus_is_chosen():
    logits = np.log(np.array([0.4, 0.35, 0.25]))[None, :].repeat(3000, axis=0)
    rng = np.random.default_rng(1)
    hot = sample_next(logits, temperature=1.0, top_p=0.7, rng=rng)
    cold = sample_next(logits, temperature=0.1, top_p=0.7, rng=rng)
    assert set(hot.tolist()) == {0, 1}
    assert set(cold.tolist()) == {0}, "at T=0.1 token 0 alone holds more than 0.7 of the mass"


@pytest.mark.parametrize("temperature", [-0.0, -1e-300, -0.5, -7.0])
def test_a_temperature_at_or_below_zero_is_greedy(random_model, temperature):
    """The chapter's rule: temperature <= 0 takes the argmax and draws nothing from the generator."""
    logits = np.random.default_rng(3).normal(size=(5, 11))
    rng = np.random.default_rng(8)
    state = rng.bit_generator.state
    picks = sample_next(logits, temperature, 0.9, rng)
    np.testing.assert_array_equal(picks, [int(np.argmax(row)) for row in logits])
    assert rng.bit_generator.state == state, "the greedy branch drew from the generator"
    ids = np.array([[1, 2, 3], [9, 8, 7]])
    greedy = generate(random_model, ids, max_new_tokens=5, temperature=0.0, use_cache=False)
    np.testing.assert_array_equal(generate(random_model, ids, max_new_tokens=5, temperature=temperature), greedy)


@pytest.mark.parametrize("temperature", [5e-324, 1e-300, 1e-30])
def test_a_vanishing_temperature_samples_the_argmax_never_nan(random_model, temperature):
    """logits / 5e-324 overflowed, the probabilities were NaN and every run returned token 0; the
    limit of the tempered distribution is the argmax, which the uncached greedy run computes."""
    ids = np.array([[1, 2, 3], [9, 8, 7]])
    greedy = generate(random_model, ids, max_new_tokens=6, temperature=0.0, use_cache=False)
    cold = generate(random_model, ids, max_new_tokens=6, temperature=temperature, seed=4)
    np.testing.assert_array_equal(cold, greedy)
    assert (cold[:, 3:] != 0).any()


def test_a_vanishing_temperature_draws_among_tied_maxima_only():
    logits = np.array([[1.0, 3.0, 3.0, -np.inf, 0.0]]).repeat(400, axis=0)
    picks = sample_next(logits, temperature=5e-324, top_p=1.0, rng=np.random.default_rng(2))
    assert set(picks.tolist()) == {1, 2}
    assert abs((picks == 1).mean() - 0.5) < 0.1


@pytest.mark.parametrize("logits", [[[0.0, np.nan]], [[0.0, np.inf]], [[-np.inf, -np.inf]]])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_sample_next_refuses_logits_without_a_finite_maximum(logits, temperature):
    with pytest.raises(ValueError, match="logits row 0"):
        sample_next(np.array(logits), temperature, 0.9, np.random.default_rng(0))


@pytest.mark.parametrize(
    "kwargs,ids,name",
    [
        ({"temperature": float("nan")}, [[1, 2]], "temperature"),
        ({"temperature": float("inf")}, [[1, 2]], "temperature"),
        ({"temperature": -float("inf")}, [[1, 2]], "temperature"),
        ({"temperature": "0.7"}, [[1, 2]], "temperature"),
        ({"top_p": float("nan")}, [[1, 2]], "top_p"),
        ({"top_p": "0.9"}, [[1, 2]], "top_p"),
        ({"top_p": 0.0}, [[1, 2]], "top_p"),
        ({"top_p": 1.5}, [[1, 2]], "top_p"),
        ({"max_new_tokens": -1}, [[1, 2]], "max_new_tokens"),
        ({"seed": "x"}, [[1, 2]], "seed"),
        ({"seed": 1.5}, [[1, 2]], "seed"),
        ({"seed": -1}, [[1, 2]], "seed"),
        ({}, [1, 2], "input_ids"),
        ({}, [[]], "input_ids"),
        ({}, [[1, 99]], "input_ids"),
        ({}, [[0.5, 1.0]], "input_ids"),
    ],
)
def test_generate_rejects_invalid_arguments(random_model, kwargs, ids, name):
    with pytest.raises(ValueError, match=name):
        generate(random_model, np.array(ids), **kwargs)


def test_decode_step_benchmark_helper_reports_both_kinds(random_model):
    cost = gen.time_decode_steps(random_model, 64, n_steps=2)
    assert set(cost) == {"windowed", "global", "windowed_per_layer", "global_per_layer", "step"}
    assert cost["windowed"] > 0 and cost["global"] > 0
    # the layers are timed inside the step, so together they cannot take longer than it
    assert cost["windowed"] + cost["global"] <= cost["step"]
    kinds = [layer.windowed for layer in random_model.layers]
    assert cost["windowed_per_layer"] == pytest.approx(cost["windowed"] / kinds.count(True))
    assert cost["global_per_layer"] == pytest.approx(cost["global"] / kinds.count(False))


def test_tiny_lm_make_model_reaches_the_mixed_model():
    import tiny_lm

    a = tiny_lm.make_model("mixed", seed=3)
    b = mixed_lm.make_mixed_model(seed=3, kind="mixed")
    ids = np.array([[1, 2, 3, 4]])
    assert np.array_equal(generate(a, ids, max_new_tokens=4, temperature=0.0),
                          generate(b, ids, max_new_tokens=4, temperature=0.0))


@pytest.mark.parametrize("windowed", [True, False])
@pytest.mark.parametrize("bad, says", [(np.nan, "holds a NaN or an infinity"), (np.inf, "holds a NaN or an infinity"),
                                       (1e300, "holds a value past the range of the layer's float32")])
def test_kv_cache_refuses_a_value_it_would_not_store_as_given(windowed, bad, says):
    """A NaN or an infinity was stored, and 1e300 into a float32 layer became an infinity with only a
    RuntimeWarning; each is refused, naming the tensor, and the cache is left as it was."""
    cache = MixedKVCache()
    k, v = tagged([1.0, 2.0])
    cache.append(0, k.astype(np.float32), v.astype(np.float32), is_windowed=windowed, window=3)
    before = snapshot(cache)
    k_bad, v_good = tagged([3.0])
    k_bad[0, 0, 0, 0] = bad
    with pytest.raises(ValueError, match=f"layer 0: k_rot {says}"):
        cache.append(0, k_bad, v_good, is_windowed=windowed, window=3)
    assert snapshot(cache) == before
