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


def run_tool(path: Path, *args: str, python: str = sys.executable, env: dict | None = None):
    environment = dict(os.environ if env is None else env)
    environment.pop("PYTHONPATH", None)
    return subprocess.run([python, str(path), *args], capture_output=True, text=True, env=environment,
                          cwd=path.parents[1], timeout=120)


# ---- --help and bad arguments --------------------------------------------------------------------


@pytest.mark.parametrize("tool", BOOK_TOOLS)
def test_help_prints_usage_and_runs_nothing(tool):
    proc = run_tool(ROOT / "tools" / f"{tool}.py", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:"), proc.stdout[:200]
    assert "==" not in proc.stdout and "VERDICT" not in proc.stdout, "--help started a run"


@pytest.mark.parametrize("tool, args, named", [
    ("mut_ch15", ["-j", "0"], "-j/--jobs"),
    ("mut_ch15", ["-k", "no mutant says this"], "-k"),
    ("mut_ch15", ["-k", ""], "-k"),
    ("gen_exp_lut", ["--chek"], "--chek"),
    ("ch15_selfcheck", ["-q", "9"], "-q/--question"),
    ("gather_bench", ["--repeats", "many"], "--repeats"),
    ("ch15_example_a", ["--free-order", "random"], "--free-order"),
    ("ch15_run", ["--steps", "8"], "--steps"),
])
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
