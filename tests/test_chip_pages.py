"""The mixed model's K/V in pages of the chip's external memory, read through GATHER
(inference/chip_pages.py, MixedChip(kv="paged")): the same greedy tokens as the contiguous cache at
every position, each gathered attention word for word the program of the same shape that LOADs a
contiguous copy (and the integer reference), the host's words per step from the window rule in
closed form, and chip_context's cycles and host words against whole steps on the machine model."""

from __future__ import annotations

import numpy as np
import pytest
from capra import config, isa
from capra import paged_attention as pa
from capra import tiled_attention as ta
from conftest import needs_icarus
from inference.chip_context import StepCycles, step_cost
from inference.chip_pages import PAGE, ChipPages
from inference.generate import generate
from inference.long_context import PasskeyEvaluator
from inference.mixed_chip import MixedChip, MixedChipError, visible_rows
from inference.mixed_lm import make_mixed_model
from inference.mixed_prefill import VectorisedPrefill
from test_mixed_prefill import _chip


@pytest.fixture(scope="module")
def chips():
    """The chip as tests/test_mixed_chip.py calibrates it, with a contiguous and a paged K/V (the
    compiled programs shared: the K/V's place changes no projection or output program)."""
    flat, ev = _chip()
    paged = MixedChip(flat.model, flat.ranges, kv="paged", max_context=1024)
    paged._programs = flat._programs
    return ev.model, flat, paged


def _fill(chip: MixedChip, context: int, seed: int) -> None:
    """The chip's cache as if context - 1 tokens had been decoded, with random int8 K and V rows:
    the host arrays and, on a paged chip, the pages."""
    m = chip.model
    rng = np.random.default_rng(seed)
    chip.reset()
    for _pos in range(context - 1):
        if chip.cache is not None:
            chip.cache.begin_step()
        for layer in range(m.n_layers):
            for grp in range(m.n_kv_heads):
                k, v = rng.integers(-127, 128, (2, 1, m.head_dim))
                n = visible_rows(m, layer, chip.position + 1)
                chip.keys[layer][grp] = np.vstack([chip.keys[layer][grp], k])[-n:]
                chip.values[layer][grp] = np.vstack([chip.values[layer][grp], v])[-n:]
                if chip.cache is not None:
                    chip.cache.write_row(layer, grp, k, v)
        if chip.cache is not None:
            chip.cache.end_step()
        chip.position += 1


@pytest.mark.heavy
def test_paged_decode_gives_the_contiguous_tokens_at_every_position(chips):
    """A 230-token passkey prompt decoded step by step with the paged K/V (every attention gathered,
    in 128-key tiles) gives, at every position, the greedy token of the contiguous cache (its
    vectorised prefill, word for word its step-by-step one: tests/test_mixed_prefill.py); then
    the answer on the machine model is the float model's and the passkey."""
    model, flat, paged = chips
    ev = PasskeyEvaluator(model)
    key = ev.passkeys_for(230, 1)[0]
    ids = ev.tokenizer.encode(ev.build_prompt(230, key))
    flat.reset()
    want = VectorisedPrefill(flat).prefill(ids).next_tokens
    flat.reset()
    paged.reset()
    got = [tr.next_token for tr in paged.prefill(ids)]
    assert got == [int(t) for t in want]
    answer = []
    tok = got[-1]
    for _ in range(6):
        tr = paged.step(tok, executor="both")
        tok = tr.next_token
        answer.append(tok)
    float_answer = generate(model, np.array([ids]), max_new_tokens=7, temperature=0.0)[0][len(ids) + 1:]
    assert answer == [int(t) for t in float_answer]
    assert ev.extract_passkey_from_output(ev.tokenizer.decode([got[-1]] + answer)) == key


@pytest.mark.parametrize("layer, head", [(0, 1), (1, 0), (3, 1)])
def test_gathered_attention_is_the_contiguous_program_word_for_word(chips, layer, head):
    """At 300 tokens (a windowed table that has released its first pages, a global one whose pages
    lie between the windowed group's reused ones): the gathered program's output equals that of the
    same program LOADing a contiguous copy of the rows, and the integer reference at 128-key tiles."""
    _model, _flat, paged = chips
    _fill(paged, 300, seed=layer)
    paged.cache.begin_step()
    rng = np.random.default_rng(layer + 10)
    for lay in range(paged.model.n_layers):
        for grp in range(paged.model.n_kv_heads):
            k, v = rng.integers(-127, 128, (2, 1, paged.model.head_dim))
            paged.cache.write_row(lay, grp, k, v)
            if (lay, grp) == (layer, head):
                keys = np.vstack([paged.keys[layer][head], k])[-visible_rows(paged.model, layer, 300):]
                values = np.vstack([paged.values[layer][head], v])[-visible_rows(paged.model, layer, 300):]
    where, lo, hi = paged.cache.source(layer, head)
    assert hi - lo == len(keys) == (300 if layer % 2 else 128)
    if layer % 2 == 0:
        assert paged.cache.groups.pool.dropped[(0, "windowed")] > 0
    p = paged.tiled_params(layer, head)
    q8 = rng.integers(-127, 128, (2, paged.model.head_dim))
    args = (p.qa, p.qs, p.smul)
    kw = dict(sink=list(p.sinks), out_shift=p.out_shift, tile=paged.paged_tile)
    with config.use(paged.cfg):
        gathered = pa.build(q8, paged.cache.image(), where, lo, hi, *args, **kw)
        kc, vc = isa.pack_int8_rows(keys), isa.pack_int8_rows(values)
        loaded = pa.build(q8, np.concatenate([kc, vc]), pa.Contiguous(0, len(kc), 64), lo, hi, *args, **kw)
        assert [s.tiles for s in gathered.segments] == [s.tiles for s in loaded.segments]
        with config.use(paged.ext_config(len(gathered.ext))):
            got = pa.run(gathered)
        want = pa.run(loaded)
    assert (got.out == want.out).all()
    ref = ta.reference(q8, keys, values, *args, paged.paged_tile, sink=list(p.sinks), out_shift=p.out_shift)
    assert (got.out == ref).all()
    paged.reset()


