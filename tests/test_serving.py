"""Batched decode and the continuous-batching server (host.ModelRunner, the serving package).

The reference for every request is its decode alone (serving.decode_alone: batches of one, a
plain list for its cache, no pages, no scheduler); the structured model's rule is a second,
float-free reference for the tokens. Batch programs are also replayed on both simulators.
"""

from __future__ import annotations

import re

import capra as C
import host
import numpy as np
import paged_tests
import pytest
import replay
import serving as S
import tiny_lm as T
from capra.graph import Graph, GraphError
from conftest import needs_simulators
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from int_reference import eval_program, requantize_ref
from replay import image

WINDOWS = (None, 4, 8)


@pytest.fixture(scope="module")
def structured():
    m = T.make_model("structured")
    return m, S.make_runner(m, 24, WINDOWS)


@pytest.fixture(scope="module")
def random_model():
    m = T.make_model("random", seed=3)
    return m, S.make_runner(m, 24, WINDOWS)


def rule(prompt, n):
    return paged_tests.rule_tokens(prompt[-1], n)[1:]


# ---- the rows view ---------------------------------------------------------------------------------


def test_rows_view_reads_inside_its_tensor_and_matches_numpy():
    rng = np.random.default_rng(0)
    g = Graph("view")
    x = g.input("x", (5, 8), range_group="x")
    y = g.matmul("y", x, g.const("W", rng.standard_normal((8, 12)) * 0.3), range_group="y")
    z = g.matmul("z", g.rows("y2", y, 2, 4), g.const("U", rng.standard_normal((12, 4)) * 0.3), range_group="z")
    g.set_outputs([z, y])
    feeds = {"x": rng.standard_normal((5, 8))}
    P = C.compile_graph(g, [feeds])
    assert P.tensors["y2"].sram == P.tensors["y"].sram + 2 * P.tensors["y"].row_words
    out, _mach = C.run(P, feeds, machine=True)
    y_int = np.asarray(out["y"][0])
    # the same matmul done by hand on rows 2..3 of y's integers, with the program's own multiplier
    acc = y_int[2:4] @ P.consts["U"]
    p = P.params["z"]
    expected = [[requantize_ref(int(v), p["qa"], p["qs"]) for v in row] for row in acc]
    assert out["z"][0] == expected and eval_program(P, feeds)["z"] == expected


def test_rows_view_errors():
    g = Graph("bad")
    x = g.input("x", (3, 4))
    with pytest.raises(GraphError, match="rows 2..5"):
        g.rows("r", x, 2, 5)
    with pytest.raises(GraphError, match="rows 1..1"):
        g.rows("r", x, 1, 1)
    g.rows("r", x, 0, 1)
    g.set_outputs(["r"])
    with pytest.raises(C.CompileError, match="view of rows cannot be an output"):
        C.compile_graph(g, [{"x": np.ones((3, 4))}])
    g.nodes["r"].attrs["hi"] = 2  # edited after building: no longer its one row
    with pytest.raises(GraphError, match="do not give its 1 rows"):
        g.check()


# ---- batch programs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("contexts", [(1,), (3, 1), (2, 6, 2), (8, 8, 8, 8), (1, 1, 12, 4, 3), (5, 9, 2, 2, 7, 1),
                                      (4, 4, 4, 1, 1, 6, 10), (8, 7, 6, 5, 4, 3, 2, 1), (9, 1, 5, 2, 7, 3, 4, 6, 2)])
def test_each_request_in_a_batch_gets_exactly_its_batch_of_one(random_model, contexts):
    m, progs = random_model
    rng = np.random.default_rng(len(contexts))
    toks = [int(t) for t in rng.integers(0, T.V, len(contexts))]
    caches = [(rng.standard_normal((n - 1, T.D)), rng.standard_normal((n - 1, T.D))) for n in contexts]
    batch = progs.run(toks, caches, check=True)  # check: machine model == numpy integer semantics
    for i, (t, cache) in enumerate(zip(toks, caches, strict=True)):
        alone = progs.run([t], [cache])
        assert batch.tokens[i] == alone.tokens[0]
        assert batch.ints[i] == alone.ints[0]
        assert np.array_equal(batch.k[i], alone.k[0]) and np.array_equal(batch.v[i], alone.v[0])


