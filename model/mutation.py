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
waits for its subprocess, so at most ``jobs`` checks run at once.
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
               "tests/test_isa_sync.py", "tests/test_tiny_lm.py"]
NO_SIMULATORS = ["-k", "not both_simulators"]

CHECKS: dict[str, list[list[str]]] = {
    "paged": [[sys.executable, "-c", PAGED_SNIPPET]],
    "compiler": [PYTEST + MODEL_TESTS + NO_SIMULATORS],
    "machine": [PYTEST + MODEL_TESTS + NO_SIMULATORS, [sys.executable, "-c", REPLAY_SNIPPET]],
    "rtl": [[sys.executable, "-c", REPLAY_SNIPPET]],
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
            proc = subprocess.run(list(cmd), cwd=root, env=_environment(), capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT)
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
        for future in futures:
            result = future.result()
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
    wall = f"wall time: {run.seconds:.0f} s for {len(run.results)} mutants, {jobs} at a time"
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
    _compiler("compiler.py", "keep = sum(1 for e in self.ends[index + 1 :] if e > self.t)",
              "keep = sum(1 for e in self.ends[index:] if e > self.t)",
              "WAIT lets the very transfer it waits for stay in flight"),
    _compiler("compiler.py", "need = 1 + max([load_index[s]", "need = 0 + max([load_index[s]",
              "a node does not wait for the load of its last operand"),
    _compiler("compiler.py", "        top += t.words\n        if top > isa.SRAM_WORDS:",
              "        top += t.words - 1\n        if top > isa.SRAM_WORDS:",
              "scratchpad placement overlaps each tensor's last word with the next tensor"),
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
    _machine("machine.py", "begin = max(self.t + 1, self._dma[-1].end if self._dma else 0)",
             "begin = max(self.t, self._dma[-1].end if self._dma else 0)",
             "a DMA transfer begins in its own fetch cycle (one cycle early)"),
    _machine("machine.py", "self._stall_until(self._dma[len(self._dma) - keep - 1].end)",
             "self._stall_until(self._dma[0].end)",
             "WAIT 0 with two transfers queued waits only for the older one"),
    _machine("machine.py", "if len(self._dma) == isa.DMA_QUEUE:", "if len(self._dma) > isa.DMA_QUEUE:",
             "the DMA queue holds three transfers instead of two"),
    _machine("machine.py", "            if clash:\n", "            if False:\n",
             "the race check between compute and DMA is off"),
    _machine("isa.py", "compute = 1 + (k + rows + cols - 2) + 1", "compute = 1 + (k + rows + cols - 2)",
             "an MM compute stage misses its settling cycle"),
    _machine("isa.py", "return 3 * nw + DIV_CYCLES + 1", "return 3 * nw + DIV_CYCLES + 2",
             "SMAX takes one cycle too many"),
    _machine("isa.py", "return DMA_SETUP + rows * cols", "return DMA_SETUP + rows * cols - 1",
             "a DMA transfer is one cycle short"),
    _machine("isa.py", "return words_for(n) + 1", "return words_for(n)", "VEC misses its finishing cycle"),
    _machine("isa.py", "cnt=w0 & FIELD_MASK16,", "cnt=w0 & 0xFFF,", "decode keeps only 12 bits of cnt"),
    _machine("machine.py", "* (1 << isa.SM_EXP_BITS) + 0.5)]", "* (1 << isa.SM_EXP_BITS))]",
             "the exponent table truncates instead of rounding"),
]


# ---- beyond the book: the RTL --------------------------------------------------------------------

_RTL = "RTL"


def _rtl(file: str, old: str, new: str, what: str, block: str | None) -> Mutant:
    return Mutant(_RTL, f"rtl/{file}", old, new, what, "rtl", block)


