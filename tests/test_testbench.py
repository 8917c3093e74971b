"""The replay testbench's interface (tb/ga2_tb.v, docs/replay.md), in Icarus and in Verilator.

Three things a reader of the book relies on:
  * the image without a header: the chapter writes out/ga2_programs.hex as the number of programs
    followed by each record as replay.image's Record.words() gives it (its CRC slot 0), and runs the
    testbench with no +PROG. It passes, checked structurally; every malformed variant is a FAIL
    naming what is wrong, the same line in both simulators;
  * plusargs parsed strictly: a +LATENCY or +WATCHDOG that is not a decimal number in its range is
    one FAIL line naming the plusarg and its text, the same in both;
  * the exit status says what the verdict line says: 0 after PASS, 1 after FAIL or MISMATCH, with
    exactly one verdict line and no abort or core-dump message.
"""

from __future__ import annotations

import pytest
import replay
from capra import asm, isa
from capra.randprog import handwritten_programs
from conftest import needs_icarus, needs_verilator
from replay import image
from replay.simulators import BY_NAME, GA2_FILES, GA2_TOP
from replay.verdict import judge
from replay_util import TIMEOUT, counters, run_addresses, sections, verdict

BOTH = ("icarus", "verilator")
DEFINES = replay.testbench_defines(0)  # replay_util.run_file's build: the cached simulators are shared
PASS_TEXT = ("programs match the Python reference (external memory, scratchpad, all five cycle counters and both "
             "hold counts)")
NO_HEADER = "(the image had no header, so its CRCs were not checked)"


def _record(code, ext) -> list[int]:
    """One program's record words with the machine model's expectations, its CRC slot 0."""
    return image.record(code, ext).words()


def _records() -> list[list[int]]:
    """Four hand-written programs (empty, DMA, units), each as _record gives it: CRC slot 0."""
    return [_record(code, ext) for _name, code, ext in handwritten_programs()[:4]]


def _listing(records: list[list[int]]) -> list[int]:
    """The book's chapter listing: the number of programs, then the records as they are."""
    return [len(records), *(w for rec in records for w in rec)]


def _write(tmp_path, words: list[int], name: str = "image.hex"):
    path = tmp_path / name
    image.write_words(words, path)
    return path


def _run(sim: str, *plusargs: str, cwd=None, defines=DEFINES) -> tuple[int, str]:
    options = {"cwd": cwd} if cwd is not None else {}
    return BY_NAME[sim].run(GA2_FILES, GA2_TOP, defines=defines, plusargs=plusargs, timeout=TIMEOUT, **options)


def _both(path, defines=DEFINES) -> tuple[str, dict[str, int]]:
    """Run the image at path in both simulators: their verdict lines must be identical; also their
    exit statuses."""
    lines, codes = {}, {}
    for sim in BOTH:
        rc, out = _run(sim, f"+PROG={path}", defines=defines)
        lines[sim], codes[sim] = verdict(out), rc
    assert lines["icarus"] == lines["verilator"], lines
    return lines["icarus"], codes


# ---- the image without a header ------------------------------------------------------------------


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", BOTH)
def test_the_chapters_listing_passes_as_the_default_image(sim, tmp_path):
    """No +PROG: out/ga2_programs.hex in the working directory, in the chapter's form."""
    records = _records()
    (tmp_path / "out").mkdir()
    _write(tmp_path / "out", _listing(records), "ga2_programs.hex")
    rc, out = _run(sim, cwd=tmp_path)
    line = verdict(out)
    cycles = sum(rec[sections(rec)["counters"]][0] for rec in records)
    assert line == f"PASS: 4 {PASS_TEXT}, {cycles} cycles in total {NO_HEADER}", line
    assert rc == 0
    assert counters(out) == {i: rec[sections(rec)["counters"]] for i, rec in enumerate(records)}


@needs_icarus
@needs_verilator
def test_the_same_programs_pass_with_a_header_and_say_nothing_of_crcs(tmp_path):
    path = tmp_path / "headed.hex"
    image.write_image(_records(), path)
    line, codes = _both(path)
    assert line.startswith(f"PASS: 4 {PASS_TEXT}") and NO_HEADER not in line, line
    assert codes == {"icarus": 0, "verilator": 0}


@needs_icarus
@needs_verilator
def test_the_crc_slot_of_a_record_without_a_header_is_not_checked(tmp_path):
    records = _records()
    records[1][-1] = 0x12345678  # what record() leaves 0; only image() fills it in
    line, codes = _both(_write(tmp_path, _listing(records)))
    assert line.startswith(f"PASS: 4 {PASS_TEXT}") and line.endswith(NO_HEADER), line


