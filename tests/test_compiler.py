"""The compiler: random graphs compiled and run on the machine model equal an independent integer
reference exactly; a sample replays on both simulators; bad input gets an error naming node and limit."""

from __future__ import annotations

import dataclasses
import random

import capra
import host
import numpy as np
import paged_lm
import pytest
import replay
import tiny_lm
from capra import isa
from capra.graph import Graph, Node
from capra.isa import Instr
from capra.machine import Machine
from conftest import needs_simulators
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from int_reference import eval_program
from replay import image


def random_graph(seed: int) -> tuple[Graph, list[dict]]:
    """A small random graph over the ops GA2 supports, and calibration feeds for it.

    Weights are scaled by 1/sqrt(fan-in) so values stay of order one, as in a real network.
    """
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    g = Graph(f"random{seed}")
    rows, cols = r.randint(1, 4), r.randint(1, 20)
    cur = g.input("x", (rows, cols))
    extra_inputs: dict[str, tuple[int, int]] = {"x": (rows, cols)}
    probabilities = False  # cur is a softmax output (perhaps through relu): its scale is fixed at 1/128
    for i in range(r.randint(1, 5)):
        op = r.choice(["matmul", "matmul_t", "add", "mul", "relu", "softmax"])
        rr, cc = g.shape(cur)
        if op == "matmul":
            m = r.randint(1, 20)
            w = g.const(f"w{i}", rng.normal(0, 1 / np.sqrt(cc), (cc, m)))
            cur = g.matmul(f"mm{i}", cur, w, relu=r.random() < 0.3)
        elif op == "matmul_t":
            m = r.randint(1, 12)
            extra_inputs[f"y{i}"] = (m, cc)
            cur = g.matmul(f"mt{i}", cur, g.input(f"y{i}", (m, cc)), transpose_b=True, scale=r.uniform(0.1, 1))
        elif op in ("add", "mul"):
            other = g.matmul(f"p{i}", cur, g.const(f"pw{i}", rng.normal(0, 1 / np.sqrt(cc), (cc, cc))))
            cur = (g.add if op == "add" else g.mul)(f"{op}{i}", cur, other)
        elif op == "relu":
            cur = g.relu(f"relu{i}", cur)
        else:
            # a probability (scale 1/128) cannot hold a sink beyond +-1: no sink after a softmax
            sink = None if probabilities else r.choice([None, r.uniform(-3, 3)])
            cur = g.softmax(f"sm{i}", cur, sink=sink)
        probabilities = op == "softmax" or (op == "relu" and probabilities)
    outs = [cur]
    if r.random() < 0.7:
        outs.append(g.argmax("am", cur))
    g.set_outputs(outs)
    calib = [{name: rng.normal(0, 1, shape) for name, shape in extra_inputs.items()} for _ in range(3)]
    return g, calib


def check_exact(seed: int) -> capra.Program:
    g, calib = random_graph(seed)
    P = capra.compile_graph(g, calib)
    feeds = {k: v * 0.9 for k, v in calib[0].items()}
    out, _mach = capra.run(P, feeds, machine=True)
    ref = capra.run(P, feeds)
    independent = eval_program(P, feeds)
    for name in P.outputs:
        assert out[name][0] == independent[name], f"seed {seed}: machine and reference differ on {name}"
        assert ref[name][0] == independent[name], f"seed {seed}: numpy semantics and reference differ on {name}"
    return P


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_random_graphs_run_exactly_on_the_machine_model(seed):
    check_exact(seed)


@needs_simulators
@pytest.mark.parametrize("seeds", [pytest.param(range(6), id="0-5"),
                                   pytest.param(range(6, 12), id="6-11", marks=pytest.mark.slow)])
def test_sample_of_compiled_graphs_replays_on_both_simulators(seeds):
    """Compiled random graphs in both simulators (six in make test, six more in test-full: Icarus
    runs them at a few thousand cycles a second)."""
    records = []
    for seed in seeds:
        g, calib = random_graph(seed)
        P = capra.compile_graph(g, calib)
        records.append(image.record(P.code, capra.ext_image(P, calib[1])))
    verdicts = replay.replay(records, name=f"compiled_graphs_{seeds[0]}")
    assert all(v.passed and v.line.startswith(f"PASS: {len(seeds)} programs") for v in verdicts), \
        [v.problems for v in verdicts]


