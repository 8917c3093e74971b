"""Mutation runs: break a copy of the code one line at a time and see whether the checks notice.

A test suite is only as good as the mistakes it catches. Each ``Mutant`` is the exact edit it makes
(file, old text, new text), so a source line that has since changed is reported as a mutant that
*no longer applies* instead of being skipped in silence: a mutation list that quietly shrinks would
report "all caught" for a suite that checks less and less.

How one mutant runs
    1. The repository's code (``COPIED``: model/, tools/, rtl/, tb/, tests/, pyproject.toml; never
       .venv or out/) is copied into a fresh temporary folder. The working tree is never touched.
    2. The one edit is applied there; the old text must occur exactly once.
    3. The mutant's check runs in a subprocess whose working directory is the copy, with the copy's
       folders first on the path. The copy's tools/hw.py roots its simulator cache at the copy's
       out/sim, so a broken RTL never lands in the real out/sim cache.
    4. A check that fails (non-zero exit, a crash, or a timeout) has *caught* the mutant.

Before any mutant, the unbroken copy must pass every check the run uses; otherwise "caught" would
mean nothing (a check that always fails catches everything).

The checks
    paged     ``paged_tests.check_all()`` (Chapter 15): a non-empty problem list is a catch.
    compiler  the compiler, quantizer and machine-model pytest files (simulator replays left out:
              the integer reference in tests/int_reference.py is the independent side).
    machine   the same pytest files, then the RTL replay: the machine model writes the expected
              memory and counters into every replay record, so a machine-model mutant that the
              Python tests cannot see is caught when Icarus disagrees with it.
    rtl       the RTL replay of the 200 random programs and the hand-written ones on Icarus,
              then the cocotb test of the mutated block (when the mutant names one).

Mutants run on ``jobs`` worker threads (two by default, the machine's cores); each worker only
waits for its subprocess, so at most ``jobs`` checks run at once. Every check runs in a process
group of its own (tools/cli.py ``run_command``): a timeout kills the check with the simulators it
started, and Ctrl-C stops every running check before the tool exits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

import cli  # noqa: E402  (tools/cli.py: children in process groups)

COPIED = ("model", "tools", "rtl", "tb", "tests", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", ".ruff_cache")
CHECK_TIMEOUT = 900  # seconds; a mutant that hangs a check is caught (the checks must finish)

CAUGHT = "caught"
SURVIVED = "SURVIVED"
EQUIVALENT = "survived, equivalent"  # a survivor whose mutant says why it cannot be seen
NO_LONGER_APPLIES = "NO LONGER APPLIES"

BOOK_SUMMARY = "page table, window and host"
REANCHOR = ("NO LONGER APPLIES: the mutant's old text is not in its file exactly once, usually because that "
            "line was edited (an exercise does this). Re-anchor it: copy the line that now does the same job, "
            "exactly, into the mutant's old text, and its broken form into new (the book's mutants are in "
            "tools/mut_ch15.py, the others in model/mutation.py); then run it alone with -k.")
NOTE = ("NOTE: this run deliberately breaks copies of the code (never the working tree). "
        "'caught' is the EXPECTED result: it means the checks noticed the break.")


class NoLongerApplies(Exception):
    """The mutant's old text is not in its file exactly once: the source changed under it."""


@dataclass(frozen=True)
class Mutant:
    """One break: replace ``old`` (which must occur exactly once in ``file``) with ``new``.

    ``what`` says what is broken (and, for a mutant shown to be equivalent, why no check can see
    it); ``area`` groups mutants in the report; ``check`` names the entry of CHECKS that must
    notice it; ``block`` names a cocotb block case (tests/test_blocks.py) to run after the replay.
    """

    area: str
    file: str
    old: str
    new: str
    what: str
    check: str
    block: str | None = None
    equivalent: str = ""  # why no check can see it (the program's behaviour is unchanged), if so


@dataclass
class Result:
    mutant: Mutant | None  # None: the unbroken copy
    status: str  # CAUGHT, SURVIVED or NO_LONGER_APPLIES (for the unbroken copy: CAUGHT means it failed)
    detail: str = ""  # the first lines of the failing check, or why the edit does not apply
    seconds: float = 0.0

    def line(self) -> str:
        m = self.mutant
        return f"{m.area}: {m.what}: {self.status}" if m else f"unbroken: {self.status}"


# ---- copying and editing -------------------------------------------------------------------------


def copy_repo(dst: Path, src: Path = ROOT) -> Path:
    """Copy the code (COPIED) from src into dst; the virtual environment and out/ stay behind."""
    for name in COPIED:
        path = src / name
        if path.is_dir():
            shutil.copytree(path, dst / name, ignore=IGNORED)
        elif path.exists():
            shutil.copy2(path, dst / name)
    return dst


