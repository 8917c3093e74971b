"""The gather (a LOAD through a block table): what it moves, what it touches, its timing, the rules
it keeps, and the RTL against the machine model in both simulators, on a memory that stalls too.

Expected words and addresses are worked out here from docs/isa.md's definition (row L of page
L >> shift at descriptor + offset + (L mod 2^shift) * stride), not with capra.isa's helpers; the
expected cycles from docs/cycle_model.md's closed form for an always-ready memory.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import replay
from capra import asm, config, isa
from capra.machine import HazardError, ProgramError, run_program
from conftest import needs_icarus, needs_simulators, needs_verilator
from replay import image
from replay_util import run_records, verdict

EXTW = 4096
TABLE_EXT = 4000  # the block table's words in external memory
TABLE_SRAM = 3000  # and in the scratchpad


def _expected_rows(ext, table, first, rows, cols, shift, stride, offset) -> list[int]:
    out = []
    for r in range(rows):
        logical = first + r
        base = table[logical // (1 << shift)] + offset + (logical % (1 << shift)) * stride
        out += [int(ext[base + c]) for c in range(cols)]
    return out


def _case(seed: int):
    """A random gather over a scattered table, its program and its expected words."""
    rng = random.Random(seed)
    ext = [rng.getrandbits(32) for _ in range(EXTW)]
    shift = rng.randint(0, 4)
    cols = rng.randint(1, 20)
    stride = cols + rng.randint(0, 5)
    offset = rng.randint(0, 40)
    pages = 12
    span = offset + ((1 << shift) - 1) * stride + cols
    table = [rng.randrange(0, TABLE_EXT - span) for _ in range(pages)]
    ext[TABLE_EXT:TABLE_EXT + pages] = table
    rows = rng.randint(1, min(40, pages << shift))
    first = rng.randrange(0, (pages << shift) - rows + 1)
    code = (asm.load(TABLE_SRAM, TABLE_EXT, 1, pages) + asm.wait()
            + asm.gather(0, TABLE_SRAM, rows, cols, first=first, page_shift=shift, ext_stride=stride, offset=offset)
            + asm.store(0, 3500, 1, rows * cols) + asm.halt())
    want = _expected_rows(ext, table, first, rows, cols, shift, stride, offset)
    n_pages = len({(first + r) >> shift for r in range(rows)})
    return code, ext, want, n_pages, rows * cols


@pytest.mark.parametrize("seed", range(40))
def test_a_gather_moves_the_rows_of_the_pages_where_they_lie(seed):
    code, ext, want, _pages, n = _case(seed)
    m = run_program(code, ext, EXTW)
    assert [int(w) for w in m.sram[:n]] == want
    assert [int(w) for w in m.ext[3500:3500 + n]] == want


@pytest.mark.parametrize("seed", range(40))
def test_a_gather_is_timed_as_a_load_of_three_more_beats_a_page(seed):
    """On an always-ready memory (latency L): the gather takes its setup at s, ends at
    s + n + 3p + L + 2 (docs/cycle_model.md): the program's cycles equal those of the same program
    with a plain LOAD of n + 3p words in its place."""
    code, ext, _want, pages, n = _case(seed)
    m = run_program(code, ext, EXTW)
    plain = code[:8] + asm.load(0, 0, 1, n + 3 * pages) + code[12:]
    p = run_program(plain, ext, EXTW)
    assert m.counters.with_holds() == p.counters.with_holds()


def test_effects_name_the_descriptors_read_and_the_rows_written():
    ext = list(range(EXTW))
    table = [100, 900, 50, 2000]
    sram = np.zeros(isa.SRAM_WORDS, dtype=np.uint32)
    sram[200:204] = table
    ins = isa.Instr.decode(asm.gather(10, 200, 5, 3, first=3, page_shift=1, ext_stride=4, offset=1))
    eff = isa.effects(ins, sram=sram)
    assert eff.reads.tolist() == [201, 202, 203]  # logical rows 3..7: pages 1, 2, 3
    assert eff.writes.tolist() == list(range(10, 25))
    rows = [(900 + 1 + 4), (50 + 1), (50 + 1 + 4), (2000 + 1), (2000 + 1 + 4)]
    assert eff.ext_reads.tolist() == [ext[r + c] for r in rows for c in range(3)]
    assert eff.cycles == 15 + 3 * 3


def _prog(*parts) -> list[int]:
    return [w for p in parts for w in p] + asm.halt()


def test_the_rules_a_gather_keeps():
    ext = [0] * EXTW
    ext[TABLE_EXT:TABLE_EXT + 4] = [10, 20, 30, 40]
    load_table = asm.load(TABLE_SRAM, TABLE_EXT, 1, 4)
    gather = asm.gather(0, TABLE_SRAM, 8, 2, page_shift=1)
    run_program(_prog(load_table, asm.wait(), gather), ext, EXTW)  # the valid form
    with pytest.raises(HazardError, match="descriptor word"):  # the table may still be arriving
        run_program(_prog(load_table, gather), ext, EXTW)
    with pytest.raises(ProgramError, match="before the program wrote it"):  # a table never written
        run_program(_prog(gather), ext, EXTW)
    with pytest.raises(ProgramError, match="writes over its own block table"):
        run_program(_prog(load_table, asm.wait(), asm.gather(TABLE_SRAM - 4, TABLE_SRAM, 8, 2, page_shift=1)),
                    ext, EXTW)
    ext[TABLE_EXT + 3] = EXTW - 1  # a page past the memory
    with pytest.raises(ProgramError, match="reaches external word"):
        run_program(_prog(load_table, asm.wait(), gather), ext, EXTW)
    ext[TABLE_EXT + 3] = 40
    # a compute instruction may not write a descriptor while the gather may still read it
    clobber = asm.vec(isa.VEC_COPY, 1500, TABLE_SRAM, 4)
    with pytest.raises(HazardError, match="descriptor the GATHER"):
        run_program(_prog(load_table, asm.load(1500, 0, 1, 1), asm.wait(), gather, clobber), ext, EXTW)
    # nor read the table's banks (the DMA's read port is on them): here word TABLE_SRAM + 4, same bank
    reader = asm.load(TABLE_SRAM + 4, 0, 1, 4) + asm.wait() + gather + asm.vec(isa.VEC_COPY, TABLE_SRAM + 4, 100, 4)
    with pytest.raises(HazardError, match="read port"):
        run_program(_prog(load_table, reader), ext, EXTW)
    run_program(_prog(load_table, reader[:8], gather, asm.wait(), reader[12:]), ext, EXTW)


def _stalled(percent: int) -> config.Config:
    return dataclasses.replace(config.active(), ext_stall=percent, ext_seed=7)


def _store_then_gather():
    """A STORE writes a new row into a page, a gather right after it reads that page: it must see
    the row (a gather waits, as a LOAD does, for the STOREs before it to be answered)."""
    ext = [(7 * a + 3) & 0xFFFFFFFF for a in range(600)]
    ext[500:503] = [64, 320, 128]  # three pages of 4 rows of 2 words
    code = (asm.load(0, 500, 1, 3) + asm.load(100, 560, 1, 2) + asm.wait()
            + asm.store(100, 320 + 3 * 2, 1, 2)  # row 3 of page 1 (logical row 7)
            + asm.gather(200, 0, 6, 2, first=4, page_shift=2) + asm.store(200, 400, 1, 12) + asm.halt())
    want = ext[320:326] + ext[560:562] + ext[128:132]
    return code, ext, want


def test_a_gather_reads_what_a_store_before_it_wrote():
    code, ext, want = _store_then_gather()
    m = run_program(code, ext, EXTW)
    assert [int(w) for w in m.ext[400:412]] == want


@needs_simulators
@pytest.mark.parametrize("stall", [0, 50])
def test_gathers_replay_exactly_in_both_simulators(stall):
    """Twelve random gathers (pages of 1 to 16 rows, first rows inside a page, offsets, strides) and
    the random programs' mix with gathers in it: every word and counter equal to the model's, on an
    always-ready memory and on one that stalls half the time."""
    from capra.randprog import random_program

    cfg = _stalled(stall)
    with config.use(cfg):
        records = [image.record(*_case(seed)[:2], EXTW) for seed in range(12)]
        records += [image.record(*random_program(9000 + seed)) for seed in range(6)]
        records.append(image.record(*_store_then_gather()[:2], EXTW))
    verdicts = replay.replay(records, cfg=cfg)
    for v in verdicts:
        assert v.passed, v.line


@needs_icarus
def test_gathers_replay_exactly_on_the_two_word_bus():
    """With ext_words=2 a gather's beats follow each row's alignment (a row at an odd address starts
    with a one-word beat), page by page: Icarus, on a memory that stalls a quarter of the cycles."""
    from replay.simulators import ICARUS

    cfg = dataclasses.replace(config.active(), ext_words=2, ext_stall=25, ext_seed=3)
    with config.use(cfg):
        records = [image.record(*_case(seed)[:2], EXTW) for seed in range(12)]
        records.append(image.record(*_store_then_gather()[:2], EXTW))
    [verdict] = replay.replay(records, cfg=cfg, simulators=[ICARUS])
    assert verdict.passed, verdict.line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_a_gather_through_a_descriptor_past_the_memory_halts_the_chip(sim, tmp_path):
    words = config.active().ext_memory
    ext = [0] * 64
    ext[40:42] = [8, words - 2]  # the second page's rows reach past the memory
    code = asm.load(100, 40, 1, 2) + asm.wait() + asm.gather(0, 100, 4, 2, page_shift=1) + asm.halt()
    with pytest.raises(ProgramError, match="reaches external word"):
        run_program(code, ext, words)
    raw = image.Record(code, ext)
    line = verdict(run_records(sim, [raw], tmp_path)[1])
    assert line == "FAIL: program 0 halted with status EXT_ADDR at instruction 2", line