# ---- scheduling: graphs whose loads fill the scratchpad, and the decode step ----------------------


def chain_graph(n_w: int, k: int, m: int, rows: int) -> tuple[Graph, list[dict]]:
    """x (rows x k) through n_w matmuls with m outputs each: big enough that the weights are loaded
    in column chunks and the last loads reach the banks of the computed tensors at the top."""
    rng = np.random.default_rng(n_w * 1000 + k * 10 + rows)
    g = Graph(f"chain{n_w}x{k}x{m}x{rows}")
    cur, width = g.input("x", (rows, k)), k
    for i in range(n_w):
        cur = g.matmul(f"mm{i}", cur, g.const(f"w{i}", rng.normal(0, 1 / np.sqrt(width), (width, m))))
        width = m
    g.set_outputs([cur])
    return g, [{"x": rng.normal(0, 1, (rows, k))} for _ in range(3)]


@pytest.mark.parametrize("shape", [(3, 64, 64, 4), (2, 64, 96, 2), (3, 60, 68, 2)])
def test_graphs_that_fill_the_scratchpad_run_exactly(shape):
    """The last weight chunks land in the bank group where the results are written: the scheduler
    must keep a matmul's writes off the banks a LOAD is writing (else the machine model raises
    HazardError), and the results must still be exact."""
    g, calib = chain_graph(*shape)
    P = capra.compile_graph(g, calib)
    out, _mach = capra.run(P, calib[1], machine=True)
    independent = eval_program(P, calib[1])
    for name in P.outputs:
        assert out[name][0] == independent[name]


def stalls_with_room_in_the_queue(code: list[int], ext) -> list[int]:
    """The WAITs that stall while fewer than DMA_QUEUE transfers are in flight and a LOAD is still
    to come: there the DMA engine could have been fetching that LOAD instead of idling."""
    instrs = [Instr.decode(code[i:i + 4]) for i in range(0, len(code), 4)]
    last_load = max((pc for pc, ins in enumerate(instrs) if ins.op == isa.OP_LOAD), default=-1)
    mach = Machine.with_ext(ext, capra.isa.EXT_MEMORY)
    found = []
    step = mach.step

    def watch(pc: int, ins: Instr) -> bool:
        if ins.op == isa.OP_WAIT and pc < last_load and mach.dma.drained_at(mach.t, ins.cnt) > mach.t \
                and len(mach.dma.in_flight(mach.t)) < isa.DMA_QUEUE:
            found.append(pc)
        return step(pc, ins)

    mach.step = watch
    mach.run(list(code))
    return found


def decode_records(W: int | None = None, steps: int = 32) -> tuple[paged_lm.PagedChip, list[dict]]:
    chip = paged_lm.PagedChip(tiny_lm.make_model("structured"), steps, W)
    return chip, chip.generate(0, steps)[1]


def test_the_dma_never_idles_behind_a_wait():
    """The scheduler fills the DMA queue before it waits for an operand, in every decode step and
    in random graphs. (Not in chain_graph's: there a matmul waits out LOADs into its own banks, and
    the LOADs still to come would write them too.)"""
    _chip, records = decode_records()
    programs = [(r["code"], r["ext"]) for r in records]
    for seed in range(20):
        g, calib = random_graph(seed)
        P = capra.compile_graph(g, calib)
        programs.append((P.code, capra.ext_image(P, calib[0])))
    for i, (code, ext) in enumerate(programs):
        assert stalls_with_room_in_the_queue(code, ext) == [], f"program {i}"


def test_cached_rows_load_before_the_weight_written_beside_them():
    """k_new is written into the K region right after kc: its matmul cannot start until kc is in
    (the DMA may not write banks the matmul writes), so kc's LOAD goes before Wk's."""
    chip, _records = decode_records(steps=4)
    for ctx in (2, 3, 4):
        P = chip.progs[ctx]
        instrs = [Instr.decode(P.code[i:i + 4]) for i in range(0, len(P.code), 4)]
        loads = [ins.a for ins in instrs if ins.op == isa.OP_LOAD]
        for rows, weight in (("kc", "Wk"), ("vc", "Wv")):
            assert loads.index(P.tensors[rows].sram) < loads.index(P.tensors[weight].sram), (ctx, rows)


