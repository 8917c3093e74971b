"""Passkey retrieval: hide a 5-digit number in filler text and ask the model for it back.

The protocol follows Mohtashami & Jaggi (2023): deterministic filler of a given length, the needle
``the passkey is NNNNN .`` placed at the start, the middle or the end, a question at the end,
greedy decoding, the first 5-digit number of the completion compared with the truth. Every context
length gets its own seeded set of distinct passkeys, and the accuracy comes with a 95% Wilson score
interval (which, unlike the normal approximation, stays inside [0, 1] and is still meaningful at 0
or n successes out of n).

Context lengths are counted in tokens of :class:`PasskeyTokenizer`, and a prompt built for length
L is exactly L tokens long.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

import numpy as np

from .generate import generate
from .mixed_lm import INDUCTION_HEAD, INDUCTION_LAYER, VOCAB

POSITIONS = ("start", "middle", "end")
PASSKEY_PATTERN = re.compile(r"\b(\d{5})\b")
FILLER_SENTENCES = (
    "the grass is green .",
    "the sky is blue .",
    "the sun is yellow .",
    "here we go .",
    "there and back again .",
    "what a day .",
)
QUESTION = "what is the passkey ? the passkey is"
TARGET_ACCURACY = 0.90
CHANCE_ACCURACY = 1.0 / 100_000       # guessing a uniformly drawn 5-digit passkey


class PasskeyTokenizer:
    """Word-level tokenizer over the tiny model's vocabulary.

    Text is lower-cased and split on spaces; ``.`` and ``?`` are tokens of their own and every digit
    is one token, so ``12345`` becomes five tokens (the model copies a passkey one digit at a time).
    Words outside the vocabulary map to ``<unk>``. ``decode`` writes digits back-to-back and glues
    punctuation to the word before it, so a decoded completion reads ``12345.``.
    """

    def __init__(self, vocab: tuple[str, ...] = VOCAB):
        self.vocab = tuple(vocab)
        self.index = {tok: i for i, tok in enumerate(self.vocab)}
        self.unk_id = self.index["<unk>"]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def split(self, text: str) -> list[str]:
        return re.findall(r"\d|[.?]|[^\s\d.?]+", text.lower())

    def encode(self, text: str) -> list[int]:
        return [self.index.get(piece, self.unk_id) for piece in self.split(text)]

    def decode(self, ids) -> str:
        pieces: list[str] = []
        for token_id in ids:
            tok = self.vocab[int(token_id)]
            glue = tok in (".", "?") or (tok.isdigit() and pieces and pieces[-1][-1:].isdigit())
            if glue and pieces:
                pieces[-1] += tok
            else:
                pieces.append(tok)
        return " ".join(pieces)


def make_filler_text(n_tokens: int, seed: int | None = None) -> str:
    """Deterministic filler of exactly ``n_tokens`` tokens, seeded (by default on ``n_tokens``).

    Sentences are drawn from a small fixed set in a seeded order; the last one may be cut short.
    None of them contains a digit, so the only number in a prompt is the passkey.
    """
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    rng = random.Random(n_tokens if seed is None else seed)
    words: list[str] = []
    while len(words) < n_tokens:
        words.extend(rng.choice(FILLER_SENTENCES).split())
    return " ".join(words[:n_tokens])


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% for z = 1.96)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class PasskeyResult:
    """Outcome at one context length: accuracy over ``n_trials`` and its 95% Wilson interval."""

    context_length: int
    position: str
    n_trials: int
    correct: int
    low: float
    high: float

    @property
    def accuracy(self) -> float:
        return self.correct / self.n_trials


class PasskeyEvaluator:
    """Build passkey prompts for a model and score its greedy completions."""

    def __init__(self, model, tokenizer: PasskeyTokenizer | None = None, max_new_tokens: int = 8,
                 base_seed: int = 42):
        self.model = model
        self.tokenizer = tokenizer or PasskeyTokenizer(model.vocab)
        self.max_new_tokens = max_new_tokens
        self.base_seed = base_seed

    @staticmethod
    def needle(passkey: int) -> str:
        return f"the passkey is {passkey:05d} ."

    def build_prompt(self, context_length: int, passkey: int, position: str = "middle") -> str:
        """Filler with the needle at ``position`` and the question last; exactly ``context_length`` tokens.

        "start" puts the needle first; "end" and "middle" put it at the sentence boundary nearest
        the end or the middle of the filler (so at "end" at most a sentence fragment separates it
        from the question). Raises ValueError for an unknown position, a
        passkey outside 0..99999, or a length too short to hold the needle and the question.
        """
        if position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
        if not 0 <= passkey <= 99_999:
            raise ValueError(f"passkey must be a 5-digit number 0..99999, got {passkey}")
        needle = self.tokenizer.split(self.needle(passkey))
        question = self.tokenizer.split(QUESTION)
        n_filler = context_length - len(needle) - len(question)
        if n_filler < 0:
            raise ValueError(
                f"context_length={context_length} is too short: needle and question take "
                f"{len(needle) + len(question)} tokens"
            )
        filler = make_filler_text(n_filler).split()
        if position == "start":
            cut = 0
        elif position == "end":
            cut = _nearest_sentence_end(filler, len(filler))
        else:
            cut = _nearest_sentence_end(filler, len(filler) // 2)
        return " ".join(filler[:cut] + needle + filler[cut:] + question)

    @staticmethod
    def extract_passkey_from_output(text: str) -> int | None:
        """The first standalone 5-digit number in ``text``, or None."""
        match = PASSKEY_PATTERN.search(text)
        return int(match.group(1)) if match else None

    def passkeys_for(self, context_length: int, n_trials: int) -> list[int]:
        """Distinct passkeys for one length, from ``random.Random(base_seed + context_length)``."""
        rng = random.Random(self.base_seed + context_length)
        return rng.sample(range(100_000), n_trials)

    def run_trials(self, context_length: int, n_trials: int, position: str,
                   batch_size: int = 2, progress=None) -> PasskeyResult:
        """Score ``n_trials`` prompts at one length; prompts of equal length are decoded in batches.
        ``progress(n)`` (if given) is called after each batch with the n trials it scored, so a
        long cell can show it is alive."""
        passkeys = self.passkeys_for(context_length, n_trials)
        correct = 0
        for start in range(0, n_trials, batch_size):
            chunk = passkeys[start:start + batch_size]
            prompts = [self.tokenizer.encode(self.build_prompt(context_length, key, position)) for key in chunk]
            ids = np.array(prompts, dtype=np.int64)
            out = generate(self.model, ids, max_new_tokens=self.max_new_tokens, temperature=0.0, use_cache=True)
            for key, row in zip(chunk, out[:, ids.shape[1]:], strict=True):
                answer = self.extract_passkey_from_output(self.tokenizer.decode(row))
                correct += int(answer == key)
            if progress is not None:
                progress(len(chunk))
        low, high = wilson_interval(correct, n_trials)
        return PasskeyResult(context_length, position, n_trials, correct, low, high)

    def evaluate_detailed(self, context_lengths=(256, 1024, 4096), n_trials: int = 10,
                          position: str = "middle") -> dict[int, PasskeyResult]:
        if n_trials < 1:
            raise ValueError(f"n_trials must be >= 1, got {n_trials}")
        return {length: self.run_trials(length, n_trials, position) for length in context_lengths}

    def evaluate(self, context_lengths=(256, 1024, 4096), n_trials: int = 10,
                 position: str = "middle") -> dict[int, float]:
        """{context_length: accuracy}; see ``evaluate_detailed`` for the counts and intervals."""
        detailed = self.evaluate_detailed(context_lengths, n_trials, position)
        return {length: result.accuracy for length, result in detailed.items()}


def shortest_prompt() -> int:
    """Tokens of the needle and the question: the shortest prompt that holds both."""
    tok = PasskeyTokenizer()
    return len(tok.split(PasskeyEvaluator.needle(0))) + len(tok.split(QUESTION))


def needle_attention(model, evaluator: PasskeyEvaluator, context_length: int, passkey: int = 12345,
                     position: str = "start") -> dict[str, float]:
    """How the induction head spreads its attention at the question's last token (``is``).

    Returns the weight on the needle's first digit (the key the head must find), on the sink, on
    the largest other key and on all other keys together. This is the numerical check that the
    softmax stays sharp at long context: thousands of filler keys must not add up to a rival.
    """
    prompt = evaluator.build_prompt(context_length, passkey, position)
    ids = np.array([evaluator.tokenizer.encode(prompt)])
    probs = model.last_query_attention(ids, INDUCTION_LAYER)[0, INDUCTION_HEAD]
    needle_start = _find(ids[0], evaluator.tokenizer.encode(PasskeyEvaluator.needle(passkey)))
    target = needle_start + 3                    # "the passkey is" then the first digit
    keys = probs[:-1]
    others = np.delete(keys, target)
    return {
        "needle": float(keys[target]),
        "sink": float(probs[-1]),
        "largest_other": float(others.max()),
        "others": float(others.sum()),
    }


def _find(haystack: np.ndarray, needle: list[int]) -> int:
    windows = np.lib.stride_tricks.sliding_window_view(haystack, len(needle))
    hits = np.flatnonzero((windows == np.array(needle)).all(axis=1))
    if hits.size == 0:
        raise ValueError("needle not found in prompt")
    return int(hits[0])


def _nearest_sentence_end(words: list[str], index: int) -> int:
    """Index just after the '.' closest to ``index`` (or ``index`` itself if there is none)."""
    ends = [i + 1 for i, w in enumerate(words) if w == "."]
    if not ends:
        return index
    return min(ends, key=lambda e: (abs(e - index), e))
