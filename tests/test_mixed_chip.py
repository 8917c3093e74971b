"""The mixed windowed/global model on GA2 (inference/mixed_chip.py): the graphs against the numpy
model, the on-chip rotation against apply_rotary, the int8 programs on the machine model against
their integer semantics, the tiled attention against a float softmax attention, the chip's greedy
passkey answer against the float model's, and decode steps replayed on the RTL."""

from __future__ import annotations

import math

import numpy as np
import pytest
import replay
from capra import config, isa
from conftest import needs_icarus, needs_verilator
from inference.generate import generate
from inference.long_context import PasskeyEvaluator
from inference.mixed_chip import (
    MixedChip,
    MixedChipError,
    StepTrace,
    a_shift,
    calibrate,
    equalize,
    float_residuals,
    float_trace,
    layer_errors,
    rotation_rows,
    swap_matrix,
)
from inference.mixed_lm import apply_rotary, make_mixed_model, rotary_tables


@pytest.fixture(scope="module")
def setup():
    model = make_mixed_model()
    ev = PasskeyEvaluator(model, base_seed=7)
    calib = []
    for length in (64, 200):  # as `capra mixed-chip` calibrates
        for key in ev.passkeys_for(length, 3):
            ids = ev.tokenizer.encode(ev.build_prompt(length, key))
            calib.append([int(t) for t in generate(model, np.array([ids]), max_new_tokens=7, temperature=0.0)[0]])
    chip_model, _ = equalize(model, calib)
    return model, chip_model, MixedChip(chip_model, calibrate(chip_model, calib))


def test_rotation_on_chip_is_apply_rotary():
    """x * C + (x @ SWAP) * S, the chip's formula, against the numpy model's apply_rotary."""
    model = make_mixed_model()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 5, model.head_dim))
    pos = np.array([0, 1, 7, 300, 4095])
    cos, sin = rotary_tables(pos, model.rotary_dims, model.rope_base, np.float64)
    c, s = rotation_rows(model, pos)
    got = x[0, 0] * c + (x[0, 0] @ swap_matrix(model.head_dim, model.rotary_dims)) * s
    np.testing.assert_allclose(got, apply_rotary(x, cos, sin, model.rotary_dims)[0, 0], rtol=1e-6, atol=1e-6)


def test_float_trace_is_the_numpy_model(setup):
    """The programs' computation in float64 gives the numpy model's residuals and logits, before and
    after equalization (which changes no score)."""
    model, chip_model, _chip = setup
    ids = PasskeyEvaluator(model).tokenizer.encode(PasskeyEvaluator(model).build_prompt(150, 31337))
    want, logits = float_residuals(model, ids)
    for m in (model, chip_model):
        tr = float_trace(m, ids)
        for layer in range(model.n_layers):
            np.testing.assert_allclose(tr["x"][layer + 1], want[layer], atol=2e-4 * np.abs(want[layer]).max())
        np.testing.assert_allclose(tr["logits"], logits, atol=1e-3)


def test_decode_step_machine_equals_integer_semantics(setup):
    """Every program of a few decode steps on the machine model gives the integer semantics' words."""
    _model, _chip_model, chip = setup
    chip.reset()
    chip.prefill([14, 15, 16], executor="both")
    tr = chip.step(3, executor="both")
    assert len(tr.runs) == 20 and all(c > 0 for c in tr.cycles)


@pytest.mark.heavy
def test_per_layer_error_and_top1(setup):
    """Teacher-forced on a prompt disjoint from calibration: small residual error in layer 0, and
    wherever the float model's top-1 is decisive the chip's is the same."""
    model, _chip_model, chip = setup
    ev = PasskeyEvaluator(model)
    ids = ev.tokenizer.encode(ev.build_prompt(48, ev.passkeys_for(48, 1)[0]))
    err = layer_errors(chip, ids, reference=model)
    assert max(err.rel[0]) < 0.02
    decisive = [t for t, d in zip(err.top1, err.decisive, strict=True) if d]
    assert len(decisive) >= 10 and all(decisive)


@pytest.mark.heavy
def test_passkey_greedy_on_machine_model(setup):
    """The chip's greedy answer on the machine model is the float model's, and it is the passkey."""
    model, _chip_model, chip = setup
    ev = PasskeyEvaluator(model)
    key = ev.passkeys_for(40, 1)[0]
    ids = ev.tokenizer.encode(ev.build_prompt(40, key))
    want = [int(t) for t in generate(model, np.array([ids]), max_new_tokens=6, temperature=0.0)[0][len(ids) :]]
    got, _traces = chip.generate(ids, 6, executor="machine")
    assert got == want
    assert ev.extract_passkey_from_output(ev.tokenizer.decode(got)) == key


def test_bad_requests(setup):
    _model, _chip_model, chip = setup
    with pytest.raises(MixedChipError, match="executor"):
        chip.step(3, executor="rtl")
    with pytest.raises(MixedChipError, match="token"):
        chip.step(99)
    with pytest.raises(MixedChipError, match="margin"):
        calibrate(make_mixed_model(), [[1, 2]], margin=0.5)
    odd = dict(chip.ranges, a1=chip.ranges["a1"] * 0.7)  # A's range not V's over a power of two
    with pytest.raises(MixedChipError, match="range a1"):
        MixedChip(chip.model, odd).tiled_params(1, 0)


# ---- attention tiled over the context --------------------------------------------------------------


def test_attention_range_is_v_over_a_power_of_two(setup):
    """A's range is V's over 2^k, at least the calibrated largest |A| and less than twice it."""
    model, chip_model, chip = setup
    for layer in range(model.n_layers):
        k = math.log2(chip.ranges[f"v{layer}"] / chip.ranges[f"a{layer}"])
        assert k == int(k) and 0 <= k <= 15
    assert a_shift(10.0, 10.0) == 0 and a_shift(10.0, 2.6) == 1 and a_shift(10.0, 2.5) == 2


