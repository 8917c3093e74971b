"""Replay on the RTL: random and hand-written programs in Icarus and Verilator, bit for bit.

The expected memory and counters in every record come from the Python machine model; the
testbench compares the RTL against them word by word (external memory and the scratchpad words
each program wrote) and counter by counter. The second half feeds the testbench broken images:
each must be a FAIL or MISMATCH naming what is wrong, the same in both simulators, never a PASS
and never a hang.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import paged_lm
import pytest
import replay
import tiny_lm
from capra import asm, isa, machine
from capra.randprog import SPAN, handwritten_programs, random_program
from capra_cli import visibility
from conftest import needs_icarus, needs_simulators, needs_verilator
from replay import image
from replay_util import IMG_HEADER, run_addresses, run_file, run_records, seal, sections, verdict

N_RANDOM = 200  # at the default external latency
N_OTHER_LATENCY = 60  # at each of the others
LATENCIES = (0, 1, isa.EXT_LATENCY, 16)


def _suite(latency: int) -> list[image.Record]:
    count = N_RANDOM if latency == isa.EXT_LATENCY else N_OTHER_LATENCY
    records = []
    for seed in range(count):
        code, ext = random_program(1000 * latency + seed, ext_latency=latency)
        records.append(image.record(code, ext, ext_latency=latency))
    for _name, code, ext in handwritten_programs():
        records.append(image.record(code, ext, ext_latency=latency))
    return records


@pytest.fixture(scope="module")
def suite():
    return _suite(isa.EXT_LATENCY)


@pytest.mark.heavy
def test_random_programs_are_varied(suite):
    cycles = [r.counters[0] for r in suite]
    overlapped = sum(1 for r in suite if r.counters[1] and (r.counters[2] or r.counters[3]))
    assert len(set(cycles)) > N_RANDOM // 2, "random programs should differ in length"
    assert overlapped > N_RANDOM // 2, "most programs should use both the DMA and a compute unit"


def test_random_programs_cover_the_matmul_and_vector_corners(suite):
    seen = Counter()
    for rec in suite:
        code = rec.code
        qbias, before = 0, None  # the last QCFG's bias address; the matmul engine's last MM
        for i in range(0, len(code), 4):
            ins = isa.Instr.decode(code[i : i + 4])
            if ins.op == isa.OP_QCFG:
                qbias = ins.d
            if ins.op == isa.OP_MM:
                eff = isa.effects(ins, qbias=qbias)
                if before is not None:  # back-to-back MMs: behind one that drains, or reading its words
                    seen["MM chained"] += bool(ins.chain)
                    seen["MM after the MM it reads"] += bool(eff.read_set & before.write_set)
                before = eff
                seen["R>4"] += ins.cnt > 4
                seen["R=9"] += ins.cnt == 9
                seen["K=1"] += ins.d == 1
                seen["K%4"] += ins.d % 4 != 0
                seen["M=1"] += ins.e == 1
                for flag in ("BIAS", "RELU", "BROWS"):
                    seen[flag] += bool(ins.flags & getattr(isa, f"MM_{flag}"))
                seen["int32"] += not ins.flags & isa.MM_OUT8
                seen["window"] += bool(ins.sub or isa.mm_fields(ins).first)
                seen["stride"] += bool(isa.mm_fields(ins).stride)
            if ins.op == isa.OP_VEC:
                before = None
                seen["bank clash"] += (isa.vec_clashes(ins.cnt, ins.a, ins.b, isa.vec_rows(ins)) > 0
                                       and isa.VEC_OPS[ins.sub].reads_b)
                seen["VEC rows"] += isa.vec_rows(ins) > 1
                seen["argmax rows"] += isa.vec_rows(ins) > 1 and ins.sub == isa.VEC_ARGMAX
    corners = ("R>4", "R=9", "K=1", "K%4", "M=1", "BIAS", "RELU", "BROWS", "int32", "window", "stride",
               "bank clash", "VEC rows", "argmax rows", "MM chained", "MM after the MM it reads")
    short = {k: seen[k] for k in corners if seen[k] < 5}
    assert not short, f"corners the random programs rarely reach: {short}"


# make test: Icarus replays the first quarter of the random programs (and every handwritten one);
# Verilator replays every program in the same test, so a mutant of the RTL or the model that the
# Icarus share misses still fails make test; make test-full replays the other three quarters in Icarus
ICARUS_SHARE = N_RANDOM // 4
ICARUS_SHARE_OTHER = N_OTHER_LATENCY // 4  # at each other latency


def _replay_in(records: list[image.Record], name: str, latency: int, *sims: str) -> None:
    verdicts = replay.replay(records, name=name, latency=latency,
                             simulators=tuple(replay.simulators.BY_NAME[s] for s in sims))
    for v in verdicts:
        assert v.passed and v.line.startswith(f"PASS: {len(records)} programs match"), v.problems
        assert v.counters == [r.counters for r in records]


@needs_simulators
@pytest.mark.parametrize("latency", LATENCIES)
def test_random_programs_match_model_in_both_simulators(latency, suite):
    """Every program in Verilator; in Icarus (a few thousand cycles a second), the first quarter of
    the random programs and the handwritten ones (the rest in make test-full, below)."""
    records = suite if latency == isa.EXT_LATENCY else _suite(latency)
    count = N_RANDOM if latency == isa.EXT_LATENCY else N_OTHER_LATENCY
    share = ICARUS_SHARE if latency == isa.EXT_LATENCY else ICARUS_SHARE_OTHER
    _replay_in(records, f"random_suite_latency{latency}", latency, "verilator")
    _replay_in(records[:share] + records[count:], f"random_suite_latency{latency}_icarus", latency, "icarus")


@needs_icarus
@pytest.mark.slow
@pytest.mark.parametrize("latency", LATENCIES)
def test_the_rest_of_the_random_programs_in_icarus(latency, suite):
    if latency == isa.EXT_LATENCY:
        records, share, count = suite, ICARUS_SHARE, N_RANDOM
    else:
        records, share, count = _suite(latency), ICARUS_SHARE_OTHER, N_OTHER_LATENCY
    _replay_in(records[share:count], f"random_suite_latency{latency}_icarus_rest", latency, "icarus")


MADE_PROGRAMS = 40  # random programs made for the default latency, run at another
ICARUS_MADE_SHARE = MADE_PROGRAMS // 4  # make test: Icarus runs the first quarter of them (Verilator all)


def _made_for_default(latency: int, suite) -> list[image.Record]:
    """Random programs made for the default latency and the chapter's first decode steps compiled for
    it, as records for a memory of `latency` cycles (their memory words the same as at the default)."""
    _toks, steps = paged_lm.PagedChip(tiny_lm.make_model("structured"), 8, paged=False).generate(0, 8)
    made = [(r.code, r.init, r) for r in suite[:MADE_PROGRAMS]]
    made += [(s.code, s.ext, image.record(s.code, s.ext)) for s in steps]
    records = []
    for code, init, default in made:
        rec = image.record(code, init, ext_latency=latency)
        assert (rec.ext_changes, rec.sp_words) == (default.ext_changes, default.sp_words)
        records.append(rec)
    return records


@needs_simulators
@pytest.mark.parametrize("latency", [pytest.param(0, marks=pytest.mark.slow), 13, 30])  # 0: also the suite's own
def test_programs_made_for_one_latency_are_right_at_every_other(latency, suite):
    """Programs are right on any memory (docs/isa.md: no conflict with a transfer that may be in
    flight, decided without a clock). Random programs made for the default latency and the
    chapter's decode steps compiled for it give the same memory at other latencies, with the
    counters the model gives for each: every one in Verilator, the first quarter of the random
    programs and the decode steps in Icarus (the rest in make test-full, below)."""
    records = _made_for_default(latency, suite)
    name = f"made_for_latency{isa.EXT_LATENCY}_run_at_{latency}"
    _replay_in(records, name, latency, "verilator")
    _replay_in(records[:ICARUS_MADE_SHARE] + records[MADE_PROGRAMS:], f"{name}_icarus", latency, "icarus")


@needs_icarus
@pytest.mark.slow
@pytest.mark.parametrize("latency", [0, 13, 30])
def test_the_rest_of_the_programs_made_for_one_latency_in_icarus(latency, suite):
    records = _made_for_default(latency, suite)[ICARUS_MADE_SHARE:MADE_PROGRAMS]
    _replay_in(records, f"made_for_latency{isa.EXT_LATENCY}_run_at_{latency}_icarus_rest", latency, "icarus")


STALL_PROGRAMS = 60  # random programs per stall rate in make test (the soak runs thousands: make soak STALL=50)
# Icarus replays the first quarter of them in make test (and the hand-written ones and the decode
# steps), the rest in make test-full; Verilator all of them
ICARUS_STALL_SHARE = STALL_PROGRAMS // 4


def _stalled(stall: int, suite) -> tuple[list[image.Record], object]:
    """Random programs, the handwritten ones and the chapter's first decode steps (all made for an
    always-ready memory) as records for a memory that stalls `stall` percent of the cycles, and that
    memory's configuration."""
    from dataclasses import replace

    from capra import config

    _toks, steps = paged_lm.PagedChip(tiny_lm.make_model("structured"), 4, paged=False).generate(0, 4)
    made = [(r.code, r.init, r) for r in suite[:STALL_PROGRAMS] + suite[N_RANDOM:]]
    made += [(s.code, s.ext, image.record(s.code, s.ext)) for s in steps]
    cfg = replace(config.active(), ext_stall=stall, ext_seed=100 + stall)
    with config.use(cfg):
        records = []
        for code, init, always_ready in made:
            rec = image.record(code, init)
            assert (rec.ext_changes, rec.sp_words) == (always_ready.ext_changes, always_ready.sp_words)
            records.append(rec)
    assert sum(r.counters[0] > a.counters[0] for r, (_c, _i, a) in zip(records, made)) > len(made) // 2
    return records, cfg