@pytest.mark.parametrize("seed", range(40))
def test_quantized_graph_tracks_float(seed):
    """The scales and multipliers themselves are right: int8 results follow the float graph.

    (The exact tests above take the program's scales as given; this one judges them.) A chain of
    int8 steps loses a little at each, so the bound is loose: 15% of the output's largest value.
    """
    g, calib = random_graph(seed)
    P = capra.compile_graph(g, calib)
    out = capra.run(P, calib[0])
    want = g.evaluate(calib[0])[P.outputs[0]]
    got = np.array(out[P.outputs[0]][1])
    assert np.abs(got - want).max() <= 0.15 * np.abs(want).max() + 0.02, f"seed {seed}"


# ---- bad input ----------------------------------------------------------------------------------


def tiny_graph(k: int = 8, m: int = 4) -> tuple[Graph, list[dict]]:
    g = Graph("tiny")
    x = g.input("x", (1, k))
    g.matmul("y", x, g.const("w", np.ones((k, m))))
    g.set_outputs(["y"])
    return g, [{"x": np.ones((1, k))}]


def test_missing_calibration_is_an_error():
    g, _ = tiny_graph()
    with pytest.raises(capra.CompileError, match="missing calibration"):
        capra.compile_graph(g, [])
    with pytest.raises(capra.CompileError, match="lacks input 'x'"):
        capra.compile_graph(g, [{"z": [1]}])


def test_unsupported_op_names_the_node():
    g, calib = tiny_graph()
    g.nodes["conv1"] = Node("conv1", "conv", ["x"], (1, 8))
    with pytest.raises(capra.CompileError, match="node 'conv1': op 'conv' is not supported"):
        capra.compile_graph(g, calib)


def test_reduction_too_long_names_node_and_limit():
    g, calib = tiny_graph(k=1100)
    with pytest.raises(capra.CompileError, match=r"matmul 'y': reduction length 1100 exceeds GA2's limit 1024"):
        capra.compile_graph(g, calib)


def test_graph_too_large_for_external_memory_names_node_and_limit(monkeypatch):
    g, calib = tiny_graph(k=64, m=8)  # 128 words of weights
    with capra.config.use(capra.config.Config(ext_memory=40)), \
            pytest.raises(capra.CompileError, match="node 'w'.*more than the external memory of 40"):
        capra.compile_graph(g, calib)


def test_graph_too_large_for_scratchpad_names_node_and_limit():
    g = Graph("big")
    x = g.input("x", (150, 64))  # 2,400 words and the weights fit; the result does not
    g.matmul("y", x, g.const("w", np.ones((64, 64))))
    g.set_outputs(["y"])
    with pytest.raises(capra.CompileError, match="node 'y'.*beyond the SRAM of 4096 words"):
        capra.compile_graph(g, [{"x": np.ones((150, 64))}])


def test_shape_mismatch_is_a_graph_error():
    g = Graph("bad")
    x = g.input("x", (1, 8))
    with pytest.raises(capra.GraphError, match="matmul 'y'"):
        g.matmul("y", x, g.const("w", np.ones((7, 4))))


def test_sink_outside_its_inputs_range_names_the_node():
    g = Graph("sink")
    x = g.input("x", (1, 8))
    p = g.softmax("p", x)
    g.softmax("pp", p, sink=3.0)  # a probability has scale 1/128: 3.0 does not fit its int8
    g.set_outputs(["pp"])
    with pytest.raises(capra.CompileError, match="softmax 'pp': sink 3 is outside the int8 range"):
        capra.compile_graph(g, [{"x": np.ones((1, 8))}])


def test_wrong_input_shape_at_run_time_names_the_input():
    g, calib = tiny_graph()
    P = capra.compile_graph(g, calib)
    with pytest.raises(ValueError, match="input 'x' has 5 values, the program expects 1 x 8"):
        capra.run(P, {"x": [1, 2, 3, 4, 5]})


