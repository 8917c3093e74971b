"""Attention over a paged K/V cache read through the block table (capra.paged_attention): the same
words as over a contiguous copy and as capra.tiled_attention's own program, for a global and a
windowed layer, split into several programs or not; one such program replayed on both simulators
with every counter equal to the model's; the host words the command counts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import replay
from capra import asm, config, isa
from capra import paged_attention as pa
from capra import tiled_attention as ta
from capra_cli import paged_attention as cli
from conftest import needs_simulators
from replay import image


def _host(tokens: int, seed: int = 0) -> cli.Host:
    host = cli.Host(64, seed)
    for i in range(tokens):
        host.append(0)
        if i % 3 == 0:
            host.append(1)  # the neighbour's pages fall between ours
    return host


def _contiguous(host: cli.Host, layer: int, head: int):
    k, v = host.pg.gather(0, layer)
    return k[:, head].astype(np.int64), v[:, head].astype(np.int64)


@pytest.mark.parametrize("layer, max_tiles", [(1, None), (1, 3), (3, 2), (0, None), (2, 1)])
def test_gathered_attention_equals_the_contiguous_and_the_tiled_program(layer, max_tiles):
    host = _host(300, seed=layer)
    ext, paged = host.image(0, layer, head=1)
    lo, hi = host.pg.attended(0, layer)
    if layer % 2 == 0:  # a windowed layer's table has released its first pages: rows from lo on, through it
        assert lo // cli.PAGE > 0 and paged.table_ext + lo // cli.PAGE == len(ext) - len(host.tables[(0, "windowed")])
    table = ext[paged.table_ext + lo // cli.PAGE : paged.table_ext + (hi - 1) // cli.PAGE + 1]
    assert len(set(np.diff(table.astype(np.int64)).tolist())) > 1, "the pages should be scattered"
    k, v = _contiguous(host, layer, 1)
    assert len(k) == hi - lo == (300 if layer % 2 else 127)
    q8 = np.random.default_rng(layer).integers(-127, 128, (2, 64))
    args = (7803, 24, isa.SM_SCALE_ONE)
    got = pa.run(pa.build(q8, ext, paged, lo, hi, *args, max_tiles=max_tiles))
    kc, vc = isa.pack_int8_rows(k), isa.pack_int8_rows(v)
    flat = pa.run(pa.build(q8, np.concatenate([kc, vc]), pa.Contiguous(0, len(kc), 64), lo, hi, *args,
                           max_tiles=max_tiles))
    own, _m = ta.run(ta.build(q8, k, v, *args, tile=pa.TILE))
    assert (got.out == flat.out).all() and (got.out == own).all()
    tiles = -(-(hi - lo) // pa.TILE)
    assert len(got.counters) == (1 if max_tiles is None else -(-tiles // max_tiles))


def test_a_context_of_more_pages_than_the_table_holds_splits_into_segments():
    """Pages of one row: 1,100 keys need 1,100 descriptors, more than the block table's bank group
    holds (1,024), so the rows go into segments whose descriptors fit; the words are those of the
    contiguous copy's program and of capra.tiled_attention's own."""
    rng = np.random.default_rng(11)
    t, dw = 1100, 16
    assert t > isa.SRAM_GROUP_WORDS
    k8, v8 = rng.integers(-127, 128, (t, 64)), rng.integers(-127, 128, (t, 64))
    order = rng.permutation(t)  # page p of the request is row order[p] of the pool
    pool = np.zeros((t, 2 * dw), dtype=np.uint32)
    pool[order, :dw], pool[order, dw:] = isa.pack_int8_rows(k8).reshape(t, dw), isa.pack_int8_rows(v8).reshape(t, dw)
    ext = np.concatenate([pool.reshape(-1), (order * 2 * dw).astype(np.uint32)])
    paged = pa.PagedKV(pool.size, t, 0, 2 * dw, 0, dw, 64)
    q8 = rng.integers(-127, 128, (2, 64))
    args = (7803, 24, isa.SM_SCALE_ONE)
    prog = pa.build(q8, ext, paged, 0, t, *args)
    assert len(prog.segments) > 1
    kc, vc = isa.pack_int8_rows(k8), isa.pack_int8_rows(v8)
    flat = pa.run(pa.build(q8, np.concatenate([kc, vc]), pa.Contiguous(0, len(kc), 64), 0, t, *args))
    own, _m = ta.run(ta.build(q8, k8, v8, *args, tile=pa.TILE))
    got = pa.run(prog)
    assert (got.out == flat.out).all() and (got.out == own).all()


def test_the_command_refuses_a_context_past_the_memory_it_can_address():
    """The largest context's programs fit the chip's largest external memory, the next page's not."""
    assert cli.image_words(cli.MAX_CONTEXT) <= config.EXT_MEMORY_MAX < cli.image_words(cli.MAX_CONTEXT + cli.PAGE)
    host = cli.Host(cli.pool_pages(64), 0)
    for _ in range(64):
        host.append(0)
    ext, _paged = host.image(0, cli.LAYER, cli.HEAD)
    assert len(ext) + 2 * 16 + 4 * 2 + 2 * 64 + 2 * 16 <= cli.image_words(64)


