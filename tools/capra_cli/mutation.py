"""Mutation runs: break a copy of the code one line at a time and see whether the checks notice.

A test suite is only as good as the mistakes it catches. Each ``Mutant`` is the exact edit it makes
(file, old text, new text), so a source line that has since changed is reported as a mutant that
*no longer applies* instead of being skipped in silence: a mutation list that quietly shrinks would
report "all caught" for a suite that checks less and less.

How one mutant runs
    1. The repository's code (``COPIED``: model/, tools/, rtl/, tb/, tests/, pyproject.toml; never
       out/) is copied into a fresh temporary folder, and .venv linked there. The working tree is
       never touched.
    2. The one edit is applied there; the old text must occur exactly once.
    3. The mutant's check runs in a subprocess whose working directory is the copy. Its
       PYTHONPATH names the copy's model/ and tools/, so the copy's code is what runs (the project
       is installed from the working tree; a path entry comes before the installed package), and
       its simulator builds share the working tree's build cache (CAPRA_SIM_CACHE): builds are
       keyed by the sources' contents, so a broken RTL gets builds of its own and never one of
       the working tree's.
    4. A check that fails (non-zero exit, a crash, or a timeout) has *caught* the mutant.

Before any mutant, the unbroken copy must pass every check the run uses; otherwise "caught" would
mean nothing (a check that always fails catches everything).

The checks (each mutant names one; ``tier`` replaces them all with a whole test tier)
    paged     ``paged_tests.check_all()`` (Chapter 15): a non-empty problem list is a catch.
    compiler  the compiler, quantizer and machine-model tests that run no simulator (the integer
              reference in tests/int_reference.py is the independent side).
    machine   the same tests, then the RTL replay: the machine model writes the expected memory
              and counters into every replay record, so a machine-model mutant that the Python
              tests cannot see is caught when Icarus disagrees with it.
    rtl       the RTL replay of the 200 random programs and the hand-written ones on Icarus,
              then the cocotb test of the mutated block (when the mutant names one).
    rtl_top   the same replay, then the sequencer's corners (illegal instructions, running off the
              end of the instruction memory) on Icarus.
    tier      ``make test-fast``, ``make test`` or ``make test-full``'s pytest (``TIERS``), stopping
              at the first failure: which mutants each tier of the suite catches by itself.

The unbroken copy and the mutants are jobs of ``executor.run_in_order``: ``jobs`` at once on a
local Dask cluster (two by default, the machine's cores; one: one after another in this process), or
on the Dask cluster at ``scheduler``, each in a copy of its worker's checkout (which must be at
this checkout's sources: the executor checks) with this run's GA2_CONFIG and GA2_EXT. Every check
runs in a process group of its own (``replay.runs.run_command``): a timeout kills the check with
the simulators it started, and Ctrl-C stops every running check before the tool exits.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from capra import config
from host import programs
from replay import runs
from replay.simulators import CACHE_ENV, cache_dir

from . import executor

ROOT = runs.ROOT
# what a copy holds: the code, its tests and what the tests read (docs/isa.md's generated table, the
# README's and the Makefile's commands)
COPIED = ("model", "tools", "rtl", "tb", "tests", "docs", "README.md", "Makefile", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", ".ruff_cache")
CHECK_TIMEOUT = 900  # seconds; a mutant that hangs a check is caught (the checks must finish)
TIER_TIMEOUT = 1800  # seconds for a whole tier

CAUGHT = "caught"
SURVIVED = "SURVIVED"
EQUIVALENT = "survived, equivalent"  # a survivor whose mutant says why it cannot be seen
NO_LONGER_APPLIES = "NO LONGER APPLIES"

BOOK_SUMMARY = "page table, window and host"
REANCHOR = ("NO LONGER APPLIES: the mutant's old text is not in its file exactly once, usually because that "
            "line was edited (an exercise does this). Re-anchor it: copy the line that now does the same job, "
            "exactly, into the mutant's old text, and its broken form into new (the book's mutants are in "
            "tools/mut_ch15.py, the others in tools/capra_cli/mutants.py); then run it alone with -k.")
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
    """Copy the code (COPIED) from src into dst; out/ stays behind, and the virtual environment is
    linked, not copied (a script in the copy restarts under <copy>/.venv/bin/python, which runs the
    copy's code: the check's PYTHONPATH names it)."""
    for name in COPIED:
        path = src / name
        if path.is_dir():
            shutil.copytree(path, dst / name, ignore=IGNORED)
        elif path.exists():
            shutil.copy2(path, dst / name)
    if (src / ".venv").is_dir():
        (dst / ".venv").symlink_to((src / ".venv").resolve(), target_is_directory=True)
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

PAGED_SNIPPET = """
import sys
import paged_tests
problems = paged_tests.check_all()
print('\\n'.join(problems[:5]) or 'no problems')
sys.exit(1 if problems else 0)
"""

# Exercise 5's worked answer: the chapter's checks and the one check that closes its gap
# (paged_tests.check_release_order, kept out of check_all so the exercise keeps its premise).
RELEASE_ORDER_SNIPPET = """
import sys
import paged_tests
problems = paged_tests.check_all() + paged_tests.check_release_order()
print('\\n'.join(problems[:5]) or 'no problems')
sys.exit(1 if problems else 0)
"""

# The random programs and the hand-written ones, on Icarus alone, judged like every replay.
REPLAY_SNIPPET = """
import sys
import replay
from capra.randprog import handwritten_programs, random_program
from replay import image
from replay.simulators import ICARUS
programs = [random_program(seed) for seed in range(200)]
programs += [(code, ext) for _name, code, ext in handwritten_programs()]
records = [image.record(code, ext) for code, ext in programs]
[verdict] = replay.replay(records, name='mutation_random_suite', simulators=[ICARUS])
print(verdict.line)
if verdict.passed:  # the same programs on a slower memory than they were made for: right all the same
    slow = [image.record(code, ext, ext_latency=30) for code, ext in programs[:60]]
    [verdict] = replay.replay(slow, name='mutation_random_suite_latency30', simulators=[ICARUS], latency=30)
    print(verdict.line, '(latency 30)')