def _float_attention(q, keys, values, sinks):
    """Softmax attention with a sink logit per query row, in float64: the reference."""
    s = q @ keys.T / math.sqrt(q.shape[1])
    m = np.maximum(s.max(axis=1), sinks)
    e = np.exp(s - m[:, None])
    return (e / (e.sum(axis=1) + np.exp(sinks - m))[:, None]) @ values


@pytest.mark.parametrize("rows, tile", [(150, None), (700, None), (2000, 16)])
def test_tiled_attention_of_a_global_layer_is_float_attention(setup, rows, tile):
    """Layer 1's attention on the chip's scales, one-shot (150 rows), tiled (700: four tiles) and in
    two programs (2000 rows in tiles of 16: 125 tiles, past the instruction memory), on the machine
    model and in its integer reference (executor "both"): within 3% (relative L2) of the float
    softmax attention of the same int8 values, sinks included. The first row attends mostly to one
    key, as layer 1's induction head does (A's int8 range is V's); the second spreads its weight."""
    _model, chip_model, chip = setup
    layer, grp = 1, 0
    rng = np.random.default_rng(rows)
    sq, sk, sv = (chip.ranges[f"{t}{layer}"] / 127 for t in "qkv")
    q8 = rng.integers(-127, 128, (2, 64))
    k = rng.standard_normal((rows, 64)) * 0.3
    k[rows // 3] = q8[0] / np.linalg.norm(q8[0]) * 8  # a key the first query finds (an induction match)
    # keys scaled so that the scores span the calibrated range of layer 1's scores, no further
    top = np.abs(q8 * sq @ k.T / 8).max()
    k8 = np.clip(np.round(k * 0.9 * chip.ranges[f"s{layer}"] / top / sk), -127, 127).astype(np.int64)
    v8 = rng.integers(-127, 128, (rows, 64))
    saved = chip.tile
    try:
        chip.tile = tile or saved
        parts = chip.tiled_parts(rows) if rows > chip.tile else [(0, rows)]
        assert len(parts) == (2 if tile else 1)
        trace = StepTrace(0, 0, [], np.zeros(0), -1)
        got = chip.attention(layer, grp, q8, k8, v8, "both", trace)
    finally:
        chip.tile = saved
    assert len(trace.runs) == len(parts) and len(trace.cycles) == len(parts)
    sinks = chip_model.clamped_sink(layer, None)[:2].astype(np.float64)
    want = _float_attention(q8 * sq, k8 * sk, v8 * sv, sinks)
    rel = np.linalg.norm(got * chip.ranges[f"a{layer}"] / 127 - want) / np.linalg.norm(want)
    assert rel < 0.03, rel


@pytest.mark.slow
def test_per_layer_error_and_passkey_with_tiled_attention(setup):
    """At 400 tokens the global layers' attention is tiled: layer 0's error stays small, every
    decisive top-1 agrees with the float model, and the greedy passkey answer on the machine model
    is the float model's."""
    model, _chip_model, chip = setup
    ev = PasskeyEvaluator(model)
    key = ev.passkeys_for(400, 1)[0]
    ids = ev.tokenizer.encode(ev.build_prompt(400, key))
    err = layer_errors(chip, ids, reference=model)
    assert max(err.rel[0]) < 0.02
    decisive = [t for t, d in zip(err.top1, err.decisive, strict=True) if d]
    assert len(decisive) >= 100 and all(decisive)
    want = [int(t) for t in generate(model, np.array([ids]), max_new_tokens=7, temperature=0.0)[0][len(ids):]]
    got, traces = chip.generate(ids, 7, executor="machine")
    assert got == want and ev.extract_passkey_from_output(ev.tokenizer.decode(got)) == key
    assert any(r.name.startswith("tiled") for r in traces[-1].runs)


# ---- decode steps replayed on the RTL ----------------------------------------------------------------


def _replay_answer(setup, length: int, steps: int, simulator: str) -> None:
    """The greedy answer steps after a passkey prompt of `length` tokens, every program of each on
    the machine model, replayed in `simulator`: every word and counter equal."""
    model, _chip_model, chip = setup
    ev = PasskeyEvaluator(model)
    key = ev.passkeys_for(length, 1)[0]
    ids = ev.tokenizer.encode(ev.build_prompt(length, key))
    got, traces = chip.generate(ids, steps, executor="machine")
    runs = [r for tr in traces[-steps:] for r in tr.runs]
    assert any(r.name.startswith("tiled") for r in runs)
    from replay import image

    with config.use(chip.ext_config(max(r.ext_words for r in runs))):
        records = [image.record(r.code, r.ext()) for r in runs]
        verdicts = replay.replay(records, name=f"mixed_chip_{length}", latency=isa.EXT_LATENCY,
                                 simulators=(replay.simulators.BY_NAME[simulator],))
    assert [r.counters[0] for r in records] == [c for tr in traces[-steps:] for c in tr.cycles]
    for v in verdicts:
        assert v.passed, v.problems
        assert v.counters == [r.counters for r in records]
    want = [int(t) for t in generate(model, np.array([ids]), max_new_tokens=steps, temperature=0.0)[0][len(ids):]]
    assert got == want


@pytest.mark.slow
@needs_icarus
def test_decode_steps_at_256_replay_in_icarus(setup):
    _replay_answer(setup, 256, 2, "icarus")


@pytest.mark.slow
@needs_verilator
def test_passkey_answer_at_1024_replays_in_verilator(setup):
    """The seven answer steps (five digits, '.', one more) after a 1,024-token passkey prompt."""
    _replay_answer(setup, 1024, 7, "verilator")
