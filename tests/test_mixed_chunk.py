"""Chunked prefill of the mixed model on GA2 (inference/mixed_chunk.py): a chunk attention program
against an integer reference written from the ISA document, the chunked prefill against the
vectorised prefill (an independent numpy evaluation of the decode arithmetic) and against the
token-by-token prefill, the machine model against the programs' integer semantics, and a chunk's
attention program replayed on both simulators."""

from __future__ import annotations

import math

import numpy as np
import pytest
import replay
from capra import config, isa, run
from capra import tiled_attention as ta
from capra.machine import Machine
from capra.quant import SOFTMAX_IN_SCALE, CompileError, multiplier
from conftest import needs_icarus, needs_verilator
from inference.mixed_chip import MixedChip, MixedChipError, sink_groups
from inference.mixed_chunk import (
    CHUNK_MAX,
    ChunkedPrefill,
    RowsTiledTooLong,
    key_spans,
    rows_tiled_code,
    rows_tiled_image,
)
from inference.mixed_prefill import VectorisedPrefill
from int_reference import requantize_ref, softmax_ref
from test_mixed_prefill import _chip


@pytest.fixture(scope="module")
def small():
    """A window of 16, one-shot attention up to 24 rows and tiles of 16 keys (every path at 60 tokens)."""
    chip, ev = _chip(window=16)
    chip.one_shot_rows, chip.tile = 24, 16
    return chip, ev


def _attention_ref(chip, layer: int, grp: int, q: np.ndarray, keys: np.ndarray, values: np.ndarray,
                   spans) -> np.ndarray:
    """Each row's A from the ISA's formulas, element by element: the scores' requantization with the
    multiplier of the calibrated scales, the softmax of its span with each head's sink, P @ V."""
    m = chip.model
    sc = {g: chip.ranges[g] / 127.0 for g in (f"q{layer}", f"k{layer}", f"v{layer}", f"s{layer}", f"a{layer}")}
    qa, qs = multiplier(sc[f"q{layer}"] * sc[f"k{layer}"] / math.sqrt(m.head_dim) / sc[f"s{layer}"], "scores")
    smul = int(np.floor(sc[f"s{layer}"] * (1 << 14) / SOFTMAX_IN_SCALE + 0.5))
    pa, ps = multiplier(sc[f"v{layer}"] / 128 / sc[f"a{layer}"], "a")
    rows, rep, hd = q.shape
    out = np.zeros((rows, rep, hd), dtype=np.int64)
    for i, (lo, hi) in enumerate(spans):
        for heads, sink in sink_groups(m, layer, grp):
            s_int = int(np.floor(sink / sc[f"s{layer}"] + 0.5))
            for h in heads:
                x = [requantize_ref(int(q[i, h] @ keys[j]), qa, qs) for j in range(lo, hi)]
                p = softmax_ref(x, s_int, smul)
                for d in range(hd):
                    out[i, h, d] = requantize_ref(sum(p[j] * int(values[lo + j, d]) for j in range(hi - lo)), pa, ps)
    return out


def test_key_spans_follow_the_window(small):
    chip, _ev = small
    m = chip.model
    # windowed layer 0 (W = 16), a chunk of 4 at position 20 after a cache of its last 16 rows
    assert key_spans(m, 0, 20, 4, 16) == [(1, 17), (2, 18), (3, 19), (4, 20)]
    # global layer 1 from position 3: every key so far
    assert key_spans(m, 1, 3, 2, 3) == [(0, 4), (0, 5)]
    with pytest.raises(MixedChipError, match="sees 17 keys"):
        key_spans(m, 1, 16, 1, 10)


def test_chunk_attention_program_is_the_isa_arithmetic(small):
    """One chunk attention program of each layer 0 group (group 1's heads have different sinks) on
    random int8 q, K and V, on the machine model, against the element-by-element reference."""
    chip, _ev = small
    rng = np.random.default_rng(11)
    cp = ChunkedPrefill(chip, 4)
    hd = chip.model.head_dim
    spans = [(0, 9), (1, 10), (2, 11), (3, 12)]  # a window-like slide: every row its own first key
    for grp in range(chip.model.n_kv_heads):
        # inputs are quantized to [-127, 127] (capra.quant.quantize)
        q = rng.integers(-127, 128, (4, 2, hd))
        keys = rng.integers(-127, 128, (12, hd))
        values = rng.integers(-127, 128, (12, hd))
        P = cp.program("attn", 0, grp, 4, tuple(spans), 12)
        feeds = {"q": q.reshape(-1, hd) * chip._scale("q0"), "K": keys * chip._scale("k0"),
                 "V": values * chip._scale("v0")}
        with config.use(chip.cfg):
            got, _mach = run(P, feeds, machine=True)
        a = np.asarray(got[P.outputs[0]][0], dtype=np.int64).reshape(4, 2, hd)
        np.testing.assert_array_equal(a, _attention_ref(chip, 0, grp, q, keys, values, spans))


