"""The tiny model and the Chapter 12 host: the rule on the chip, and the chip against the float model."""

from __future__ import annotations

import math

import capra
import numpy as np
import paged_lm as PL
import pytest
import replay
import tiny_lm as T
from conftest import needs_simulators
from replay import image


def rule(start: int, n: int) -> list[int]:
    toks = [start]
    for _ in range(n):
        toks.append((5 * toks[-1] + 3) % 16)
    return toks


def test_f_next_is_the_rule():
    assert [T.f_next(t) for t in range(16)] == [(5 * t + 3) % 16 for t in range(16)]


def test_float_step_attention_is_a_distribution_over_cache_and_new_token():
    m = T.make_model("random", 4)
    kc = [T.mv(m["E"][t], m["Wk"]) for t in (1, 2, 3)]
    vc = [T.mv(m["E"][t], m["Wv"]) for t in (1, 2, 3)]
    logits, k, v, info = T.float_step(m, 5, kc, vc)
    assert len(logits) == T.V and len(info["p"]) == 4
    assert abs(sum(info["p"]) - 1) < 1e-12
    assert k == T.mv(m["E"][5], m["Wk"]) and v == T.mv(m["E"][5], m["Wv"])


def test_float_step_matches_a_from_scratch_formula():
    m = T.make_model("random", 9)
    toks = [3, 1, 4, 1, 5]
    x = np.array([m["E"][t] for t in toks])
    keys, values = x @ m["Wk"], x @ m["Wv"]
    q = x[-1] @ m["Wq"]
    s = keys @ q / math.sqrt(T.D)
    p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    h = x[-1] + (p @ values) @ m["Wo"]
    y = h + np.maximum(h @ m["W1"], 0) @ m["W2"]
    logits, _, _, _ = T.float_step(m, toks[-1], keys[:-1].tolist(), values[:-1].tolist())
    assert np.allclose(logits, y @ m["Wout"], atol=1e-12)


def test_structured_model_follows_the_rule_in_float_for_every_start():
    m = T.make_model("structured")
    for start in range(16):
        toks, kc, vc = [start], [], []
        for _ in range(32):
            lg, k, v, _ = T.float_step(m, toks[-1], kc, vc)
            kc.append(k)
            vc.append(v)
            toks.append(lg.index(max(lg)))
        assert toks == rule(start, 32)


def chapter12_host(m: dict, steps: int) -> PL.PagedChip:
    """Chapter 12's host: the cache kept as plain lists, no window."""
    return PL.PagedChip(m, steps, W=None, paged=False, n_pages=-(-steps // 4) + 1)


@pytest.fixture(scope="module")
def structured_host():
    return chapter12_host(T.make_model("structured"), 32)


def test_structured_model_follows_the_rule_on_the_chip_for_every_start(structured_host):
    for start in range(16):
        toks, records = structured_host.generate(start, 32)
        assert toks == rule(start, 32), f"start {start}"
        assert [r["tok"] for r in records] == rule(start, 32)[1:]
    assert sorted(structured_host.progs) == list(range(1, 33))


def test_machine_model_equals_the_programs_integer_semantics(structured_host):
    """Every output of every step: the generated code on the machine model against the numpy
    integer semantics of the same program (capra.run without the machine)."""
    m = structured_host.m
    tok, kc, vc = 7, [], []
    for n in range(1, 13):
        feed = {"x": [list(m["E"][tok])]}
        if n > 1:
            feed["kc"], feed["vc"] = kc, vc
        P = structured_host.program(n)
        on_machine, _mach = capra.run(P, feed, machine=True)
        in_numpy = capra.run(P, feed)
        for name in P.outputs:
            assert on_machine[name][0] == in_numpy[name][0], f"context {n}: {name} differs"
        kc = kc + [on_machine["k_new"][1][0]]
        vc = vc + [on_machine["v_new"][1][0]]
        tok = on_machine["tok"][0][0][0]


@pytest.mark.parametrize("seed", [1, 2, 3, *(pytest.param(s, marks=pytest.mark.slow) for s in (4, 5))])  # 4, 5: full
def test_random_model_logits_stay_within_15_percent_of_float(seed):
    """Every start token, every step of a 16-step decode, teacher-forced on the float tokens."""
    m = T.make_model("random", seed)
    host = chapter12_host(m, 16)
    for start in range(16):
        ref, kc, vc = [start], [], []
        floats = []
        for _ in range(16):
            lg, k, v, _ = T.float_step(m, ref[-1], kc, vc)
            floats.append(lg)
            kc.append(k)
            vc.append(v)
            ref.append(lg.index(max(lg)))
        _toks, records = host.generate(start, 16, force=ref)
        for L, (r, lg) in enumerate(zip(records, floats), start=1):
            err = math.sqrt(sum((a - b) ** 2 for a, b in zip(r["logits"], lg)) / sum(b * b for b in lg))
            assert err < 0.15, f"seed {seed} start {start} step {L}: relative logit error {err:.3f}"


def test_the_decode_graph_names_one_request_as_the_book_and_a_batch_per_request():
    m = T.make_model("random", 3)
    one = T.build_graph(m, 5)
    assert one.inputs == ["x", "kc", "vc"] and one.outputs == ["logits", "tok", "k_new", "v_new"]
    assert [one.shape(n) for n in one.inputs] == [(1, T.D), (4, T.D), (4, T.D)]
    assert T.build_graph(m, 1).inputs == ["x"]
    two = T.decode_graph(m, [5, 2])
    assert two.inputs == ["x", "kc_0", "vc_0", "kc_1", "vc_1"]
    assert two.outputs == ["logits", "tok", "k_0", "v_0", "k_1", "v_1"]


@needs_simulators
def test_decode_replays_on_both_simulators(structured_host):
    _toks, records = structured_host.generate(0, 32)
    verdicts = replay.replay([image.record(r["code"], r["ext"]) for r in records], name="decode32")
    assert all(v.passed for v in verdicts), [v.problems for v in verdicts]
    for v in verdicts:
        assert v.line.startswith("PASS: 32 programs")
        assert v.counters == [r["counters"] for r in records]
