"""The mutation harness itself (tools/capra_cli/mutation.py): edits that no longer apply are reported, never
skipped; the working tree is never touched; the unbroken copy passes; a real break is caught.

The two tests that run a check take a few seconds each (one ``paged_tests.check_all()``); the
full mutation runs are ``make mut`` and ``make mut-all``.
"""

from __future__ import annotations

import hashlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from capra_cli import mut, mutants
from capra_cli import mutation as M

ROOT = Path(__file__).resolve().parents[1]
BOOK, ADDED = mut.book()


def _tree_digest(root: Path) -> str:
    """One hash over every file the harness copies, to prove a run leaves the working tree alone."""
    h = hashlib.sha256()
    for name in ("model", "rtl"):
        for path in sorted((root / name).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def _never_run(root, commands):
    raise AssertionError("a mutant that does not apply must not be checked")


def test_every_listed_mutant_applies_exactly_once_to_the_current_code():
    for m in BOOK + ADDED + mutants.EXTENDED:
        text = (ROOT / m.file).read_text()
        assert text.count(m.old) == 1, f"{m.area}: {m.what}: {m.old!r} occurs {text.count(m.old)} times in {m.file}"
        assert m.old != m.new and m.check in M.CHECKS


def test_the_book_has_eighteen_and_each_extra_area_at_least_fifteen():
    assert len(BOOK) == 18 and {m.area for m in BOOK} == {"page table", "window", "host"}
    assert all(m.file == "model/paged_lm.py" and m.check == "paged" for m in BOOK + ADDED)
    areas = [m.area for m in mutants.EXTENDED]
    for area in ("compiler and quantizer", "machine model", "RTL"):
        assert areas.count(area) >= 15, f"{area}: only {areas.count(area)} mutants"


def test_an_edit_whose_text_is_gone_is_reported_as_no_longer_applies():
    gone = M.Mutant("page table", "model/paged_lm.py", "this line was rewritten long ago", "x", "stale edit", "paged")
    result = M.run_mutant(gone, runner=_never_run)
    assert result.status == M.NO_LONGER_APPLIES
    assert result.line() == "page table: stale edit: NO LONGER APPLIES"
    assert "is not in model/paged_lm.py" in result.detail


def test_an_edit_whose_text_occurs_twice_is_ambiguous_and_does_not_apply(tmp_path):
    (tmp_path / "f.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(M.NoLongerApplies, match="occurs 2 times"):
        M.apply(tmp_path, M.Mutant("a", "f.py", "x = 1", "x = 2", "twice", "paged"))
    assert (tmp_path / "f.py").read_text() == "x = 1\nx = 1\n"


def test_a_missing_file_does_not_apply():
    gone = M.Mutant("a", "model/no_such_file.py", "x", "y", "file gone", "paged")
    assert M.run_mutant(gone, runner=_never_run).status == M.NO_LONGER_APPLIES


def test_the_copy_holds_the_code_links_the_venv_and_leaves_out_out(tmp_path):
    M.copy_repo(tmp_path)
    assert (tmp_path / "model" / "paged_lm.py").exists() and (tmp_path / "rtl" / "ga2.v").exists()
    assert (tmp_path / "tests" / "conftest.py").exists() and (tmp_path / "pyproject.toml").exists()
    assert not (tmp_path / "out").exists()
    assert not (ROOT / ".venv").is_dir() or (tmp_path / ".venv").resolve() == (ROOT / ".venv").resolve()
    assert not list(tmp_path.rglob("__pycache__"))


def test_the_edit_lands_in_the_copy_and_the_check_runs_there():
    mutant = BOOK[0]
    seen = {}

    def spy(root, commands):
        seen["root"] = root
        seen["text"] = (root / mutant.file).read_text()
        return True, ""

    result = M.run_mutant(mutant, runner=spy)
    assert seen["root"] != ROOT and mutant.new in seen["text"] and mutant.old not in seen["text"]
    assert mutant.old in (ROOT / mutant.file).read_text()
    assert result.status == M.SURVIVED  # the spy passed, so the harness must say the mutant survived
    assert not seen["root"].exists(), "the temporary copy must be removed"


@pytest.mark.heavy
def test_the_unbroken_copy_passes_the_chapter_checks():
    result = M.run_unbroken(["paged"])
    assert result.status == M.SURVIVED, f"the unbroken code fails check_all:\n{result.detail}"


def test_a_cheap_real_break_is_caught_and_the_working_tree_is_untouched():
    before = _tree_digest(ROOT)
    exhaustion = next(m for m in BOOK if m.what == "exhaustion is not reported")
    result = M.run_mutant(exhaustion)
    assert result.status == M.CAUGHT, result.detail
    assert result.line() == "page table: exhaustion is not reported: caught"
    assert _tree_digest(ROOT) == before


def test_summary_counts_caught_per_area():
    a, b = BOOK[0], BOOK[-1]
    results = [M.Result(a, M.CAUGHT), M.Result(a, M.SURVIVED), M.Result(b, M.NO_LONGER_APPLIES)]
    assert M.summary_by_area(results) == {"page table": (1, 0, 2), "host": (0, 0, 1)}


def test_a_survivor_is_equivalent_only_when_its_mutant_says_why():
    plain = BOOK[0]
    shown = M.Mutant(plain.area, plain.file, plain.old, plain.new, plain.what, plain.check,
                     equivalent="no reachable state tells them apart")
    assert M.run_mutant(plain, runner=lambda root, cmds: (True, "")).status == M.SURVIVED
    result = M.run_mutant(shown, runner=lambda root, cmds: (True, ""))
    assert result.status == M.EQUIVALENT and M.accounted_for(result)
    assert not M.accounted_for(M.Result(plain, M.SURVIVED))
    assert not M.accounted_for(M.Result(plain, M.NO_LONGER_APPLIES))


def test_an_rtl_mutant_builds_its_simulators_in_its_copy_and_a_python_one_shares_the_cache(tmp_path, monkeypatch):
    """A mutated RTL's builds serve no later run: they are made in the copy (removed with it), with
    Verilator's runtime objects linked from the shared cache; a copy of this RTL uses the shared cache."""
    from replay.simulators import CACHE_ENV

    shared = tmp_path / "shared"
    (shared / "verilator-runtime-0123").mkdir(parents=True)
    monkeypatch.setenv(CACHE_ENV, str(shared))
    python_copy = M.copy_repo(tmp_path / "python")
    M.apply(python_copy, next(m for m in mutants.EXTENDED if m.file.startswith("model/")))
    assert M._environment(python_copy)[CACHE_ENV] == str(shared)
    rtl_copy = M.copy_repo(tmp_path / "rtl")
    M.apply(rtl_copy, next(m for m in mutants.EXTENDED if m.file.startswith("rtl/")))
    own = Path(M._environment(rtl_copy)[CACHE_ENV])
    assert own == rtl_copy / "out" / "sim"
    assert (own / "verilator-runtime-0123").resolve() == (shared / "verilator-runtime-0123").resolve()
    assert sorted(p.name for p in shared.iterdir()) == ["verilator-runtime-0123"]  # nothing added there


def test_a_check_runs_the_copys_code_not_the_installed_one(tmp_path):
    """The project is installed from the working tree; a mutant's check must import the copy."""
    M.copy_repo(tmp_path)
    (tmp_path / "model" / "tiny_lm.py").write_text("WHERE = 'the copy'\n")
    probe = [sys.executable, "-c", "import sys, tiny_lm; sys.exit(getattr(tiny_lm, 'WHERE', '') != 'the copy')"]
    passed, detail = M.run_commands(tmp_path, [probe])
    assert passed, detail


def test_a_tier_names_every_test_file_once_the_model_tests_first():
    """A mutant run names the tier's files so that those catching most mutants run first; a file
    left out would be a test the tier no longer runs."""
    paths = M.tier_paths()
    every = sorted(str(p.relative_to(M.ROOT)) for p in (M.ROOT / "tests").glob("test_*.py"))
    assert sorted(paths) == every and len(set(paths)) == len(paths)
    assert paths[:len(M.MODEL_TESTS)] == M.MODEL_TESTS


def test_a_tier_replaces_every_check_with_the_whole_tier():
    plain = BOOK[0]
    seen = []
    M.run_mutant(plain, runner=lambda root, cmds, *timeout: seen.append(cmds) or (False, ""), tier="fast")
    assert seen == [M.tier_commands("fast")] and M.TIERS["fast"] == "not sim and not slow and not heavy"
    assert M.LIST_TEST.split("::")[1] in globals(), "the deselected test of the list is this file's"


def collected(*args: str) -> set[str]:
    """The test ids pytest selects with these arguments (collection only, nothing runs)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p",
                           "no:cacheprovider", *args],
                          cwd=M.ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {line for line in proc.stdout.splitlines() if "::" in line}


@pytest.mark.slow
def test_a_tiers_parts_hold_exactly_its_tests():
    """(make test-full: it collects the whole suite three times, for the hours-long make mut-tiers.)
    A tier runs in parts (no simulator first): together they must select the tier's tests, each
    once (the `sim` mark is given at collection, tests/conftest.py, so this is not a matter of logic
    alone). make test's tier; the others are written the same way."""
    tier = "test"
    whole = collected(*(["-m", M.TIERS[tier]] if M.TIERS[tier] else []))
    parts = [collected("-m", part, *M.tier_paths()) for part in M.TIER_PARTS[tier]]  # as a mutant run names them
    assert sum(len(p) for p in parts) == len(whole) and set().union(*parts) == whole
    assert len(whole) > 500, "the collection found the suite"


def test_a_mutant_that_no_longer_applies_prints_how_to_reanchor_it(monkeypatch):
    monkeypatch.setattr(M, "run_unbroken", lambda *args, **kwargs: M.Result(None, M.SURVIVED))
    stale = M.Mutant("page table", "model/paged_lm.py", "a line an exercise rewrote", "x", "stale", "paged")
    lines: list[str] = []
    run = M.report([stale], jobs=1, out=lines.append)
    assert run is not None and not M.accounted_for(run.results[0])
    assert "page table: stale: NO LONGER APPLIES" in lines
    assert lines[-1] == M.REANCHOR and "tools/mut_ch15.py" in M.REANCHOR


@pytest.mark.heavy
def test_every_python_mutant_still_parses():
    """A mutant that breaks the syntax is 'caught' by any import and says nothing of the checks."""
    import ast

    for m in BOOK + ADDED + mutants.EXTENDED:
        if m.file.endswith(".py"):
            mutated = (ROOT / m.file).read_text().replace(m.old, m.new)
            try:
                ast.parse(mutated)
            except SyntaxError as error:
                raise AssertionError(f"{m.area}: {m.what}: the mutated {m.file} does not parse: {error}") from None


def test_exercise_5s_closing_check_passes_on_the_code_and_its_mutant_applies():
    """The worked answer's check holds on the unbroken code (it is not in check_all: the exercise
    keeps its premise), and its mutant's text is in paged_lm.py exactly once."""
    import paged_tests

    assert paged_tests.check_release_order() == []
    assert (ROOT / mut.ANSWER_5.file).read_text().count(mut.ANSWER_5.old) == 1
    assert "check_release_order" not in inspect.getsource(paged_tests.check_all)


@pytest.mark.slow
def test_exercise_5s_worked_answer_holds(capsys):
    """Its mutant survives check_all() and is caught once check_release_order runs too."""
    assert mut.answers() == 0, capsys.readouterr().out
