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


# ---- beyond the book: the compiler and quantizer -------------------------------------------------

_COMPILER = "compiler and quantizer"


def _compiler(file: str, old: str, new: str, what: str) -> Mutant:
    return Mutant(_COMPILER, f"model/capra/{file}", old, new, what, "compiler")


COMPILER: list[Mutant] = [
    _compiler("quant.py", "q = np.sign(x) * np.floor(np.abs(x) + 0.5)", "q = np.sign(x) * np.floor(np.abs(x))",
              "quantize truncates instead of rounding half away from zero"),
    _compiler("quant.py", "return np.clip(q, -QMAX, QMAX).astype(np.int64)",
              "return np.clip(q, -QMAX - 1, QMAX).astype(np.int64)",
              "quantize clips to -128 instead of the symmetric -127"),
    _compiler("quant.py", "return max_abs / QMAX if max_abs > 0 else 1.0",
              "return max_abs / (QMAX + 1) if max_abs > 0 else 1.0",
              "the scale maps the largest magnitude to 128, which then saturates"),
    _compiler("quant.py", "    qa = int(math.floor(m * (1 << shift) + 0.5))\n    while",
              "    qa = int(math.floor(m * (1 << (shift + 1)) + 0.5))\n    while",
              "the requantization multiplier is twice too large"),
    _compiler("quant.py", "    qb = int(math.floor(mb * (1 << shift) + 0.5))\n    while",
              "    qb = int(math.floor(ma * (1 << shift) + 0.5))\n    while",
              "a residual add scales its second operand with the first one's multiplier"),
    _compiler("compiler.py", "            scales[node.name] = scales[node.inputs[0]]  # relu keeps its input's scale",
              "            pass",
              "relu gets its own calibrated scale although VEC RELU does not rescale"),
    _compiler("compiler.py", 'q = int(np.floor(node.attrs["sink"] / ins[0] + 0.5))',
              'q = int(np.floor(node.attrs["sink"] * ins[0] + 0.5))',
              "the softmax sink is multiplied by the input scale instead of divided"),
    _compiler("compiler.py", "keep = len(flying) - flying.index(x) - 1", "keep = len(flying) - flying.index(x)",
              "WAIT lets the very transfer it waits for stay in flight"),
    _compiler("compiler.py", "arrive(max(need), f\"wait for the operands", "arrive(min(need), f\"wait for the operands",
              "a node waits only for the load of its first operand, not its last"),
    _compiler("compiler.py", "            low += tensors[name].words\n", "            low += tensors[name].words - 1\n",
              "scratchpad placement overlaps each loaded tensor's last word with the next one"),
    _compiler("compiler.py", "        tensors[name].sram = cursor\n        cursor += tensors[name].words",
              "        tensors[name].sram = cursor\n        cursor += tensors[name].words - 1",
              "scratchpad placement overlaps each computed tensor's last word with the next one"),
    _compiler("compiler.py",
              "            if not racing:\n                break",
              "            if True:\n                break",
              "the scheduler never waits out a bank-port race with the DMA"),
    _compiler("compiler.py", "a + words <= size and all(a + words <= x or a >= y for x, y in taken)",
              "a + words <= size", "a concat region may be placed over other tensors"),
    _compiler("compiler.py", "        if low + packed > high:", "        if low + packed > size:",
              "the packed concat regions may run into the computed tensors"),
    _compiler("compiler.py", "pick = min(ready, key=lambda n: arrival[n.name])", "pick = ready[-1]",
              "compute nodes run in the wrong order among the ready ones (slower steps)"),
    _compiler("compiler.py", "key=lambda n: (first_use[n], _region_of(inside, n) is None, order[n])",
              "key=lambda n: (first_use[n], _region_of(inside, n) is not None, order[n])",
              "cached rows are loaded after the weight of the node that writes next to them (slower steps)"),
    _compiler("compiler.py",
              "        prefetch()  # fill the queue before waiting",
              "        pass  # fill the queue before waiting",
              "the scheduler waits for operands before it queues the next loads (the DMA idles)"),
    _compiler("compiler.py", "        top += t.words\n        if top > limit:",
              "        top += t.words - 1\n        if top > limit:",
              "external placement overlaps each tensor's last word with the next tensor"),
    _compiler("compiler.py", 'return [name] if node.op in ("const", "input") else []',
              'return [name] if node.op in ("const",) else []',
              "graph inputs are never loaded into the scratchpad"),
    _compiler("compiler.py", "t.sram + r * t.row_words, x.cols, sink=", "t.sram + r * x.cols, sink=",
              "softmax rows are written at a stride of cols, not of the packed row's words"),
    _compiler("compiler.py", "x.sram + r * x.row_words, t.sram + r, x.cols)",
              "x.sram + r * x.row_words, t.sram, x.cols)",
              "every row's argmax overwrites the first row's result"),
    _compiler("compiler.py", "    if a.cols % isa.LANES == 0:", "    if True:",
              "one VEC runs over rows that have padding lanes between them"),
    _compiler("compiler.py", 'brows=not node.attrs["transpose_b"])', 'brows=node.attrs["transpose_b"])',
              "the MM layout flag is inverted (x @ W read as a @ b.T)"),
    _compiler("reference.py", 'acc = wrap32(a @ (b.T if node.attrs["transpose_b"] else b))',
              'acc = wrap32(a @ (b if node.attrs["transpose_b"] else b.T))',
              "the numpy integer semantics transpose the wrong matmul operand"),
    _compiler("reference.py", 'requantize(args[0] * p["qa"] + args[1] * p["qb"], 1, p["qs"])',
              'requantize(args[0] * p["qa"] + args[1] * p["qa"], 1, p["qs"])',
              "the numpy integer semantics scale both addends with qa"),
    _compiler("graph.py", "            e = np.exp(x - m)\n", "            e = np.exp(m - x)\n",
              "the float softmax (calibration and the float side) exponentiates the negated differences"),
]