def test_rows_tiled_program_is_the_decode_tiled_arithmetic(small):
    """Eight query rows of four lengths (two heads each) over tiles of 16 keys, on the machine model:
    rows that see none of a tile, part of it or all of it; each row's output is the decode's tiled
    attention over its own keys (``tiled_attention.reference``), with each head's sink."""
    chip, _ev = small
    rng = np.random.default_rng(5)
    hd = chip.model.head_dim
    p = chip.tiled_params(1, 0)
    lengths = [5, 5, 17, 17, 33, 33, 40, 40]
    with config.use(chip.cfg):
        prog = rows_tiled_code(lengths, hd, p.qa, p.qs, p.smul, chip.tile, p.out_shift)
    q8 = rng.integers(-127, 128, (8, hd))
    k8 = rng.integers(-127, 128, (40, hd))
    v8 = rng.integers(-127, 128, (40, hd))
    sinks = [p.sinks[r % 2] for r in range(8)]
    with config.use(chip.ext_config(prog.words)):
        m = Machine.with_ext(rows_tiled_image(prog, q8, k8, v8, sinks), prog.words)
        m.run(prog.code)
    got = isa.unpack_int8_rows(m.ext[prog.out:prog.out + 8 * hd // 4], 8, hd)
    for r, n in enumerate(lengths):
        want = ta.reference(q8[r:r + 1], k8[:n], v8[:n], p.qa, p.qs, p.smul, chip.tile, sinks[r], p.out_shift)
        np.testing.assert_array_equal(got[r], want[0], err_msg=f"row {r} over {n} keys")
    with pytest.raises(MixedChipError, match="non-decreasing"):
        rows_tiled_code([5, 4], hd, p.qa, p.qs, p.smul, chip.tile, p.out_shift)
    with config.use(chip.cfg), pytest.raises(RowsTiledTooLong, match="instruction memory"):
        rows_tiled_code([1000] * 16, hd, p.qa, p.qs, p.smul, chip.tile, p.out_shift)  # 63 tiles of 16 keys


def _same_as(chip, res, traces) -> None:
    """The chunk traces' residuals, logits and tokens against the vectorised prefill's `res`."""
    pos = 0
    for tr in traces:
        for i in range(len(tr.tokens)):
            for layer in range(chip.model.n_layers):
                np.testing.assert_array_equal(tr.residuals[layer][i], res.residuals[layer][pos])
            np.testing.assert_array_equal(tr.logits[i], res.logits[pos])
            assert tr.next_tokens[i] == res.next_tokens[pos], f"position {pos}"
            pos += 1


@pytest.mark.heavy
def test_chunked_prefill_equals_the_vectorised_prefill(small):
    """60 tokens of a passkey prompt: the first 5 decoded step by step (a cached prefix), the rest in
    chunks of 8 (the last of 7). Every path runs: windowed one-shot with the window full, global
    one-shot, and global rows past the one-shot rows through the tiled decode attention. The cache,
    each position's residuals, logits and greedy token are the vectorised prefill's, word for word."""
    chip, ev = small
    ids = ev.tokenizer.encode(ev.build_prompt(60, ev.passkeys_for(60, 1)[0], "start"))[:60]
    res = VectorisedPrefill(chip).prefill(ids)
    want = ([[k.copy() for k in layer] for layer in chip.keys], [[v.copy() for v in layer] for layer in chip.values])
    chip.reset()
    for tok in ids[:5]:
        chip.step(tok)
    traces = ChunkedPrefill(chip, 8).prefill(ids[5:])
    assert chip.position == 60
    assert [len(t.tokens) for t in traces] == [8] * 6 + [7]
    for layer in range(chip.model.n_layers):
        for grp in range(chip.model.n_kv_heads):
            np.testing.assert_array_equal(chip.keys[layer][grp], want[0][layer][grp])
            np.testing.assert_array_equal(chip.values[layer][grp], want[1][layer][grp])
    res5 = type(res)([r[5:] for r in res.residuals], res.logits[5:], res.next_tokens[5:])
    _same_as(chip, res5, traces)


def _tokens_after(chip, ids: list[int], chunk: int, steps: int) -> None:
    """`ids` prefilled token by token and in chunks of `chunk`, then `steps` greedy steps from the
    prompt's last token: the same logits at every step, the same tokens."""
    chip.reset()
    want, want_traces = chip.generate(ids, steps)
    chip.reset()
    ChunkedPrefill(chip, chunk).prefill(ids[:-1])
    tok, got = int(ids[-1]), []
    for i in range(steps):
        tr = chip.step(tok)
        np.testing.assert_array_equal(tr.logits, want_traces[len(ids) - 1 + i].logits)
        tok = tr.next_token
        got.append(tok)
    assert got == want


# make test-full: the test above already finds every cache word the chunked prefill writes equal to the
# token-by-token prefill's, and a decode step reads nothing else; this one runs the steps after it.
@pytest.mark.slow
def test_tokens_after_chunked_prefill_are_the_token_by_token_ones(small):
    """A 40-token passkey prompt (global rows past the one-shot rows at its end), chunks of 16."""
    chip, ev = small
    _tokens_after(chip, ev.tokenizer.encode(ev.build_prompt(40, ev.passkeys_for(40, 2)[1], "middle")), 16, 7)


@pytest.mark.slow
def test_passkey_answer_after_chunked_prefill_on_the_default_chip():
    """The default chip (window 128, one-shot up to 192): a 48-token passkey prompt, chunks of 16."""
    chip, ev = _chip()
    _tokens_after(chip, ev.tokenizer.encode(ev.build_prompt(48, ev.passkeys_for(48, 1)[0])), 16, 7)


def test_chunk_machine_model_equals_integer_semantics(small):
    """Every chunk program of two chunks (the second with global rows past the one-shot rows) on the
    machine model and in its integer semantics: the same words (executor "both")."""
    chip, ev = small
    ids = ev.tokenizer.encode(ev.build_prompt(40, ev.passkeys_for(40, 1)[0], "end"))[:32]
    chip.reset()
    cp = ChunkedPrefill(chip, 16)
    traces = cp.prefill(ids, executor="both")
    assert all(c > 0 for tr in traces for c in tr.cycles)
    assert any(r.name.startswith("ctiled") for r in traces[1].runs)


def test_the_largest_chunk_is_the_largest_whose_programs_fit():
    """CHUNK_MAX rows: the projection and the output programs (the logits) compile on the mixed
    chip; one row more, one of them does not fit the scratchpad (so --chunks stops at CHUNK_MAX)."""
    chip, _ev = _chip()
    cp = ChunkedPrefill(chip, CHUNK_MAX)

    def fits(rows: int) -> bool:
        try:
            for kind, layer in (("proj", 0), ("out", chip.model.n_layers - 1)):
                cp.program(kind, layer, 0, rows)
        except CompileError:
            return False
        return True

    assert fits(CHUNK_MAX) and not fits(CHUNK_MAX + 1)


def test_bad_chunks(small):
    chip, _ev = small
    with pytest.raises(MixedChipError, match="chunk must lie"):
        ChunkedPrefill(chip, 0)
    paged = MixedChip(chip.model, chip.ranges, chip.cfg, kv="paged", max_context=64)
    with pytest.raises(MixedChipError, match="contiguous K/V cache; the chip's is 'paged'"):
        ChunkedPrefill(paged, 4)
    cp = ChunkedPrefill(chip, 4)
    with pytest.raises(MixedChipError, match="1..4 tokens"):
        cp.run_chunk([1] * 5)
    with pytest.raises(MixedChipError, match="executor"):
        cp.run_chunk([1], executor="fast")
    with pytest.raises(MixedChipError, match="token ids"):
        cp.run_chunk([chip.model.vocab_size])


def _replay_chunk_programs(small, simulator) -> None:
    """Layer 1, group 0's programs of a chunk of 8 at positions 20..27: its projection, the one-shot
    attention of the rows that see at most 24 keys and the tiled attention of the others."""
    chip, ev = small
    ids = ev.tokenizer.encode(ev.build_prompt(40, ev.passkeys_for(40, 1)[0], "end"))[:28]
    chip.reset()
    cp = ChunkedPrefill(chip, 8)
    cp.prefill(ids[:20])
    tr = cp.run_chunk(ids[20:28], executor="machine")
    prefixes = ("cproj1g0", "cattn1g0", "ctiled1g0")
    runs = [(r, c) for r, c in zip(tr.runs, tr.cycles, strict=True) if r.name.startswith(prefixes)]
    assert sorted(r.name[:len(p)] for r, _c in runs for p in prefixes if r.name.startswith(p)) == sorted(prefixes)
    from replay import image

    with config.use(chip.ext_config(max(r.ext_words for r, _c in runs))):
        records = [image.record(r.code, r.ext()) for r, _c in runs]
        verdicts = replay.replay(records, name="mixed_chunk", latency=isa.EXT_LATENCY,
                                 simulators=(replay.simulators.BY_NAME[simulator],))
    assert [r.counters[0] for r in records] == [c for _r, c in runs]
    for v in verdicts:
        assert v.passed, v.problems
        assert v.counters == [r.counters for r in records]


@needs_icarus
def test_chunk_programs_replay_in_icarus(small):
    _replay_chunk_programs(small, "icarus")


@pytest.mark.slow
@needs_verilator
def test_chunk_programs_replay_in_verilator(small):
    _replay_chunk_programs(small, "verilator")