# ---- nothing passes that should fail: NaN, infinities, non-numbers, float shapes -------------------
# Each of these compiled (or ran) silently before: a NaN weight or calibration value gave its tensor
# the scale 1.0 (max(0.0, nan) is 0.0), a range of 0 or NaN did the same, a NaN input ran as an
# arbitrary int8, a shape of 2.7 became 2 and a transposed calibration feed was reshaped back.

BAD_NUMBERS = [float("nan"), float("inf"), -float("inf")]


def ranged_graph() -> Graph:
    """x (2 x 4, range group "x") @ w (4 x 3) -> y: one tensor of every kind the checks cover."""
    g = Graph("ranged")
    x = g.input("x", (2, 4), range_group="x")
    g.matmul("y", x, g.const("w", np.full((4, 3), 0.5)))
    g.set_outputs(["y"])
    return g


def good_feed() -> dict:
    return {"x": np.arange(8.0).reshape(2, 4) / 8}


@pytest.mark.parametrize("where", ["const", "edited const", "calibration", "run", "machine", "ext_image"])
@settings(max_examples=8, deadline=None)
@given(row=st.integers(0, 1), col=st.integers(0, 3), bad=st.sampled_from(BAD_NUMBERS))
def test_a_non_finite_value_anywhere_is_refused_naming_its_tensor(where, row, col, bad):
    """One NaN or infinity at any index of a weight (4 x 3: index (col, row)), a calibration set
    or a run-time input (2 x 4: index (row, col))."""
    feed = good_feed()
    bad_feed = {"x": feed["x"].copy()}
    bad_feed["x"][row, col] = bad
    if where == "const":
        w = np.full((4, 3), 0.5)
        w[col, row] = bad
        with pytest.raises(capra.GraphError, match=rf"const 'w' holds .* at index \({col}, {row}\)"):
            Graph("g").const("w", w)
        return
    if where == "edited const":  # changed after the graph was built: compile_graph checks again
        g = ranged_graph()
        g.nodes["w"].attrs["value"][col, row] = bad
        with pytest.raises(capra.CompileError, match="const 'w'"):
            capra.compile_graph(g, [feed])
        return
    if where == "calibration":
        with pytest.raises(capra.CompileError, match=r"calibration set 1: input 'x' holds"):
            capra.compile_graph(ranged_graph(), [feed, bad_feed])
        return
    P = capra.compile_graph(ranged_graph(), [feed])
    entry = {"run": lambda: capra.run(P, bad_feed), "machine": lambda: capra.run(P, bad_feed, machine=True),
             "ext_image": lambda: capra.ext_image(P, bad_feed)}[where]
    with pytest.raises(ValueError, match=rf"input 'x' holds .* at index \({row}, {col}\)"):
        entry()


@pytest.mark.parametrize("edit, says", [
    (lambda g: setattr(g.nodes["y"], "shape", (2, 2)),
     r"node 'y' \(matmul\) has shape \(2, 2\), its inputs give \(2, 3\)"),
    (lambda g: setattr(g.nodes["y"], "shape", (2, 1)), r"its inputs give \(2, 3\)"),
    (lambda g: setattr(g.nodes["y"], "shape", (1, 3)), r"its inputs give \(2, 3\)"),
    (lambda g: setattr(g.nodes["x"], "shape", (2, 5)), r"matmul 'y': x is 2x5 but w has 4 rows"),
    (lambda g: setattr(g, "outputs", ["nope"]), r"output 'nope' is not a node"),
])
def test_a_node_edited_after_building_is_refused_before_it_is_compiled(edit, says):
    """A shape changed after the graph was built compiled, and ran with values the graph's own
    arithmetic does not give (2 x 3 from run, 2 x 2 from the machine)."""
    g = ranged_graph()
    edit(g)
    with pytest.raises(capra.CompileError, match=says):
        capra.compile_graph(g, [good_feed()])


