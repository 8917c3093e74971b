"""The mixed windowed/global model on GA2 (inference/mixed_chip.py): the graphs against the numpy
model, the on-chip rotation against apply_rotary, the int8 programs on the machine model against
their integer semantics, and the chip's greedy passkey answer against the float model's."""

from __future__ import annotations

import numpy as np
import pytest
from inference.generate import generate
from inference.long_context import PasskeyEvaluator
from inference.mixed_chip import (
    MixedChip,
    MixedChipError,
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