sys.exit(0 if verdict.passed else 1)
"""

# The same programs on a memory whose AXI channels stall half the cycles (the model on the same
# schedule), in Verilator: a dependency the model stops checking lets a program read or write a word
# before its transfer has moved it, and a stalling memory makes that late.
STALL_SNIPPET = """
import sys
from dataclasses import replace
import replay
from capra import config
from capra.randprog import handwritten_programs, random_program
from replay import image
from replay.simulators import VERILATOR
programs = [random_program(seed) for seed in range(200)]
programs += [(code, ext) for _name, code, ext in handwritten_programs()]
with config.use(replace(config.active(), ext_stall=50, ext_seed=5)):
    records = [image.record(code, ext) for code, ext in programs]
    [verdict] = replay.replay(records, name='mutation_random_suite_stall50', simulators=[VERILATOR])
print(verdict.line, '(stall 50%)')
sys.exit(0 if verdict.passed else 1)
"""

PYTEST = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly"]
MODEL_TESTS = ["tests/test_numeric_edges.py", "tests/test_machine.py", "tests/test_effects.py",
               "tests/test_compiler.py", "tests/test_report.py", "tests/test_isa_sync.py", "tests/test_tiny_lm.py"]
NO_SIMULATORS = ["-m", "not sim"]

CHECKS: dict[str, list[list[str]]] = {
    "paged": [[sys.executable, "-c", PAGED_SNIPPET]],
    "paged_release_order": [[sys.executable, "-c", RELEASE_ORDER_SNIPPET]],
    "compiler": [PYTEST + MODEL_TESTS + NO_SIMULATORS],
    "machine": [PYTEST + MODEL_TESTS + NO_SIMULATORS, [sys.executable, "-c", REPLAY_SNIPPET]],
    "rtl": [[sys.executable, "-c", REPLAY_SNIPPET]],
    "stall": [[sys.executable, "-c", STALL_SNIPPET]],
    # the sequencer's corners: the random suite, then illegal instructions and running off the end
    "rtl_top": [[sys.executable, "-c", REPLAY_SNIPPET],
                PYTEST + ["tests/test_replay.py", "-k", "(illegal or past_the_last) and icarus"]],
}

# The test tiers (tests/conftest.py, the Makefile): what `make test-fast`, `make test` and
# `make test-full` run, here stopping at the first failure (-x).
TIERS: dict[str, str] = {
    "fast": "not sim and not slow and not heavy",
    "test": "not slow",
    "full": "",
}
# A tier is run in two parts that together hold exactly its tests: those without a simulator
# first (about a minute on one core), then those with one. The verdict is the same (caught when
# any test of the tier fails), but a mutant of the Python code is caught without waiting for the
# replays and cocotb benches.
TIER_PARTS: dict[str, tuple[str, ...]] = {
    "fast": ("not sim and not slow and not heavy",),
    "test": ("not sim and not slow", "sim and not slow"),
    "full": ("not sim", "sim"),
}


# A test of the mutant list itself fails for every mutant (its edited line is no longer in the
# file): it would "catch" all of them without testing anything, so a tier is judged without it.
LIST_TEST = "tests/test_mutation.py::test_every_listed_mutant_applies_exactly_once_to_the_current_code"


# The files a tier runs first: those that test the compiler, the machine model and the page table
# directly catch most mutants within seconds, and a run stops at its first failure. The order decides
# only how soon a caught mutant is known, never whether it is caught: every test file is named.
FIRST = MODEL_TESTS + ["tests/test_paged.py", "tests/test_chip_pages.py", "tests/test_serving.py"]


def tier_paths(root: Path = ROOT) -> list[str]:
    """Every test file of the suite, those of FIRST first (pytest keeps the order it is given)."""
    every = sorted(str(path.relative_to(root)) for path in (root / "tests").glob("test_*.py"))
    return [name for name in FIRST if name in every] + [name for name in every if name not in FIRST]


def tier_commands(tier: str) -> list[list[str]]:
    """The tier's pytest runs, one per part of TIER_PARTS, each stopping at its first failure."""
    return [PYTEST + ["-m", part, "--deselect", LIST_TEST] + tier_paths() for part in TIER_PARTS[tier]]