# ---- beyond the book: the machine model ----------------------------------------------------------

_MACHINE = "machine model"


def _machine(file: str, old: str, new: str, what: str) -> Mutant:
    return Mutant(_MACHINE, f"model/capra/{file}", old, new, what, "machine")


MACHINE: list[Mutant] = [
    _machine("machine.py", "p = (p + (1 << (shift - 1))) >> shift", "p = (p + (1 << shift)) >> shift",
             "requantize rounds with the wrong bit (2^shift instead of 2^(shift-1))"),
    _machine("machine.py", "np.clip(p.astype(np.int64), INT8_MIN, INT8_MAX)",
             "np.clip(p.astype(np.int64), INT8_MIN + 1, INT8_MAX)",
             "requantize saturates at -127"),
    Mutant(_MACHINE, "model/capra/machine.py", "return np.minimum(255, (np.asarray(diff",
           "return np.minimum(254, (np.asarray(diff", "the softmax table index is clamped one entry early",
           "machine", equivalent="entries 178..255 of the exponent table are all 0 (round(2^15 * exp(-d/16)) < 0.5 "
           "once d/16 > ln 2^16), so reading entry 254 instead of 255 never changes a value"),
    _machine("machine.py", "recip = (1 << isa.SM_RECIP_BITS) // total",
             "recip = (1 << isa.SM_RECIP_BITS) // (total + 1)",
             "the softmax reciprocal divides by sum + 1"),
    _machine("machine.py", "m = int(x.max()) if sink is None else max(int(x.max()), sink)", "m = int(x.max())",
             "the softmax sink does not take part in the max"),
    _machine("machine.py", "return ((np.asarray(x, dtype=np.int64) + (1 << 31)) % (1 << 32)) - (1 << 31)",
             "return np.asarray(x, dtype=np.int64)",
             "accumulators do not wrap at 32 bits (a bias can overflow them)"),
    _machine("machine.py", "                acc = np.maximum(acc, 0)", "                acc = np.maximum(acc, -1)",
             "MM relu lets -1 through"),
    _machine("machine.py", "z = np.maximum(x, y)", "z = np.minimum(x, y)", "VEC MAX computes the minimum"),
    _machine("machine.py", "z = requantize(x * self.qa + y * self.qb, 1, self.qs)",
             "z = requantize(x * self.qa + y * self.qa, 1, self.qs)", "VEC ADD scales b with qa"),
    _machine("machine.py", "self.sram[dst] = np.uint32(int(np.argmax(x)))",
             "self.sram[dst] = np.uint32(int(len(x) - 1 - np.argmax(x[::-1])))",
             "VEC ARGMAX returns the last of tied maxima"),
    _machine("machine.py", "        unwritten = idx[~self.written[idx]]\n", "        unwritten = idx[:0]\n",
             "a program may read scratchpad words it never wrote (what the chip's banks hold then is not zero)"),
    _machine("dma.py", "setup = max(t + 1, self.engine_free)", "setup = max(t, self.engine_free)",
             "a DMA transfer takes its descriptor in its own issue cycle (one cycle early)"),
    _machine("dma.py", "end = setup + n + self.latency + 2", "end = setup + n + self.latency + 1",
             "a LOAD ends one cycle before its last word is written"),
    _machine("dma.py", "self.engine_free = setup + n + 1", "self.engine_free = setup + n",
             "the engine takes the next descriptor in the cycle of a LOAD's last request"),
    _machine("dma.py", "setup = max(setup, self.last_load_end + 1)", "setup = max(setup, self.last_load_end)",
             "a STORE takes its descriptor in the cycle the LOADs before it end"),
    _machine("dma.py", "end = setup + n + 3", "end = setup + n + 2", "a STORE ends one cycle early"),
    _machine("dma.py", "return flying[len(flying) - keep - 1].end", "return flying[0].end",
             "WAIT keep (and HALT) wait only for the oldest transfer"),
    _machine("dma.py", "if len(flying) < isa.DMA_QUEUE:", "if len(flying) <= isa.DMA_QUEUE:",
             "the DMA queue takes one transfer more than it holds"),
    _machine("dma.py", "            if bank in banks and lo <= last and hi >= first:", "            if False:",
             "the bank-port rule is off: compute and the DMA may use one port of a bank together"),
    _machine("dma.py", "if x.words.isdisjoint(writes) and (not x.is_load or x.words.isdisjoint(reads)):",
             "if True:", "the race check on words is off: compute may touch what a transfer in flight moves"),
    _machine("isa.py", "return b + (MM_BIAS_LINES if flags & MM_BIAS else 0)", "return b",
             "an MM pass does not count its bias reads"),
    _machine("isa.py", "total += reads + (passes - 1) * max(reads, tile.gap)", "total += reads + (passes - 1) * reads",
             "MM passes never wait for the writer of the pass before them"),
    _machine("isa.py", "tiles.append(MmTile(rt, g, cols, w, w + N - 1 + (2 if bias else 0)))",
             "tiles.append(MmTile(rt, g, cols, w, w + N - 2 + (2 if bias else 0)))",
             "the MM pass spacing G is one cycle short"),
    _machine("isa.py", "            while 2 * g * rt <= N and", "            while 2 * g * rt < N and",
             "a one-row MM runs two groups instead of four (half the B words per cycle)"),
    _machine("isa.py", "return (addr // SRAM_GROUP_WORDS) * LANES + (addr % LANES)",
             "return (addr // SRAM_GROUP_WORDS) * LANES",
             "a word's bank ignores its lane (VEC sees clashes where there are none)"),
    _machine("isa.py", "return 3 * nw + DIV_CYCLES + SMAX_LATENCY", "return 3 * nw + DIV_CYCLES + SMAX_LATENCY - 1",
             "SMAX takes one cycle too few"),
    _machine("isa.py", "cnt=w0 & FIELD_MASK16,", "cnt=w0 & 0xFFF,", "decode keeps only 12 bits of cnt"),
    _machine("machine.py", "* (1 << isa.SM_EXP_BITS) + 0.5)]", "* (1 << isa.SM_EXP_BITS))]",
             "the exponent table truncates instead of rounding"),
]