def test_the_host_words_of_a_step():
    """With the chip's gather the host writes the new row into each group's page and the changed
    descriptors; a host copy adds every attended row of every layer (K and V, both heads)."""
    host = _host(40)
    before = host.written
    host.append(0)  # token 41 of request 0: row 40 of page 2, no new page in either group
    assert host.written - before == 2 * host.row_words
    before = host.written
    for _ in range(8):  # to token 49: row 48 starts page 3 in both groups
        host.append(0)
    assert host.written - before == 8 * 2 * host.row_words + 2
    rows = sum(hi - lo for lo, hi in (host.pg.attended(0, layer) for layer in range(4)))
    assert host.host_copy_words(0) == rows * 2 * cli.KV_HEADS * 16


def test_the_command_checks_and_prints(capsys):
    from capra_cli.__main__ import main

    assert main(["paged-attention", "--contexts", "64", "160"]) == 0
    out = capsys.readouterr().out
    assert "VERDICT: PASS: 2 contexts" in out and "   160 |" in out


def _small_paged_program():
    """A paged K/V of 96 keys in pages of 16 rows laid out by hand in a pool of 10 pages (6 used,
    scattered), and its attention program: small enough for the testbench's memory."""
    rng = np.random.default_rng(5)
    t, dw, row = 96, 16, 32
    k8, v8 = rng.integers(-127, 128, (t, 64)), rng.integers(-127, 128, (t, 64))
    order = [7, 2, 9, 0, 5, 3]
    pool = rng.integers(0, 2**32, 10 * 16 * row).astype(np.uint32)  # the unused pages hold noise
    kp, vp = isa.pack_int8_rows(k8).reshape(t, dw), isa.pack_int8_rows(v8).reshape(t, dw)
    for r in range(t):
        at = order[r // 16] * 16 * row + (r % 16) * row
        pool[at : at + dw], pool[at + dw : at + 2 * dw] = kp[r], vp[r]
    ext = np.concatenate([pool, np.array([p * 16 * row for p in order], dtype=np.uint32)])
    paged = pa.PagedKV(len(pool), len(order), 4, row, 0, dw, 64)
    q8 = rng.integers(-127, 128, (2, 64))
    return pa.build(q8, ext, paged, 0, t, 7803, 24, isa.SM_SCALE_ONE), (q8, k8, v8)


@needs_simulators
@pytest.mark.parametrize("stall", [0, 50])
def test_a_paged_attention_program_replays_exactly_in_both_simulators(stall):
    prog, (q8, k8, v8) = _small_paged_program()
    [seg] = prog.segments
    n_gathers = sum(1 for i in range(0, len(seg.code), 4)
                    if isa.Instr.decode(seg.code[i:i + 4]).flags == isa.LD_GATHER and seg.code[i] >> 28 == isa.OP_LOAD)
    assert n_gathers == 6
    assert len(prog.ext) <= isa.EXT_MEMORY
    own, _m = ta.run(ta.build(q8, k8, v8, 7803, 24, isa.SM_SCALE_ONE, tile=pa.TILE))
    assert (pa.run(prog).out == own).all()
    cfg = dataclasses.replace(config.active(), ext_stall=stall, ext_seed=11)
    with config.use(cfg):
        rec = image.record(seg.code, [int(w) for w in prog.ext])
    for verdict in replay.replay([rec], cfg=cfg):
        assert verdict.passed, verdict.line
        assert verdict.counters == [rec.counters]
    assert asm.listing(seg.code[:8])  # the listing names the gathers' fields