@pytest.mark.parametrize("flag", ["relu", "transpose_b"])
@pytest.mark.parametrize("value", ["no", 1, None])
def test_a_matmul_flag_is_a_bool(flag, value):
    """relu="no" was stored and read as true (a relu applied), transpose_b="no" as transposed."""
    g = Graph("flags")
    x = g.input("x", (2, 4))
    with pytest.raises(capra.GraphError, match=f"{flag} must be True or False"):
        g.matmul("y", x, g.const("w", np.ones((4, 4))), **{flag: value})
    g.matmul("ok", x, g.const("v", np.ones((4, 4))), **{flag: np.bool_(False)})
    assert g.nodes["ok"].attrs[flag] is False


def test_run_takes_machine_as_a_bool():
    P = capra.compile_graph(ranged_graph(), [good_feed()])
    with pytest.raises(ValueError, match="machine must be True or False"):
        capra.run(P, good_feed(), machine="no")


def test_all_nan_calibration_is_refused():
    with pytest.raises(capra.CompileError, match="calibration set 0: input 'x' holds nan .*8 of 8 values"):
        capra.compile_graph(ranged_graph(), [{"x": np.full((2, 4), np.nan)}])


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, *BAD_NUMBERS, "2.0", True, None, [2.0]])
def test_a_range_must_be_a_positive_finite_number(bad):
    with pytest.raises(capra.CompileError, match="range of group 'x' must be"):
        capra.compile_graph(ranged_graph(), [good_feed()], ranges={"x": bad})


def test_a_valid_range_sets_the_groups_scale_and_ranges_must_be_a_mapping():
    P = capra.compile_graph(ranged_graph(), [good_feed()], ranges={"x": 2.54})
    assert P.tensors["x"].scale == 2.54 / 127  # the range maps to 127, whatever the calibration saw
    with pytest.raises(capra.CompileError, match="ranges must map"):
        capra.compile_graph(ranged_graph(), [good_feed()], ranges=[("x", 2.54)])


@pytest.mark.parametrize("sink", [*BAD_NUMBERS, "1.5"])
def test_a_softmax_sink_must_be_a_finite_number(sink):
    g = Graph("g")
    x = g.input("x", (1, 4))
    with pytest.raises(capra.GraphError, match="softmax 'p': sink must be"):
        g.softmax("p", x, sink=sink)


@pytest.mark.parametrize("scale", [*BAD_NUMBERS, 0.0, -0.5, "1"])
def test_a_matmul_scale_must_be_a_finite_positive_number(scale):
    g = Graph("g")
    x = g.input("x", (1, 4))
    with pytest.raises(capra.GraphError, match="matmul 'y': scale must be"):
        g.matmul("y", x, x, transpose_b=True, scale=scale)


@pytest.mark.parametrize("shape", [(2.7, 4), (2.0, 4), (True, 4), (0, 4), (2, -1), ("2", 4), (2,), 7, (2, 4, 1)])
def test_a_shape_is_two_positive_integers(shape):
    with pytest.raises(capra.GraphError, match="node 'x'"):
        Graph("g").input("x", shape)


def test_integer_shapes_of_any_integer_type_are_accepted():
    g = Graph("g")
    assert g.shape(g.input("x", (np.int64(2), 4))) == (2, 4)
    with pytest.raises(capra.GraphError, match="no node 'nope'"):
        g.relu("y", "nope")


def test_a_node_edited_to_a_float_shape_is_caught_at_compile_time():
    g = ranged_graph()
    g.nodes["y"].shape = (2.7, 3)
    with pytest.raises(capra.CompileError, match="node 'y': rows must be an integer, got 2.7"):
        capra.compile_graph(g, [good_feed()])


@pytest.mark.parametrize("value,got", [(np.ones((4, 2)), "shape \\(4, 2\\)"), (np.ones(8), "shape \\(8,\\)"),
                                       (np.ones((2, 3)), "6 values")])
def test_calibration_and_run_time_feeds_must_have_the_inputs_shape(value, got):
    """A (4, 2) feed for a (2, 4) input is another matrix, not the same one laid out differently."""
    with pytest.raises(capra.CompileError, match=f"calibration set 0: input 'x' has {got}, the graph expects 2 x 4"):
        capra.compile_graph(ranged_graph(), [{"x": value}])
    P = capra.compile_graph(ranged_graph(), [good_feed()])
    with pytest.raises(ValueError, match=f"input 'x' has {got}, the program expects 2 x 4"):
        capra.run(P, {"x": value})