def apply(root: Path, mutant: Mutant) -> None:
    """Make the mutant's edit in the copy at root. Raises NoLongerApplies (and changes nothing)
    unless the old text occurs exactly once."""
    path = root / mutant.file
    if not path.exists():
        raise NoLongerApplies(f"{mutant.file} does not exist")
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        where = "is not in" if count == 0 else f"occurs {count} times in"
        raise NoLongerApplies(f"the text {mutant.old!r} {where} {mutant.file}")
    path.write_text(text.replace(mutant.old, mutant.new))


# ---- the checks ----------------------------------------------------------------------------------

_PATH = "import sys; sys.path[:0] = ['model', 'tools', 'tests']\n"

PAGED_SNIPPET = _PATH + """
import paged_tests
problems = paged_tests.check_all()
print('\\n'.join(problems[:5]) or 'no problems')
sys.exit(1 if problems else 0)
"""

# The random suite of tests/test_replay.py on Icarus alone (its pytest test needs both simulators).
REPLAY_SNIPPET = _PATH + """
import ga2_progs
from capra.randprog import EXTW, handwritten_programs, random_program
from replay_util import counters, replay, verdict
records = [ga2_progs.record(*random_program(seed), EXTW) for seed in range(200)]
records += [ga2_progs.record(code, ext, EXTW) for _name, code, ext in handwritten_programs()]
expected = {i: r[-6:-1] for i, r in enumerate(records)}
rc, out = replay('icarus', records, 'mutation_random_suite', EXTW)
line = verdict(out)
print(line)
sys.exit(0 if line.startswith(f'PASS: {len(records)} programs match') and counters(out) == expected else 1)
"""

PYTEST = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--hypothesis-seed=0"]
MODEL_TESTS = ["tests/test_numeric_edges.py", "tests/test_machine.py", "tests/test_compiler.py",
               "tests/test_decode_report.py", "tests/test_isa_sync.py", "tests/test_tiny_lm.py"]
NO_SIMULATORS = ["-k", "not both_simulators"]

CHECKS: dict[str, list[list[str]]] = {
    "paged": [[sys.executable, "-c", PAGED_SNIPPET]],
    "compiler": [PYTEST + MODEL_TESTS + NO_SIMULATORS],
    "machine": [PYTEST + MODEL_TESTS + NO_SIMULATORS, [sys.executable, "-c", REPLAY_SNIPPET]],
    "rtl": [[sys.executable, "-c", REPLAY_SNIPPET]],
    # the sequencer's corners: the random suite, then illegal instructions and running off the end
    "rtl_top": [[sys.executable, "-c", REPLAY_SNIPPET],
                PYTEST + ["tests/test_replay.py", "-k", "(illegal or past_the_last) and icarus"]],
}


def block_check(block: str) -> list[str]:
    """The cocotb test of one block (a case id of tests/test_blocks.py)."""
    return PYTEST + ["tests/test_blocks.py", "-k", block]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the copy's folders only, never the working tree's
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_commands(root: Path, commands: Sequence[Sequence[str]]) -> tuple[bool, str]:
    """Run the commands in the copy one after another; (all passed, output of the first failure)."""
    for cmd in commands:
        try:
            proc = cli.run_command(cmd, cwd=root, env=_environment(), timeout=CHECK_TIMEOUT)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {CHECK_TIMEOUT} s: {' '.join(cmd[:6])}"
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-8:]
            return False, "\n".join(tail)
    return True, ""


def commands_for(mutant: Mutant) -> list[list[str]]:
    commands = list(CHECKS[mutant.check])
    if mutant.block:
        commands.append(block_check(mutant.block))
    return commands


