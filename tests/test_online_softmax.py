"""The online-softmax modes of SMAX (STEP, ACC, NORM) and attention tiled over the context.

Expected values come from float arithmetic written here (numpy exp and division), not from
capra.isa's integer functions; the replays compare the RTL with the machine model word for word
and counter for counter.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import replay
from capra import asm, config, isa, tiled_attention
from capra.machine import ProgramError
from capra_cli.tiled_attention import case as tiled_case
from conftest import needs_simulators
from replay import image

RNG = np.random.default_rng(7)


def _float_step(x, m_old, l_old, scale):
    m = max(m_old, x.max())
    return 127 * np.exp((x - m) * scale), m, l_old * np.exp((m_old - m) * scale)


def test_step_matches_exp_relative_to_the_running_max():
    scale = 1 / 16
    for _ in range(50):
        x = RNG.integers(-128, 128, RNG.integers(1, 70))
        m_old, l_old = int(RNG.integers(-128, 128)), int(RNG.integers(0, 1 << 20))
        p, m, l_new, alpha = isa.softmax_step(x, m_old & 0xFFFFFFFF, l_old, isa.SM_SCALE_ONE)
        fp, fm, fl = _float_step(x, m_old, l_old, scale)
        assert ((m ^ 0x80000000) - 0x80000000) == fm
        assert np.all(np.abs(p - np.minimum(127, fp)) <= 127 * 0.035 + 0.5)  # table step 1/16, rounding
        assert abs(alpha / 2**15 - np.exp((m_old - fm) * scale)) <= 0.035 * np.exp((m_old - fm) * scale) + 1e-4
        assert abs(l_new - (fl + p.sum())) <= 0.035 * fl + l_old * 2**-15 + 2  # alpha rounds to 2^-15


def test_acc_and_norm_against_float():
    o = RNG.integers(-(1 << 28), 1 << 28, 64)
    t = RNG.integers(-(1 << 20), 1 << 20, 64)
    alpha = int(RNG.integers(0, 1 << 15))
    got = isa.softmax_acc(o, t, alpha)
    assert np.all(np.abs(got - (o * alpha / 2**15 + t)) <= 1)
    l_word = int(RNG.integers(1, 1 << 24))
    for k in (0, 3, 15):
        o = RNG.integers(-127 * l_word, 127 * l_word, 64) >> k
        got = isa.softmax_norm(o, l_word, k)
        want = np.clip(np.round(o / l_word * 2**k), -128, 127)
        assert np.all(np.abs(got - want) <= 1)


def test_modes_refuse_bad_operands_naming_them():
    with pytest.raises(ProgramError, match="state"):
        isa.effects(isa.Instr.decode(asm.smax_step(0, 1, 100, 16)))  # the state inside the source
    with pytest.raises(ProgramError, match="mode 4"):
        isa.effects(isa.Instr(isa.OP_SMAX, sub=4, cnt=4, a=0, c=8))
    with pytest.raises(ProgramError, match="no flags"):
        isa.effects(isa.Instr(isa.OP_SMAX, sub=isa.SM_ACC, flags=1, cnt=4, a=0, b=100, c=8))
    with pytest.raises(ValueError, match="shift"):
        asm.smax_norm(0, 100, 200, 4, shift=16)


def _case(t, needle=True, seed=0):
    """The tool's float reference case (random int8 q, K, V and their float softmax attention),
    built into one tiled program with logits of scale 1/8."""
    q8, k8, v8, logit_scale, sv, ref = tiled_case(t, needle, seed)
    qa = int(round(logit_scale * 8 * 2**24))
    return tiled_attention.build(q8, k8, v8, qa, 24, smul=2048), ref, sv


@pytest.mark.parametrize("t", [100, 1024])
def test_tiled_attention_is_close_to_float_softmax(t):
    prog, ref, sv = _case(t, seed=t)
    assert prog.context > prog.tile  # several tiles, a shorter last one at t = 100
    out, m = tiled_attention.run(prog)
    rel = np.linalg.norm(out * sv - ref) / np.linalg.norm(ref)
    assert rel < 0.03, rel
    if t == 1024:  # the K/V stream dominates
        assert tiled_attention.word_bound(prog) / m.counters.cycles > 0.9


def test_without_the_online_state_the_output_is_wrong():
    """A mutant that forgets the running maximum (alpha = 1 always) is caught by the float check."""
    prog, ref, sv = _case(300, seed=3)
    orig = isa.softmax_acc
    try:
        isa.softmax_acc = lambda o, t, a: orig(o, t, 1 << 15)
        out, _ = tiled_attention.run(prog)
    finally:
        isa.softmax_acc = orig
    assert np.linalg.norm(out * sv - ref) / np.linalg.norm(ref) > 0.05


def _mode_programs(count: int = 12) -> list[image.Record]:
    records = []
    for seed in range(count):
        rng = random.Random(seed)
        ext = [rng.getrandbits(32) for _ in range(300)]
        ext[200], ext[201] = rng.getrandbits(32), rng.choice([0, 1, 127, rng.getrandbits(20), rng.getrandbits(32)])
        n, na, nn = rng.randint(1, 70), rng.randint(1, 64), rng.randint(1, 64)
        code = asm.load(0, 0, 1, 200) + asm.load(1024, 200, 1, 3) + asm.wait()
        code += asm.smax_step(0, 1024, 0 if seed % 3 == 0 else 2048, n, smul=rng.choice([1, 1024, 0xFFFF, 300]))
        code += asm.smax_acc(0, 1024, 100, na) + asm.smax_norm(100, 1024, 2200, nn, shift=rng.randrange(16))
        code += asm.store(0 if seed % 3 == 0 else 2048, 400, 1, isa.words_for(n)) + asm.store(1024, 450, 1, 3)
        code += asm.store(100, 500, 1, na) + asm.store(2200, 600, 1, isa.words_for(nn)) + asm.halt()
        records.append(image.record(code, ext))
    return records


def _replay(records, name, *sims):
    for v in replay.replay(records, name=name, latency=isa.EXT_LATENCY,
                           simulators=tuple(replay.simulators.BY_NAME[s] for s in sims)):
        assert v.passed, v.problems
        assert v.counters == [r.counters for r in records]


@needs_simulators
def test_mode_programs_replay_in_both_simulators():
    records = _mode_programs()
    _replay(records, "online_modes", "verilator", "icarus")


@needs_simulators
def test_tiled_attention_replays_in_both_simulators():
    prog, _, _ = _case(128, seed=5)
    with config.use(tiled_attention.ext_config(prog)):
        rec = image.record(prog.code, prog.ext)
        _replay([rec], "tiled_attention_128", "verilator", "icarus")
    assert rec.counters[0] == tiled_attention.run(prog)[1].counters.cycles


def test_rows_with_their_own_sinks_and_a_context_in_parts():
    """Two query rows, one with a sink logit and one without, over 700 keys: the float attention
    with each row's sink within 3%; the program split into three parts (tiles of 48, the states and
    the int32 output handed on through external memory) gives the words of the one program, and
    both are the integer reference's (tiled_attention.reference, numpy with the chip's arithmetic)."""
    t, d, tile, smul, sinks = 700, 64, 48, 2048, [104, None]  # row 0: a sink of 13, its needle scores 13.8
    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((2, d)), rng.standard_normal((t, d)), rng.standard_normal((t, d))
    k[t // 3] = 2.0 * q[0] / np.linalg.norm(q[0]) * np.sqrt(d)  # each row's needle: its output is large
    k[t // 2] = 2.5 * q[1] / np.linalg.norm(q[1]) * np.sqrt(d)
    s = [np.abs(x).max() / 127 for x in (q, k, v)]
    q8, k8, v8 = [np.clip(np.round(x / c), -127, 127).astype(np.int64) for x, c in zip((q, k, v), s)]
    qa = int(round(s[0] * s[1] / np.sqrt(d) * 8 * 2**24))  # logits of scale 1/8
    whole = tiled_attention.build(q8, k8, v8, qa, 24, smul=smul, tile=tile, sink=sinks)
    out_whole, _ = tiled_attention.run(whole)
    bounds = [(0, 240), (240, 480), (480, t)]
    states, o32 = [tiled_attention.state_init(x) for x in sinks], None
    for i, (lo, hi) in enumerate(bounds):
        part = tiled_attention.build_part(q8, k8[lo:hi], v8[lo:hi], qa, 24, smul, tile, states, o32,
                                          last=i == len(bounds) - 1)
        out_parts, m = tiled_attention.run(part)
        if not part.last:
            states, o32 = tiled_attention.carry(part, m)
    assert np.array_equal(out_parts, out_whole)
    assert np.array_equal(out_whole, tiled_attention.reference(q8, k8, v8, qa, 24, smul, tile, sinks))
    logits = (q8 * s[0]) @ (k8 * s[1]).T / np.sqrt(d)
    for r, sink in enumerate(sinks):
        extra = [] if sink is None else [sink / 8]  # the sink in the logits' scale of 1/8, a zero value
        top = max([logits[r].max(), *extra])
        e = np.exp(logits[r] - top)
        want = e @ (v8 * s[2]) / (e.sum() + sum(np.exp(x - top) for x in extra))
        rel = np.linalg.norm(out_whole[r] * s[2] - want) / np.linalg.norm(want)
        assert rel < 0.03, (r, rel)