def test_one_row_may_be_given_flat():
    g, _ = tiny_graph()
    flat = [0.5, -1.0, 0.25, 2.0, 0.0, 1.0, -0.5, 1.5]
    P = capra.compile_graph(g, [{"x": flat}])
    assert P.tensors["x"].scale == 2.0 / 127
    assert capra.run(P, {"x": flat}) == capra.run(P, {"x": [flat]})


def test_calibration_that_overflows_float64_names_the_node():
    g = Graph("huge")
    g.matmul("y", g.input("x", (1, 2)), g.const("w", np.full((2, 1), 1e200)))
    g.set_outputs(["y"])
    with pytest.raises(capra.CompileError, match="calibration set 0: node 'y' evaluates to non-finite"):
        capra.compile_graph(g, [{"x": [[1e200, 1e200]]}])


def test_calibration_must_be_a_list_of_input_sets():
    g, calib = tiny_graph()
    with pytest.raises(capra.CompileError, match="list of input sets"):
        capra.compile_graph(g, calib[0])  # one dict, not a list of them
    with pytest.raises(capra.CompileError, match="calibration set 1 must map input names"):
        capra.compile_graph(g, [calib[0], [1.0] * 8])


def test_concat_regions_packed_when_first_fit_fails_stay_apart_and_exact():
    """[353, 1] leaves first fit without room for a region (the review's case); the compiler then
    packs the regions after the loaded tensors. Every tensor that owns memory must lie apart from
    every other, inside the scratchpad, and the program must compute what numpy does."""
    from capra import compiler as CC

    m = tiny_lm.make_model("random", seed=1)
    ranges = host.calibrate(m, 4, starts=range(2)).ranges
    g = tiny_lm.decode_graph(m, [353, 1])
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(g.shape(name)) for name in g.inputs}
    P = capra.compile_graph(g, [feeds], ranges=ranges)
    inside = CC._concat_parents(g)
    owners = [n for n, node in g.nodes.items() if node.op != "rows" and n not in inside]
    regions = [n for n in owners if g.nodes[n].op == "concat"]
    low = max(P.tensors[n].sram + P.tensors[n].words for n in owners if g.nodes[n].op in ("input", "const"))
    high = min(P.tensors[n].sram for n in owners if g.nodes[n].op not in ("input", "const", "concat"))
    sizes = [P.tensors[r].words for r in regions]
    assert CC._place_regions(sizes, low, high, isa.SRAM_WORDS, isa.SRAM_GROUP_WORDS) is None  # first fit fails
    spans = sorted((P.tensors[n].sram, P.tensors[n].sram + P.tensors[n].words, n) for n in owners)
    assert spans[0][0] >= 0 and spans[-1][1] <= isa.SRAM_WORDS
    for (_a, end, x), (start, _b, y) in zip(spans, spans[1:]):
        assert end <= start, f"{x} and {y} overlap"
    out, _mach = capra.run(P, feeds, machine=True)
    ref = capra.run(P, feeds)
    assert all(out[k][0] == ref[k][0] for k in P.outputs)


def test_concat_regions_that_do_not_fit_even_packed_are_refused():
    m = tiny_lm.make_model("structured")
    ranges = host.calibrate(m, 4, starts=range(2)).ranges
    # packed, the regions would need words 584..3831 and the computed tensors start at 3826
    g = tiny_lm.decode_graph(m, [205, 200])
    feeds = {name: np.zeros(g.shape(name)) for name in g.inputs}
    with pytest.raises(capra.CompileError, match="concat regions"):
        capra.compile_graph(g, [feeds], ranges=ranges)