def _record_start(records, p: int) -> int:
    """Line index (0-based) of record p in the chapter listing."""
    return 1 + sum(len(r) for r in records[:p])


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("case, expected", [
    ("a word more", "FAIL: malformed image: lines {n1}..{n1} follow the last of the 4 programs"),
    ("a word less", "FAIL: truncated image: program 3 record ends at line {n}, past the last line of the file ({n0})"),
    ("one program more counted", "FAIL: truncated image: program 4 of 5 starts at line {n1}, past the last line of "
                                 "the file ({n})"),
    ("one program fewer counted", "FAIL: malformed image: lines {l3}..{n} follow the last of the 3 programs"),
    ("a record without its magic", "FAIL: malformed image: program 2 record does not start with the record magic "
                                   "(line {l2})"),
    ("a run past the scratchpad", "FAIL: malformed image: program 1 scratchpad run 0 (first 65535, 1 words) is empty, "
                                  "overlaps the run before or passes word {spw}"),
    ("more code than the instruction memory", "FAIL: malformed image: program 0 sizes (code 4100, init 256, external "
                                              "runs 0 and words 0, scratchpad runs 0 and words 0) do not fit (IMEM "
                                              "4096 in whole instructions"),
])
def test_a_malformed_image_without_a_header_is_a_fail_naming_it(case, expected, tmp_path):
    records = _records()
    words = _listing(records)
    n = len(words)
    if case == "a word more":
        words.append(0)
    elif case == "a word less":
        words.pop()
    elif case == "one program more counted":
        words[0] = 5
    elif case == "one program fewer counted":
        words[0] = 3
    elif case == "a record without its magic":
        words[_record_start(records, 2)] ^= 1
    elif case == "a run past the scratchpad":
        # program 1 (load and store back) has one scratchpad run of 32 words; now it names one word
        # at address 65535, past the scratchpad
        at = _record_start(records, 1) + sections(records[1])["sruns"].start
        words[at : at + 2] = [0xFFFF, 1]
    elif case == "more code than the instruction memory":
        words[1 + 1] = 4100  # record 0's n_code
    want = expected.format(n=n, n0=n - 1, n1=n + 1, l2=_record_start(records, 2) + 1,
                           l3=_record_start(records, 3) + 1, spw=isa.SRAM_WORDS - 1)
    line, codes = _both(_write(tmp_path, words))
    assert line.startswith(want), f"{case}: {line}"
    assert codes == {"icarus": 1, "verilator": 1}, codes


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("first, shown", [(0, "00000000"), (0x10000, "00010000"), (0xFFFFFFFF, "ffffffff")])
def test_a_first_word_that_is_neither_the_magic_nor_a_program_count_is_a_fail(first, shown, tmp_path):
    line, _codes = _both(_write(tmp_path, [first, *_listing(_records())[1:]]))
    assert line == (f"FAIL: malformed image {tmp_path / 'image.hex'}: line 1 is {shown}, not the image magic 47413204 "
                    "(an image with a header) nor a program count 1..65535 (an image without a header)"), line


@pytest.mark.parametrize("sim", [pytest.param("icarus", marks=needs_icarus),
                                 pytest.param("verilator", marks=[needs_verilator, pytest.mark.slow])])
def test_an_image_without_a_header_stops_at_maxwords(sim, tmp_path):
    """Without a header the reader reads to the end of the file, but never past MAXWORDS lines.
    A build of its own (MAXWORDS=64): Icarus compiles it in a second, Verilator in half a minute,
    so make test asks Icarus and make test-full both (the reader is the same Verilog)."""
    words = _listing([_record(asm.halt(), [])])
    assert len(words) < 64
    path = _write(tmp_path, words + [0] * (64 - len(words) + 1))
    rc, out = _run(sim, f"+PROG={path}", defines=(*DEFINES, "MAXWORDS=64"))
    line = verdict(out)
    assert line == f"FAIL: malformed image {path}: the file goes on after MAXWORDS=64 lines", line
    assert rc == 1


@needs_icarus
@needs_verilator
def test_a_byte_outside_the_line_format_fails_the_same_without_a_header(tmp_path):
    path = _write(tmp_path, _listing(_records()))
    data = bytearray(path.read_bytes())
    data[9 * 5 + 2] = ord("G")  # line 6, byte 3
    path.write_bytes(bytes(data))
    line, _codes = _both(path)
    assert line.startswith(f"FAIL: malformed image {path}: line 6 byte 3 is 0x47, not a lowercase hex digit"), line