def _replay_stalled(records: list[image.Record], cfg, name: str, *sims: str) -> None:
    from capra import config

    with config.use(cfg):
        verdicts = replay.replay(records, name=name, simulators=tuple(replay.simulators.BY_NAME[s] for s in sims))
    for v in verdicts:
        assert v.passed, v.problems
        assert v.counters == [r.counters for r in records]


@needs_simulators
@pytest.mark.parametrize("stall", [10, 50])
def test_programs_are_exact_on_a_memory_that_stalls(stall, suite):
    """A memory whose five AXI channels stall 10% or 50% of the cycles, on the seeded schedule the
    machine model follows too: random programs, the handwritten ones and the chapter's first decode
    steps (all made for an always-ready memory) give the memory and scratchpad words they give
    there, and every counter equals the model's for the same schedule, in both simulators."""
    records, cfg = _stalled(stall, suite)
    share = ICARUS_STALL_SHARE
    _replay_stalled(records, cfg, f"stall{stall}", "verilator")
    _replay_stalled(records[:share] + records[STALL_PROGRAMS:], cfg, f"stall{stall}_icarus", "icarus")


@needs_icarus
@pytest.mark.slow
@pytest.mark.parametrize("stall", [10, 50])
def test_the_rest_of_the_programs_on_a_memory_that_stalls_in_icarus(stall, suite):
    records, cfg = _stalled(stall, suite)
    _replay_stalled(records[ICARUS_STALL_SHARE:STALL_PROGRAMS], cfg, f"stall{stall}_icarus_rest", "icarus")


