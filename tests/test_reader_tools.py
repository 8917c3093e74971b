"""The Chapter 15 tools as a reader runs them: they find the project's .venv whatever Python
started them, --help only helps, a mistaken argument is one line and exit status 2, the mutants
sit where the book says, and the self-check answers agree with the chapter's arithmetic."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import ch15_run
import ch15_selfcheck
import mut_ch15
import mutation as M
import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK_TOOLS = ("ch15_run", "ch15_example_a", "ch15_example_b", "ch15_figures", "ch15_selfcheck", "mut_ch15",
              "gather_bench")


def run_tool(path: Path, *args: str, python: str = sys.executable, env: dict | None = None,
             flags: tuple[str, ...] = ()):
    environment = dict(os.environ if env is None else env)
    environment.pop("PYTHONPATH", None)
    return subprocess.run([python, *flags, str(path), *args], capture_output=True, text=True, env=environment,
                          cwd=path.parents[1], timeout=120)


# ---- --help and bad arguments --------------------------------------------------------------------

# Mistakes a reader makes, each with the argument its one-line error must name. The book's tools run
# them as scripts (below); every tool runs all of them in-process (further down).
BAD_ARGUMENTS = [
    ("dse", ["--random", "0"], "--random"),
    ("dse", ["--only", "ext_latency=99"], "--only"),
    ("dse", ["--only", "n=3"], "--only"),
    ("dse", ["--only", ""], "--only"),  # used to run the default configuration
    ("dse", ["--only", "n=4", "ext_latency=4"], "--only"),  # the same point twice, at once, into one folder
    ("dse", ["--synth-timeout", "0"], "--synth-timeout"),
    ("decode_report", ["--steps", "0"], "--steps"),
    ("decode_report", ["--steps", "1"], "--steps"),
    ("decode_report", ["--steps", "100000"], "--steps"),  # used to calibrate for minutes, then fail
    ("decode_report", ["--model", "mixed"], "--model"),
    ("ch12_run", ["--start", "16"], "--start"),
    ("ch12_run", ["--start", "-1"], "--start"),  # used to decode token 15 silently
    ("ch12_run", ["--steps", "0"], "--steps"),  # used to print two FAIL lines and exit 0
    ("ch12_run", ["--steps", "100000"], "--steps"),
    ("ch12_run", ["--steps", "many"], "--steps"),
    ("ch12_accuracy", ["--starts", "0"], "--starts"),
    ("ch12_accuracy", ["--starts", "-1", "--seeds", "1", "--steps", "2"], "--starts"),  # used to "pass"
    ("ch12_accuracy", ["--steps", "100000"], "--steps"),
    ("ch12_accuracy", ["--seeds", "-3"], "--seeds"),
    ("ch12_accuracy", ["--seeds", "1", "1"], "--seeds"),  # used to run seed 1 twice and count it twice
    ("ch15_selfcheck", ["-q", "1", "1"], "--question"),
    ("passkey_eval", ["--n-trials", "0"], "--n-trials"),
    ("passkey_eval", ["--n-trials", "100001"], "--n-trials"),  # more than there are 5-digit passkeys
    ("passkey_eval", ["--window", "0"], "--window"),
    ("passkey_eval", ["--window", "300000000"], "--window"),  # used to take 24 GB until killed
    ("passkey_eval", ["--context-lengths", "8"], "--context-lengths"),
    ("passkey_eval", ["--context-lengths", "1000000000"], "--context-lengths"),
    ("passkey_eval", ["--probe-lengths", str(10**13)], "--probe-lengths"),
    ("waves", ["--context", "0"], "--context"),
    ("waves", ["--context", "100000"], "--context"),
    ("bench", ["--repeats", "0"], "--repeats"),
    ("gather_bench", ["--repeats", "0"], "--repeats"),
    ("gather_bench", ["--repeats", "many"], "--repeats"),
    ("mut_ch15", ["-j", "0"], "-j/--jobs"),
    ("mut_ch15", ["-k", "no mutant says this"], "-k"),
    ("mut_ch15", ["-k", ""], "-k"),
    ("gen_exp_lut", ["--chek"], "--chek"),
    ("ch15_selfcheck", ["-q", "9"], "-q/--question"),
    ("ch15_example_a", ["--free-order", "random"], "--free-order"),
    ("ch15_example_b", ["extra"], "extra"),
    ("ch15_run", ["--steps", "8"], "--steps"),
    ("ch15_figures", ["--steps", "8"], "--steps"),
    ("kv_cache_benchmark", ["--quick", "3"], "3"),
    ("serve_run", ["--requests", "8"], "--requests"),
    ("serve_run", ["--pages", "0"], "--pages"),
    ("serve_run", ["--replay", "some"], "--replay"),
    ("soak", ["-n", "0"], "-n/--programs"),
    ("soak", ["--batch", "many"], "--batch"),
    ("visibility", ["--programs", "0"], "--programs"),
    ("visibility", ["--min", "101"], "--min"),
    ("synth", ["--jobs", "0"], "--jobs"),
    ("synth", ["--timeout", "nan"], "--timeout"),
    ("synth", ["no_such_block"], "no_such_block"),
    ("synth", ["--define", "GA2_SRAM_WORDS_D"], "--define"),
    ("synth", ["--define", "GA2_N_D=3"], "--define"),  # used to synthesize a chip that cannot exist, and pass
    ("synth", ["--define", "FOO=1"], "--define"),
    ("synth", ["--define", "GA2_N_D=4", "--define", "GA2_N_D=8"], "--define"),
    ("synth", ["--define", "GA2_SRAM_WORDS_D=8192", "sram"], "--define"),  # sram's size is a parameter
]


@pytest.mark.parametrize("tool", BOOK_TOOLS)
def test_help_prints_usage_and_runs_nothing(tool):
    proc = run_tool(ROOT / "tools" / f"{tool}.py", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:"), proc.stdout[:200]
    assert "==" not in proc.stdout and "VERDICT" not in proc.stdout, "--help started a run"


@pytest.mark.parametrize("tool, args, named",
                         [case for case in BAD_ARGUMENTS if case[0] in (*BOOK_TOOLS, "gen_exp_lut")])
def test_a_bad_argument_is_one_line_naming_it_and_exit_2(tool, args, named):
    proc = run_tool(ROOT / "tools" / f"{tool}.py", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], proc.stderr


def test_gen_exp_lut_help_writes_nothing():
    lut = ROOT / "rtl" / "exp_lut.v"
    before = lut.stat().st_mtime_ns
    proc = run_tool(ROOT / "tools" / "gen_exp_lut.py", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stdout[:200]
    assert lut.stat().st_mtime_ns == before, "--help rewrote rtl/exp_lut.v"


# ---- bootstrap: the project's .venv, whatever Python starts a tool -------------------------------

PROBE = """import sys
import bootstrap
bootstrap.need("capra_probe_dependency")
import capra_probe_dependency
print("ran", sys.argv[1:], capra_probe_dependency.VALUE)
"""


@pytest.fixture
def fake_checkout(tmp_path):
    """A checkout with tools/bootstrap.py and a script that needs a module only a .venv would have."""
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "bootstrap.py", tmp_path / "tools")
    (tmp_path / "tools" / "probe.py").write_text(PROBE)
    (tmp_path / "deps").mkdir()
    (tmp_path / "deps" / "capra_probe_dependency.py").write_text("VALUE = 42\n")
    return tmp_path


def make_venv_python(root: Path, with_dependency: bool, executable: bool = True) -> None:
    """.venv/bin/python as a wrapper around this Python, with or without the probe's module."""
    path = root / ".venv" / "bin" / "python"
    path.parent.mkdir(parents=True)
    search = f"PYTHONPATH={root / 'deps'} " if with_dependency else ""
    path.write_text(f'#!/bin/sh\n{search}exec {sys.executable} "$@"\n')
    path.chmod(0o755 if executable else 0o644)