def block_check(block: str) -> list[str]:
    """The cocotb test of one block (a case id of tests/test_blocks.py)."""
    return PYTEST + ["tests/test_blocks.py", "-k", block]


# The sources a simulator build is made from: a copy that changes one of them builds simulators that
# no later run can use.
SIMULATED = ("rtl/*.v", "rtl/*.vh", "tb/*.v", "tb/*.cpp")


@functools.cache
def _checkout_simulated() -> str:
    """This checkout's RTL and testbench, hashed once per run (a run refuses an edited checkout)."""
    return runs.sources_hash(SIMULATED)


def simulators_changed(root: Path) -> bool:
    """Whether the copy at root holds other RTL or testbench sources than this checkout."""
    return runs.sources_hash(SIMULATED, root) != _checkout_simulated()


def simulator_cache(root: Path) -> Path:
    """Where the check in the copy at root keeps its simulator builds. The shared cache when the
    copy simulates this checkout's RTL (a mutant of the Python code): its builds are this checkout's
    own. A cache in the copy when the mutant changes the RTL or the testbench: those builds serve no
    later run (a build is keyed by its sources), so they go with the copy instead of piling up in
    out/sim, a few megabytes a mutant. Verilator's runtime objects do not depend on the design: the
    copy's cache links the shared ones."""
    shared = cache_dir()
    if not simulators_changed(root):
        return shared
    own = root / "out" / "sim"
    own.mkdir(parents=True, exist_ok=True)
    for runtime in shared.glob("verilator-runtime-*"):
        link = own / runtime.name
        if runtime.is_dir() and not link.exists():
            link.symlink_to(runtime.resolve(), target_is_directory=True)
    return own


