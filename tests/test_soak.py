"""`capra soak` (tools/capra_cli/soak.py) without the simulators: a stand-in testbench reads each
image and answers as the real one would, so the bookkeeping (a mismatch counted and the rest of its
batch still checked, the state written whole and resumed, kept apart per settings and per chip, the
exit status) is tested in a second. The real thing is ``make soak``; the argument mistakes are in
tests/test_cli.py."""

from __future__ import annotations

import json

import pytest
import replay
from capra import config
from capra.randprog import random_program
from capra_cli import soak
from capra_cli.__main__ import run_command
from replay import image, runs
from replay.simulators import Simulator


def _key(rec: image.Record) -> tuple[int, ...]:
    """A program's first external data words: random, so they tell the programs of a batch apart."""
    return tuple(rec.init[:4])


class FakeBench:
    """Passes every program and prints its counters, except the programs whose _key is in `bad`:
    there it stops with a MISMATCH naming the program, as tb/ga2_tb.v does."""

    def __init__(self, bad: set[tuple[int, ...]] = frozenset()):
        self.bad = bad
        self.runs = 0

    def __call__(self, files, top, defines=(), plusargs=(), timeout=None, cwd=None):
        self.runs += 1
        records, _form = image.read_image(plusargs[0].removeprefix("+PROG="))
        lines = []
        for i, rec in enumerate(records):
            if _key(rec) in self.bad:
                return 0, "\n".join([*lines, f"MISMATCH: program {i} scratchpad word 7: expected 1, got 0"])
            lines.append(f"COUNTERS {i} " + " ".join(str(c) for c in rec.counters))
        return 0, "\n".join([*lines, f"PASS: {len(lines)} programs match"])


def no_build(*_args) -> None:
    return None


