"""The vectorised prefill of the mixed model on GA2 (inference/mixed_prefill.py) against the chip's
own token-by-token prefill: the int8 K/V cache, every position's residuals, logits and greedy token
word for word, and the decode step after it. Token-by-token prefill with the reference executor is
the programs' integer semantics (test_mixed_chip.py checks it against the machine model, "both")."""

from __future__ import annotations

import numpy as np
import pytest
from capra import run
from inference.generate import generate
from inference.long_context import PasskeyEvaluator
from inference.mixed_chip import MixedChip, MixedChipError, StepTrace, calibrate, equalize, visible_rows
from inference.mixed_lm import make_mixed_model
from inference.mixed_prefill import VectorisedPrefill, run_rows


def _chip(window: int = 128) -> tuple[MixedChip, PasskeyEvaluator]:
    """The chip as `capra mixed-chip` calibrates it (passkeys seeded 7), and an evaluator seeded 42."""
    model = make_mixed_model(window=window)
    ev = PasskeyEvaluator(model, base_seed=7)
    calib = []
    for length in (64, 200):
        for key in ev.passkeys_for(length, 3):
            ids = ev.tokenizer.encode(ev.build_prompt(length, key))
            calib.append([int(t) for t in generate(model, np.array([ids]), max_new_tokens=7, temperature=0.0)[0]])
    chip_model, _ = equalize(model, calib)
    return MixedChip(chip_model, calibrate(chip_model, calib)), PasskeyEvaluator(model)


def _same_as_token_by_token(chip: MixedChip, ids: list[int]) -> None:
    """Vectorised prefill of ids[:-1], then one decode step, against chip.prefill and the same step."""
    res = VectorisedPrefill(chip).prefill(ids[:-1])
    cache = ([[k.copy() for k in layer] for layer in chip.keys], [[v.copy() for v in layer] for layer in chip.values])
    assert chip.position == len(ids) - 1
    after = chip.step(ids[-1])
    chip.reset()
    traces = chip.prefill(ids[:-1], executor="reference")
    for layer in range(chip.model.n_layers):
        for grp in range(chip.model.n_kv_heads):
            np.testing.assert_array_equal(cache[0][layer][grp], chip.keys[layer][grp])
            np.testing.assert_array_equal(cache[1][layer][grp], chip.values[layer][grp])
    for i, tr in enumerate(traces):
        for layer in range(chip.model.n_layers):
            np.testing.assert_array_equal(res.residuals[layer][i], tr.residuals[layer])
        np.testing.assert_array_equal(res.logits[i], tr.logits)
        assert res.next_tokens[i] == tr.next_token
    want = chip.step(ids[-1])
    assert after.next_token == want.next_token
    np.testing.assert_array_equal(after.logits, want.logits)


def test_run_rows_is_the_programs_integer_semantics():
    """Independent runs stacked on a leading axis give capra.run's integers, run by run."""
    chip, _ev = _chip()
    rng = np.random.default_rng(3)
    for kind in ("proj", "out"):
        P = chip.program(kind, 3)
        feeds = [{n: rng.standard_normal((P.tensors[n].rows, P.tensors[n].cols)) * P.tensors[n].scale * 60
                  for n in P.inputs} for _ in range(5)]
        got = run_rows(P, {n: np.stack([f[n] for f in feeds]) for n in P.inputs})
        for b, f in enumerate(feeds):
            for name in P.outputs:
                np.testing.assert_array_equal(got[name][b], np.asarray(run(P, f)[name][0]))


@pytest.mark.heavy
def test_small_window_and_tile_equal_token_by_token():
    """A window of 16, one-shot attention up to 24 rows and tiles of 16 keys: at 70 tokens every
    path runs (windowed one-shot, global one-shot, tiled over five tiles with a cut last one), on a
    passkey prompt and on random tokens (whose attention is spread wider than the constructed
    circuits spread it on a passkey prompt)."""
    chip, ev = _chip(window=16)
    chip.one_shot_rows, chip.tile = 24, 16
    ids = ev.tokenizer.encode(ev.build_prompt(70, ev.passkeys_for(70, 1)[0], "start"))
    _same_as_token_by_token(chip, ids)
    chip.reset()
    rng = np.random.default_rng(5)
    _same_as_token_by_token(chip, [int(t) for t in rng.integers(0, chip.model.vocab_size, 70)])


@pytest.mark.parametrize("layer", [0, 1])
def test_attention_of_every_position_is_the_decode_steps(layer):
    """Random int8 q, K and V (spread attention, unlike the constructed circuits'): the vectorised
    attention of every position equals ``MixedChip.attention`` over the rows that position's decode
    step sees -- one-shot (windowed layer 0, and layer 1 up to 24 rows), tiled in tiles of 16 with a
    cut last tile (layer 1 past 24 rows)."""
    chip, _ev = _chip(window=16)
    chip.one_shot_rows, chip.tile = 24, 16
    m = chip.model
    rng = np.random.default_rng(layer)
    t, rep = 70, m.n_heads // m.n_kv_heads
    vp = VectorisedPrefill(chip)
    for grp in range(m.n_kv_heads):
        q = rng.integers(-40, 41, (t, rep, m.head_dim))
        k = rng.integers(-40, 41, (t, m.head_dim))
        v = rng.integers(-127, 128, (t, m.head_dim))
        q[::8, 0] = k[::8]  # some positions find their own key, some of them first in a tile
        q[1::5, 1] = k[:-1:5]  # and some their predecessor
        got = vp._attention(layer, grp, q, k, v)
        for p in range(t):
            n = visible_rows(m, layer, p + 1)
            trace = StepTrace(p, 0, [], np.zeros(0), -1)
            want = chip.attention(layer, grp, q[p], k[p + 1 - n:p + 1], v[p + 1 - n:p + 1], "reference", trace)
            np.testing.assert_array_equal(got[p], want, err_msg=f"layer {layer} group {grp} position {p}")
        assert np.abs(got).max() > 20  # attention that reads V, not a row of zeros


@pytest.mark.slow
def test_prefill_at_256_equals_token_by_token():
    """The chip as the passkey table runs it, a 256-token prompt (tiled attention past 192 rows)."""
    chip, ev = _chip()
    ids = ev.tokenizer.encode(ev.build_prompt(256, ev.passkeys_for(256, 1)[0], "middle"))
    _same_as_token_by_token(chip, ids)


def test_bad_prefill_requests():
    chip, _ev = _chip()
    vp = VectorisedPrefill(chip)
    with pytest.raises(MixedChipError, match="non-empty"):
        vp.prefill([])
    with pytest.raises(MixedChipError, match="token ids"):
        vp.prefill([1, chip.model.vocab_size])
    chip.one_shot_rows = 64  # below the window: windowed layers would need a tiled attention
    with pytest.raises(MixedChipError, match="window"):
        VectorisedPrefill(chip)