def run_mutant(mutant: Mutant, src: Path = ROOT,
               runner: Callable[[Path, Sequence[Sequence[str]]], tuple[bool, str]] = run_commands) -> Result:
    """Copy src, apply the mutant, run its check; the temporary copy is removed afterwards."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="capra-mutant-") as tmp:
        root = copy_repo(Path(tmp), src)
        try:
            apply(root, mutant)
        except NoLongerApplies as e:
            return Result(mutant, NO_LONGER_APPLIES, str(e), time.monotonic() - start)
        passed, detail = runner(root, commands_for(mutant))
    if passed:
        status = EQUIVALENT if mutant.equivalent else SURVIVED
        detail = mutant.equivalent or detail
    else:
        status = CAUGHT
    return Result(mutant, status, detail, time.monotonic() - start)


def run_unbroken(checks: Iterable[str], src: Path = ROOT, blocks: Iterable[str] = (),
                 runner: Callable[[Path, Sequence[Sequence[str]]], tuple[bool, str]] = run_commands) -> Result:
    """Run the named checks (and the cocotb tests of the named blocks) on an unmodified copy;
    status CAUGHT here means the unbroken code FAILS."""
    start = time.monotonic()
    commands = [cmd for name in dict.fromkeys(checks) for cmd in CHECKS[name]]
    blocks = sorted(set(blocks))
    if blocks:
        commands.append(block_check(" or ".join(blocks)))
    with tempfile.TemporaryDirectory(prefix="capra-unbroken-") as tmp:
        root = copy_repo(Path(tmp), src)
        passed, detail = runner(root, commands)
    return Result(None, SURVIVED if passed else CAUGHT, detail, time.monotonic() - start)


# ---- a whole run ---------------------------------------------------------------------------------


@dataclass
class Run:
    unbroken_passes: bool
    unbroken_detail: str
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0


def run_all(mutants: Sequence[Mutant], jobs: int = 2, src: Path = ROOT,
            on_result: Callable[[Result], None] | None = None,
            on_unbroken: Callable[[bool], None] | None = None) -> Run:
    """The unbroken copy first (every check the mutants use), then the mutants, `jobs` at a time.

    Results come back in the order of ``mutants``; ``on_result`` sees each one as soon as it and
    all those before it are done, so the report streams in a stable order.
    """
    start = time.monotonic()
    checks = [m.check for m in mutants]
    unbroken = run_unbroken(checks, src, blocks=[m.block for m in mutants if m.block])
    run = Run(unbroken.status == SURVIVED, unbroken.detail)
    if on_unbroken:
        on_unbroken(run.unbroken_passes)
    if not run.unbroken_passes:
        run.seconds = time.monotonic() - start
        return run
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_mutant, m, src) for m in mutants]
        try:
            for future in futures:
                result = future.result()
                run.results.append(result)
                if on_result:
                    on_result(result)
        except BaseException:  # Ctrl-C: the workers wait for their checks, so stop those first
            for future in futures:
                future.cancel()
            cli.kill_children()
            raise
    run.seconds = time.monotonic() - start
    return run


def summary_by_area(results: Iterable[Result]) -> dict[str, tuple[int, int, int]]:
    """area -> (caught, equivalent survivors, total) in order of first appearance."""
    out: dict[str, tuple[int, int, int]] = {}
    for r in results:
        caught, equivalent, total = out.get(r.mutant.area, (0, 0, 0))
        out[r.mutant.area] = (caught + (r.status == CAUGHT), equivalent + (r.status == EQUIVALENT), total + 1)
    return out


def accounted_for(result: Result) -> bool:
    """Caught, or a survivor shown equivalent; anything else is a gap (or a stale edit)."""
    return result.status in (CAUGHT, EQUIVALENT)



def report(mutants: Sequence[Mutant], jobs: int = 2, verbose: bool = False, full: bool = False,
           out: Callable[[str], None] = print) -> int:
    """Run the mutants and print the chapter's report; returns 0 when every mutant is caught.

    One line per mutant, in list order. Without ``full`` (the book's run) the last line is
    ``page table, window and host: <k> of <n> broken versions caught``; with ``full`` a
    caught / total line per area, that line, and the wall time follow.
    """
    out(NOTE)
    previous: list[str] = []

    def show(result: Result) -> None:
        if previous and previous[-1] != result.mutant.check:
            out("")  # a blank line between the groups of mutants (book, compiler, machine, RTL)
        previous.append(result.mutant.check)
        out(result.line())
        if verbose or result.status != CAUGHT:
            for line in result.detail.splitlines():
                out(f"    | {line}")

    run = run_all(mutants, jobs=jobs, on_result=show,
                  on_unbroken=lambda ok: out(f"unbroken model passes: {ok}"))
    if not run.unbroken_passes:
        out("the unbroken code fails its own checks, so no mutant can be judged:")
        for line in run.unbroken_detail.splitlines():
            out(f"    | {line}")
        return 1
    book = [r for r in run.results if r.mutant.check == "paged"]
    book_line = f"{BOOK_SUMMARY}: {sum(r.status == CAUGHT for r in book)} of {len(book)} broken versions caught"
    n = len(run.results)
    wall = f"wall time: {run.seconds:.0f} s for {n} mutant{'s' * (n != 1)}, {jobs} at a time"
    out("")
    if full:
        for area, (caught, equivalent, total) in summary_by_area(run.results).items():
            shown = f", {equivalent} equivalent (shown not to change behaviour)" if equivalent else ""
            out(f"{area}: {caught} of {total} caught{shown}")
        out(wall)
        if book:
            out(book_line)
    else:
        out(wall)
        if book:
            out("")
            out(book_line)
    if any(r.status == NO_LONGER_APPLIES for r in run.results):
        out("")
        out(REANCHOR)
    return 0 if all(accounted_for(r) for r in run.results) else 1

# ---- the book's eighteen (Chapter 15) -----------------------------------------------------------
# They are listed in tools/mut_ch15.py, where the book puts them and where exercise 5 adds one;
# ``mutation.BOOK`` reads that list.


def __getattr__(name: str):
    if name == "BOOK":
        tools = str(ROOT / "tools")
        if tools not in sys.path:
            sys.path.insert(0, tools)
        import mut_ch15

        return mut_ch15.BOOK
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