def simulators(run, build=no_build, names=("Icarus", "Verilator")) -> tuple[Simulator, ...]:
    return tuple(Simulator(name, "sh", build, run) for name in names)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Soak in tmp_path (its state, its kept images, its run folders) with stand-in simulators:
    ``install(run)`` makes both run `run`."""
    monkeypatch.setattr(soak, "SOAK_DIR", tmp_path / "soak")
    monkeypatch.setattr(runs, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(replay, "require", lambda *tools: None)

    def install(run, build=no_build) -> None:
        monkeypatch.setattr(soak, "SIMULATORS", simulators(run, build))
    return install


def soak_main(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = run_command("soak", list(argv), prog="soak.py")
    except SystemExit as done:
        code = done.code
    out, err = capsys.readouterr()
    return code, out, err


def test_every_program_matches(fake, capsys):
    bench = FakeBench()
    fake(bench)
    code, out, _err = soak_main(capsys, "-n", "6", "--batch", "3", "-j", "1")
    assert code == 0, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("soak: 6 programs, 0 mismatches, ") and last.endswith(" programs per second")
    assert bench.runs == 4  # two batches, two simulators


@pytest.mark.parametrize("argv,stalls", [((), {"+STALL=25"}), (("--stall", "0"), set()),
                                          (("--stall", "40"), {"+STALL=40"})])
def test_the_memory_stalls_as_the_configuration_says_unless_stall_is_given(fake, capsys, argv, stalls):
    """GA2_CONFIG's ext_stall is the default of --stall (a default of 0 used to override it: the
    batches ran on a memory that never stalls under a line that said it did)."""
    seen: list[tuple[str, ...]] = []

    def bench(files, top, defines=(), plusargs=(), timeout=None, cwd=None):
        seen.append(tuple(plusargs))
        return FakeBench()(files, top, defines, plusargs, timeout, cwd)

    fake(bench)
    with config.use(config.Config(ext_stall=25)):
        code, out, _err = soak_main(capsys, "-n", "2", "--batch", "1", "-j", "1", *argv)
    assert code == 0, out
    assert len(seen) == 4 and {a for run in seen for a in run if a.startswith("+STALL=")} == stalls, seen
    # what it prints agrees: the stalls on the memory line, the chip (the default here) on no line
    assert "configuration:" not in out, out
    assert [line for line in out.splitlines() if line.startswith("memory:")] == (
        [f"memory: every AXI channel stalls {stalls.pop()[7:]}% of the cycles (a schedule seed per batch)"]
        if stalls else []), out


def test_a_mismatch_is_counted_and_the_rest_of_its_batch_still_checked(fake, capsys):
    [batch] = soak.batches(5, 5, 0)
    seeds = batch.seeds()
    bench = FakeBench({_key(image.record(*random_program(seeds[1], ext_latency=batch.latency),
                                        ext_latency=batch.latency))})
    fake(bench)
    code, out, _err = soak_main(capsys, "-n", "5", "--batch", "5", "-j", "1")
    assert code == 1
    assert f"MISMATCH program 1 (seed {seeds[1]}, latency {batch.latency}, Icarus)" in out
    assert out.strip().splitlines()[-1].startswith("soak: 5 programs, 1 mismatches")
    assert bench.runs == 4  # per simulator: the batch, then the three programs after the one that failed
    kept = soak.SOAK_DIR / f"seed{seeds[1]}_latency{batch.latency}.hex"
    assert kept.exists(), "the failing program's image is kept"
    [program], _form = image.read_image(kept)
    assert _key(program) in bench.bad


def test_an_interrupted_run_resumes_and_the_state_is_written_whole(fake, capsys):
    bench = FakeBench()
    fake(bench)
    assert soak_main(capsys, "-n", "4", "--batch", "2", "-j", "1")[0] == 0
    assert [p.name for p in soak.SOAK_DIR.iterdir() if p.suffix == ".json"] == [soak.state_path(0, 2).name]
    assert not [p for p in soak.SOAK_DIR.iterdir() if ".tmp" in p.name], "a temporary file was left"
    runs_before = bench.runs
    code, out, _err = soak_main(capsys, "-n", "6", "--batch", "2", "-j", "1")  # only the third batch is new
    assert code == 0 and "resuming: 4 of 6 programs already checked" in out and bench.runs == runs_before + 2
    assert "this run checked none" not in out
    code, out, _err = soak_main(capsys, "-n", "6", "--batch", "2", "-j", "1")  # nothing new: it says so
    last = out.strip().splitlines()[-1]
    assert code == 1, "a run that checked nothing must not exit 0"
    assert bench.runs == runs_before + 2 and last.startswith("soak: 6 programs, 0 mismatches"), out
    assert "this run checked none: every one was checked by an earlier run" in last, last
    # each run that added batches is recorded with what it ran on; the one that added none is not
    state = json.loads(soak.state_path(0, 2).read_text())
    prov = runs.provenance()
    assert [r["batches"] for r in state["runs"]] == [2, 1]
    assert all((r["commit"], r["simulators"], r["chip"]) == (prov["commit"], prov["simulators"], prov["chip"])
               for r in state["runs"])


def test_other_settings_or_another_chip_never_resume_an_earlier_state(fake, capsys):
    """A state belongs to one --seed, --batch and configuration: a run with others starts afresh in
    a state file of its own and leaves the earlier one as it was (it used to be one file, refused)."""
    bench = FakeBench()
    fake(bench)
    assert soak_main(capsys, "-n", "4", "--batch", "2", "-j", "1")[0] == 0
    first = soak.state_path(0, 2)
    saved = first.read_text()
    for argv, cfg in ((("-n", "6", "--batch", "3"), None), (("-n", "4", "--batch", "2"), config.Config(ext_words=2))):
        runs_before = bench.runs
        with config.use(cfg or config.active()):
            code, out, _err = soak_main(capsys, *argv, "-j", "1")
            assert soak.state_path(0, int(argv[3])) != first
        assert code == 0 and "resuming" not in out, out
        assert bench.runs == runs_before + 2 * 2, "not every batch was run again in both simulators"
    assert first.read_text() == saved


def test_a_state_of_other_sources_starts_over(fake, capsys):
    """A change to the RTL, the testbench or the machine model since a state was saved: its batches
    checked other code, so they do not count."""
    bench = FakeBench()
    fake(bench)
    assert soak_main(capsys, "-n", "4", "--batch", "2", "-j", "1")[0] == 0
    path = soak.state_path(0, 2)
    path.write_text(json.dumps({**json.loads(path.read_text()), "sources": "0" * 16}))
    runs_before = bench.runs
    code, out, _err = soak_main(capsys, "-n", "4", "--batch", "2", "-j", "1")
    assert code == 0 and "changed since" in out and "resuming" not in out and bench.runs == runs_before + 4


@pytest.mark.parametrize("done, seconds", [({"0": 5}, 0), ({"0": {"programs": 250}}, 0),
                                           ({"0": {"programs": "x", "mismatches": []}}, 0),
                                           ({"x": {"programs": 2, "mismatches": []}}, 0),
                                           ({"0": {"programs": 2, "mismatches": []}}, "nan"), ({}, -1)])
def test_a_malformed_state_file_is_one_line_and_exit_2(fake, capsys, done, seconds):
    """Each of these used to end in a traceback (or, for NaN seconds, a rate of nan programs/s)."""
    fake(FakeBench())
    path = soak.state_path(0, 2)
    path.parent.mkdir(parents=True)
    state = {"seed": 0, "batch": 2, "config": config.active().key(), "sources": soak.sources_hash(), "done": done,
             "seconds": seconds}
    path.write_text(json.dumps(state))
    code, out, err = soak_main(capsys, "-n", "4", "--batch", "2", "-j", "1")
    lines = err.strip().splitlines()
    assert (code, out) == (2, "") and len(lines) == 1 and "is not a soak state" in lines[0], err


def test_a_state_path_that_is_a_folder_is_one_line_and_exit_2(fake, capsys):
    fake(FakeBench())
    soak.state_path(0, 2).mkdir(parents=True)
    code, out, err = soak_main(capsys, "-n", "4", "--batch", "2", "-j", "1")
    lines = err.strip().splitlines()
    assert (code, out) == (2, "") and len(lines) == 1 and "is not a soak state" in lines[0], err


def test_the_chip_is_built_for_the_active_configuration():
    assert soak.defines() == ("EXTW=8192", "DUMP")  # the default: the tests' build
    with config.use(config.Config(ext_words=2, ext_latency=8, n=8)):  # the latency is a plusarg, not a define
        assert soak.defines() == ("EXTW=8192", "GA2_EXT_WORDS_D=2", "GA2_N_D=8", "DUMP")
        assert soak.latencies() == (0, 1, 8, 16)
    assert soak.latencies() == (0, 1, 4, 16)


def test_a_memory_too_small_for_the_random_programs_is_refused(fake, capsys):
    fake(FakeBench())
    with config.use(config.Config(ext_memory=100)):
        code, out, err = soak_main(capsys, "-n", "2")
    lines = err.strip().splitlines()
    assert (code, out) == (2, "") and len(lines) == 1 and "GA2_EXT" in lines[0] and "100" in lines[0], err


def test_a_simulator_that_cannot_run_fails_every_program_of_its_batch(fake, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("vvp: cannot start")

    fake(broken)
    code, out, _err = soak_main(capsys, "-n", "2", "--batch", "2", "-j", "1")
    assert code == 1
    assert "could not run: vvp: cannot start" in out and "soak: 2 programs, 2 mismatches" in out


def test_nothing_checked_is_a_failure(fake, monkeypatch, capsys):
    def build_fails(*args):
        raise RuntimeError("verilator failed")

    monkeypatch.setattr(soak, "SIMULATORS", simulators(FakeBench(), build_fails, names=("Verilator",)))
    code, out, _err = soak_main(capsys, "-n", "2", "-j", "1")
    lines = out.strip().splitlines()
    assert code == 1
    assert "cannot build the Verilator testbench: verilator failed" in lines[0]
    assert lines[-1].startswith("soak: 0 programs, 0 mismatches")


def test_a_second_run_with_the_same_state_is_refused_while_the_first_runs(fake, capsys):
    """Two runs of one seed, batch, stall and chip share a state file: the second is one line and
    exit 2 while the first holds it (they used to rewrite it in turn), and runs once it is free."""
    import fcntl

    fake(FakeBench())
    soak.SOAK_DIR.mkdir(parents=True)
    lock = soak.state_path(0, 1, 0).with_suffix(".lock")
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, out, err = soak_main(capsys, "-n", "1", "--batch", "1", "-j", "1")
        assert (code, out) == (2, "") and "another soak with these settings is running" in err, err
        other = soak_main(capsys, "-n", "1", "--batch", "1", "-j", "1", "--seed", "1")
        assert other[0] == 0, other  # another seed: another state, not held
    code, out, _err = soak_main(capsys, "-n", "1", "--batch", "1", "-j", "1")
    assert code == 0, out
