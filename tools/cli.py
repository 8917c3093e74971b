"""What every tool in tools/ shares, so that no tool can pass what should fail.

Exit status, the same for every tool:

    0    every check ran and passed (and at least one ran)
    1    a check or a replay failed, or nothing was checked
    2    a user mistake: a bad argument, a bad environment variable, a size past a limit of the
         chip or the model, an input file that is missing or not what it should be; one line on
         stderr naming what is wrong, nothing written
    130  interrupted (Ctrl-C or SIGTERM); every child process has been killed

Argument parsing (``parser``, ``in_range``, ``int_range``): a mistake is one line naming the
argument. Verdicts (``replay_verdict``, ``finish``): a simulator's output becomes a verdict here and
nowhere else, and a tool's exit status comes from its list of problems and its count of checks,
printed as the final ``VERDICT:`` line. Outputs (``atomic_path``, ``write_text``, ``write_json``):
written to a temporary file in the same folder, then renamed, so an interrupted tool never leaves a
half-written file for the next one to read. Children (``run_command``): each in a process group of
its own, killed as a group when the tool stops early, so no ``make`` or ``g++`` outlives it.

This module needs only the standard library: tools import it before anything else.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


# ---- arguments -----------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error is one line (no usage block), exit status 2."""

    def error(self, message: str):
        hint = "" if "(see " in message else " (see --help)"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}{hint}\n")

    def refuse(self, argument: str, message: str):
        """A value that parsed but is past a limit found after parsing (a size the chip cannot hold)."""
        self.error(f"argument {argument}: {message}")

    def distinct(self, argument: str, values: Sequence[object] | None) -> None:
        """Refuse a list option that names a value twice: it would be run and counted twice."""
        seen: set[object] = set()
        for value in values or ():
            if value in seen:
                self.refuse(argument, f"{value} is given twice")
            seen.add(value)


def one_line(message: str) -> str:
    """The message with its line breaks shown as \\n: an argument may hold a newline, and an error
    is one line, so nothing after it can pass for a line of its own (a forged VERDICT, say)."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def parser(doc: str) -> Parser:
    """A parser whose --help prints the tool's docstring as it is written."""
    return Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def _show(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def in_range(kind: Callable[[str], float], lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a number of `kind` (int or float) in lo .. hi (NaN and infinities refused)."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{_show(value)} is outside {_show(lo)}..{_show(hi)}")
        return value

    parse.__name__ = "integer" if kind is int else "number"
    return parse


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in lo .. hi."""
    return in_range(int, lo, hi)  # type: ignore[return-value]


def at_least(lo: int) -> Callable[[str], int]:
    """An argparse type: an integer >= lo, for a size whose upper limit the tool derives after
    parsing (from the chip or the model) and names in its own message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"{value} is less than {lo}")
        return value

    parse.__name__ = "integer"
    return parse


class ToolError(Exception):
    """A problem the user fixes outside the tool's arguments (a simulator not installed, an input
    file that is missing or incomplete, a bad environment variable): ``run`` prints it as one line
    and exits 2."""


def ext_words() -> int:
    """GA2_EXT, the external memory size in words, read once up front: a bad value is a ToolError
    (one line naming the variable, exit 2) before any work, not a traceback halfway through."""
    from capra.compiler import CompileError, ext_limit  # the one reader of GA2_EXT

    try:
        return ext_limit()
    except CompileError as error:
        raise ToolError(str(error)) from None


# ---- running a tool ------------------------------------------------------------------------------