# ---- plusargs --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_image(tmp_path_factory):
    path = tmp_path_factory.mktemp("tb") / "small.hex"
    image.write_image(_records(), path)
    return path


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("arg, expected", [
    ("+LATENCY=abc", "FAIL: +LATENCY=abc is not a decimal number of cycles, 0..30"),
    ("+LATENCY=", "FAIL: +LATENCY= is empty: give the external memory's latency in cycles, 0..30"),
    ("+LATENCY=4x", "FAIL: +LATENCY=4x is not a decimal number of cycles, 0..30"),
    ("+LATENCY=-1", "FAIL: +LATENCY=-1 is not a decimal number of cycles, 0..30"),
    ("+LATENCY= 4", "FAIL: +LATENCY= 4 is not a decimal number of cycles, 0..30"),
    ("+LATENCY=0x4", "FAIL: +LATENCY=0x4 is not a decimal number of cycles, 0..30"),
    ("+LATENCY=31", "FAIL: +LATENCY=31 is outside 0..30 (the chip keeps at most 32 requests waiting)"),
    ("+LATENCY=4294967300", "FAIL: +LATENCY=4294967300 is outside 0..30 (the chip keeps at most 32 requests waiting)"),
    ("+LATENCY=" + "4" * 41, "FAIL: +LATENCY=..." + "4" * 40 + " is longer than 40 characters: not a latency, "
                             "0..30 cycles"),
    ("+LATENCY", "FAIL: a plusarg starts +LATENCY but is not +LATENCY=<cycles> (0..30)"),
    ("+LATENCY4", "FAIL: a plusarg starts +LATENCY but is not +LATENCY=<cycles> (0..30)"),
    ("+WATCHDOG=", "FAIL: +WATCHDOG= is empty: give the cycles a program may run, 1..999999999"),
    ("+WATCHDOG=2e6", "FAIL: +WATCHDOG=2e6 is not a decimal number of cycles, 1..999999999"),
    ("+WATCHDOG=0", "FAIL: +WATCHDOG=0 is outside 1..999999999"),
    ("+WATCHDOG=1000000000", "FAIL: +WATCHDOG=1000000000 is outside 1..999999999"),
    ("+WATCHDOG", "FAIL: a plusarg starts +WATCHDOG but is not +WATCHDOG=<cycles> (1..999999999)"),
    ("+STALL=91", "FAIL: +STALL=91 is outside 0..90"),
    ("+STALL=", "FAIL: +STALL= is empty: give a number, 0..90"),
    ("+STALL=25%", "FAIL: +STALL=25% is not a decimal number, 0..90"),
    ("+STALL", "FAIL: a plusarg starts +STALL but is not +STALL=<percent> (0..90)"),
    ("+SEED=x", "FAIL: +SEED=x is not a decimal number, 0..999999999"),
    ("+SEED=1000000000", "FAIL: +SEED=1000000000 is outside 0..999999999"),
    ("+SEED", "FAIL: a plusarg starts +SEED but is not +SEED=<number> (0..999999999)"),
])
def test_a_bad_numeric_plusarg_is_one_fail_line_naming_it(arg, expected, small_image):
    for sim in BOTH:
        rc, out = _run(sim, f"+PROG={small_image}", arg)
        assert verdict(out) == expected, f"{sim}: {verdict(out)}"
        assert rc == 1, f"{sim} exited with {rc}"


@needs_icarus
@needs_verilator
def test_a_watchdog_bound_of_exactly_a_programs_cycles_passes_and_one_fewer_fails(small_image, tmp_path):
    """The bound is checked at exactly its cycle: a program of c cycles passes with +WATCHDOG=c and
    fails with c - 1 (the longest of the four programs sets what the whole image needs)."""
    longest = max(rec[sections(rec)["counters"]][0] for rec in _records())
    for sim in BOTH:
        rc, out = _run(sim, f"+PROG={small_image}", f"+WATCHDOG={longest}")
        assert verdict(out).startswith(f"PASS: 4 {PASS_TEXT}") and rc == 0, f"{sim}: {verdict(out)}"
        rc, out = _run(sim, f"+PROG={small_image}", f"+WATCHDOG={longest - 1}")
        assert "did not halt within the watchdog bound" in verdict(out) and rc == 1, f"{sim}: {verdict(out)}"


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("arg", ["+LATENCY=4", "+LATENCY=04", "+LATENCY=0000000004"])
def test_a_latency_in_decimal_digits_is_taken(arg, small_image):
    """Leading zeros are digits like any other (the records were made at the default latency, 4)."""
    for sim in BOTH:
        rc, out = _run(sim, f"+PROG={small_image}", arg)
        assert verdict(out).startswith(f"PASS: 4 {PASS_TEXT}") and rc == 0, f"{sim}: {verdict(out)} (exit {rc})"


# ---- the exit status --------------------------------------------------------------------------------


def _mismatch(tmp_path):
    code = asm.load(0, 0, 1, 8) + asm.store(0, 100, 1, 8) + asm.halt()
    rec = _record(code, list(range(1, 9)))
    rec[sections(rec)["xvals"].start + 3] += 1  # external word 103 expected wrong
    path = tmp_path / "mismatch.hex"
    image.write_image([rec], path)
    return path


def _bad_image(tmp_path):
    return _write(tmp_path, [0, 1, 2, 3], "bad.hex")


