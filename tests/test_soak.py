"""tools/soak.py without the simulators: a stand-in testbench reads each image and answers as the real
one would, so the bookkeeping (a mismatch counted and the rest of its batch still checked, the
state written whole and resumed, the exit status, one-line argument errors) is tested in a second.
The real thing is ``make soak``."""

from __future__ import annotations

import json

import ga2_progs
import pytest
import soak


def _records_of(path) -> list[list[int]]:
    """The records of an image file, walked with their own sizes."""
    words = [int(line, 16) for line in open(path)]
    out, at = [], ga2_progs.IMG_HEADER
    while at < len(words):
        n = ga2_progs.REC_HEADER + sum(words[at + 1 : at + ga2_progs.REC_HEADER]) + ga2_progs.N_COUNTERS + 1
        out.append(words[at : at + n])
        at += n
    return out


def _key(rec: list[int]) -> int:
    """A program's first external data word: random, so it tells the programs of a batch apart."""
    return rec[ga2_progs.sections(rec)["init"].start]


class FakeBench:
    """Passes every program and prints its counters, except the programs whose _key is in `bad`:
    there it stops with a MISMATCH naming the program, as tb/ga2_tb.v does."""

    def __init__(self, bad: set[int] = frozenset()):
        self.bad = bad
        self.runs = 0

    def __call__(self, files, top, defines=(), plusargs=(), timeout=None):
        self.runs += 1
        lines = []
        for i, rec in enumerate(_records_of(plusargs[0].removeprefix("+PROG="))):
            if _key(rec) in self.bad:
                return 0, "\n".join([*lines, f"MISMATCH: program {i} scratchpad word 7: expected 1, got 0"])
            lines.append(f"COUNTERS {i} " + " ".join(str(c) for c in rec[-6:-1]))
        return 0, "\n".join([*lines, f"PASS: {len(lines)} programs match"])


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setattr(soak, "SOAK_DIR", tmp_path)
    monkeypatch.setattr(soak, "STATE", tmp_path / "state.json")

    def install(bench) -> None:
        monkeypatch.setattr(soak, "SIMULATORS", (("Icarus", bench, lambda *a: None),
                                                 ("Verilator", bench, lambda *a: None)))
    return install


def test_every_program_matches(fake, capsys):
    bench = FakeBench()
    fake(bench)
    assert soak.main(["-n", "6", "--batch", "3", "-j", "1"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("soak: 6 programs, 0 mismatches, ") and last.endswith(" programs per second")
    assert bench.runs == 4  # two batches, two simulators


def test_a_mismatch_is_counted_and_the_rest_of_its_batch_still_checked(fake, capsys):
    from capra.randprog import EXTW, random_program

    seeds = soak.batches(5, 5, 0)[0].seeds()
    bench = FakeBench({_key(ga2_progs.record(*random_program(seeds[1], ext_latency=0), EXTW, 0))})
    fake(bench)
    assert soak.main(["-n", "5", "--batch", "5", "-j", "1"]) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH program 1 (seed {seeds[1]}, latency 0, Icarus)" in out
    assert out.strip().splitlines()[-1].startswith("soak: 5 programs, 1 mismatches")
    assert bench.runs == 4  # per simulator: the batch, then the three programs after the one that failed
    assert (soak.SOAK_DIR / f"seed{seeds[1]}_latency0.hex").exists(), "the failing program's image is kept"


def test_an_interrupted_run_resumes_and_the_state_is_written_whole(fake, capsys):
    bench = FakeBench()
    fake(bench)
    assert soak.main(["-n", "4", "--batch", "2", "-j", "1"]) == 0
    assert not list(soak.SOAK_DIR.glob("*.tmp"))
    runs = bench.runs
    assert soak.main(["-n", "6", "--batch", "2", "-j", "1"]) == 0  # only the third batch is new
    out = capsys.readouterr().out
    assert "resuming: 4 of 6 programs already checked" in out and bench.runs == runs + 2
    with pytest.raises(SystemExit) as stop:
        soak.main(["-n", "6", "--batch", "3"])  # other settings: not silently mixed with the old state
    assert stop.value.code == 2 and "--batch 2" in capsys.readouterr().err
    from capra import config

    with config.use(config.Config(ext_words=2)), pytest.raises(SystemExit) as stop:
        soak.main(["-n", "6", "--batch", "2"])  # another chip: not mixed with the default's state either
    assert stop.value.code == 2 and "ext_words=1" in capsys.readouterr().err


@pytest.mark.parametrize("done, seconds", [({"0": 5}, 0), ({"0": {"programs": 250}}, 0),
                                           ({"0": {"programs": "x", "mismatches": []}}, 0),
                                           ({"x": {"programs": 2, "mismatches": []}}, 0),
                                           ({"0": {"programs": 2, "mismatches": []}}, "nan"), ({}, -1)])
def test_a_malformed_state_file_is_one_line_and_exit_2(fake, capsys, done, seconds):
    """Each of these used to end in a traceback (or, for NaN seconds, a rate of nan programs/s)."""
    fake(FakeBench())
    soak.STATE.write_text(json.dumps({"seed": 0, "batch": 2, "done": done, "seconds": seconds}))
    with pytest.raises(SystemExit) as stop:
        soak.main(["-n", "4", "--batch", "2", "-j", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "is not a soak state" in err[0], err


def test_a_state_path_that_is_a_folder_is_one_line_and_exit_2(fake, capsys):
    fake(FakeBench())
    soak.STATE.mkdir()
    with pytest.raises(SystemExit) as stop:
        soak.main(["-n", "4", "--batch", "2", "-j", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "is not a soak state" in err[0], err


def test_the_chip_is_built_for_the_active_configuration():
    from capra import config

    assert soak.defines() == (f"EXTW={soak.EXTW}", "DUMP")  # the default: the tests' build
    with config.use(config.Config(ext_words=2, ext_latency=8, n=8)):
        assert soak.defines() == (f"EXTW={soak.EXTW}", "DUMP", "GA2_EXT_WORDS_D=2", "GA2_N_D=8")


def test_a_simulator_that_cannot_run_fails_every_program_of_its_batch(fake, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("vvp: cannot start")

    fake(broken)
    assert soak.main(["-n", "2", "--batch", "2", "-j", "1"]) == 1
    out = capsys.readouterr().out
    assert "could not run: vvp: cannot start" in out and "soak: 2 programs, 2 mismatches" in out


def test_nothing_checked_is_a_failure(fake, monkeypatch, capsys):
    def no_build(*args):
        raise RuntimeError("verilator failed")

    monkeypatch.setattr(soak, "SIMULATORS", (("Verilator", FakeBench(), no_build),))
    assert soak.main(["-n", "2", "-j", "1"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert "cannot build the Verilator testbench: verilator failed" in lines[0]
    assert lines[-1].startswith("soak: 0 programs, 0 mismatches")


@pytest.mark.parametrize("args, message", [
    (["-n", "0"], "-n/--programs: 0 is outside 1..10000000"),
    (["--batch", "x"], "--batch: 'x' is not an integer"),
    (["-j", "0"], "-j/--jobs: 0 is outside 1..64"),
])
def test_bad_arguments_are_one_line_and_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as stop:
        soak.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and message in err[0], err
