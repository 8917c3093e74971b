"""Passkey retrieval: prompts, scoring, intervals, and the constructed model that retrieves.

Small contexts and few trials keep this file fast; ``tools/passkey_eval.py`` runs the full table.
"""

from __future__ import annotations

import numpy as np
import pytest
from inference.long_context import (
    FILLER_SENTENCES,
    QUESTION,
    PasskeyEvaluator,
    PasskeyTokenizer,
    make_filler_text,
    needle_attention,
    wilson_interval,
)
from inference.mixed_lm import ModelConfigError, make_mixed_model


@pytest.fixture(scope="module")
def tokenizer():
    return PasskeyTokenizer()


@pytest.fixture(scope="module")
def mixed():
    return make_mixed_model(seed=0, window=32)


@pytest.fixture(scope="module")
def windowed():
    return make_mixed_model(seed=0, kind="windowed", window=32)


# ---------------------------------------------------------------------------------------------
# tokenizer and filler
# ---------------------------------------------------------------------------------------------


def test_tokenizer_splits_digits_and_punctuation_and_round_trips(tokenizer):
    text = "the passkey is 04217 . what is the passkey ?"
    pieces = tokenizer.split(text)
    assert pieces[3:8] == ["0", "4", "2", "1", "7"]
    assert pieces[8] == "." and pieces[-1] == "?"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == "the passkey is 04217. what is the passkey?"
    assert tokenizer.encode(tokenizer.decode(ids)) == ids
    assert tokenizer.encode("zebra") == [tokenizer.unk_id]
    assert tokenizer.vocab_size <= 64


def test_filler_has_exact_length_is_deterministic_and_digit_free(tokenizer):
    for n in (0, 1, 17, 500):
        text = make_filler_text(n)
        assert len(tokenizer.encode(text)) == n
        assert make_filler_text(n) == text, "filler is seeded on its length by default"
        assert not any(ch.isdigit() for ch in text)
    assert make_filler_text(200, seed=1) != make_filler_text(200, seed=2)
    sentences = {s.split()[0] for s in FILLER_SENTENCES}
    assert make_filler_text(100).split()[0] in sentences
    with pytest.raises(ValueError, match="n_tokens"):
        make_filler_text(-1)


# ---------------------------------------------------------------------------------------------
# prompts and scoring
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["start", "middle", "end"])
def test_build_prompt_has_exact_length_and_needle_at_its_depth(mixed, tokenizer, position):
    evaluator = PasskeyEvaluator(mixed)
    length = 300
    prompt = evaluator.build_prompt(length, 31415, position)
    words = prompt.split()
    assert len(tokenizer.encode(prompt)) == length
    assert prompt.endswith(QUESTION)
    needle_at = words.index("passkey")
    assert words[needle_at + 2:needle_at + 7] == ["3", "1", "4", "1", "5"]
    fraction = needle_at / length
    expected = {"start": (0.0, 0.01), "middle": (0.4, 0.6), "end": (0.9, 1.0)}[position]
    assert expected[0] <= fraction <= expected[1], f"needle at {fraction:.2f} of the prompt"
    if position != "start":
        assert words[needle_at - 2] == ".", "the needle starts a sentence"


def test_build_prompt_rejects_bad_input(mixed):
    evaluator = PasskeyEvaluator(mixed)
    with pytest.raises(ValueError, match="position"):
        evaluator.build_prompt(100, 12345, "top")
    with pytest.raises(ValueError, match="passkey"):
        evaluator.build_prompt(100, 123456, "start")
    with pytest.raises(ValueError, match="context_length"):
        evaluator.build_prompt(10, 12345, "start")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("12345.", 12345),
        ("the passkey is 04217. here", 4217),
        ("1234 then 98765 and 11111", 98765),
        ("123456", None),
        ("1234", None),
        ("green blue", None),
    ],
)
def test_extract_passkey_takes_first_standalone_five_digit_number(text, expected):
    assert PasskeyEvaluator.extract_passkey_from_output(text) == expected