def _environment(root: Path) -> dict[str, str]:
    """The check's environment: the copy's code first on the path, the simulator builds
    (``simulator_cache``) and the shared program store (keyed by its sources: a mutant of the
    compiler compiles again), and every simulator required (a missing one fails a check rather
    than skipping what would catch)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(root / d) for d in ("model", "tools"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["CAPRA_REQUIRE_SIMULATORS"] = "1"
    env[CACHE_ENV] = str(simulator_cache(root))
    if programs.STORE is not None:
        env[programs.STORE_ENV] = str(programs.STORE.folder)
    return env


def run_commands(root: Path, commands: Sequence[Sequence[str]], timeout: float = CHECK_TIMEOUT) -> tuple[bool, str]:
    """Run the commands in the copy one after another; (all passed, output of the first failure)."""
    for cmd in commands:
        try:
            proc = runs.run_command(cmd, cwd=root, env=_environment(root), timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout} s: {' '.join(cmd[:6])}"
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-8:]
            return False, "\n".join(tail)
    return True, ""


def commands_for(mutant: Mutant, tier: str | None = None) -> list[list[str]]:
    if tier is not None:
        return tier_commands(tier)
    commands = list(CHECKS[mutant.check])
    if mutant.block:
        commands.append(block_check(mutant.block))
    return commands


def run_mutant(mutant: Mutant, src: Path = ROOT, runner: Callable[..., tuple[bool, str]] = run_commands,
               tier: str | None = None) -> Result:
    """Copy src, apply the mutant, run its check (or the whole `tier`); the copy is removed after."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="capra-mutant-") as tmp:
        root = copy_repo(Path(tmp), src)
        try:
            apply(root, mutant)
        except NoLongerApplies as e:
            return Result(mutant, NO_LONGER_APPLIES, str(e), time.monotonic() - start)
        passed, detail = runner(root, commands_for(mutant, tier), *([TIER_TIMEOUT] if tier else []))
    if passed:
        status = EQUIVALENT if mutant.equivalent else SURVIVED
        detail = mutant.equivalent or detail
    else:
        status = CAUGHT
    return Result(mutant, status, detail, time.monotonic() - start)


def run_unbroken(checks: Iterable[str], src: Path = ROOT, blocks: Iterable[str] = (),
                 runner: Callable[..., tuple[bool, str]] = run_commands, tier: str | None = None) -> Result:
    """Run the named checks (and the cocotb tests of the named blocks), or the whole `tier`, on an
    unmodified copy; status CAUGHT here means the unbroken code FAILS."""
    start = time.monotonic()
    if tier is not None:
        commands = tier_commands(tier)
    else:
        commands = [cmd for name in dict.fromkeys(checks) for cmd in CHECKS[name]]
        blocks = sorted(set(blocks))
        if blocks:
            commands.append(block_check(" or ".join(blocks)))
    with tempfile.TemporaryDirectory(prefix="capra-unbroken-") as tmp:
        root = copy_repo(Path(tmp), src)
        passed, detail = runner(root, commands, *([TIER_TIMEOUT] if tier else []))
    return Result(None, SURVIVED if passed else CAUGHT, detail, time.monotonic() - start)


# ---- a whole run ---------------------------------------------------------------------------------


@dataclass
class Run:
    unbroken_passes: bool
    unbroken_detail: str
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0


CHIP_VARIABLES = (config.ENV, config.ENV_EXT)  # what a check's chip follows; carried to every worker


def chip_environment() -> dict[str, str]:
    """This run's GA2_CONFIG and GA2_EXT (those set), for the checks wherever they run."""
    return {name: os.environ[name] for name in CHIP_VARIABLES if name in os.environ}