def one_line_exit_2(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_without_a_venv_a_tool_says_in_one_line_to_run_make_sim_first(fake_checkout):
    line = one_line_exit_2(run_tool(fake_checkout / "tools" / "probe.py"))
    assert "capra_probe_dependency" in line and "run `make sim` first" in line


def test_a_tool_restarts_under_the_venv_with_its_arguments(fake_checkout):
    make_venv_python(fake_checkout, with_dependency=True)
    proc = run_tool(fake_checkout / "tools" / "probe.py", "--flag", "two words")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ran ['--flag', 'two words'] 42"


def test_an_incomplete_venv_is_reported_once_not_restarted_again(fake_checkout):
    make_venv_python(fake_checkout, with_dependency=False)
    line = one_line_exit_2(run_tool(fake_checkout / "tools" / "probe.py"))
    assert "incomplete" in line and "delete .venv, then run `make sim`" in line


def test_a_venv_python_that_cannot_start_is_reported(fake_checkout):
    make_venv_python(fake_checkout, with_dependency=True, executable=False)
    line = one_line_exit_2(run_tool(fake_checkout / "tools" / "probe.py"))
    assert "cannot start" in line and "delete .venv, then run `make sim`" in line


def test_a_venv_whose_python_is_gone_is_reported(fake_checkout):
    (fake_checkout / ".venv" / "bin").mkdir(parents=True)
    (fake_checkout / ".venv" / "bin" / "python").symlink_to(fake_checkout / "no-such-python")
    line = one_line_exit_2(run_tool(fake_checkout / "tools" / "probe.py"))
    assert "cannot start" in line and "delete .venv, then run `make sim`" in line


# ---- the mutants where the book puts them --------------------------------------------------------


def test_the_books_mutants_are_listed_in_mut_ch15_and_read_by_mutation():
    assert M.BOOK is mut_ch15.BOOK and len(mut_ch15.BOOK) == 18
    assert all(m.file == "model/paged_lm.py" and m.check == "paged" for m in mut_ch15.BOOK + mut_ch15.ADDED)


def test_a_mutant_that_no_longer_applies_prints_how_to_reanchor_it(monkeypatch):
    monkeypatch.setattr(M, "run_unbroken", lambda *args, **kwargs: M.Result(None, M.SURVIVED))
    stale = M.Mutant("page table", "model/paged_lm.py", "a line an exercise rewrote", "x", "stale", "paged")
    lines: list[str] = []
    assert M.report([stale], out=lines.append) == 1
    assert "page table: stale: NO LONGER APPLIES" in lines
    assert lines[-1] == M.REANCHOR and "tools/mut_ch15.py" in M.REANCHOR


# ---- what the tools compute ----------------------------------------------------------------------


def test_the_savings_line_is_computed_from_the_totals():
    cycles = {None: [100, 200, 300], 8: [100, 150, 150], 4: [100, 120, 120]}  # totals 600, 400, 340
    lines = ch15_run.cost_lines(cycles)
    assert "100.0 cycles on average" in lines[0]
    assert lines[1] == "over 3 steps a window of 8 saves 33.3% and a window of 4 saves 43.3% of the cycles of no window"


def test_the_eight_self_check_answers_agree_with_the_chapters_arithmetic(capsys):
    assert ch15_selfcheck.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("DISAGREES") == 0 and "8 answers, every one agrees" in out
    assert "= 87.5%" in out


# ==== nothing passes that should fail ============================================================
#
# Every tool in tools/ that is a program: --help only helps; a user mistake is one line naming it,
# exit 2, nothing written and no work started; a failed replay or check, or a run that checks
# nothing, exits 1; outputs are written atomically; children die with the tool.

import importlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

import cli  # noqa: E402
import decode  # noqa: E402
import hw  # noqa: E402
import paged_lm  # noqa: E402
import tiny_lm  # noqa: E402

OUT = ROOT / "out"
PROGRAMS = sorted(p.stem for p in (ROOT / "tools").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def test_every_program_in_tools_is_covered_here():
    """A new tool joins these tests by being listed here (and gets --help and bad-input cases)."""
    assert PROGRAMS == sorted(["bench", "ch12_accuracy", "ch12_run", "ch15_example_a", "ch15_example_b",
                               "ch15_figures", "ch15_run", "ch15_selfcheck", "decode_report", "dse", "gather_bench",
                               "gen_exp_lut", "kv_cache_benchmark", "mut_ch15", "passkey_eval", "serve_run", "soak",
                               "synth", "visibility", "waves"])


def out_state() -> dict[str, int]:
    """The files a tool could write, with their modification times."""
    files = [p for p in OUT.iterdir() if p.is_file()] + [ROOT / "rtl" / "exp_lut.v"]
    return {p.name: p.stat().st_mtime_ns for p in files}


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a tool starts real work: a decode, a simulator, a model past 10^6 rows."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("work started before the arguments were checked")

    for module, name in ((decode, "ChipHost"), (paged_lm, "PagedChip"), (hw, "sim_icarus"), (hw, "sim_verilator")):
        monkeypatch.setattr(module, name, refuse)
    import passkey_eval

    real = passkey_eval.make_mixed_model
    monkeypatch.setattr(passkey_eval, "make_mixed_model",
                        lambda **kw: refuse() if kw.get("window", 0) > 10**6 else real(**kw))


def call(capsys, tool: str, *argv: str) -> tuple[int, str, str]:
    """Run a tool's main in-process as its script does (cli.run); (exit status, stdout, stderr)."""
    module = importlib.import_module(tool)
    try:
        code = cli.run(module.main, list(argv))
    except SystemExit as done:
        code = done.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("tool", PROGRAMS)
def test_every_tool_runs_from_a_python_without_the_projects_packages(tool):
    """The README promises that `python tools/<tool>.py` works with whatever Python is on the PATH:
    a tool that needs numpy must restart under .venv/bin/python before it imports it. `-S` leaves
    out site-packages, so this Python has no numpy."""
    proc = run_tool(ROOT / "tools" / f"{tool}.py", "--help", python=sys.executable, env=None, flags=("-S",))
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stderr[-1000:]


@pytest.mark.parametrize("tool", PROGRAMS)
def test_a_bad_configuration_in_the_environment_is_one_line_and_exit_2(tool):
    """GA2_CONFIG is read when capra is first imported, before a tool's own error handling runs: a
    bad one must still end the tool with one line naming it, not with a traceback. A tool that reads
    no configuration before parsing its arguments just prints its usage."""
    env = {**os.environ, "GA2_CONFIG": "n=3"}
    proc = run_tool(ROOT / "tools" / f"{tool}.py", "--help", env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 0:
        assert proc.stdout.startswith("usage:"), proc.stdout[:200]
    else:
        lines = proc.stderr.strip().splitlines()
        assert (proc.returncode, proc.stdout, len(lines)) == (2, "", 1), proc.stderr
        assert lines[0].startswith(f"{tool}.py: error: GA2_CONFIG='n=3': n=3:"), lines[0]


@pytest.mark.parametrize("tool", PROGRAMS)
def test_help_of_every_tool_only_helps(capsys, no_work, tool):
    before = out_state()
    code, out, err = call(capsys, tool, "--help")
    assert code == 0 and out.startswith("usage:"), (code, out[:200], err)
    assert "VERDICT" not in out and "==" not in out
    assert out_state() == before, "--help wrote a file"




@pytest.mark.parametrize("tool, args, named", BAD_ARGUMENTS)
def test_a_user_mistake_is_one_line_exit_2_before_any_work(capsys, no_work, tool, args, named):
    before = out_state()
    code, out, err = call(capsys, tool, *args)
    assert (code, out) == (2, ""), (code, out[-500:], err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], err
    assert out_state() == before, "a refused run wrote a file"


@pytest.mark.parametrize("tool, args", [("ch12_run", []), ("ch12_accuracy", []), ("decode_report", []),
                                        ("waves", []), ("bench", []), ("visibility", []), ("dse", ["--no-area"]),
                                        ("mut_ch15", ["-k", "gather starts"])])
@pytest.mark.parametrize("value", ["abc", "0", "70000"])
def test_a_bad_GA2_EXT_is_one_line_naming_it(capsys, monkeypatch, no_work, tool, args, value):
    monkeypatch.setenv("GA2_EXT", value)
    code, out, err = call(capsys, tool, *args)
    assert (code, out) == (2, ""), (code, out[-500:], err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"GA2_EXT={value}" in lines[0].replace("'", ""), err


@pytest.mark.parametrize("tool, args, missing", [
    ("ch12_run", ["--steps", "1"], ("iverilog", "verilator")), ("ch15_run", [], ("iverilog", "verilator")),
    ("serve_run", [], ("verilator",)), ("soak", ["-n", "1"], ("iverilog",)), ("bench", [], ("verilator",)),
    ("dse", ["--no-area", "--only", "n=8"], ("iverilog", "verilator")), ("waves", ["--context", "1"], ("iverilog",))])
def test_a_missing_simulator_is_one_line_before_any_work(capsys, monkeypatch, no_work, tool, args, missing):
    """These used to print results, write images and fail a replay (exit 1) before saying so."""
    import shutil

    import hw

    which = shutil.which
    monkeypatch.setattr(hw.shutil, "which", lambda name, *a, **k: None if name in missing else which(name, *a, **k))
    before = out_state()
    code, out, err = call(capsys, tool, *args)
    assert (code, out) == (2, ""), (code, out[-500:], err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and all(hw.INSTALL_HINT[m] in lines[0] for m in missing), err
    assert out_state() == before, "a refused run wrote a file"


@pytest.mark.parametrize("tool, args", [("ch12_run", []), ("decode_report", []), ("waves", []), ("bench", []),
                                        ("visibility", []), ("mut_ch15", ["-k", "gather starts"])])
def test_a_GA2_EXT_too_small_for_the_decode_is_refused_before_any_work(capsys, monkeypatch, no_work, tool, args):
    monkeypatch.setenv("GA2_EXT", "100")  # a valid size, but the weights alone need more
    before = out_state()
    code, out, err = call(capsys, tool, *args)
    assert (code, out) == (2, ""), (code, out[-500:], err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "GA2_EXT=100" in lines[0], err
    assert out_state() == before, "a refused run wrote a file"


def test_ext_limit_reads_GA2_EXT_as_words_1_to_65536(monkeypatch):
    from capra.compiler import CompileError, ext_limit

    monkeypatch.delenv("GA2_EXT", raising=False)
    assert ext_limit() == 8192
    for good in ("1", "40", "65536"):
        monkeypatch.setenv("GA2_EXT", good)
        assert ext_limit() == int(good)
    for bad in ("abc", "", "0", "-5", "65537", "8192.0", "8_192", " 8192 ", "\u0668192"):  # int() takes the last 3
        monkeypatch.setenv("GA2_EXT", bad)
        with pytest.raises(CompileError, match="GA2_EXT"):
            ext_limit()


def test_the_context_limit_is_the_largest_program_that_compiles(capsys, no_work):
    import limits

    model = tiny_lm.make_model("structured")
    found = limits.largest_context(model)
    assert limits.compile_error(model, found.largest) is None
    assert limits.compile_error(model, found.largest + 1) == found.reason and "scratchpad" in found.reason
    code, _out, err = call(capsys, "decode_report", "--steps", str(found.largest + 1))
    assert code == 2 and f"the largest decode context GA2 can run, {found.largest}" in err


def test_a_smaller_scratchpad_is_a_shorter_limit_named_before_any_work(capsys, no_work):
    """The limit follows the configuration: with half the scratchpad a decode the default chip runs
    is refused up front, in one line naming the scratchpad, and the default's limit is untouched."""
    import limits
    from capra import config

    model = tiny_lm.make_model("structured")
    default = limits.largest_context(model)
    with config.use(config.Config(sram_words=2048)):
        small = limits.largest_context(model)
        assert small.largest < default.largest and "scratchpad (2048 words" in small.reason
        code, _out, err = call(capsys, "decode_report", "--steps", str(small.largest + 1))
        assert code == 2 and f"the largest decode context GA2 can run, {small.largest}" in err
    assert limits.largest_context(model) == default


# ---- verdicts -----------------------------------------------------------------------------------

PASS3 = "PASS: 3 programs match the Python reference (memory and all five cycle counters), 99 cycles in total\n"
COUNTERS3 = "".join(f"COUNTERS {i} 10 1 2 3 4\n" for i in range(3))


@pytest.mark.parametrize("rc, output, programs, problem", [
    (0, PASS3, 3, None),
    (0, COUNTERS3 + PASS3, 3, None),
    (0, PASS3, 4, "the image holds 4"),
    (0, PASS3, 0, "nothing was checked"),
    (0, "FAIL: malformed image out/x.hex: the first word (1 words read) is not a program count\n", 1, "FAIL"),
    (0, "MISMATCH: program 1 counter c0: expected 5, got 6\n" + PASS3, 3, "MISMATCH"),
    (0, PASS3 + "FAIL: program 2 did not halt\n", 3, "FAIL"),
    (0, "", 3, "no verdict"),
    (0, "PASSED\n", 3, "no verdict"),
    (1, PASS3, 3, "exited with status 1"),
    (0, "COUNTERS 0 10 1 2 3 4\n" + PASS3, 3, "counters for 1 of 3"),
])
def test_a_replay_passes_only_on_one_PASS_for_every_program(rc, output, programs, problem):
    replay = cli.replay_verdict("Icarus", rc, output, programs, dump=True) if "COUNTERS" in output else \
        cli.replay_verdict("Icarus", rc, output, programs)
    if problem is None:
        assert replay.passed, replay.problems
    else:
        assert not replay.passed and problem in "; ".join(replay.problems), replay.problems


def test_finish_fails_a_run_that_checked_nothing(capsys):
    assert cli.finish([], checks=0, passed="everything") == 1
    assert capsys.readouterr().out == "VERDICT: FAIL: nothing was checked\n"
    assert cli.finish(["a", "b"], checks=5) == 1
    assert capsys.readouterr().out == "VERDICT: FAIL: a; b\n"
    assert cli.finish([], checks=1, passed="one check") == 0
    assert capsys.readouterr().out == "VERDICT: PASS: one check\n"


@pytest.mark.parametrize("output", [
    "FAIL: malformed image out/ga2_programs.hex: the first word (1 words read) is not a program count\n",
    "PASS: 1 programs match\nCOUNTERS 0 1 1 1 1 1\n",  # too few programs
    "PASS: 2 programs match\nCOUNTERS 0 1 1 1 1 1\nCOUNTERS 1 1 1 1 1 1\n",  # counters not the model's
])
def test_ch12_run_fails_when_a_simulator_does_not_pass(capsys, monkeypatch, output):
    fake = ("Icarus", lambda *a, **k: (0, output)), ("Verilator", lambda *a, **k: (0, output))
    monkeypatch.setattr(hw, "SIMULATORS", fake)
    code, out, _err = call(capsys, "ch12_run", "--steps", "2")
    assert code == 1 and out.strip().splitlines()[-1].startswith("VERDICT: FAIL"), out


def test_waves_fails_and_keeps_no_waveform_when_the_replay_fails(capsys, monkeypatch, tmp_path):
    import waves

    monkeypatch.setattr(waves, "VCD", tmp_path / "ga2.vcd")
    monkeypatch.setattr(hw, "sim_icarus", lambda *a, **k: (0, "FAIL: program 0 halted on an illegal instruction\n"))
    code, out, _err = call(capsys, "waves", "--context", "1")
    assert code == 1 and "VERDICT: FAIL" in out and not (tmp_path / "ga2.vcd").exists()


def test_bench_stops_when_a_timed_replay_does_not_pass(tmp_path):
    import bench

    def icarus(*_args, **_kwargs):
        return 0, "FAIL: truncated image\n"

    with pytest.raises(SystemExit) as stop:
        bench.timed_run(icarus, tmp_path / "x.hex", 8192, 32)
    assert stop.value.code == 1


def test_passkey_eval_exits_1_below_its_target(capsys, monkeypatch):
    import passkey_eval

    monkeypatch.setattr(passkey_eval, "TARGET_ACCURACY", 1.01)  # unreachable: every cell is below it
    code, out, _err = call(capsys, "passkey_eval", "--n-trials", "1", "--context-lengths", "64", "--position",
                           "end", "--probe-lengths")
    assert code == 1 and "verdict: BELOW TARGET" in out and "VERDICT: FAIL" in out


def test_kv_cache_benchmark_reports_a_cached_decode_that_differs(monkeypatch, capsys):
    import kv_cache_benchmark as K
    import numpy as np

    monkeypatch.setattr(K, "generate", lambda *a, use_cache, **k: np.array([[1 if use_cache else 2]]))
    assert K.section_cached_vs_uncached([64], new_tokens=1) == [
        "prompt of 64 tokens: the cached decode's tokens differ from the uncached one's"]


# ---- out/ch15_run.json: written by a passing run only, checked by the figures ---------------------

def fake_cycles() -> dict:
    """Cycles shaped like the real run's: growing without a window, flat once a window is full."""
    grow = [690 + 8 * i for i in range(32)]
    return {None: grow, 8: grow[:7] + [grow[7]] * 25, 4: grow[:3] + [grow[3]] * 29}


@pytest.fixture
def fake_ch15_run(monkeypatch, tmp_path):
    """ch15_run with its three sections replaced (no decode, no simulator) and its JSON in tmp_path."""
    monkeypatch.setattr(ch15_run, "RUN_JSON", tmp_path / "ch15_run.json")
    monkeypatch.setattr(ch15_run, "section_checks", lambda: [])
    decodes = {W: [{"pages": 1}] * 32 for W in ch15_run.WINDOWS}
    monkeypatch.setattr(ch15_run, "section_rule", lambda m: (decodes, []))
    return tmp_path / "ch15_run.json"


def test_ch15_run_writes_its_json_with_the_verdict_only_when_it_passes(capsys, monkeypatch, fake_ch15_run):
    monkeypatch.setattr(ch15_run, "section_replay", lambda d: (fake_cycles(), []))
    assert ch15_run.main([]) == 0
    data = json.loads(fake_ch15_run.read_text())
    assert data["verdict"] == "PASS" and data["cycles"]["8"] == fake_cycles()[8]
    monkeypatch.setattr(ch15_run, "section_replay", lambda d: (fake_cycles(), ["window 8: Icarus: FAIL: x"]))
    assert ch15_run.main([]) == 1
    assert not fake_ch15_run.exists(), "a failing run left the passing run's numbers for the figures"
    assert "VERDICT: FAIL\n  - window 8: Icarus: FAIL: x" in capsys.readouterr().out


EXAMPLE_B = {"contig": [4, 1022, 8192], "paged": {"4": [34, 7852, 7916]}, "share": {"96/16": [72, 30, 0]},
             "win": {"8": [938, 1152, 0.16]}, "serve": {"2048": [5, 5, 135, 135]}}
GOOD_RUN = {"verdict": "PASS", "steps": 32, "page": 4, "cycles": {str(W): c for W, c in fake_cycles().items()}}


@pytest.mark.parametrize("text, named", [
    (json.dumps(GOOD_RUN)[:200], "not complete JSON"),  # truncated
    (json.dumps({k: v for k, v in GOOD_RUN.items() if k != "verdict"}), "not from a passing run"),
    (json.dumps({**GOOD_RUN, "verdict": "FAIL"}), "not from a passing run"),
    (json.dumps({**GOOD_RUN, "cycles": {"None": [1] * 32, "8": [1] * 31, "4": [1] * 32}}), "32 positive integer"),
    (json.dumps({**GOOD_RUN, "cycles": {"None": [1] * 32, "8": [1] * 32}}), "32 positive integer"),
    (json.dumps({**GOOD_RUN, "cycles": {"None": [-5] * 32, "8": [1] * 32, "4": [1] * 32}}), "32 positive integer"),
    ("[]", "not from a passing run"),
])
def test_the_figures_refuse_a_run_file_that_is_not_a_complete_passing_run(capsys, monkeypatch, tmp_path,
                                                                          text, named):
    import ch15_figures

    (tmp_path / "ch15_run.json").write_text(text)
    (tmp_path / "ch15_example_b.json").write_text(json.dumps(EXAMPLE_B))
    monkeypatch.setattr(ch15_run, "RUN_JSON", tmp_path / "ch15_run.json")
    monkeypatch.setattr(ch15_figures, "OUT", tmp_path)
    code, out, err = call(capsys, "ch15_figures")
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1 and named in err, err
    assert not list(tmp_path.glob("*.png")), "a figure was written from a file that was refused"


@pytest.mark.parametrize("change", [{"win": {}}, {"paged": {"4": [34, 7852, 0]}}, {"share": {"96/16": [0, 30, 0]}},
                                    {"win": {"x": [938, 1152, 0.16]}}, {"win": {"8": [938, 0, 0.16]}},
                                    {"serve": {"abc": [5, 5, 135, 135]}}])
def test_the_figures_refuse_an_incomplete_example_b_file(capsys, monkeypatch, tmp_path, change):
    """Each of these but the first used to write some figures, then end in a traceback."""
    import ch15_figures

    (tmp_path / "ch15_run.json").write_text(json.dumps(GOOD_RUN))
    (tmp_path / "ch15_example_b.json").write_text(json.dumps({**EXAMPLE_B, **change}))
    monkeypatch.setattr(ch15_run, "RUN_JSON", tmp_path / "ch15_run.json")
    monkeypatch.setattr(ch15_figures, "OUT", tmp_path)
    code, out, err = call(capsys, "ch15_figures")
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1 and "every study of example B" in err, err
    assert not list(tmp_path.glob("*.png")), "a figure was written from a file that was refused"


def test_the_figures_accept_a_passing_run(monkeypatch, tmp_path):
    import ch15_figures

    (tmp_path / "ch15_run.json").write_text(json.dumps(GOOD_RUN))
    assert ch15_figures.run_cycles(tmp_path / "ch15_run.json") == GOOD_RUN["cycles"]


# ---- atomic outputs -----------------------------------------------------------------------------


def test_a_folder_where_a_file_is_written_is_a_named_error_and_stays(tmp_path):
    (tmp_path / "ch15_run.json").mkdir()
    with pytest.raises(cli.ToolError, match="is a folder"):
        cli.write_json(tmp_path / "ch15_run.json", {"a": 1})
    assert (tmp_path / "ch15_run.json").is_dir() and [p.name for p in tmp_path.iterdir()] == ["ch15_run.json"]


@pytest.mark.parametrize("tool, args", [("ch12_run", ["a\nVERDICT: PASS"]), ("synth", ["nosuch\nVERDICT: PASS"]),
                                        ("decode_report", ["--steps", "2\n3"])])
def test_an_argument_with_a_newline_is_still_one_line(capsys, no_work, tool, args):
    code, out, err = call(capsys, tool, *args)
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1 and "\\n" in err, err


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "ch15_run.json"
    cli.write_text(path, "old\n")
    with pytest.raises(KeyboardInterrupt), cli.atomic_path(path) as tmp:
        tmp.write_text("half of the n")
        raise KeyboardInterrupt
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["ch15_run.json"]
    cli.write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_the_tools_write_files_only_through_cli():
    """One helper for every output (cli.atomic_path): no tool writes a file in place."""
    direct = re.compile(r"\.write_(text|bytes)\(|json\.dump\(|open\([^)]*['\"][wax]b?['\"]|savefig\((?!tmp)")
    found = [f"{p.name}: {line.strip()}" for p in (ROOT / "tools").glob("*.py") if p.name != "cli.py"
             for line in p.read_text().splitlines()
             if direct.search(line) and "cli." not in line and "streamed log" not in line]
    assert not found, found


# ---- children die with the tool -----------------------------------------------------------------


def alive(pid: int) -> bool:
    """True while pid is a running process (a zombie waiting for its reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def all_dead(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_child_that_times_out_is_killed_with_its_whole_group(tmp_path):
    pids = tmp_path / "pids"
    with pytest.raises(subprocess.TimeoutExpired):
        cli.run_command(["sh", "-c", f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; sleep 300"], timeout=0.5)
    found = [int(p) for p in pids.read_text().split()]
    assert len(found) == 2 and all_dead(found)


FAKE_VERILATOR = """#!/bin/sh
# A build that takes for ever: a make with a compiler under it, as Verilator's does.
sh -c 'sleep 300' &
echo $! >> {pids}
sleep 300 &
echo $! >> {pids}
echo $$ >> {pids}
wait
"""

DRIVER = """import signal, sys
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (CI)
sys.path[:0] = [sys.argv[1] + "/tools", sys.argv[1] + "/model"]
import cli, hw
hw.SIM_DIR = Path(sys.argv[2])
sys.exit(cli.run(hw.build_verilator, ["tb/ga2_tb.v"], "ga2_tb"))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_verilator_build_leaves_no_process_and_no_half_build(tmp_path, signum):
    bin_dir, sim_dir, pids = tmp_path / "bin", tmp_path / "sim", tmp_path / "pids"
    bin_dir.mkdir()
    (bin_dir / "verilator").write_text(FAKE_VERILATOR.format(pids=pids))
    (bin_dir / "verilator").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    tool = subprocess.Popen([sys.executable, "-c", DRIVER, str(ROOT), str(sim_dir)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (pids.exists() and len(pids.read_text().split()) == 3):
        assert time.monotonic() < deadline and tool.poll() is None, tool.communicate()
        time.sleep(0.05)
    tool.send_signal(signum)
    _out, err = tool.communicate(timeout=30)
    assert tool.returncode == 130 and "interrupted" in err, err
    assert all_dead([int(p) for p in pids.read_text().split()]), "a build process outlived the tool"
    assert list(sim_dir.iterdir()) == [], "a half-built simulator was left in the cache"


# ---- make test: a missing simulator fails, a plain pytest skips ----------------------------------


@pytest.mark.parametrize("required, outcome", [("1", "1 failed"), ("", "1 skipped")])
def test_a_missing_simulator_fails_under_make_test_and_skips_otherwise(tmp_path, required, outcome):
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path)
    (tmp_path / "test_needs.py").write_text("from conftest import needs_icarus\n\n\n"
                                            "@needs_icarus\ndef test_replay():\n    pass\n")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "CAPRA_REQUIRE_SIMULATORS": required,
           "PYTHONPATH": f"{ROOT / 'tools'}:{ROOT / 'model'}"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfs", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert outcome in proc.stdout and "Icarus Verilog is not installed" in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == (1 if required else 0)