# ---- beyond the book: the RTL --------------------------------------------------------------------

_RTL = "RTL"


def _rtl(file: str, old: str, new: str, what: str, block: str | None) -> Mutant:
    return Mutant(_RTL, f"rtl/{file}", old, new, what, "rtl_top" if file == "ga2.v" else "rtl", block)


RTL: list[Mutant] = [
    _rtl("requant.v", "(50'sd1 <<< (shift_r - 6'd1))", "(50'sd1 <<< shift_r)",
         "requant adds the wrong rounding bit", "requant"),
    _rtl("requant.v", "(q < -50'sd128) ? 8'h80", "(q < -50'sd127) ? 8'h81", "requant saturates at -127", "requant"),
    _rtl("requant.v", "prod <= {{18{acc_r[31]}}, acc_r} * $signed({34'd0, mult_r});",
         "prod <= {18'd0, acc_r} * $signed({34'd0, mult_r});",
         "requant zero-extends a negative accumulator", "requant"),
    # no block bench: the replays alone must see it (they did not before the random programs used
    # power-of-two multipliers with small shifts and the scratchpad was compared)
    _rtl("requant.v", "sum <= prod + rnd_p;",
         "sum <= prod + rnd_p - ((prod < 0 && shift_p != 6'd0) ? 50'sd1 : 50'sd0);",
         "requant rounds exact ties of negative values down (-2.5 -> -3, not -2), judged by the replays alone",
         None),
    _rtl("systolic.v", "prod <= $signed(a_q) * $signed(b_q);", "prod <= a_q * b_q;",
         "a PE multiplies unsigned (negative operands go wrong)", "systolic_n4"),
    _rtl("systolic.v", "acc_q <= (f_p ? 32'd0 : acc_q) + {{16{prod[15]}}, prod};",
         "acc_q <= acc_q + {{16{prod[15]}}, prod};",
         "a PE does not restart its sum at a tile's first step", "systolic_n4"),
    _rtl("systolic.v", "if (l_p) res[(i*N+c)*32 +: 32] <=", "if (l_q) res[(i*N+c)*32 +: 32] <=",
         "a PE keeps its result one step before the last product is in", "systolic_n4"),
    _rtl("systolic.v", "assign b_in = inj[i] ? b_inj[(i*N+c)*8 +: 8] : g_row[i-1].g_col[c].b_q;",
         "assign b_in = g_row[i-1].g_col[c].b_q;",
         "rows of a later group take B from the group above (one-row matmuls compute one column tile)",
         "systolic_n4"),
    _rtl("ga2_mm.v",
         "localparam integer READ_TO_RES = 3 + 3 + N - 1;",
         "localparam integer READ_TO_RES = 3 + 3 + N - 2;",
         "the MM writer reads the array one cycle before the last column's result is in", "ga2_mm"),
    _rtl("ga2_mm.v", "finish(res[{pe_r, pe_c}*32 +: 32], bias_l[bias_sel], biasf, relu)",
         "finish(res[{pe_c, pe_r}*32 +: 32], bias_l[bias_sel], biasf, relu)",
         "a slot reads the PE at the transposed place (a column of the array instead of a row)", "ga2_mm"),
    _rtl("ga2_mm.v", "finish = (clamp && v[31]) ? 32'd0 : v;", "finish = (clamp && raw[31]) ? 32'd0 : v;",
         "relu tests the sign before the bias is added", "ga2_mm"),
    _rtl("ga2_mm.v", "- {{(WB-1){1'b0}}, 1'b1} + (biasf ? 2 : 0);", "- {{(WB-1){1'b0}}, 1'b1};",
         "a biased pass follows the one before it before that one's bias is used", "ga2_mm"),
    _rtl("ga2_mm.v",
         "else if (N == 4) groups_of = (rt == 1) ? 3'd4",
         "else if (N == 4) groups_of = (rt == 1) ? 3'd2",
         "a one-row BROWS matmul runs two groups while the rest of the engine expects four", "ga2_mm"),
    _rtl("ga2_mm.v", "({j[2:0], 2'b00} < c)) && ((t + j[15:0]) < t_end);", "({j[2:0], 2'b00} < c));",
         "a pass reads line words past the last column tile", "ga2_mm"),
    _rtl("ga2_mm.v", "load ? {{(SRB-1){1'b0}}, dot_l2 == 0}", "load ? {{(SRB-2){1'b0}}, dot_l2 == 0, 1'b0}",
         "a dot-form pass restarts its sums one step late", "ga2_mm"),
    _rtl("ga2_mm.v", "wire            k_in     = {6'd0, tg2_k} < kl;", "wire            k_in     = 1'b1;",
         "a dot-form pass adds the products of the lanes past K (whatever A and B hold there)", "ga2_mm"),
    _rtl("ga2_mm.v",
         "                    if (a_last) phase <= P_ATURN;",
         "                    if (a_last) phase <= P_BREAD;",
         "B streams in before the last A word has landed in rowmem", "ga2_mm"),
    _rtl("ga2_mm.v", "n_aload_pad <= ({{(11-WB){1'b0}}, t_gap} > n_aload) ? (t_gap - n_aload[WB-1:0]) : {WB{1'b0}};",
         "n_aload_pad <= {WB{1'b0}};",
         "the next batch tile's A load does not wait for the previous tile's writer", "ga2_mm"),
    _rtl("ga2_mm.v", "assign word_out = d_h1 ? {word8[15:0], hold[d_row]} : word8;",
         "assign word_out = d_h1 ? {hold[d_row], word8[15:0]} : word8;",
         "N = 2: the two halves of an int8 word are joined the wrong way round", "ga2_mm_n2"),
    _rtl("ga2_mm.v", "wire            dot_w2  = (DOTW > 1) && ({{PB{1'b0}}, dot_l, 1'b1} < {3'b000, kw});",
         "wire            dot_w2  = (DOTW > 1);",
         "N = 8: a dot-form read takes a second word past the end of a B row", "ga2_mm_n8"),
    _rtl("ga2_mm.v", "else if (N == 8) groups_of = (rt <= (N[RB-1:0] >> 1)) ? 3'd2 : 3'd1;",
         "else if (N == 8) groups_of = (rt < (N[RB-1:0] >> 1)) ? 3'd2 : 3'd1;",
         "N = 8: a four-row BROWS matmul runs one group where the formula counts two", "ga2_mm_n8"),
    _rtl("ga2_vec.v",
         "wire        clash  = two && ({a_addr[AW-1:AW-2], a_addr[1:0]} == {b_addr[AW-1:AW-2], b_addr[1:0]});",
         "wire        clash  = two && (a_addr[1:0] == b_addr[1:0]);",
         "VEC sees a bank clash in every group (a cycle lost where none is)", "ga2_vec"),
    _rtl("ga2_vec.v", "first_max = ($signed(q[23:16]) > $signed(p[23:16])) ? q : p;",
         "first_max = ($signed(q[23:16]) >= $signed(p[23:16])) ? q : p;",
         "ARGMAX returns the last of tied maxima", "ga2_vec"),
    _rtl("ga2_vec.v", "VEC_MAX:  s1_y[l] <= ($signed(a_word[l*8 +: 8]) > $signed(rb_data[l*8 +: 8]))",
         "VEC_MAX:  s1_y[l] <= ($signed(a_word[l*8 +: 8]) < $signed(rb_data[l*8 +: 8]))",
         "VEC MAX computes the minimum", "ga2_vec"),
    _rtl("ga2_vec.v", "assign rq_mult  = (op == VEC_ADD) ? 16'd1 : qa_r;",
         "assign rq_mult  = (op == VEC_ADD) ? 16'd1 : qb_r;",
         "VEC MUL multiplies by qb instead of qa", "ga2_vec"),
    _rtl("sram.v", "if (p0_v) p0_data[k*32 +: 32] <=", "p0_data[k*32 +: 32] <=",
         "the line port's output moves every cycle, not only after a read (a VEC word whose operands "
         "share a bank gets b for a)", "ga2_vec"),
    _rtl("ga2_sm.v", "(25'd1 << (GA2_SM_SCALE_SHIFT - 1))", "(25'd1 << (GA2_SM_SCALE_SHIFT - 2))",
         "the softmax table step rounds with the wrong bit", "ga2_sm"),
    _rtl("ga2_sm.v", "else if (start) m <= sink_en ? sink : 8'h80;", "else if (start) m <= sink_en ? sink : 8'h00;",
         "the softmax max starts at 0, not -128", "ga2_sm"),
    _rtl("ga2_sm.v", "lane_ok = sink_now ? (lane == 2'd0 && with_sink) :", "lane_ok = sink_now ? (lane == 2'd0) :",
         "the softmax sum counts a sink that is not there", "ga2_sm"),
    _rtl("divu.v", "left <= 6'd32;", "left <= 6'd31;", "the divider runs 31 iterations", "divu"),
    _rtl("dma.v", "wire take     = free && (have_q || start) && (!take_st || loads_out == {QW{1'b0}});",
         "wire take     = free && (have_q || start);",
         "a STORE starts before the LOADs ahead of it have written their words", "dma"),
    _rtl("dma.v", "wire free     = (state == R_IDLE) || (req_done && !store);",
         "wire free     = (state == R_IDLE) || req_done;",
         "the next transfer takes its descriptor in the cycle a STORE reads its last word", "dma"),
    _rtl("dma.v", "wire [PQW-1:0] pq_head = (pq_count == {(PW+1){1'b0}}) ? {last_wd, bmask, s_addr} : pq[pq_rp];",
         "wire [PQW-1:0] pq_head = pq[pq_rp];",
         "an answer in its request's own cycle (latency 0) goes to a stale address", "dma"),
    _rtl("dma.v", "e_row <= e_row + e_stride;", "e_row <= e_row + e_stride - 16'd1;",
         "the DMA external row address steps one word short", "dma"),
    _rtl("sram.v", "p0_data[k*32 +: 32] <= bank_rdata[p0_sel[k]*32 +: 32];",
         "p0_data[k*32 +: 32] <= bank_rdata[p0_sel[3-k]*32 +: 32];",
         "the line read returns its words in reverse order", "sram"),
    Mutant(_RTL, "rtl/sram.v", ".raddr(dr_use[b] ? dr_lrow[LANE] : p0_use[b] ? p0_lrow[LANE] : p1_row)",
           ".raddr(p0_use[b] ? p0_lrow[LANE] : dr_use[b] ? dr_lrow[LANE] : p1_row)",
           "a bank serves the compute read before the DMA's", "rtl", "sram",
           equivalent="the machine model rejects a program in which a compute unit and a STORE read one bank "
           "in the same cycle (each bank has one read port), and the units read only the words the model "
           "counts (the ga2_mm bench checks it), so which read a bank would serve first never matters"),
    _rtl("rowmem.v", ".we(we && (wbank == b))", ".we(we)", "an A row is written into every rowmem bank", "rowmem"),
    _rtl("ga2.v", "if (executing && !is_mm) c3 <= c3 + 32'd1;", "if (executing && is_vec) c3 <= c3 + 32'd1;",
         "counter c3 misses SMAX cycles", None),
    _rtl("ga2.v", "|| (op == OP_WAIT && {{(16-QW){1'b0}}, inflight} > cnt)",
         "|| (op == OP_WAIT && {{(16-QW){1'b0}}, inflight} >= cnt)",
         "WAIT keep waits for one transfer more than it should", None),
    _rtl("ga2.v", "wire       pc_last  = (pc == {IAW{1'b1}});", "wire       pc_last  = 1'b0;",
         "the program counter wraps at the end of the instruction memory", None),
]

EXTENDED: list[Mutant] = COMPILER + MACHINE + RTL