def _prog() -> str:
    return Path(sys.argv[0]).name or "tool"


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run(main: Callable[..., int], *args: object) -> int:
    """Run a tool's ``main(*args)`` and return its exit status: a ``ToolError`` is one line and 2,
    Ctrl-C or SIGTERM kills every child (``run_command``) and is one line and 130."""
    previous = None
    _stopping.clear()
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGTERM unwinds like Ctrl-C
    try:
        return main(*args)
    except ToolError as error:
        print(f"{_prog()}: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        kill_children()
        print(f"{_prog()}: interrupted; every process it started has been stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class Progress:
    """Progress of a long loop on stderr: a line at most every `every` seconds, none at all for a
    loop that ends sooner, so a long run shows it is alive and a short one prints nothing extra."""

    def __init__(self, what: str, total: int, every: float = 3.0) -> None:
        self.what, self.total, self.every = what, total, every
        self.start = self.last = time.monotonic()
        self.done = 0

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every and self.done < self.total:
            self.last = now
            note(f"{self.what}: {self.done} of {self.total} ({now - self.start:.0f} s)")


def note(message: str) -> None:
    """One progress line on stderr (stdout stays the tool's result)."""
    print(f"{_prog()}: {message}", file=sys.stderr, flush=True)


# ---- children ------------------------------------------------------------------------------------

_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()
_stopping = threading.Event()  # set by kill_children: no new child starts (other threads' loops)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (verilator -> make -> g++), then reap the child."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(Exception):
        proc.wait()


def kill_children() -> None:
    """Kill every child ``run_command`` started and has not yet reaped (any thread's), and refuse
    new ones (KeyboardInterrupt) until ``run`` starts the next tool."""
    _stopping.set()
    with _children_lock:
        running = list(_children)
    for proc in running:
        _kill_group(proc)


def run_command(cmd: Sequence[str], *, cwd: str | os.PathLike | None = None, timeout: float | None = None,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run cmd in a process group of its own and capture its output (text).

    When the wait ends in any way but the child's own exit (a timeout, Ctrl-C, SIGTERM, an error),
    the whole group is killed before the exception goes on, and so are any processes the child
    left behind in its group when it exits. A timeout raises subprocess.TimeoutExpired.
    """
    if _stopping.is_set():
        raise KeyboardInterrupt("the tool is stopping")
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", start_new_session=True)
    with _children_lock:
        _children.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # grandchildren that outlived the child
        with _children_lock:
            _children.discard(proc)
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


# ---- verdicts ------------------------------------------------------------------------------------

VERDICT_RE = re.compile(r"^(PASS|FAIL|MISMATCH)\b.*$", re.M)
PASS_COUNT_RE = re.compile(r"^PASS: (\d+) programs?\b")
COUNTERS_RE = re.compile(r"^COUNTERS (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)$", re.M)


def verdict_text(output: str) -> str:
    """The testbench's first verdict line (PASS / FAIL / MISMATCH), else the last lines it printed:
    what a report shows. Whether a replay passed is ``replay_verdict``'s to judge."""
    found = VERDICT_RE.search(output)
    return found.group(0) if found else (" | ".join(output.strip().splitlines()[-2:]) or "(no output)")


def parse_counters(output: str) -> dict[int, list[int]]:
    """Program index -> its five counters, from the testbench's COUNTERS lines (define DUMP)."""
    return {int(m.group(1)): [int(c) for c in m.groups()[1:]] for m in COUNTERS_RE.finditer(output)}


@dataclass
class Replay:
    """One simulator's run of a replay image, judged."""

    simulator: str
    rc: int  # the simulator's exit status
    line: str  # the testbench's verdict line (or what it printed last): for the reader
    problems: list[str] = field(default_factory=list)  # empty = PASS
    counters: list[list[int]] = field(default_factory=list)  # program order (with DUMP)
    seconds: float = 0.0  # wall time of the run (set by hw.replay)

    @property
    def passed(self) -> bool:
        return not self.problems


def replay_verdict(simulator: str, rc: int, output: str, programs: int, dump: bool = False) -> Replay:
    """Judge one replay: it passed only if the simulator exited 0, printed exactly one verdict line,
    that line is PASS for exactly `programs` programs, and (with `dump`) it printed the counters of
    programs 0 .. programs-1 and nothing else. Anything less is a problem, named."""
    verdicts = [m.group(0) for m in VERDICT_RE.finditer(output)]
    last = " | ".join(output.strip().splitlines()[-2:]) or "(no output)"
    replay = Replay(simulator, rc, verdicts[0] if verdicts else last)
    problems = replay.problems
    if programs < 1:
        problems.append(f"{simulator}: the image holds no program, so nothing was checked")
    if not verdicts:
        problems.append(f"{simulator} printed no verdict ({last})")
    elif len(verdicts) > 1 or not verdicts[0].startswith("PASS"):
        shown = "; ".join(verdicts[:3]) + (f"; ... ({len(verdicts)} lines)" if len(verdicts) > 3 else "")
        problems.append(f"{simulator}: {shown}")
    else:
        count = PASS_COUNT_RE.match(verdicts[0])
        if count is None or int(count.group(1)) != programs:
            problems.append(f"{simulator} passed {count.group(1) if count else 'an unstated number of'} "
                            f"programs, the image holds {programs}")
    if rc != 0:
        problems.append(f"{simulator} exited with status {rc}")
    if dump:
        found = parse_counters(output)
        if sorted(found) != list(range(programs)):
            problems.append(f"{simulator} printed counters for {len(found)} of {programs} programs")
        replay.counters = [found[i] for i in sorted(found)]
    return replay


def finish(problems: Iterable[str], checks: int, passed: str = "", *, itemize: bool = False,
           brackets: bool = False) -> int:
    """Print the final verdict line and return the exit status: 0 only when `checks` > 0 checks
    ran and no problem was found, else 1 (a run that checked nothing has not passed).

    ``VERDICT: PASS: <passed>`` (``VERDICT: PASS (<passed>)`` with `brackets`), or
    ``VERDICT: FAIL: <problem>; <problem>`` (with `itemize`: ``VERDICT: FAIL`` and one
    ``  - <problem>`` line each)."""
    problems = list(problems)
    if checks <= 0:
        problems.append("nothing was checked")
    if problems:
        if itemize:
            print("VERDICT: FAIL")
            for p in problems:
                print("  -", p)
        else:
            print("VERDICT: FAIL: " + "; ".join(problems))
        return EXIT_FAIL
    detail = (f" ({passed})" if brackets else f": {passed}") if passed else ""
    print(f"VERDICT: PASS{detail}")
    return EXIT_PASS


# ---- files ---------------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path in `path`'s folder to write to; renamed over `path` when the block ends
    normally, removed when it raises (Ctrl-C included). Readers see the old file or the new one,
    never a half-written one. The temporary name keeps the suffix (matplotlib reads the format
    from it)."""
    path = Path(path)
    if path.is_dir():
        raise ToolError(f"{path} is a folder, where this tool writes a file: move it away")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # as an ordinary new file, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write a text file atomically (``atomic_path``)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | os.PathLike, data: object) -> Path:
    """Write JSON atomically, indented one space, ending in a newline."""
    return write_text(path, json.dumps(data, indent=1) + "\n")


def read_json(path: str | os.PathLike, what: str) -> object:
    """A JSON file another tool wrote; ToolError (one line, exit 2) when it is missing, unreadable
    or not JSON (a truncated file)."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist ({what})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ToolError(f"{path} cannot be read ({what}): {error}") from None
    except json.JSONDecodeError as error:
        raise ToolError(f"{path} is not complete JSON ({what}): {error.msg} at line {error.lineno}") from None