def test_latency_changes_the_cycles_not_the_results():
    code, ext = random_program(7)
    fast, slow = (image.record(code, ext, ext_latency=lat) for lat in (0, 16))
    assert (fast.code, fast.init, fast.ext_changes, fast.sp_words) == (slow.code, slow.init, slow.ext_changes,
                                                                       slow.sp_words), \
        "memory image and expectations must not depend on the latency"
    assert fast.counters[0] < slow.counters[0], "a slower memory must cost cycles"


def test_random_programs_store_what_they_compute(suite):
    """Every word a compute instruction writes is stored to external memory before the program ends,
    and every program computes some words that are not zero (the suite's random programs)."""
    for i, rec in enumerate(suite[:N_RANDOM]):
        code, ext = rec.code, rec.init
        mach = machine.Machine.with_ext(ext, SPAN)
        unstored: set[int] = set()
        computed = []
        for pc in range(len(code) // 4):
            ins = isa.Instr.decode(code[4 * pc : 4 * pc + 4])
            if not mach.step(pc, ins):
                break
            if ins.op in (isa.OP_MM, isa.OP_VEC, isa.OP_SMAX):
                unstored |= mach.last_writes
                computed += [int(mach.sram[w]) for w in mach.last_writes]
            if ins.op == isa.OP_STORE:
                f = isa.dma_fields(ins)
                unstored -= {f.sram + r * f.sram_stride + c for r in range(f.rows) for c in range(f.cols)}
        assert not unstored, f"suite program {i} never stores scratchpad words {sorted(unstored)[:8]}"
        assert any(computed), f"suite program {i} computes only zeros"


@pytest.mark.heavy
def test_a_replay_sees_at_least_95_percent_of_corrupted_computed_words(suite):
    """Corrupt, one at a time, each word a compute instruction writes in the random suite (in the
    machine model): at least 95% of them must change what the replay compares."""
    v = visibility.of_programs((r.code, r.init) for r in suite[:N_RANDOM])
    row = visibility.line("random programs", v, v)
    assert sum(v.total.values()) > 2000, "the random programs should compute a lot"
    assert v.percent() >= visibility.GOAL, row
    assert all(v.percent(kind) >= 90 for kind in visibility.COMPUTE.values()), row


def _round_negative_ties_down(acc, mult, shift):
    """requantize with one bug: exact ties of negative values round down (-2.5 -> -3) instead of up."""
    p = np.asarray(acc, dtype=object) * int(mult)
    if shift > 0:
        p = np.array([(int(x) + (1 << (shift - 1)) - (int(x) < 0)) >> shift for x in p.reshape(-1)],
                     dtype=object).reshape(p.shape)
    return np.clip(p.astype(np.int64), machine.INT8_MIN, machine.INT8_MAX)


def test_the_suite_sees_a_rounding_error_at_negative_ties(suite, monkeypatch):
    """A requantization that rounds negative exact ties the other way: the hand-written ties program
    records different memory under it, and so does a random program of the suite (an exact tie is
    rare in random data: two of the 200 at the default latency meet one, which is why the hand-written
    program exists). Each program is compared with its own record."""
    records = suite
    halves = np.array([-3, -2, -1, 3])  # -1.5, -1, -0.5, 1.5 after a shift of 1
    assert machine.requantize(halves, 1, 1).tolist() == [-1, -1, 0, 2]
    assert _round_negative_ties_down(halves, 1, 1).tolist() == [-2, -1, -1, 2]
    hand = handwritten_programs()
    programs = [(r.code, r.init) for r in records]  # the suite's own programs, random then hand-written
    ties = N_RANDOM + next(i for i, (name, _c, _e) in enumerate(hand) if name.startswith("requantization at exact"))
    monkeypatch.setattr(isa, "requantize", _round_negative_ties_down)  # the one definition, every unit's
    differ = [i for i, (code, ext) in enumerate(programs) if image.record(code, ext) != records[i]]
    assert ties in differ and any(i < N_RANDOM for i in differ), differ


# ---- broken images: a named FAIL or MISMATCH, the same in both simulators --------------------------------


def _both(path, timeout: float = 120) -> str:
    """Run the image at path in both simulators; their verdict lines must be identical."""
    lines = {sim: verdict(run_file(sim, path, timeout=timeout)[1]) for sim in ("icarus", "verilator")}
    assert lines["icarus"] == lines["verilator"], lines
    return lines["icarus"]


def _both_words(words: list[int], folder) -> str:
    """Write the words as an image in `folder` and run it in both simulators."""
    path = folder / "image.hex"
    image.write_words(words, path)
    return _both(path)


def _small_image() -> tuple[list[list[int]], list[int]]:
    records = [image.record(code, ext).words() for _n, code, ext in handwritten_programs()[:4]]
    return records, image.header_words(records)


def _second_record(records) -> tuple[int, dict[str, slice]]:
    """Where the second record (load and store back) starts in the image, and its sections."""
    return IMG_HEADER + len(records[0]), sections(records[1])


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("where", ["code", "init", "xvals", "svals", "counters", "header"])
def test_tampered_image_fails_with_crc(where, tmp_path):
    records, words = _small_image()
    at, sec = _second_record(records)
    index = 1 if where == "header" else at + sec[where].start + 1
    words = list(words)
    words[index] ^= 1 << 5
    line = _both_words(words, tmp_path)
    want = "header CRC-32 mismatch" if where == "header" else "program 1: CRC-32 mismatch"
    assert line.startswith("FAIL") and want in line, line


@needs_icarus
@needs_verilator
def test_swapped_code_words_fail_although_their_sum_is_unchanged(tmp_path):
    """A plain sum cannot see two words trade places; CRC-32 does."""
    records, words = _small_image()
    at, sec = _second_record(records)
    i, j = at + sec["code"].start, at + sec["code"].start + 1  # a LOAD's first two words
    assert words[i] != words[j]
    swapped = list(words)
    swapped[i], swapped[j] = words[j], words[i]
    assert sum(swapped) == sum(words)
    line = _both_words(swapped, tmp_path)
    assert line.startswith("FAIL: program 1: CRC-32 mismatch"), line


@needs_icarus
@needs_verilator
def test_truncated_image_fails(tmp_path):
    _records, words = _small_image()
    line = _both_words(words[: len(words) - 7], tmp_path)
    assert line.startswith("FAIL: truncated image") and f"ends after line {len(words) - 7}" in line, line


@needs_icarus
@needs_verilator
def test_words_after_the_counted_ones_fail(tmp_path):
    _records, words = _small_image()
    line = _both_words([*words, 0], tmp_path)
    assert line.startswith("FAIL: malformed image") and f"goes on after the {len(words)} lines" in line, line


@needs_icarus
@needs_verilator
def test_a_word_count_beyond_maxwords_fails_before_reading_on(tmp_path):
    words = seal([image.IMG_MAGIC, 1, (1 << 20) + 1, 0])
    line = _both_words(words, tmp_path)
    assert line.startswith("FAIL: malformed image") and "MAXWORDS=1048576" in line, line


@needs_icarus
@needs_verilator
def test_missing_program_fails(tmp_path):
    """A header that claims one more program than the image holds (its CRCs made consistent)."""
    _records, words = _small_image()
    words = list(words)
    words[1] += 1
    fixed = image.REC_HEADER + image.N_COUNTERS + 1  # a record's words besides its lists
    words[2] += fixed  # room for a fifth record's fixed words, so the header itself is plausible
    line = _both_words(seal(words) + [0] * fixed, tmp_path)
    assert line.startswith("FAIL: malformed image: program 4 record does not start with the record magic"), line


@needs_icarus
@needs_verilator
def test_malformed_first_word_fails(tmp_path):
    line = _both_words([0, 1, 2, 3], tmp_path)
    assert line.startswith("FAIL: malformed image") and "line 1 is 00000000, not the image magic 47413204" in line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("text, reason", [
    (b"47413204\nzzzz0000\n", "line 2 byte 1 is 0x7a, not a lowercase hex digit"),
    (b"47413204\n000000001\n", "line 2 byte 9 is 0x31, not the line feed"),
    (b"47413204\n0000\x000001\n", "line 2 byte 5 is 0x00, not a lowercase hex digit"),
    (b"47413204\n0000000A\n", "line 2 byte 8 is 0x41, not a lowercase hex digit"),
    (b"47413204\n00000001 \n", "line 2 byte 9 is 0x20, not the line feed"),
    (b"47413204\n00000001\r\n", "line 2 byte 9 is 0x0d, not the line feed"),
    (b"47413204\n 0000001\n", "line 2 byte 1 is 0x20, not a lowercase hex digit"),
    (b"47413204\n\n00000001\n", "line 2 byte 1 is 0x0a, not a lowercase hex digit"),
    (b"47413204\n\t0000001\n", "line 2 byte 1 is 0x09, not a lowercase hex digit"),
    (b"47413204\n00000001", "truncated image"),
], ids=["letter", "nine digits", "NUL", "capital", "space", "CRLF", "leading space", "blank line", "tab",
        "no final line feed"])
def test_a_byte_outside_the_line_format_is_a_fail_naming_it(text, reason, tmp_path):
    """Exactly one form: eight lowercase hex digits and a line feed. Anything else, in both."""
    path = tmp_path / "bad.hex"
    path.write_bytes(text)
    line = _both(path)
    assert line.startswith("FAIL") and reason in line, line


@needs_icarus
@needs_verilator
def test_a_nul_byte_inside_a_valid_image_fails(tmp_path):
    """A NUL in the middle of a good image's word (Icarus used to skip the rest of the line)."""
    _records, words = _small_image()
    path = tmp_path / "nul.hex"
    image.write_words(words, path)
    data = bytearray(path.read_bytes())
    data[9 * 10 + 3] = 0  # line 11, byte 4
    path.write_bytes(bytes(data))
    line = _both(path)
    assert line.startswith("FAIL") and "line 11 byte 4 is 0x00" in line, line


@needs_icarus
@needs_verilator
def test_a_latency_the_chip_cannot_wait_for_is_a_fail(tmp_path):
    """+LATENCY picks the memory's latency at run time, 0..30; the same image under another latency
    than the one its counters were recorded for is a MISMATCH on a cycle counter, not a PASS."""
    _records, words = _small_image()
    path = tmp_path / "small.hex"
    image.write_words(words, path)
    for sim in ("icarus", "verilator"):
        line = verdict(run_file(sim, path, latency=31)[1])
        assert line == "FAIL: +LATENCY=31 is outside 0..30 (the chip keeps at most 32 requests waiting)", line
        assert verdict(run_file(sim, path, latency=isa.EXT_LATENCY)[1]).startswith("PASS: 4 programs")
        assert verdict(run_file(sim, path, latency=0)[1]).startswith("MISMATCH: program 1 counter c0")


@needs_icarus
@needs_verilator
def test_a_directory_is_a_fail_not_a_hang(tmp_path):
    line = _both(tmp_path, timeout=60)
    assert line.startswith("FAIL: cannot read the image") and "no byte could be read" in line, line


@needs_icarus
@needs_verilator
def test_an_endless_file_is_a_fail_not_a_hang():
    line = _both("/dev/zero", timeout=60)
    assert line.startswith("FAIL: malformed image /dev/zero: line 1 byte 1 is 0x00"), line


def _mismatch_image(path) -> None:
    """A one-program image whose expected external word 103 is wrong (as a model bug would make it)."""
    code = asm.load(0, 0, 1, 8) + asm.store(0, 100, 1, 8) + asm.halt()
    rec = image.record(code, list(range(1, 9))).words()
    rec[sections(rec)["xvals"].start + 3] += 1  # the 4th stored word, external word 103
    image.write_image([rec], path)


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_wrong_expectation_is_a_mismatch_naming_word(sim, tmp_path):
    _mismatch_image(tmp_path / "mismatch.hex")
    line = verdict(run_file(sim, tmp_path / "mismatch.hex")[1])
    assert line.startswith("MISMATCH: program 0 external word 103: expected 00000005, got 00000004"), line


@needs_icarus
@needs_verilator
def test_a_long_path_reads_that_file(tmp_path):
    """More than 256 characters (the old testbench kept the last 128, Verilator's runtime 256)."""
    path = tmp_path / ("d" * 200) / ("e" * 200) / "mismatch.hex"
    path.parent.mkdir(parents=True)
    _mismatch_image(path)
    assert len(str(path)) > 400
    line = _both(path)
    assert line.startswith("MISMATCH: program 0 external word 103"), line


@needs_icarus
@needs_verilator
def test_a_path_longer_than_path_max_fails_naming_the_limit(tmp_path):
    """Its last 4,096 characters name a valid image (slashes repeat freely in a path): reading it
    would PASS, so the testbench must refuse the path instead of cutting it."""
    records, _words = _small_image()
    valid = tmp_path / "valid.hex"
    image.write_image(records, valid)
    assert _both(valid).startswith("PASS: 4 programs")
    long = "/" * (5000 - len(str(valid))) + str(valid)
    line = _both(long)
    assert line.startswith("FAIL: the +PROG path") and "longer than PATH_MAX=4096 characters" in line, line


@needs_icarus
@needs_verilator
def test_a_wrong_scratchpad_word_is_a_mismatch_naming_it(tmp_path):
    """A program that computes into the scratchpad and stores nothing: only the scratchpad comparison
    can see a wrong result."""
    code = (asm.load(0, 0, 1, 8) + asm.wait() + asm.qcfg(qa=1, qb=1, shift=1)
            + asm.vec(isa.VEC_ADD, 0, 40, 16, b=4) + asm.halt())
    rec = image.record(code, [0x01020304 * (i + 1) & 0xFFFFFFFF for i in range(8)]).words()
    s = sections(rec)
    assert rec[s["xvals"]] == [], "the program must not change the external memory"
    sp = dict(zip(run_addresses(rec[s["sruns"]]),
                  range(s["svals"].start, s["svals"].stop)))
    assert sorted(sp) == [*range(8), *range(40, 44)]
    want = rec[sp[42]]
    rec[sp[42]] ^= 0x100  # lane 1 of word 42, a sum the VEC wrote
    image.write_image([rec], tmp_path / "sp.hex")
    line = _both(tmp_path / "sp.hex")
    assert line == (f"MISMATCH: program 0 scratchpad word 42: expected {want ^ 0x100:08x}, got {want:08x}"), line


@needs_icarus
@needs_verilator
def test_missing_image_is_a_fail(tmp_path):
    assert _both(tmp_path / "there_is_no_such_file.hex").startswith("FAIL: cannot open the image")


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_program_that_does_not_halt_in_time_is_a_fail(sim, tmp_path):
    # a 3,000-word load takes over 3,000 cycles, more than a watchdog bound of 2,000 allows
    code = asm.load(0, 0, 1, 3000) + asm.halt()
    records = [image.record(asm.halt(), []), image.record(code, [])]
    rc, out = run_records(sim, records, tmp_path, plusargs=("+WATCHDOG=2000",))
    line = verdict(out)
    assert line.startswith("FAIL") and "program 1 did not halt" in line and "2000 cycles" in line, line


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_wrong_counter_is_a_mismatch_naming_counter(sim, tmp_path):
    rec = image.record(asm.load(0, 0, 1, 8) + asm.halt(), list(range(1, 9)))
    rec.counters[3] += 1
    line = verdict(run_records(sim, [rec], tmp_path)[1])
    assert line.startswith("MISMATCH: program 0 counter c3"), line


def _raw_record(code: list[int]) -> image.Record:
    """A record for code the machine model refuses: no expectations, counters of zero."""
    return image.Record(code)


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
@pytest.mark.parametrize("what, code", [
    ("opcode 9", [0x90000000, 0, 0, 0]),
    ("a reserved bit of word 0", [asm.qcfg(qa=1)[0] | (1 << 17), 0, 0, 0]),
    ("a reserved bit of word 3", asm.qcfg(qa=1)[:3] + [1 << 30]),
    ("WAIT keeping as many transfers as the queue holds", [asm.wait()[0] | isa.DMA_QUEUE, 0, 0, 0]),
    # fields that ran a unit without end or over a whole memory before the decoder refused them
    ("a LOAD of no rows", isa.Instr(isa.OP_LOAD, cnt=0, c=1).encode()),
    ("a STORE of no columns (it wrote all 65,536 external words)", isa.Instr(isa.OP_STORE, cnt=1, c=0).encode()),
    ("a gather of no rows", isa.Instr(isa.OP_LOAD, flags=isa.LD_GATHER, cnt=0, c=1).encode()),
    ("a STORE with the GATHER flag", isa.Instr(isa.OP_STORE, flags=isa.LD_GATHER, cnt=1, c=1).encode()),
    ("a LOAD with flag 2", isa.Instr(isa.OP_LOAD, flags=2, cnt=1, c=1).encode()),
    ("a LOAD with a page shift but no GATHER flag", isa.Instr(isa.OP_LOAD, sub=2, cnt=1, c=1).encode()),
    ("an MM of no rows (it never halted)", isa.Instr(isa.OP_MM, cnt=0, d=16, e=16).encode()),
    ("an MM of no reduction (it never halted)", isa.Instr(isa.OP_MM, cnt=1, d=0, e=16).encode()),
    ("an MM reduction past MM_MAX_K", isa.Instr(isa.OP_MM, cnt=1, d=isa.MM_MAX_K + 1, e=16).encode()),
    ("an MM of no columns", isa.Instr(isa.OP_MM, cnt=1, d=16, e=0).encode()),
    ("an MM column window past the matrix", isa.Instr(isa.OP_MM, cnt=1, d=16, e=16 | 3 << 16, sub=2).encode()),
    ("an MM column window that starts at the end", isa.Instr(isa.OP_MM, cnt=1, d=16, e=16 | 4 << 16).encode()),
    ("a VEC of sub-op 6 (it ran as COPY)", isa.Instr(isa.OP_VEC, sub=6, cnt=4).encode()),
    ("a VEC of no elements (it wrote 65,536 words)", isa.Instr(isa.OP_VEC, cnt=0).encode()),
    ("an SMAX of no elements", isa.Instr(isa.OP_SMAX, cnt=0).encode()),
    ("a QCFG shift past MAX_SHIFT", isa.Instr(isa.OP_QCFG, c=isa.MAX_SHIFT + 1).encode()),
])
def test_illegal_instruction_halts_the_chip_with_a_fail(sim, what, code, tmp_path):
    from capra import ProgramError
    from capra.machine import run_program

    with pytest.raises(ProgramError):
        run_program(code + asm.halt(), [], SPAN)  # the model refuses it too
    line = verdict(run_records(sim, [_raw_record(code + asm.halt())], tmp_path)[1])
    assert line == "FAIL: program 0 halted with status ILLEGAL at instruction 0", f"{what}: {line}"


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
@pytest.mark.parametrize("kind", ["LOAD", "STORE"])
def test_a_transfer_past_the_memory_halts_the_chip_naming_it(sim, kind, tmp_path):
    """A LOAD or STORE that reaches a word past the external memory stops the chip with status
    EXT_ADDR and the transfer's instruction (the machine model refuses the program), never wraps."""
    from capra import ProgramError, config
    from capra.machine import run_program

    words = config.active().ext_memory  # the testbench's memory, and the chip's ext_limit
    far = asm.load(8, words - 3, 2, 2, ext_stride=2) if kind == "LOAD" else asm.store(0, words - 3, 2, 2, ext_stride=2)
    code = asm.load(0, 0, 1, 8) + asm.wait() + far + asm.halt()
    with pytest.raises(ProgramError, match="reaches external word"):
        run_program(code, list(range(8)), words)
    line = verdict(run_records(sim, [_raw_record(code)], tmp_path)[1])
    assert line == "FAIL: program 0 halted with status EXT_ADDR at instruction 2", line


@pytest.mark.parametrize("sim", [pytest.param("icarus", marks=needs_icarus),
                                 pytest.param("verilator", marks=[needs_verilator, pytest.mark.slow])])
def test_transfers_reach_external_words_past_16_bits(sim, tmp_path):
    """A LOAD or STORE addresses 32 bits (b the low half, e's top half the high one): in a memory of
    2^17 words, transfers that cross word 65,536, start above it and end at the last word. The
    memory size is a build of its own: Icarus compiles it in a second (make test), Verilator in a
    quarter of a minute (make test-full)."""
    from capra import config
    from capra.config import Config
    from capra.machine import run_program

    words = 1 << 17
    ext = [0] * 127_008
    for a in (*range(65_530, 65_546), *range(120_000, 120_004), *range(127_000, 127_004)):
        ext[a] = (a * 2_654_435_761) & 0xFFFFFFFF
    code = (asm.load(0, 65_530, 1, 16) + asm.load(16, 120_000, 2, 4, ext_stride=7_000) + asm.wait()
            + asm.store(0, words - 24, 1, 24) + asm.store(0, 65_534, 1, 4) + asm.halt())
    assert isa.dma_fields(isa.Instr.decode(code[4:8])).ext == 120_000 and code[7] >> 16 == 1
    # what the memory must hold, from the operands alone
    want = list(ext) + [0] * (words - len(ext))
    moved = ext[65_530:65_546] + ext[120_000:120_004] + ext[127_000:127_004]
    want[words - 24:] = moved
    want[65_534:65_538] = moved[:4]
    with config.use(Config(ext_memory=words)):
        final = run_program(code, ext, words).ext
        assert [int(w) for w in final] == want
        rc, out = run_records(sim, [image.record(code, ext)], tmp_path)
    assert rc == 0 and verdict(out).startswith("PASS: 1 programs"), verdict(out)


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_running_past_the_last_instruction_halts_as_illegal(sim, tmp_path):
    from capra import ProgramError
    from capra.machine import run_program

    code = asm.wait() * isa.IMEM_INSTRS  # a full instruction memory and no HALT
    with pytest.raises(ProgramError, match="runs past the last instruction"):
        run_program(code, [], SPAN)
    line = verdict(run_records(sim, [_raw_record(code)], tmp_path)[1])
    assert line == f"FAIL: program 0 halted with status ILLEGAL at instruction {isa.IMEM_INSTRS - 1}", line


def _chained_after_one_step(k: int, second: str) -> tuple[list[int], list[int], np.ndarray]:
    """A one-row BROWS matmul of K = k (four groups side by side, one per column tile) and a CHAIN
    MM of five rows after it, in the dot form (another layout) or with BROWS (one group); the first
    one's int8 output as numpy works it out from its operands."""
    rng = np.random.default_rng(k)
    ext = [int(w) for w in rng.integers(0, 1 << 32, 200, dtype=np.uint64)]
    code = asm.load(0, 0, 1, 200) + asm.wait() + asm.qcfg(qa=3000, shift=13)
    code += asm.mm(0, 16, 300, 1, k, 16, out8=True, brows=True)
    code += asm.chain(asm.mm(100, 120, 400, 5, 4, 4, brows=second == "brows"))
    code += asm.store(300, 1000, 1, 4) + asm.store(400, 1010, 1, 20) + asm.halt()

    def int8s(words):
        return np.array(words, dtype=np.uint32).view(np.int8).astype(np.int64)

    a = int8s(ext[0:isa.words_for(k)])[:k]
    b = int8s(ext[16:16 + 4 * k]).reshape(k, 16)
    want = np.clip((a @ b * 3000 + (1 << 12)) >> 13, -128, 127)
    return code, ext, want


@needs_simulators
def test_a_chained_matmul_of_another_layout_leaves_a_one_step_matmul_its_groups():
    """A matmul of one reduction step reads its only B line in the cycle before the engine takes
    the next MM: the array's layout for that step (four groups, one per column tile) must come
    from the step's own tile, not from the next MM's flags, or three of its four output words
    are zero. Against numpy, in both simulators (the testbench checks every word and counter
    against the machine model as well)."""
    records = []
    for k in (1, 2):
        for second in ("dot", "brows"):
            code, ext, want = _chained_after_one_step(k, second)
            final = machine.run_program(code, ext, 2048).ext
            got = np.array([int(w) for w in final[1000:1004]], dtype=np.uint32).view(np.int8)
            assert list(got) == list(want), (k, second)
            records.append(image.record(code, ext))
    assert all(isa.Instr.decode(r.code[16:20]).chain for r in records)
    _replay_in(records, "chained_after_one_step", isa.EXT_LATENCY, "icarus", "verilator")