@pytest.mark.parametrize("contexts, strided", [([8] * 8, True), ([3, 1, 5, 2], True), ([1, 1, 4], False)])
def test_batch_projections_scatter_their_rows_and_stay_exact(contexts, strided):
    """A batch's key (and value) projections of consecutive rows of x run as one MM per family,
    its rows written `stride` words apart, each at the end of its own request's cache (or alone,
    at context 1). Every tensor that owns memory lies apart from every other, the program equals
    the independent integer reference, and each request's new key row is where its cache region
    ends."""
    from capra import compiler as CC

    m = tiny_lm.make_model("random", seed=2)
    ranges = host.calibrate(m, 4, starts=range(2)).ranges
    g = tiny_lm.decode_graph(m, contexts)
    rng = np.random.default_rng(1)
    feeds = {name: rng.standard_normal(g.shape(name)) for name in g.inputs}
    P = capra.compile_graph(g, [feeds], ranges=ranges)
    inside = CC._concat_parents(g)
    owners = [n for n, node in g.nodes.items() if node.op != "rows" and n not in inside]
    spans = sorted((P.tensors[n].sram, P.tensors[n].sram + P.tensors[n].words, n) for n in owners)
    assert spans[0][0] >= 0 and spans[-1][1] <= isa.SRAM_WORDS
    for (_a, end, x), (start, _b, y) in zip(spans, spans[1:]):
        assert end <= start, f"{x} and {y} overlap"
    mms = [Instr.decode(P.code[j : j + 4]) for j in range(0, len(P.code), 4)]
    mms = [ins for ins in mms if ins.op == isa.OP_MM]
    # each MM that writes a new key or value row writes whole new rows and nothing else: its
    # strided rows land exactly on the rows the requests' caches end with
    for kind in ("k", "v"):
        rows = [P.tensors[getattr(tiny_lm.slot_names(len(contexts), i), kind)] for i in range(len(contexts))]
        spans = [set(range(t.sram, t.sram + t.words)) for t in rows]
        covered = 0
        for ins in mms:
            writes = set(isa.effects(ins).writes.tolist())
            touched = [span for span in spans if span & writes]
            if touched:
                assert writes == set().union(*touched), f"{contexts}: an MM writes {kind} rows and other words"
                covered += len(touched)
        assert covered == len(contexts), f"{contexts}: {covered} of the {kind} rows written by MMs"
    matmuls = sum(node.op == "matmul" for node in g.nodes.values())
    assert len(mms) < matmuls, "no projection of the batch was fused"
    # [1, 1, 4]: the two context-1 rows are neighbours (stride 0), the third is an MM of its own
    assert any(isa.mm_fields(ins).stride for ins in mms) == strided
    out, _mach = capra.run(P, feeds, machine=True)
    independent = eval_program(P, feeds)
    for name in P.outputs:
        assert out[name][0] == independent[name], f"{contexts}: machine and reference differ on {name}"


def test_regions_of_one_kind_are_placed_side_by_side():
    """With kinds, a batch's two halves of key caches share one bank group and its two halves of
    value caches another; without, first fit puts the second value half after the second key
    half. The spots follow from the rule by hand: group starts 1024 and 2048 are free (0 holds the
    loaded tensors, 3072 lies above `high`), then right after a region of the same kind, then
    after the region that ends first."""
    from capra import compiler as CC

    sizes, low, high = [128, 128, 128, 128, 32], 608, 2807
    kinds = ["Wk", "Wv", "Wk", "Wv", None]
    assert CC._place_regions(sizes, low, high, 4096, 1024, kinds) == [1024, 2048, 1152, 2176, 1280]
    assert CC._place_regions(sizes, low, high, 4096, 1024) == [1024, 2048, 1152, 1280, 1408]


def test_a_batch_of_eight_on_the_8x8_array_fuses_its_projections_and_stays_exact():
    """On the 8 x 8 array the compiler chooses among more variants (families of four rows or of
    all eight, the key caches in one bank group and the value caches in another): whichever wins
    must keep every new row where its cache region ends and the program equal to the independent
    integer reference."""
    with capra.config.use(capra.config.Config.parse("n=8")):
        test_batch_projections_scatter_their_rows_and_stay_exact([8] * 8, True)