RTL: list[Mutant] = [
    _rtl("requant.v", "(50'sd1 <<< (shift - 6'd1))", "(50'sd1 <<< shift)",
         "requant adds the wrong rounding bit", "requant"),
    _rtl("requant.v", "(q < -50'sd128) ? 8'h80", "(q < -50'sd127) ? 8'h81", "requant saturates at -127", "requant"),
    _rtl("requant.v", "wire signed [49:0] acc_x  = {{18{acc[31]}}, acc};", "wire signed [49:0] acc_x  = {18'd0, acc};",
         "requant zero-extends a negative accumulator", "requant"),
    _rtl("dma.v", "setup <= GA2_DMA_SETUP[3:0];", "setup <= GA2_DMA_SETUP[3:0] - 4'd1;",
         "the DMA setup counter misses a cycle", "dma"),
    _rtl("dma.v", "e_row <= e_row + e_stride;", "e_row <= e_row + e_stride - 16'd1;",
         "the DMA external row address steps one word short (off by one)", "dma"),
    _rtl("dma.v", "begin_transfer(p_store, p_rows, p_cols, p_ext, p_est, p_sram, p_sst);",
         "begin_transfer(p_store, p_rows, p_cols, p_ext, p_est, p_sst, p_sram);",
         "the queued DMA descriptor swaps SRAM base and stride", "dma"),
    _rtl("systolic.v", "acc_q <= acc_q + {{16{prod[15]}}, prod};", "acc_q <= acc_q + {16'd0, prod};",
         "a PE zero-extends negative products", "systolic_n4"),
    _rtl("systolic.v", "assign a_in = g_row[i].g_col[j-1].a_q;", "assign a_in = g_row[i].g_col[j-1].a_in;",
         "A skips the PE registers (wrong skew across a row)", "systolic_n4"),
    _rtl("ga2_mm.v", "wire [15:0] k_here = cc - 16'd1 - Q;", "wire [15:0] k_here = cc - 16'd1;",
         "the matmul feeds every lane unskewed", "ga2_mm"),
    _rtl("ga2_mm.v", "wire [15:0] c_len  = kl + rows + c_cols;", "wire [15:0] c_len  = kl + rows + c_cols - 16'd1;",
         "the compute stage counter misses a cycle", "ga2_mm"),
    _rtl("ga2_mm.v", "wire [1:0]  bias_j = cc[1:0] - l_b[1:0];", "wire [1:0]  bias_j = cc[1:0] - l_b[1:0] + 2'd1;",
         "bias words land one column over", "ga2_mm"),
    _rtl("ga2_mm.v", "finish = (relu && biased[31]) ? 32'd0 : biased;", "finish = (relu && raw[31]) ? 32'd0 : biased;",
         "relu tests the sign before the bias is added", "ga2_mm"),
    _rtl("ga2_mm.v", "                            o_ptr <= o_ptr + mw;",
         "                            o_ptr <= o_ptr + mt;",
         "int8 output rows advance by M words instead of ceil(M/4)", "ga2_mm"),
    _rtl("ga2_mm.v", "kw <= (k_len + 16'd3) >> 2;", "kw <= (k_len + 16'd2) >> 2;",
         "the words of a K row are rounded down when K = 4j+1", "ga2_mm"),
    _rtl("ga2_vec.v", "$signed(ra_data[q*8 +: 8]) > $signed(scan_v)", "$signed(ra_data[q*8 +: 8]) >= $signed(scan_v)",
         "ARGMAX returns the last of tied maxima", "ga2_vec"),
    _rtl("ga2_vec.v", "(op == VEC_MAX)  ? ((a > b) ? a : b)", "(op == VEC_MAX)  ? ((a < b) ? a : b)",
         "VEC MAX computes the minimum", "ga2_vec"),
    _rtl("ga2_vec.v", "b_x * $signed({16'd0, qb_r})", "b_x * $signed({16'd0, qa_r})",
         "VEC ADD multiplies b by qa (swapped operand)", "ga2_vec"),
    _rtl("ga2_vec.v", "assign valid[l] = (first + LANE) < len;", "assign valid[l] = (first + LANE) <= len;",
         "VEC writes one lane past n", "ga2_vec"),
    _rtl("ga2_sm.v", "+ (24'd1 << (GA2_SM_SCALE_SHIFT - 1));", "+ (24'd1 << (GA2_SM_SCALE_SHIFT - 2));",
         "the softmax table step rounds with the wrong bit", "ga2_sm"),
    _rtl("ga2_sm.v", "m <= sink_en ? sink : 8'h80;", "m <= sink_en ? sink : 8'h00;",
         "the softmax max starts at 0, not -128", "ga2_sm"),
    _rtl("ga2_sm.v", "if (dc == GA2_DIV_CYCLES[15:0]) state <= S_NORM;",
         "if (dc == GA2_DIV_CYCLES[15:0] - 16'd1) state <= S_NORM;",
         "the division wait misses a cycle", "ga2_sm"),
    _rtl("divu.v", "left <= 6'd32;", "left <= 6'd31;", "the divider runs 31 iterations", "divu"),
    _rtl("ga2.v", "if (executing && !is_mm) c3 <= c3 + 32'd1;", "if (executing && is_vec) c3 <= c3 + 32'd1;",
         "counter c3 misses SMAX cycles", None),
    _rtl("ga2.v", "(keeps1 && dma_full)", "(keeps1 && dma_busy)", "WAIT 1 waits for the queue to empty", None),
]

EXTENDED: list[Mutant] = COMPILER + MACHINE + RTL
