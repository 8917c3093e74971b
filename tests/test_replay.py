"""Replay on the RTL: random and hand-written programs in Icarus and Verilator, bit for bit.

The expected memory and counters in every record come from the Python machine model; the
testbench compares the RTL against them word by word and counter by counter.
"""

from __future__ import annotations

from collections import Counter

import ga2_progs
import pytest
from capra import asm, isa
from capra.randprog import EXTW, handwritten_programs, random_program
from conftest import needs_icarus, needs_verilator
from replay_util import counters, replay, run_file, verdict

N_RANDOM = 200  # at the default external latency
N_OTHER_LATENCY = 60  # at each of the others
LATENCIES = (0, 1, isa.EXT_LATENCY, 16)


def _suite(latency: int) -> tuple[list[list[int]], dict[int, list[int]]]:
    count = N_RANDOM if latency == isa.EXT_LATENCY else N_OTHER_LATENCY
    records = []
    for seed in range(count):
        code, ext = random_program(1000 * latency + seed, ext_latency=latency)
        records.append(ga2_progs.record(code, ext, EXTW, latency))
    for _name, code, ext in handwritten_programs():
        records.append(ga2_progs.record(code, ext, EXTW, latency))
    return records, {i: r[-6:-1] for i, r in enumerate(records)}


@pytest.fixture(scope="module")
def suite():
    return _suite(isa.EXT_LATENCY)


def test_random_programs_are_varied(suite):
    records, expected = suite
    cycles = [c[0] for c in expected.values()]
    overlapped = sum(1 for c in expected.values() if c[1] and (c[2] or c[3]))
    assert len(set(cycles)) > N_RANDOM // 2, "random programs should differ in length"
    assert overlapped > N_RANDOM // 2, "most programs should use both the DMA and a compute unit"


def test_random_programs_cover_the_matmul_and_vector_corners(suite):
    records, _expected = suite
    seen = Counter()
    for rec in records:
        code = rec[4 : 4 + rec[1]]
        for i in range(0, len(code), 4):
            ins = isa.Instr.decode(code[i : i + 4])
            if ins.op == isa.OP_MM:
                seen["R>4"] += ins.cnt > 4
                seen["R=9"] += ins.cnt == 9
                seen["K=1"] += ins.d == 1
                seen["K%4"] += ins.d % 4 != 0
                seen["M=1"] += ins.e == 1
                for flag in ("BIAS", "RELU", "BROWS"):
                    seen[flag] += bool(ins.flags & getattr(isa, f"MM_{flag}"))
                seen["int32"] += not ins.flags & isa.MM_OUT8
                seen["window"] += bool(ins.sub or ins.e >> 16)
            if ins.op == isa.OP_VEC:
                seen["bank clash"] += isa.vec_clashes(ins.cnt, ins.a, ins.b) > 0 and ins.sub in (
                    isa.VEC_ADD, isa.VEC_MUL, isa.VEC_MAX)
    corners = ("R>4", "R=9", "K=1", "K%4", "M=1", "BIAS", "RELU", "BROWS", "int32", "window", "bank clash")
    short = {k: seen[k] for k in corners if seen[k] < 5}
    assert not short, f"corners the random programs rarely reach: {short}"


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("latency", LATENCIES)
def test_random_programs_match_model_in_both_simulators(latency, suite):
    records, expected = suite if latency == isa.EXT_LATENCY else _suite(latency)
    results = {}
    for sim in ("icarus", "verilator"):
        rc, out = replay(sim, records, f"random_suite_latency{latency}", EXTW,
                         extra_defines=(f"EXT_LATENCY={latency}",))
        assert verdict(out).startswith(f"PASS: {len(records)} programs match"), out[-3000:]
        results[sim] = counters(out)
    assert results["icarus"] == results["verilator"] == expected


def test_latency_changes_the_cycles_not_the_results():
    code, ext = random_program(7)
    fast, slow = (ga2_progs.record(code, ext, EXTW, lat) for lat in (0, 16))
    assert fast[:-6] == slow[:-6], "memory image and expectations must not depend on the latency"
    assert fast[-6] < slow[-6], "a slower memory must cost cycles"


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
    # a 3,000-word load takes over 3,000 cycles, more than the watchdog allows in this build
    code = asm.load(0, 0, 1, 3000) + asm.halt()
    records = [ga2_progs.record(asm.halt(), [], 4096), ga2_progs.record(code, [], 4096)]
    rc, out = replay(sim, records, "watchdog", 4096, extra_defines=("WATCHDOG=2000",))
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
    ("WAIT keeping as many transfers as the queue holds", [asm.wait()[0] | isa.DMA_QUEUE, 0, 0, 0]),
])
def test_illegal_instruction_halts_the_chip_with_a_fail(sim, what, code):
    from capra import ProgramError
    from capra.machine import run_program

    with pytest.raises(ProgramError):
        run_program(code + asm.halt(), [], EXTW)  # the model refuses it too
    line = verdict(replay(sim, [_raw_record(code + asm.halt())], "illegal", EXTW)[1])
    assert line.startswith("FAIL: program 0 halted on an illegal instruction"), f"{what}: {line}"


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_running_past_the_last_instruction_halts_as_illegal(sim):
    from capra import ProgramError
    from capra.machine import run_program

    code = asm.wait() * isa.IMEM_INSTRS  # a full instruction memory and no HALT
    with pytest.raises(ProgramError, match="runs past the last instruction"):
        run_program(code, [], EXTW)
    line = verdict(replay(sim, [_raw_record(code)], "past_imem", EXTW)[1])
    assert line.startswith("FAIL: program 0 halted on an illegal instruction"), line