def _exact(g: Graph, feeds: dict) -> capra.Program:
    """Compile g and check the machine model against the independent integer reference."""
    P = capra.compile_graph(g, [feeds])
    out, _mach = capra.run(P, feeds, machine=True)
    independent = eval_program(P, feeds)
    for name in P.outputs:
        assert out[name][0] == independent[name], f"{g.name}: machine and reference differ on {name}"
    return P


def test_projections_built_in_reverse_row_order_still_fuse_and_run():
    """A family stands where its first row's node is, which is not always first in graph order
    (rows projected 2, 1, 0): the scheduler must still order every node after what it reads."""
    m = tiny_lm.make_model("random", seed=2)
    g = Graph("reverse")
    x = g.input("x", (3, tiny_lm.D))
    wk = g.const("Wk", m["Wk"])
    outs = [g.softmax(f"p_{i}", g.matmul(f"k_{i}", g.rows(f"x_{i}", x, i, i + 1), wk, range_group="k"))
            for i in (2, 1, 0)]
    g.set_outputs(outs)
    _exact(g, {"x": np.random.default_rng(0).standard_normal((3, tiny_lm.D))})


def test_two_rows_of_one_concat_are_not_a_family():
    """k_0 and k_1 both live in one concat (one region): they cannot lie a region's stride apart,
    so they stay two matmuls, each at its own place in the region."""
    m = tiny_lm.make_model("random", seed=2)
    g = Graph("one region")
    x = g.input("x", (2, tiny_lm.D))
    wk = g.const("Wk", m["Wk"])
    parts = [g.matmul(f"k_{i}", g.rows(f"x_{i}", x, i, i + 1), wk, range_group="k") for i in range(2)]
    both = g.concat("C", *parts)
    g.set_outputs([g.matmul("o", both, g.const("W2", m["Wk"]), range_group="o"), both])
    P = _exact(g, {"x": np.random.default_rng(0).standard_normal((2, tiny_lm.D))})
    assert P.tensors["k_1"].sram == P.tensors["k_0"].sram + P.tensors["k_0"].words


def test_a_tensor_added_to_partners_in_every_lane_is_placed():
    """t is added to four tensors that start in lanes 0, 1, 2 and 3: no start avoids them all, and
    the placement must take one anyway (it used to search for ever)."""
    rng = np.random.default_rng(0)
    g = Graph("four partners")
    x = g.input("x", (1, 8))
    ws = [g.const(f"W{i}", rng.standard_normal((8, 4))) for i in range(5)]
    parts = [g.matmul(f"a{i}", x, ws[i]) for i in range(4)]
    t = g.matmul("t", x, ws[4])
    g.set_outputs([g.add(f"s{i}", t, parts[i]) for i in range(4)])
    _exact(g, {"x": rng.standard_normal((1, 8))})


@pytest.mark.parametrize("stall", [0, 10, 50])
def test_batch_programs_compiled_for_a_stalling_memory_keep_the_overlap_rules(stall):
    """OVERLAP and CHAIN are decided without the clock (docs/isa.md), whatever memory the compiler
    times its schedule for: a batch program compiled for a memory that stalls `stall` percent of the
    cycles is accepted by the machine model, whose rules look at the program alone (the clock only
    sets the cycles), and every request's tokens equal those of the program compiled for an
    always-ready memory. The batch (16, 10, 4, 2) compiled for 10% stalls once chained a matmul on
    one that had finished by the compiler's clock, and let a softmax read that one's output beside
    it: right only on a memory as slow as the one it was timed for."""
    m = tiny_lm.make_model("structured")
    ranges = host.calibrate(m, 4).ranges
    rng = np.random.default_rng(5)
    contexts = (16, 10, 4, 2)
    tokens = [3, 7, 1, 12]
    caches = [(rng.normal(size=(c - 1, tiny_lm.D)), rng.normal(size=(c - 1, tiny_lm.D))) for c in contexts]
    ready = host.ModelRunner(m, ranges, programs=host.ProgramCache()).run(tokens, caches)
    with capra.config.use(dataclasses.replace(capra.config.active(), ext_stall=stall)):
        stalling = host.ModelRunner(m, ranges, programs=host.ProgramCache()).run(tokens, caches)
    assert stalling.tokens == ready.tokens