def _watchdog(tmp_path):
    path = tmp_path / "long.hex"
    image.write_image([_record(asm.load(0, 0, 1, 800) + asm.halt(), [])], path)
    return path


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("sim", BOTH)
@pytest.mark.parametrize("image, plusargs, starts, status", [
    (lambda tmp: _write(tmp, _listing(_records())), (), "PASS", 0),
    (_mismatch, (), "MISMATCH: program 0 external word 103", 1),
    (_bad_image, (), "FAIL: malformed image", 1),
    (_watchdog, ("+WATCHDOG=500",),
     "FAIL: program 0 did not halt within the watchdog bound of 500 cycles: instruction 1 waits for the DMA", 1),
], ids=["pass", "mismatch", "malformed", "watchdog"])
def test_the_exit_status_says_what_the_verdict_says(sim, image, plusargs, starts, status, tmp_path):
    rc, out = _run(sim, f"+PROG={image(tmp_path)}", *plusargs)
    line = verdict(out)  # exactly one verdict line
    assert line.startswith(starts), line
    assert rc == status, f"{sim} exited with {rc} after {line!r}"
    assert not any(word in out for word in ("Abort", "abort", "core dumped", "%Error", "FATAL")), out[-2000:]
    judged = judge(sim, rc, out, 4 if status == 0 else 1, dump=True)
    assert judged.passed == (status == 0), judged.problems
    if status:
        assert f"{sim} exited with status 1" in judged.problems, judged.problems


@needs_icarus
@needs_verilator
def test_a_missing_default_image_is_a_fail_with_status_1(tmp_path):
    for sim in BOTH:
        rc, out = _run(sim, cwd=tmp_path)
        assert verdict(out) == "FAIL: cannot open the image out/ga2_programs.hex" and rc == 1, (sim, rc, out[-500:])


# ---- every external word that can differ is compared ------------------------------------------------


def _without(rec: list[int], drop: set[int]) -> list[int]:
    """The record with the external words at `drop` left out of its expected changes (as a model
    that missed a store would write it): the chip still writes them."""
    s = sections(rec)
    addrs = run_addresses(rec[s["xruns"]])
    changes = {a: v for a, v in zip(addrs, rec[s["xvals"]]) if a not in drop}
    sp_addrs = run_addresses(rec[s["sruns"]])
    return image.Record(rec[s["code"]], rec[s["init"]], changes, dict(zip(sp_addrs, rec[s["svals"]])),
                        rec[s["counters"]]).words()


@needs_icarus
@needs_verilator
def test_a_write_the_record_does_not_expect_is_a_mismatch(tmp_path):
    """Word 107 is written by the chip but not among the record's changes: only the testbench's log
    of the chip's writes can see it (the words it compares are the logged and the expected ones)."""
    code = asm.load(0, 0, 1, 8) + asm.store(0, 100, 1, 8) + asm.halt()
    rec = _without(_record(code, list(range(1, 9))), {107})
    path = tmp_path / "unexpected.hex"
    image.write_image([_record(asm.halt(), list(range(1, 9))), rec], path)
    line, codes = _both(path)
    assert line == "MISMATCH: program 1 external word 107: expected 00000000, got 00000008", line
    assert codes == {"icarus": 1, "verilator": 1}


@needs_icarus
@needs_verilator
def test_more_writes_than_the_log_holds_are_compared_word_by_word(tmp_path):
    """5,000 write beats (five stores of the same 1,000 words) overflow the testbench's log of 4,096:
    every external word is compared, and the unexpected one is still named; the next program starts
    from its own initial image all the same."""
    code = asm.load(0, 0, 1, 1000) + asm.wait() + asm.store(0, 0, 5, 1000, ext_stride=0, sram_stride=0) + asm.halt()
    ext = [(7 * i + 1) & 0xFFFFFFFF for i in range(1000)]
    good = _record(code, ext)
    assert sections(good)["xvals"].stop == sections(good)["xvals"].start  # stores what it read
    path = tmp_path / "overflow.hex"
    later = _record(asm.load(0, 0, 1, 8) + asm.store(0, 900, 1, 8) + asm.halt(), list(range(1, 9)))
    image.write_image([good, later], path)
    line, _codes = _both(path)
    assert line.startswith(f"PASS: 2 {PASS_TEXT}"), line
    code = asm.load(0, 0, 1, 1000) + asm.wait() + asm.store(0, 5, 5, 1000 - 5, ext_stride=0, sram_stride=0) + asm.halt()
    bad = _without(_record(code, ext), {600})
    image.write_image([bad], path)
    line, codes = _both(path)
    assert line == f"MISMATCH: program 0 external word 600: expected {ext[600]:08x}, got {ext[595]:08x}", line
    assert codes == {"icarus": 1, "verilator": 1}
