"""The model runner: a batch of requests in, one program run, each request's results out.

``ModelRunner.run(tokens, caches)`` takes, per request, the token it feeds and the cached key and
value rows its step attends, and runs the batch as one program: the requests go to the program
longest context first (so the order they joined in does not matter, and a batch of the same
contexts is one program), and the results come back in the caller's order. The program comes from
the program cache (host/programs.py) for the batch's contexts and the runner's ranges.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import tiny_lm as T
from capra import CompileError, Program, isa

from .programs import PROGRAMS, ProgramCache
from .step import MachineMismatch, Step, run_step

__all__ = ["MachineMismatch", "ModelRunner", "batch_key", "check_ranges"]

Ranges = Mapping[str, float] | Callable[[tuple[int, ...]], Mapping[str, float]]


def check_ranges(ranges: Mapping[str, float]) -> dict[str, float]:
    """Every group's range as a finite float > 0, or ValueError naming the bad ones."""
    if not isinstance(ranges, Mapping):
        raise ValueError(f"ranges={ranges!r}: give a dict of group -> range (host.calibrate)")
    missing = [g for g in T.GROUPS if g not in ranges]
    if missing:
        raise ValueError(f"ranges lack the groups {missing}: every tensor needs one fixed scale")
    bad = {g: ranges[g] for g in T.GROUPS if not isinstance(ranges[g], int | float | np.integer | np.floating)
           or isinstance(ranges[g], bool) or not math.isfinite(ranges[g]) or ranges[g] <= 0}
    if bad:
        raise ValueError(f"ranges {bad}: each must be a finite number > 0")
    return {g: float(ranges[g]) for g in T.GROUPS}


def batch_key(contexts) -> tuple[int, ...]:
    """The contexts as a tuple of ints, each 1 .. isa.MM_MAX_K, or ValueError naming the bad one.
    A bool, a float or a numpy float is not a context, even when it equals one (True == 1)."""
    try:
        contexts = list(contexts)
    except TypeError:
        raise ValueError(f"contexts {contexts!r}: give a list of context lengths") from None
    if not contexts:
        raise ValueError("a batch needs at least one request")
    for i, n in enumerate(contexts):
        if isinstance(n, bool | np.bool_) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"request {i} of the batch: context {n!r} is not an int >= 1")
        if n > isa.MM_MAX_K:  # refused before any array of that many rows is made
            raise ValueError(f"request {i} of the batch: context {n} is past {isa.MM_MAX_K}, the longest "
                             "reduction GA2's matmul can do")
    return tuple(int(n) for n in contexts)


class ModelRunner:
    """Runs decode steps of model `m` on the machine model, any batch, scales from `ranges` (one
    dict for every program, or a function of the batch's contexts, longest first)."""

    def __init__(self, m: dict, ranges: Ranges, programs: ProgramCache | None = None) -> None:
        if not isinstance(m, dict) or any(name not in m for name in ("E", "Wq", "Wk", "Wv")):
            raise ValueError("m must be the tiny model's weights (tiny_lm.make_model)")
        self.m = m
        self.ranges = ranges if callable(ranges) else check_ranges(ranges)
        self.programs = PROGRAMS if programs is None else programs
        self.seen: set[tuple[str, tuple[int, ...]]] = set()  # the batches that ran

    def ranges_for(self, key: tuple[int, ...]) -> Mapping[str, float]:
        return self.ranges(key) if callable(self.ranges) else self.ranges

    def program(self, contexts: Sequence[int]) -> Program:
        """The program for a batch of these contexts, longest first; CompileError if it does not fit
        GA2, ValueError if they are not contexts."""
        key = tuple(sorted(batch_key(contexts), reverse=True))
        return self.programs.get(self.m, key, self.ranges_for(key))

    def fits(self, contexts: Sequence[int]) -> str | None:
        """None if a batch with these contexts compiles for GA2, else the reason it does not (the
        compiler's, or what is wrong with the contexts). A batch that fits keeps fitting when any of
        its contexts shrinks (the compiler's placement guarantees it; the tests check it)."""
        try:
            self.program(contexts)
        except (ValueError, CompileError) as error:
            return str(error)
        return None

    def run(self, tokens: Sequence[int], caches: Sequence[tuple[np.ndarray, np.ndarray]],
            check: bool = False) -> Step:
        """One step for the batch: request i feeds tokens[i] and attends caches[i] = (kc, vc) rows.

        With `check`, the program's integer semantics (numpy, no machine) are computed too and every
        output must equal the machine model's (MachineMismatch if not)."""
        tokens, contexts = _checked_batch(tokens, caches)
        order = sorted(range(len(tokens)), key=lambda i: -contexts[i])  # stable: ties keep their order
        key = tuple(contexts[i] for i in order)
        program = self.program(key)
        feeds: dict = {"x": np.asarray([self.m["E"][tokens[i]] for i in order], dtype=np.float64)}
        for j, i in enumerate(order):
            if contexts[i] > 1:
                names = T.slot_names(len(order), j)
                feeds[names.kc], feeds[names.vc] = caches[i]
        step = run_step(program, feeds, key, check=check)
        self.seen.add((program.name, key))
        position = {i: j for j, i in enumerate(order)}
        return step.select([position[i] for i in range(len(tokens))])


def _checked_batch(tokens, caches) -> tuple[list[int], list[int]]:
    """The tokens as ints and each request's context, or ValueError naming the request."""
    try:
        tokens, caches = list(tokens), list(caches)
    except TypeError:
        raise ValueError("tokens and caches must be lists, one entry per request") from None
    if len(tokens) != len(caches) or not tokens:
        raise ValueError(f"a batch of {len(tokens)} tokens and {len(caches)} caches")
    for i, t in enumerate(tokens):
        if isinstance(t, bool | np.bool_) or not isinstance(t, int | np.integer) or not 0 <= t < T.V:
            raise ValueError(f"request {i}: token {t!r} is not a token 0..{T.V - 1}")
    contexts = []
    for i, pair in enumerate(caches):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValueError(f"request {i}: the cache must be a pair (kc, vc) of row arrays")
        try:
            kc, vc = np.shape(pair[0]), np.shape(pair[1])
        except ValueError:
            raise ValueError(f"request {i}: cached rows of uneven lengths") from None
        empty = kc in ((0,), (0, T.D)) and vc in ((0,), (0, T.D))  # context 1: no rows
        if not empty and (kc != vc or len(kc) != 2 or kc[1] != T.D):
            raise ValueError(f"request {i}: cached rows of shapes {kc} and {vc}; both must be (n, {T.D})")
        contexts.append(kc[0] + 1)
    return [int(t) for t in tokens], contexts