def _descriptors(pos: int, window: int) -> int:
    """Descriptors written at the step of position pos: the global table's one when a page starts;
    the windowed table's whole length when its first page moved on, else its one when a page starts."""
    first, first_before = (max(0, p + 1 - window) // PAGE for p in (pos, pos - 1))
    starts = int(pos % PAGE == 0)
    return starts + (pos // PAGE - first + 1 if pos and first != first_before else starts)


def test_host_words_per_step_follow_the_window_rule():
    """Per step the pages take the new row in each group's page (two groups of two layers: K and V
    of two heads, 16 words each: 256 words) and the descriptors that changed: the global table one
    when a page starts; the windowed table one when a page starts, and all of its descriptors when
    its first page was released (the table moves up a place)."""
    model = make_mixed_model()
    pages = ChipPages(model, 400)
    zero = np.zeros(model.head_dim, dtype=np.int64)
    for pos in range(400):
        before = pages.written
        pages.begin_step()
        for layer in range(model.n_layers):
            for head in range(model.n_kv_heads):
                pages.write_row(layer, head, zero, zero)
        pages.end_step()
        assert pages.written - before == 256 + _descriptors(pos, model.window), pos


@pytest.mark.parametrize("context", [60, 300])
def test_step_cycles_and_host_words_are_those_of_a_step(chips, context):
    """A whole decode step on the machine model, its cache random: the cycles and host words
    chip_context adds up, for the paged and the contiguous K/V; and the paged step writes the
    contiguous step's words less every K/V row its attention reads, plus its own rows and
    descriptors."""
    model, flat, paged = chips
    traces = {}
    for chip in (flat, paged):
        _fill(chip, context, seed=context)
        traces[chip.kv] = chip.step(5, executor="machine")
        want = step_cost(StepCycles(chip), "mixed", context)
        assert sum(traces[chip.kv].cycles) == want.cycles
        assert traces[chip.kv].host_words == want.host_words
        assert len(traces[chip.kv].runs) == want.programs
        chip.reset()
    visible = [visible_rows(model, layer, context) for layer in range(model.n_layers)]
    rows = sum(visible) * model.n_kv_heads
    new_row = 2 * 2 * model.n_kv_heads * model.head_dim // 4  # a group's row: two layers' K and V
    # the one-shot programs' inputs are q, K and V; the gathered program's q and each row's state
    states = sum(n <= flat.one_shot_rows for n in visible) * model.n_kv_heads * 2 * ta.STATE_WORDS
    descriptors = traces["paged"].host_words - (traces["contiguous"].host_words - 2 * rows * 16 + states
                                                + 2 * new_row)
    assert descriptors == _descriptors(context - 1, model.window)


def test_paged_chip_refuses_what_it_cannot_hold(chips):
    model, flat, _paged = chips
    with pytest.raises(MixedChipError, match="kv must be"):
        MixedChip(model, flat.ranges, kv="ring")
    small = MixedChip(flat.model, flat.ranges, kv="paged", max_context=2)
    small._programs = flat._programs
    small.step(3)
    small.step(4)
    with pytest.raises(MixedChipError, match="max_context=2"):
        small.step(5)
    with pytest.raises(MixedChipError, match="contiguous cache"):
        VectorisedPrefill(small)


@pytest.mark.slow
@needs_icarus
def test_a_paged_decode_step_replays_in_icarus(chips):
    """One decode step at 200 tokens with the paged K/V (every attention gathered from the pages,
    the windowed table past its first pages), replayed: every word and counter equal."""
    import replay
    from replay import image

    model, _flat, paged = chips
    ev = PasskeyEvaluator(model)
    ids = ev.tokenizer.encode(ev.build_prompt(200, ev.passkeys_for(200, 1)[0]))
    paged.reset()
    paged.prefill(ids[:-1])
    trace = paged.step(ids[-1], executor="machine")
    paged.reset()
    assert sum(r.name.startswith("gathered") for r in trace.runs) == 8
    with config.use(paged.ext_config(max(r.ext_words for r in trace.runs))):
        records = [image.record(r.code, r.ext()) for r in trace.runs]
        verdicts = replay.replay(records, name="chip_pages", latency=isa.EXT_LATENCY,
                                 simulators=(replay.simulators.BY_NAME["icarus"],))
    assert [r.counters[0] for r in records] == trace.cycles
    for v in verdicts:
        assert v.passed, v.problems
        assert v.counters == [r.counters for r in records]
