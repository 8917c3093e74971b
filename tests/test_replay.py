"""Replay on the RTL: random and hand-written programs in Icarus and Verilator, bit for bit.

The expected memory and counters in every record come from the Python machine model; the
testbench compares the RTL against them word by word and counter by counter.
"""

from __future__ import annotations

import ga2_progs
import pytest
from capra import asm
from capra.randprog import EXTW, handwritten_programs, random_program
from conftest import needs_icarus, needs_verilator
from replay_util import counters, replay, run_file, verdict

N_RANDOM = 200


@pytest.fixture(scope="module")
def suite():
    records = []
    for seed in range(N_RANDOM):
        code, ext = random_program(seed)
        records.append(ga2_progs.record(code, ext, EXTW))
    for _name, code, ext in handwritten_programs():
        records.append(ga2_progs.record(code, ext, EXTW))
    expected = {i: r[-6:-1] for i, r in enumerate(records)}
    return records, expected


def test_random_programs_are_varied(suite):
    records, expected = suite
    cycles = [c[0] for c in expected.values()]
    overlapped = sum(1 for c in expected.values() if c[1] and (c[2] or c[3]))
    assert len(set(cycles)) > N_RANDOM // 2, "random programs should differ in length"
    assert overlapped > N_RANDOM // 2, "most programs should use both the DMA and a compute unit"


@needs_icarus
@needs_verilator
def test_random_programs_match_model_in_both_simulators(suite):
    records, expected = suite
    results = {}
    for sim in ("icarus", "verilator"):
        rc, out = replay(sim, records, "random_suite", EXTW)
        assert verdict(out).startswith(f"PASS: {len(records)} programs match"), out[-3000:]
        results[sim] = counters(out)
    assert results["icarus"] == results["verilator"] == expected


def _flip(words: list[int], index: int, bit: int = 5) -> list[int]:
    out = list(words)
    out[index] ^= 1 << bit
    return out


def _small_image() -> tuple[list[int], list[int]]:
    records = [ga2_progs.record(code, ext, EXTW) for _n, code, ext in handwritten_programs()[:4]]
    return records, ga2_progs.image(records)


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
@pytest.mark.parametrize("where", ["code", "data", "expected", "counter"])
def test_tampered_image_fails_with_checksum(sim, where):
    records, words = _small_image()
    rec = records[1]  # the second program: load and store back
    n_code, n_init = rec[1], rec[2]
    offset = 1 + len(records[0])  # the second record starts here in the image
    index = {"code": 4, "data": 4 + n_code + 1, "expected": 4 + n_code + n_init + 1,
             "counter": len(rec) - 3}[where]
    rc, out = replay(sim, _flip(words, offset + index), f"tampered_{where}", EXTW)
    line = verdict(out)
    assert line.startswith("FAIL") and "program 1" in line and "checksum" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_truncated_image_fails(sim):
    _records, words = _small_image()
    rc, out = replay(sim, words[: len(words) - 7], "truncated", EXTW)
    line = verdict(out)
    assert line.startswith("FAIL") and "truncated" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_missing_program_fails(sim):
    _records, words = _small_image()
    words = list(words)
    words[0] += 1  # claims one more program than the file holds
    line = verdict(replay(sim, words, "missing_program", EXTW)[1])
    assert line.startswith("FAIL") and "program 4" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_malformed_first_word_fails(sim):
    line = verdict(replay(sim, [0, 1, 2, 3], "malformed", EXTW)[1])
    assert line.startswith("FAIL") and "malformed" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_program_that_does_not_halt_in_time_is_a_fail(sim):
    # a 4 x 1000 x 8 matmul takes about 5,000 cycles, more than the watchdog allows in this build
    code = asm.qcfg(qa=1) + asm.mm(0, 1000, 3100, 4, 1000, 8, out8=True, brows=True) + asm.halt()
    records = [ga2_progs.record(asm.halt(), [], EXTW), ga2_progs.record(code, [], EXTW)]
    rc, out = replay(sim, records, "watchdog", EXTW, extra_defines=("WATCHDOG=2000",))
    line = verdict(out)
    assert line.startswith("FAIL") and "program 1 did not halt" in line and "2000 cycles" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_wrong_expectation_is_a_mismatch_naming_word(sim):
    code = asm.load(0, 0, 1, 8) + asm.store(0, 100, 1, 8) + asm.halt()
    rec = ga2_progs.record(code, list(range(1, 9)), EXTW)
    # change expected word 103 (the 4th stored word) and recompute the checksum, as a model bug would
    n_code, n_init = rec[1], rec[2]
    rec[4 + n_code + n_init + 103] += 1
    rec[-1] = sum(rec[:-1]) & 0xFFFFFFFF
    line = verdict(replay(sim, [rec], "mismatch", EXTW)[1])
    assert line.startswith("MISMATCH") and "external word 103" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_wrong_counter_is_a_mismatch_naming_counter(sim):
    rec = ga2_progs.record(asm.load(0, 0, 1, 8) + asm.halt(), list(range(1, 9)), EXTW)
    rec[-3] += 1  # c3
    rec[-1] = sum(rec[:-1]) & 0xFFFFFFFF
    line = verdict(replay(sim, [rec], "counter_mismatch", EXTW)[1])
    assert line.startswith("MISMATCH") and "counter c3" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
@pytest.mark.parametrize("text, reason", [
    ("00000001\n52454321\nzzzz0000\n", "line 3 has the character 'z', not a hex digit"),
    ("00000001\n123456789\n", "line 2 has 9 hex digits"),
])
def test_non_hex_text_is_a_fail_naming_the_line(sim, text, reason, tmp_path):
    path = tmp_path / "not_hex.hex"
    path.write_text(text)
    out = run_file(sim, path, EXTW)[1]
    line = verdict(out)
    assert line.startswith("FAIL: malformed image") and reason in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_missing_image_is_a_fail(sim, tmp_path):
    out = run_file(sim, tmp_path / "there_is_no_such_file.hex", EXTW)[1]
    assert verdict(out).startswith("FAIL: cannot open the image"), out[-500:]


def _raw_record(code: list[int]) -> list[int]:
    """A record for code the machine model refuses: expectations of zero, a valid checksum."""
    words = [ga2_progs.REC_MAGIC, len(code), 0, 0, *code, 0, 0, 0, 0, 0]
    return words + [sum(words) & 0xFFFFFFFF]


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
@pytest.mark.parametrize("what, code", [
    ("opcode 9", [0x90000000, 0, 0, 0]),
    ("a reserved bit of word 0", [asm.qcfg(qa=1)[0] | (1 << 17), 0, 0, 0]),
    ("a reserved bit of word 3", asm.qcfg(qa=1)[:3] + [1 << 30]),
    ("WAIT keeping two transfers", [asm.wait()[0] | 2, 0, 0, 0]),
])
def test_illegal_instruction_halts_the_chip_with_a_fail(sim, what, code):
    from capra import ProgramError
    from capra.machine import run_program

    with pytest.raises(ProgramError):
        run_program(code + asm.halt(), [], EXTW)  # the model refuses it too
    line = verdict(replay(sim, [_raw_record(code + asm.halt())], "illegal", EXTW)[1])
    assert line.startswith("FAIL: program 0 halted on an illegal instruction"), f"{what}: {line}"