@pytest.mark.parametrize("contexts", [[1], [5, 3, 1], [8, 8, 8, 8], [9, 7, 7, 4, 2, 2, 1, 1]])
def test_batch_programs_equal_the_independent_integer_reference(random_model, contexts):
    """The machine model and the numpy semantics against int_reference.eval_program, written from
    the ISA document one element at a time (the batch-of-one test compares the first two only)."""
    m, progs = random_model
    rng = np.random.default_rng(sum(contexts))
    P = progs.program(contexts)
    feeds = {"x": m["E"][rng.integers(0, T.V, len(contexts))]}
    for i, c in enumerate(contexts):
        if c > 1:
            names = T.slot_names(len(contexts), i)
            feeds[names.kc], feeds[names.vc] = rng.uniform(-1, 1, (2, c - 1, T.D))
    out, _mach = C.run(P, feeds, machine=True)
    numpy_semantics = C.run(P, feeds)
    independent = eval_program(P, feeds)
    for name in P.outputs:
        assert out[name][0] == independent[name], name
        assert numpy_semantics[name][0] == independent[name], name


def test_batch_program_is_close_to_the_float_model(random_model):
    """A batch's logits track the float decode step of each request (int8 error only)."""
    m, progs = random_model
    rng = np.random.default_rng(7)
    contexts = [5, 2, 7]
    toks = [1, 9, 4]
    caches = [(rng.standard_normal((n - 1, T.D)) * 0.5, rng.standard_normal((n - 1, T.D)) * 0.5) for n in contexts]
    P = progs.program(sorted(contexts, reverse=True))
    scale = P.tensors["logits"].scale
    batch = progs.run(toks, caches)
    for i, (t, (kc, vc)) in enumerate(zip(toks, caches, strict=True)):
        want, _k, _v, _info = T.float_step(m, t, kc, vc)
        got = np.asarray(batch.ints[i]) * scale
        assert np.max(np.abs(got - np.asarray(want))) < 0.1 * np.max(np.abs(want)) + 4 * scale


