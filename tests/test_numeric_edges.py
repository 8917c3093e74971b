"""Edges of the quantizer and the machine model that the broader tests did not reach.

Each test here closes a mutant that survived ``make mut-all`` (model/mutation.py): the broad
tests compare the machine model with an integer reference that reuses the compiler's own scales
and constants, and the random replay programs rarely make a rare case visible. So every expected
value below comes from the written scheme (docs/quantization.md, docs/isa.md), computed here with
plain Python integers or floats, never from the code under test.
"""

from __future__ import annotations

import random

import capra
import numpy as np
import pytest
from capra import asm, isa
from capra.graph import Graph
from capra.machine import run_program, softmax_int8
from capra.quant import quantize, scale_for
from int_reference import eval_program, softmax_ref


def pack(values) -> list[int]:
    v = np.zeros(-(-len(values) // 4) * 4, dtype=np.int8)
    v[: len(values)] = values
    return [int(w) for w in v.view(np.uint32)]


def int8_words(words, n) -> list[int]:
    return [int(x) for x in np.asarray(words, dtype=np.uint32).view(np.int8)[:n]]


# ---- the quantizer -------------------------------------------------------------------------------


def test_scale_maps_the_calibrated_maximum_to_exactly_127():
    assert scale_for(127.0) == 1.0
    assert scale_for(2.54) == 2.54 / 127
    g = Graph("one")
    g.relu("y", g.input("x", (1, 4)))
    g.set_outputs(["y"])
    P = capra.compile_graph(g, [{"x": [[-0.5, 0.25, 3.0, -1.0]]}])
    assert P.tensors["x"].scale == 3.0 / 127
    assert list(quantize([3.0, -3.0], P.tensors["x"].scale)) == [127, -127]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "3"])
def test_a_scale_comes_only_from_a_finite_non_negative_magnitude(bad):
    """scale_for(nan) was 1.0 (nan > 0 is False), the scale of an all-zero tensor."""
    with pytest.raises(capra.CompileError, match="largest magnitude"):
        scale_for(bad)
    with pytest.raises(capra.CompileError, match="largest magnitude of node 'w'"):
        scale_for(bad, "node 'w'")
    assert scale_for(0.0) == 1.0


@pytest.mark.parametrize("values,scale,match", [
    ([1.0, float("nan")], 1.0, r"weights holds nan at index \(1,\)"),
    ([float("-inf")], 1.0, "weights holds -inf"),
    ([1.0], 0.0, "scale of weights must be > 0"),
    ([1.0], float("nan"), "scale of weights must be finite"),
    (["1"], 1.0, "weights must hold real numbers"),
])
def test_quantize_refuses_what_has_no_int8(values, scale, match):
    """numpy casts NaN to an arbitrary integer (and warns at most): quantize must refuse it."""
    with pytest.raises(ValueError, match=match):
        quantize(values, scale, "weights")


def test_values_beyond_the_calibrated_range_saturate_symmetrically_at_127():
    assert list(quantize([1000.0, -1000.0, 127.4, -127.6], 1.0)) == [127, -127, 127, -127]
    g = Graph("copy")
    g.relu("y", g.input("x", (1, 8)))
    g.set_outputs(["y"])
    P = capra.compile_graph(g, [{"x": np.linspace(-1, 1, 8)[None, :]}])
    feeds = {"x": np.array([[-5.0, -1.0, 0.0, 2.0, -3.0, 0.5, -0.25, 4.0]])}  # up to 5x the calibration
    out, _mach = capra.run(P, feeds, machine=True)
    assert out["y"][0] == eval_program(P, feeds)["y"]


def test_a_standalone_relu_keeps_its_inputs_scale():
    """VEC RELU copies int8 values unchanged, so the output must be read with the input's scale:
    with negatives dominating the calibration a relu given its own scale is off by their ratio."""
    g = Graph("relu")
    g.relu("y", g.input("x", (1, 8)))
    g.set_outputs(["y"])
    calib = [{"x": np.array([[-4.0, -3.0, -2.0, -1.0, 0.0, 0.5, 1.0, 0.25]])}]
    P = capra.compile_graph(g, calib)
    got = np.array(capra.run(P, calib[0])["y"][1])
    want = np.maximum(calib[0]["x"], 0.0)
    assert np.abs(got - want).max() <= P.tensors["x"].scale, f"relu output {got} for {want}"


def test_a_softmax_sink_is_quantized_with_the_input_scale():
    """The sink is a logit, so it becomes int8 the same way as the softmax's input: divided by its scale."""
    rng = np.random.default_rng(7)
    g = Graph("sink")
    g.softmax("p", g.input("x", (2, 12)), sink=1.5)
    g.set_outputs(["p"])
    calib = [{"x": rng.normal(0, 1.5, (2, 12))} for _ in range(3)]
    P = capra.compile_graph(g, calib)
    for feeds in calib:
        got = np.array(capra.run(P, feeds)["p"][1])
        want = g.evaluate(feeds)["p"]
        assert np.abs(got - want).max() <= 0.03, f"quantized softmax with a sink {got} vs float {want}"


# ---- the machine model ---------------------------------------------------------------------------


def test_softmax_matches_the_independent_formula_on_many_random_rows():
    """The reciprocal and the final rounding differ from a near miss only now and then, so compare
    thousands of rows, not a handful."""
    r = random.Random(11)
    for _ in range(3000):
        n = r.randint(1, 24)
        x = [r.randint(-128, 127) for _ in range(n)]
        sink = r.choice([None, r.randint(-128, 127)])
        smul = r.choice([isa.SM_SCALE_ONE, r.randint(1, 400), r.randint(1, 65535)])
        assert list(softmax_int8(np.array(x), sink, smul)) == softmax_ref(x, sink, smul), (x, sink, smul)


def test_mm_accumulator_plus_bias_wraps_at_32_bits():
    """An int32 bias near the limit plus a positive dot product wraps, as a 32-bit register does:
    the raw int32 result is negative, and so is its requantized int8 (saturated to -128, not 127)."""
    a, b = [100, 100, 100, 100], [100, 100, 100, 100]  # dot product 40,000
    bias = (1 << 31) - 1000
    ext = pack(a) + pack(b) + [bias]
    code = (asm.load(0, 0, 1, 3) + asm.wait() + asm.qcfg(qa=1, shift=0, bias=2)
            + asm.mm(0, 1, 100, 1, 4, 1, bias=True) + asm.mm(0, 1, 101, 1, 4, 1, bias=True, out8=True)
            + asm.store(100, 10, 1, 2) + asm.halt())
    m = run_program(code, ext, 16)
    want = (40_000 + bias + (1 << 31)) % (1 << 32) - (1 << 31)  # two's complement, by hand
    assert want < 0
    assert int(np.uint32(m.ext[10]).view(np.int32)) == want
    assert int8_words(m.ext[11:12], 1) == [-128]


def test_vec_max_takes_the_larger_of_each_pair():
    a = [5, -7, 127, -128, 0, 3, -1]
    b = [-5, 7, -128, 127, 0, 3, -2]
    code = (asm.load(0, 0, 1, 4) + asm.wait() + asm.vec(isa.VEC_MAX, 0, 10, 7, b=2)
            + asm.store(10, 20, 1, 2) + asm.halt())
    m = run_program(code, pack(a) + pack(b), 32)
    assert int8_words(m.ext[20:22], 7) == [max(x, y) for x, y in zip(a, b)]