@contextmanager
def _chip(chip: dict[str, str]):
    """While the block runs, GA2_CONFIG and GA2_EXT are `chip`'s (the checks' children inherit them)."""
    saved = {name: os.environ.get(name) for name in CHIP_VARIABLES}
    for name in CHIP_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(chip)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_one(mutant: Mutant | None, *, checks: Sequence[str], blocks: Sequence[str], tier: str | None,
              chip: dict[str, str]) -> Result:
    """One job of a run (on a worker, or here): the unbroken copy's checks (mutant None) or one
    mutant's, on `chip`'s configuration."""
    with _chip(chip):
        if mutant is None:
            return run_unbroken(checks, blocks=blocks, tier=tier)
        return run_mutant(mutant, tier=tier)


def run_all(mutants: Sequence[Mutant], jobs: int = 2, on_result: Callable[[Result], None] | None = None,
            on_unbroken: Callable[[bool], None] | None = None, tier: str | None = None,
            scheduler: str | None = None) -> Run:
    """The unbroken copy (every check the mutants use, or the tier) and the mutants, `jobs` at a
    time (or on the Dask cluster at `scheduler`); the mutants' results count only when the unbroken
    copy passes (when it fails, the rest is cancelled).

    Results come back in the order of ``mutants``; ``on_result`` sees each one as soon as it and
    all those before it are done, so the report streams in a stable order.
    """
    start = time.monotonic()
    check = partial(check_one, checks=[m.check for m in mutants], blocks=[m.block for m in mutants if m.block],
                    tier=tier, chip=chip_environment())
    run = Run(False, "")
    with closing(executor.run_in_order(check, [None, *mutants], workers=jobs, scheduler=scheduler,
                                       what="checks (the unbroken copy, then the mutants)")) as finished:
        for mutant, future in finished:
            result = future.result()
            if mutant is None:
                run = Run(result.status == SURVIVED, result.detail)
                if on_unbroken:
                    on_unbroken(run.unbroken_passes)
                if not run.unbroken_passes:
                    break  # closing the jobs cancels the mutants
                continue
            run.results.append(result)
            if on_result:
                on_result(result)
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
           out: Callable[[str], None] = print, tier: str | None = None, scheduler: str | None = None) -> Run | None:
    """Run the mutants and print the chapter's report; the Run (None when the unbroken code fails).

    One line per mutant, in list order. Without ``full`` (the book's run) the last line is
    ``page table, window and host: <k> of <n> broken versions caught``; with ``full`` a
    caught / total line per area, that line, and the wall time follow. With ``tier``, every
    mutant is judged by that whole test tier instead of its own check.
    """
    out(NOTE)
    if tier is not None:
        tests = f"pytest -m '{TIERS[tier]}'" if TIERS[tier] else "pytest, every test"
        out(f"every mutant is judged by the test tier '{tier}': {tests} (without a simulator first, then with one; "
            "stopping at the first failure)")
    previous: list[str] = []

    def show(result: Result) -> None:
        if previous and previous[-1] != result.mutant.check:
            out("")  # a blank line between the groups of mutants (book, compiler, machine, RTL)
        previous.append(result.mutant.check)
        out(result.line())
        if verbose or result.status != CAUGHT:
            for line in result.detail.splitlines():
                out(f"    | {line}")

    run = run_all(mutants, jobs=jobs, on_result=show, tier=tier, scheduler=scheduler,
                  on_unbroken=lambda ok: out(f"unbroken model passes: {ok}"))
    if not run.unbroken_passes:
        out("the unbroken code fails its own checks, so no mutant can be judged:")
        for line in run.unbroken_detail.splitlines():
            out(f"    | {line}")
        return None
    book = [r for r in run.results if r.mutant.check == "paged"]
    book_line = f"{BOOK_SUMMARY}: {sum(r.status == CAUGHT for r in book)} of {len(book)} broken versions caught"
    n = len(run.results)
    wall = f"wall time: {run.seconds:.0f} s for {n} mutant{'s' * (n != 1)}, " + (
        f"on the Dask cluster at {scheduler}" if scheduler else f"{jobs} at a time")
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
    return run