@st.composite
def batch_near_its_limit(draw):
    """A batch of 1 to 8 contexts drawn up to a little past what that many requests can hold
    (about 420 / B rows each), so most batches fit and many sit close to the scratchpad's edge."""
    size = draw(st.integers(1, 8))
    return draw(st.lists(st.integers(1, 420 // size + 8), min_size=size, max_size=size))


def _fits_after_shrinking(progs, contexts, which, fraction) -> None:
    """What admission relies on: it checks each request at its longest context, and every step
    after runs a batch whose contexts are each no longer."""
    assume(progs.fits(contexts) is None)
    i = which % len(contexts)
    assume(contexts[i] > 1)
    shrunk = list(contexts)
    shrunk[i] = 1 + int((contexts[i] - 1) * fraction)  # strictly shorter
    assert shrunk[i] < contexts[i] and progs.fits(shrunk) is None


# Each example compiles one or two batch programs (a batch of eight, about a second): make test-fast
# draws 6 of them, make test 24 more (30 in all), make test-full 300.
@settings(max_examples=6)
@given(contexts=batch_near_its_limit(), which=st.integers(0, 7), fraction=st.floats(0, 0.99))
def test_a_batch_that_fits_keeps_fitting_when_a_context_shrinks(structured, contexts, which, fraction):
    _fits_after_shrinking(structured[1], contexts, which, fraction)


@pytest.mark.heavy
@settings(max_examples=24)
@given(contexts=batch_near_its_limit(), which=st.integers(0, 7), fraction=st.floats(0, 0.99))
def test_a_batch_that_fits_keeps_fitting_when_a_context_shrinks_over_more_examples(structured, contexts, which,
                                                                                   fraction):
    _fits_after_shrinking(structured[1], contexts, which, fraction)


@pytest.mark.slow
@settings(max_examples=300)
@given(contexts=batch_near_its_limit(), which=st.integers(0, 7), fraction=st.floats(0, 0.99))
def test_a_batch_that_fits_keeps_fitting_over_many_more_examples(structured, contexts, which, fraction):
    _fits_after_shrinking(structured[1], contexts, which, fraction)


def test_programs_are_cached_by_everything_that_decides_them_and_bounded(structured):
    m, _ = structured
    cache = host.ProgramCache(capacity=2)
    progs = host.ModelRunner(m, host.calibrate(m, 4).ranges, programs=cache)
    for key in ((1,), (2,), (1,), (3,)):
        progs.program(key)
    assert cache.compiled == 3 and [key[-1] for key in cache.programs] == [(1,), (3,)]
    other = host.ModelRunner(T.make_model("structured", 1), progs.ranges, programs=cache)  # other weights
    other.program((3,))
    assert cache.compiled == 4, "another model's program is another program"
    wider = host.ModelRunner(m, progs.ranges | {"q": 2 * progs.ranges["q"]}, programs=cache)
    assert wider.program((3,)) is not progs.program((3,)) and cache.compiled == 6
    assert progs.fits([4000]) is not None  # a context no scratchpad holds
    assert "at least one request" in progs.fits([]) and "not an int" in progs.fits([2.5])
    with pytest.raises(ValueError, match="token 16"):
        progs.run([16], [(np.zeros((0, T.D)), np.zeros((0, T.D)))])
    with pytest.raises(ValueError, match="shapes"):
        progs.run([1], [(np.zeros(T.D), np.zeros(T.D))])
    with pytest.raises(ValueError, match="lack the groups"):
        host.ModelRunner(m, {"x": 1.0})


# ---- the scheduler ------------------------------------------------------------------------------------


def _run(m, progs, reqs, b_max, pages, page=4):
    server = S.Server(m, b_max, pages, page, windows=WINDOWS, runner=progs, check=True)
    for r in reqs:
        server.submit(r)
    problems = []
    server.run(lambda srv, log: problems.extend(paged_tests.pool_invariants(srv.pool, f"step {len(srv.log)}")))
    return server, problems


requests_strategy = st.lists(
    st.tuples(st.sampled_from([(3,), (5, 1, 2), (7, 7, 0, 4, 2), (11, 6)]),  # few prompts: many shared
              st.integers(1, 12), st.sampled_from(WINDOWS), st.integers(0, 4000)),
    min_size=1, max_size=10)


# About a second an example (each compiles the batch programs its steps need): make test-fast draws
# 4, make test 11 more (15 in all), make test-full the 300 below.
@settings(max_examples=4)
@given(specs=requests_strategy, b_max=st.integers(1, 6), pages=st.integers(3, 40))  # from 3: some are refused
def test_scheduler_serves_every_request_exactly_as_alone(random_model, specs, b_max, pages):
    check_served_exactly_as_alone(random_model, specs, b_max, pages)


@pytest.mark.heavy
@settings(max_examples=11)
@given(specs=requests_strategy, b_max=st.integers(1, 6), pages=st.integers(3, 40))
def test_scheduler_serves_every_request_exactly_as_alone_over_more_examples(random_model, specs, b_max, pages):
    check_served_exactly_as_alone(random_model, specs, b_max, pages)


@pytest.mark.slow
@settings(max_examples=300)
@given(specs=requests_strategy, b_max=st.integers(1, 6), pages=st.integers(3, 40))
def test_scheduler_serves_every_request_exactly_as_alone_over_many_more_examples(random_model, specs, b_max, pages):
    check_served_exactly_as_alone(random_model, specs, b_max, pages)


def check_served_exactly_as_alone(random_model, specs, b_max, pages):
    """Every request submitted to a server of b_max and `pages` pages: each that fits leaves with
    exactly its decode alone, first come first served, the pool's invariants after every step."""
    m, progs = random_model
    reqs = [S.Request(i, prompt, n, W, at) for i, (prompt, n, W, at) in enumerate(specs)]
    fits = [r for r in reqs if S.pages_needed(r.rows, r.window, 4) <= pages]
    server = S.Server(m, b_max, pages, 4, windows=WINDOWS, runner=progs, check=True)
    for r in reqs:
        if r in fits:
            server.submit(r)
        else:
            with pytest.raises(S.RequestRefused, match="pages at once"):
                server.submit(r)
    problems = []

    def after(srv, log):
        problems.extend(paged_tests.pool_invariants(srv.pool, str(len(srv.log))))
        for seq in srv.scheduler.running:  # pages out of the window go back at once
            keep = 0 if seq.req.window is None else max(0, seq.fed + 1 - seq.req.window)
            if srv.pool.dropped[seq.rid] != keep // 4:
                problems.append(f"step {len(srv.log)}: {seq.rid} keeps pages before row {keep}")
            if srv.blocks.held(seq.rid) > seq.reserved:
                problems.append(f"step {len(srv.log)}: {seq.rid} holds more pages than it reserved")
        if srv.blocks.reserved() > srv.blocks.n_pages:
            problems.append(f"step {len(srv.log)}: the reservations exceed the pool")
        wanted = {r.prefix_key for r in srv.scheduler.waiting}
        problems.extend(f"prefix {key} kept for nobody" for key in srv.blocks.prefixes if key not in wanted)

    report = server.run(after)
    assert not problems
    assert sorted(report.tokens) == sorted(r.rid for r in fits)  # none lost, none twice
    for r in fits:
        assert (report.tokens[r.rid], report.logits[r.rid]) == S.decode_alone(r, progs)
        assert report.admitted[r.rid] >= r.arrival
    served = sorted(fits, key=lambda r: r.arrival)  # first come, first served: ties in submission order
    assert [report.admitted[r.rid] for r in served] == sorted(report.admitted[r.rid] for r in served)
    assert max((len(s.rids) for s in report.steps), default=0) <= b_max
    assert server.pool.used() == 0 and not server.pool.table and not server.blocks.prefixes


class CountingMemory(np.ndarray):
    """An external memory that counts the words read from it and written to it."""

    def __array_finalize__(self, obj) -> None:
        self.moved = getattr(obj, "moved", None)

    def __getitem__(self, index):
        if isinstance(index, np.ndarray) and self.moved is not None:
            self.moved[0] += index.size
        return super().__getitem__(index)

    def __setitem__(self, index, value) -> None:
        if isinstance(index, np.ndarray) and self.moved is not None:
            self.moved[0] += index.size
        super().__setitem__(index, value)


def words_moved(P, feeds) -> tuple[int, int]:
    """(external words the program's DMA moves, its cycles) counted on the machine model's memory
    itself, not by the roofline's reading of the code."""
    from capra.machine import Machine

    m = Machine.with_ext(C.ext_image(P, feeds), C.isa.EXT_MEMORY)
    m.ext = m.ext.view(CountingMemory)
    m.ext.moved = [0]
    m.run(list(P.code))
    return m.ext.moved[0], m.counters.as_list()[0]


@pytest.mark.parametrize("contexts", [[8], [8, 8], [8] * 4, [8] * 8, [9, 5, 3, 1]])
def test_a_batch_reads_the_weights_once(structured, contexts):
    """The point of batching: the weights (576 words: the seven int8 matrices of the model, four to
    a word) are moved once per batch, and each request adds only its own words: its input row (4),
    its cached K and V rows (8 a token) and its outputs (logits 4, token 1, k 4, v 4). The batch
    then takes fewer cycles than its requests one by one."""
    m, progs = structured
    weights = sum(np.asarray(m[name]).size // 4 for name in ("Wq", "Wk", "Wv", "Wo", "W1", "W2", "Wout"))
    assert weights == 576
    rng = np.random.default_rng(1)

    def feeds(ctxs):
        f = {"x": m["E"][[1 + i for i in range(len(ctxs))]]}
        for i, c in enumerate(ctxs):
            if c > 1:
                names = T.slot_names(len(ctxs), i)
                f[names.kc] = f[names.vc] = rng.uniform(-0.5, 0.5, (c - 1, T.D))
        return f

    moved, cycles = words_moved(progs.program(contexts), feeds(contexts))
    assert moved == weights + sum(4 + 8 * (c - 1) + 13 for c in contexts)
    alone = sum(words_moved(progs.program([c]), feeds([c]))[1] for c in contexts)
    assert len(contexts) == 1 or cycles < alone


@pytest.mark.heavy
def test_batching_the_same_requests_takes_fewer_cycles(structured):
    m, progs = structured
    reqs = [S.Request(i, (i % T.V,), 6 + i % 5, None, 0) for i in range(8)]
    cycles = {}
    for b_max in (1, 4):
        server, problems = _run(m, progs, reqs, b_max, 64)
        assert not problems and sorted(server.scheduler.done) == list(range(8))
        cycles[b_max] = server.run().cycles
    assert cycles[4] < cycles[1]


@pytest.mark.heavy
def test_structured_model_follows_its_rule_in_any_batch(structured):
    m, progs = structured
    reqs = [S.Request(i, (i % T.V, (3 * i) % T.V), 3 + i % 7, WINDOWS[i % 3], 50 * i) for i in range(12)]
    server, problems = _run(m, progs, reqs, 4, 64)
    assert not problems
    report = server.run()
    for r in reqs:
        assert server.scheduler.done[r.rid].tokens == rule(r.prompt, r.n_new)
    cycles = sum(step.counters[0] for step in server.log)  # every step's own machine count
    assert report.cycles == cycles and report.generated == sum(r.n_new for r in reqs)
    assert report.tokens_per_kilocycle() == 1000 * sum(r.n_new for r in reqs) / cycles


def test_a_shared_prompt_is_forked_and_copied_on_write(structured):
    m, progs = structured
    prompt = (2, 9, 4, 4, 1, 8)  # 6 rows: the second page is half full when the prefix is kept
    reqs = [S.Request("first", prompt, 3, None, 0), S.Request("late", prompt, 5, None, 100_000)]
    server, problems = _run(m, progs, reqs, 2, 16)
    assert not problems and server.scheduler.forked == {"late"}
    assert server.scheduler.done["late"].tokens == rule(prompt, 5)
    done = server.scheduler.done["late"]  # the logits too: the structured model's tokens ignore the K/V rows
    assert (done.tokens, done.logits) == S.decode_alone(reqs[1], progs)
    # the late request fed no prompt token itself: its steps are its own generated tokens only
    assert sum("late" in s.rids for s in server.log) == 5 - 1


def test_a_prefix_only_the_head_wants_does_not_block_it(structured):
    """The head's own prefix and its reservation cover the same pages: counting both deadlocked a
    pool of 6 pages (2 for the prefix + 5 reserved > 6) with nothing running."""
    m, progs = structured
    prompt = (1, 2, 3, 4, 5)
    reqs = [S.Request("A", prompt, 3, None, 0), S.Request("B", prompt, 13, None, 0)]
    server, problems = _run(m, progs, reqs, 1, 6)
    assert not problems and server.scheduler.finish_order == ["A", "B"] and server.scheduler.forked == {"B"}
    done = server.scheduler.done["B"]  # the logits too: the structured model's tokens ignore the K/V rows
    assert (done.tokens, done.logits) == S.decode_alone(reqs[1], progs)


def test_a_later_request_does_not_jump_one_waiting_for_pages(structured):
    """Seven pages of 4 rows: A takes 4, B (4 more) must wait for A to leave, and C (1 page),
    though it would fit beside A, waits behind B: admission is first come, first served."""
    m, progs = structured
    reqs = [S.Request("A", (1,), 15), S.Request("B", (2,), 15), S.Request("C", (3,), 1)]  # 16, 16, 2 rows
    server, problems = _run(m, progs, reqs, 4, 7)
    assert not problems
    admitted = server.scheduler.admitted
    assert admitted["A"] == 0 < admitted["B"] <= admitted["C"]
    assert server.scheduler.finish_order[0] == "A"


def test_admission_waits_for_pages_and_loses_nothing(structured):
    m, progs = structured
    reqs = [S.Request(i, (i,), 20, None, 0) for i in range(4)]  # 20 rows: 5 pages each
    server, problems = _run(m, progs, reqs, 4, 10)
    assert not problems and sorted(server.scheduler.done) == [0, 1, 2, 3]
    assert max(len(s.rids) for s in server.log) == 2  # two at a time: 10 pages hold two
    assert server.peak <= 10


def test_admission_asks_the_compiler_about_the_scratchpad(structured):
    m, _ = structured
    progs = S.make_runner(m, 4)
    # each request alone fits; eight of them at context 120 would need about 8 x 2 x 120 x 4 words
    reqs = [S.Request(i, (1,), 120, None, 0) for i in range(8)]
    server = S.Server(m, 8, 4096, 4, windows=(None,), runner=progs)
    for r in reqs:
        server.submit(r)
    server.step()
    running = len(server.scheduler.running)
    assert 1 <= running < 8
    assert progs.fits([120] * (running + 1)) is not None


@pytest.mark.parametrize("make, error, match", [
    (lambda: S.Request("a", (1,), 3), S.DuplicateRequest, "already submitted"),
    (lambda: S.Request("b", (1,), -1), S.RequestRefused, "n_new must be >= 1, got -1"),
    (lambda: S.Request("c", (1,), 0), S.RequestRefused, "n_new must be >= 1, got 0"),
    (lambda: S.Request("d", (), 3), S.RequestRefused, "non-empty"),
    (lambda: S.Request("e", (16,), 3), S.RequestRefused, "token 16"),
    (lambda: S.Request("f", (1,), 3, 5), S.UnknownWindow, "window 5"),
    (lambda: S.Request("g", (1,), 3, None, -4), S.RequestRefused, "arrival must be >= 0, got -4"),
    (lambda: S.Request("h", (1,), 200), S.RequestRefused, "pages at once"),
    (lambda: S.Request("i", (1,), 2000, 8), S.RequestRefused, r"needs 3 pages|does not fit"),
    (lambda: S.Request("j", (1,), True), S.RequestRefused, "n_new must be an integer, got True"),
    (lambda: S.Request("k", (1,), 3, None, 2.0), S.RequestRefused, "arrival must be an integer, got 2.0"),
    (lambda: S.Request("l", (True,), 3), S.RequestRefused, "prompt token must be an integer, got True"),
    (lambda: S.Request("m", [1, 2], 3), S.RequestRefused, "non-empty tuple"),
    (lambda: S.Request("n", (1,), 3, 8.0), S.UnknownWindow, "window must be an integer, got 8.0"),
    (lambda: S.Request(["o"], (1,), 3), S.RequestRefused, "not hashable"),
    (lambda: S.Request(float("nan"), (1,), 3), S.RequestRefused, "not equal to itself"),  # two were both queued
    (lambda: ("p", (1,), 3), S.RequestRefused, "takes a Request"),
])
def test_bad_requests_are_refused_and_change_nothing(structured, make, error, match):
    m, progs = structured
    server = S.Server(m, 2, 12 if match != r"needs 3 pages|does not fit" else 2, 4, windows=(None, 8),
                      runner=progs)
    server.submit(S.Request("a", (1,), 3))
    before = (list(server.scheduler.waiting), set(server.submitted), server.pool.used())
    with pytest.raises(error, match=match):
        server.submit(make())
    assert (list(server.scheduler.waiting), set(server.submitted), server.pool.used()) == before


def test_a_context_beyond_the_scratchpad_is_refused_when_submitted(structured):
    m, progs = structured
    server = S.Server(m, 2, 4096, 4, windows=(None,), runner=progs)
    with pytest.raises(S.RequestRefused, match="does not fit the chip even alone"):
        server.submit(S.Request("long", (1,), 2000))
    assert not server.scheduler.waiting and not server.submitted


@pytest.mark.parametrize("kwargs, match", [
    ({"b_max": 0}, "b_max"), ({"b_max": 2.5}, "b_max"), ({"b_max": True}, "b_max"), ({"n_pages": 0}, "n_pages"),
    ({"n_pages": True}, "n_pages"), ({"page": 0}, "page"), ({"windows": (0,)}, "window must be >= 1, got 0"),
    ({"windows": 8}, "list of windows"), ({"windows": ()}, "at least one window"), ({"windows": (True,)}, "window"),
    ({"steps": 0}, "steps"), ({"runner": "x"}, "ModelRunner"),
    # each of these three used to run for minutes (or until memory ran out) before anything was said
    ({"n_pages": 10**10}, "rows, more than"), ({"steps": 10**6}, "no decode context past 1024"),
    ({"windows": (10**7,)}, "longer than any context"),
])
def test_bad_server_settings(structured, kwargs, match):
    m, progs = structured
    args = {"b_max": 2, "n_pages": 8, "windows": (None,), "runner": progs} | kwargs
    with pytest.raises(ValueError, match=match):
        S.Server(m, **args)


def test_a_shared_runner_must_run_the_servers_model(structured):
    """A runner made for another model was used as it was, and m ignored: a server of the random
    model decoded the structured one's tokens."""
    m, progs = structured
    S.Server(T.make_model("structured"), 2, runner=progs)  # the same weights, another dict: fine
    for other in (T.make_model("random"), {"junk": 1}):
        with pytest.raises(ValueError, match="runner: it runs another model than m"):
            S.Server(other, 2, runner=progs)


def test_a_request_id_shaped_like_the_servers_own_prefix_key_is_just_an_id(structured):
    """The pool keeps a shared prompt's pages under a key of the server's own; an id that looked
    like the old key ("prefix", (prompt, window)) made the fork fail halfway through a step."""
    m, progs = structured
    reqs = [S.Request("x", (1, 2), 3), S.Request(("prefix", ((1, 2), None)), (5,), 6),
            S.Request("y", (1, 2), 3, None, 10**6)]
    server, problems = _run(m, progs, reqs, 2, 12)
    assert not problems and server.scheduler.forked == {"y"}
    for r in reqs:
        assert server.scheduler.done[r.rid].tokens == rule(r.prompt, r.n_new)


def test_programs_follow_the_active_configuration(structured):
    """A program cache must not keep its answers across configurations: a batch that fits the
    default scratchpad was once said to fit a 2,048-word one, then failed on the machine model."""
    m, progs = structured
    assert progs.fits([40] * 4) is None
    with C.config.use(C.config.Config(sram_words=2048)):
        fresh = host.ModelRunner(m, progs.ranges, programs=host.ProgramCache()).fits([40] * 4)
        assert fresh is not None and progs.fits([40] * 4) == fresh


@pytest.mark.parametrize("contexts, match", [([True], "context True"), ([1.0], "context 1.0"),
                                             ([np.float64(3.0)], "context np.float64(3.0)"), ([2000], "past 1024"),
                                             ([], "at least")])
def test_a_batch_key_is_checked_before_the_cache(structured, contexts, match):
    m, progs = structured
    progs.program([1]), progs.program([3])  # cached: True == 1 and 3.0 == 3 must not find them
    assert match in progs.fits(contexts)
    with pytest.raises(ValueError, match=re.escape(match)):
        progs.program(contexts)


def test_a_refused_run_is_not_counted(structured):
    m, progs = structured
    before = set(progs.seen)
    bad = np.full((2, T.D), np.nan)
    with pytest.raises(ValueError, match="nan"):
        progs.run([1], [(bad, bad)])
    with pytest.raises(ValueError, match="pair"):
        progs.run([1], [None])
    with pytest.raises(ValueError, match="shapes"):
        progs.run([1], [(np.zeros((0, 5)), np.zeros((0, 5)))])
    assert progs.seen == before


@pytest.mark.parametrize("change, match", [({"x": float("nan")}, "finite"), ({"q": 0.0}, "> 0"),
                                           ({"k": "1"}, "finite")])
def test_bad_ranges_are_refused_when_the_programs_are_made(structured, change, match):
    m, progs = structured
    with pytest.raises(ValueError, match=match):
        host.ModelRunner(m, progs.ranges | change)


def test_numpy_integers_are_taken_as_ints(structured):
    m, progs = structured
    server = S.Server(m, np.int64(2), np.int64(8), windows=(None, np.int64(8)), runner=progs)
    server.submit(S.Request("a", (np.int64(3), 4), np.int64(2), np.int64(8), np.int64(0)))
    queued = server.scheduler.waiting[0]
    assert queued == S.Request("a", (3, 4), 2, 8, 0) and type(queued.n_new) is int
    assert server.run().tokens["a"] == rule((3, 4), 2)


def test_reservations_of_very_long_requests_are_instant():
    assert S.pages_needed(10**12, 8, 4) == S.pages_needed(100, 8, 4) == 3
    assert S.pages_needed(10**12, None, 4) == 25 * 10**10


def test_pages_needed_matches_a_page_table():
    """The reservation formula against a real page table driven the way the server drives it."""
    from paged_lm import PageTable
    for W in (None, 1, 3, 4, 5, 9):
        for page in (1, 2, 4):
            for rows in range(0, 23):
                pt = PageTable(64, page)
                pt.new(0)
                most = 0
                for L in range(1, rows + 1):
                    pt.append(0, L)
                    most = max(most, len(pt.table[0]))
                    if W is not None:
                        pt.trim(0, max(0, L + 1 - W))
                assert S.pages_needed(rows, W, page) == most, (rows, W, page)


# ---- replays of random batch programs -----------------------------------------------------------


def _batch_records(count: int) -> list[image.Record]:
    records = []
    for seed in range(count):
        rng = np.random.default_rng(100 + seed)
        m = T.make_model("random", seed=seed)
        progs = host.ModelRunner(m, host.calibrate(m, 10, starts=range(4)).ranges)
        B = 1 + seed % 9  # every batch size 1..9
        contexts = sorted((int(n) for n in rng.integers(1, 13, B)), reverse=True)
        P = progs.program(contexts)
        feeds = {"x": rng.standard_normal((B, T.D))}
        for i, n in enumerate(contexts):
            if n > 1:
                names = T.slot_names(B, i)
                feeds[names.kc] = rng.standard_normal((n - 1, T.D))
                feeds[names.vc] = rng.standard_normal((n - 1, T.D))
        records.append(image.record(P.code, C.ext_image(P, feeds)))
    return records


@needs_simulators
def test_random_batch_programs_match_the_model_in_both_simulators():
    records = _batch_records(12)
    rows = {C.isa.Instr.decode(r.code[i : i + 4]).cnt for r in records for i in range(0, len(r.code), 4)
            if C.isa.Instr.decode(r.code[i : i + 4]).op == C.isa.OP_MM}
    assert set(range(1, 10)) <= rows, "the batches should span one to nine rows"
    verdicts = replay.replay(records, name="batch_programs")
    assert all(v.passed for v in verdicts), [v.problems for v in verdicts]
    assert all(v.counters == [r.counters for r in records] for v in verdicts)


@pytest.mark.heavy
@pytest.mark.parametrize("last", [81_000, 120_000, 165_000, 240_000])
def test_the_serving_figures_tick_labels_do_not_run_together(tmp_path, monkeypatch, last):
    """out/serve_run.png's pages-over-time axis spans six-digit cycle counts: every tick label of
    both panels stands at least its own height apart from the next once drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from capra_cli import serve

    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    results = {(b, w): {"tokens_per_kcycle": 1.0 + b / 10} for b in serve.B_MAXES for w in serve.WINDOWS}
    clocks = list(range(0, last + 1, 1_000))
    pages = {b: (clocks, [b % 7] * len(clocks)) for b in serve.B_MAXES}
    serve.figure(results, pages, tmp_path / "serve.png", [], "footer")
    fig = drawn[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        boxes.sort(key=lambda b: b.x0)
        for a, b in zip(boxes, boxes[1:], strict=False):
            gap = b.x0 - a.x1
            assert gap >= a.height, f"{ax.get_title()}: x tick labels {gap:.1f} px apart"
    plt.close(fig)