def test_passkeys_are_distinct_seeded_and_differ_across_lengths(mixed):
    evaluator = PasskeyEvaluator(mixed, base_seed=42)
    keys = evaluator.passkeys_for(1024, 200)
    assert len(set(keys)) == 200 and all(0 <= k <= 99_999 for k in keys)
    assert keys == PasskeyEvaluator(mixed, base_seed=42).passkeys_for(1024, 200)
    assert keys != evaluator.passkeys_for(2048, 200)
    import random

    assert keys == random.Random(42 + 1024).sample(range(100_000), 200)


def test_wilson_interval_matches_textbook_values():
    # Textbook 95% Wilson intervals (z = 1.96): 0/10 -> [0, 0.2775], 10/10 -> [0.7225, 1],
    # 5/10 -> [0.2366, 0.7634], 90/100 -> [0.8256, 0.9448].
    for successes, n, low, high in [(0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0),
                                    (5, 10, 0.2366, 0.7634), (90, 100, 0.8256, 0.9448)]:
        got_low, got_high = wilson_interval(successes, n)
        assert got_low == pytest.approx(low, abs=5e-4) and got_high == pytest.approx(high, abs=5e-4)


# ---------------------------------------------------------------------------------------------
# the constructed model retrieves; the windowed-only control does not
# ---------------------------------------------------------------------------------------------


def test_mixed_model_retrieves_at_every_depth(mixed):
    evaluator = PasskeyEvaluator(mixed)
    for position in ("start", "middle", "end"):
        result = evaluator.run_trials(400, 6, position)
        assert result.correct == 6, f"{position}: {result.correct}/6"
    accuracy = evaluator.evaluate(context_lengths=(100, 200), n_trials=4, position="middle")
    assert accuracy == {100: 1.0, 200: 1.0}


def test_mixed_model_retrieves_at_2048_tokens(mixed):
    evaluator = PasskeyEvaluator(mixed)
    result = evaluator.run_trials(2048, 2, "start")
    assert result.correct == 2


def test_windowed_model_fails_once_the_needle_leaves_the_window(windowed):
    evaluator = PasskeyEvaluator(windowed)
    for position in ("start", "middle"):
        result = evaluator.run_trials(400, 6, position)
        assert result.correct == 0, f"{position}: the needle is ~200+ tokens back, window is 32"
        assert result.high < 0.5
    assert evaluator.run_trials(400, 6, "end").correct == 6, "inside the window it still reads the needle"


def test_induction_softmax_stays_sharp_at_long_context(mixed):
    evaluator = PasskeyEvaluator(mixed)
    for length in (512, 8192):
        probe = needle_attention(mixed, evaluator, length)
        assert probe["needle"] > 0.999, f"{length}: only {probe['needle']} on the needle"
        assert probe["others"] < 1e-6 and probe["sink"] < 1e-6


def test_repeated_trigram_passkeys_are_the_known_blind_spot(mixed):
    """The head matches three tokens of context; 1 2 1 2 1 repeats (1, 2, 1) and cannot be read."""
    evaluator = PasskeyEvaluator(mixed)
    ids = np.array([evaluator.tokenizer.encode(evaluator.build_prompt(60, 12121, "middle"))])
    from inference.generate import generate

    out = generate(mixed, ids, max_new_tokens=8, temperature=0.0)
    assert evaluator.extract_passkey_from_output(evaluator.tokenizer.decode(out[0, 60:])) != 12121


def test_model_construction_rejects_shapes_that_cannot_hold_the_circuit():
    with pytest.raises(ModelConfigError, match="n_heads"):
        make_mixed_model(n_heads=2, n_kv_heads=1)
    with pytest.raises(ModelConfigError, match="kind"):
        make_mixed_model(kind="sparse")
    with pytest.raises(ModelConfigError, match="head_dim"):
        make_mixed_model(head_dim=32, rotary_dims=16)
