"""What every command shares, so that no command can pass what should fail.

Exit status, the same for every command:

    0    every check ran and passed (and at least one ran)
    1    a check or a replay failed, or nothing was checked
    2    a user mistake: a bad argument, a bad environment variable, a size past a limit of the
         chip or the model, an input file that is missing or not what it should be, a simulator
         that is not installed; one line on stderr naming what is wrong, nothing written
    130  interrupted (Ctrl-C or SIGTERM); every child process has been killed

Arguments (``Parser``, ``int_range``, ``in_range``, ``at_least``): a mistake is one line naming the
argument. Verdicts (``finish``): a command's exit status comes from its list of problems and its
count of checks, printed as the final ``VERDICT:`` line. Running (``run``): the errors the library
raises for a user's mistake become one line and exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import re
import select
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path

import replay
from capra import config
from capra.config import ConfigError
from replay import runs
from replay.runs import UserError, allow_children, kill_children, note
from threadpoolctl import threadpool_limits

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def tool_path(name: str) -> str | None:
    """A command installed into this Python's environment (the .venv, where pyproject.toml's extras
    put the YoWASP synthesis tools), else on PATH; None when neither has it."""
    here = Path(sys.executable).parent
    return shutil.which(name, path=os.pathsep.join([str(here), os.environ.get("PATH", "")]))


def tool_arg(path: Path | str) -> str:
    """A file's path as a YoWASP tool is given it: relative to the repository root, the folder every
    synthesis tool runs in. YoWASP mounts a private folder of its own at /tmp, so an absolute path
    under /tmp (a clone in a temporary folder, a test's tmp_path) would name a file the tool cannot
    see; a relative path reaches the real one."""
    return os.path.relpath(path, runs.ROOT)


class ToolError(UserError):
    """A problem the user fixes outside the command's arguments: one line, exit status 2."""


class BadArgument(Exception):
    """An argument that parsed but is past a limit found only afterwards (a size the chip cannot
    hold): the command's parser reports it as its own error, one line naming the argument, exit 2."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"argument {argument}: {message}")


# ---- arguments -----------------------------------------------------------------------------------


class _Store(argparse.Action):
    """argparse's plain store, except that a list option (``nargs="+"`` or ``"*"``) given more than
    once gathers the values of every occurrence: argparse itself keeps the last occurrence's alone,
    so ``--only A --only B`` would run B and drop A without a word. The first occurrence replaces
    the default (an option's default list is never appended to)."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        gathers = self.nargs in ("+", "*") and option_string is not None
        if gathers and isinstance(before, list) and before is not self.default:
            values = before + list(values)
        setattr(namespace, self.dest, values)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error is one line (no usage block), exit status 2, and whose list
    options gather every occurrence (``_Store``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Store)
        self.register("action", "store", _Store)

    def error(self, message: str):
        hint = "" if "(see " in message else " (see --help)"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}{hint}\n")


def distinct(argument: str, values: Sequence[object] | None) -> None:
    """Refuse a list option that names a value twice: it would be run and counted twice."""
    seen: set[object] = set()
    for value in values or ():
        if value in seen:
            raise BadArgument(argument, f"{value} is given twice")
        seen.add(value)


def one_line(message: str) -> str:
    """The message with its line breaks shown as \\n: an argument may hold a newline, and an error
    is one line, so nothing after it can pass for a line of its own (a forged VERDICT, say)."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def _show(x: float) -> str:
    """A number as a message shows it: short (1e+06, 0.5), but never rounded to another number
    (100.0001 is not shown as 100)."""
    if not isinstance(x, float):
        return str(x)
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


# What a number on the command line may look like: ASCII digits, an optional sign, and for a float a
# point and an exponent. Python's int() and float() also take "1_0", " 3", "infinity" and digits of
# other scripts ("٨"), which no one means and GA2_EXT's reader (config.decimal) refuses as well.
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


def in_range(kind: Callable[[str], float], lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a number of `kind` (int or float) in lo .. hi (NaN and infinities refused)."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> float:
        if not (_INTEGER if kind is int else _NUMBER).fullmatch(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}")
        value = kind(text)
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
    """An argparse type: an integer >= lo, for a size whose upper limit the command derives after
    parsing (from the chip or the model) and names in its own message."""

    def parse(text: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
        value = int(text)
        if value < lo:
            raise argparse.ArgumentTypeError(f"{value} is less than {lo}")
        return value

    parse.__name__ = "integer"
    return parse


def memory_arguments(ap: argparse.ArgumentParser) -> None:
    """--stall and --stall-seed: a memory whose AXI channels stall (capra.dma.StallSchedule)."""
    ap.add_argument("--stall", type=int_range(0, config.STALL_MAX), default=None,
                    help=f"percent of cycles each AXI channel of the memory stalls, 0..{config.STALL_MAX} (default: "
                         "the configuration's, 0 unless GA2_CONFIG sets ext_stall); the model runs on the same "
                         "schedule")
    ap.add_argument("--stall-seed", type=int_range(0, config.SEED_MAX), default=None,
                    help=f"the stall schedule's seed, 0..{config.SEED_MAX} (default: the configuration's, 1)")


@contextmanager
def memory(args: argparse.Namespace) -> Iterator[config.Config]:
    """The active configuration with the memory --stall and --stall-seed describe, while the
    command runs."""
    cfg = config.active()
    changes = {name: value for name, value in (("ext_stall", args.stall), ("ext_seed", args.stall_seed))
               if value is not None}
    if args.stall_seed is not None and not changes.get("ext_stall", cfg.ext_stall):
        raise BadArgument("--stall-seed", "seeds the stall schedule of a memory that stalls: give --stall too "
                          "(or ext_stall in GA2_CONFIG)")
    with config.use(replace(cfg, **changes)) as active:
        yield active


# ---- running -------------------------------------------------------------------------------------


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def program_name(prog: str) -> Iterator[None]:
    """While the block runs, the program's name (``replay.runs.program_name``, which starts every
    error and progress line) is `prog`: ``python -m capra_cli`` would otherwise be ``__main__.py``."""
    saved = sys.argv[:1]
    sys.argv[:1] = [prog]
    try:
        yield
    finally:
        sys.argv[:1] = saved


def _reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (Linux reports POLLERR for
    the writing end of such a pipe): a BrokenPipeError from anything else is a real failure."""
    with suppress(OSError, ValueError, AttributeError):
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poll.poll(0))
    return False


def run(main: Callable[..., int], *args: object) -> int:
    """Run a command's ``main(*args)`` and return its exit status: a user's mistake the library
    names (a missing simulator or input file, a configuration or a size GA2 cannot take) is one
    line and 2; Ctrl-C or SIGTERM kills every child and is one line and 130; output closed by its
    reader (a pipe into `head`) ends the command quietly with 1 (the rest was not shown); a full disk
    (or `> /dev/full`) is one line and 1."""
    previous = None
    allow_children()
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGTERM unwinds like Ctrl-C
    try:
        # One BLAS thread: every product here is small (the tiny model, the long-context path's
        # heads), where a thread per core costs more to start than it saves, and multiplies a
        # command's time whenever anything else runs on the machine.
        with threadpool_limits(limits=1):
            status = main(*args)
        sys.stdout.flush()  # a reader that closed the output early (`| head`) is met here, not at exit
        return status
    except BrokenPipeError:  # the output was cut: what was left unprinted is not shown, and not a traceback
        if not _reader_gone():
            raise  # another pipe broke (a child's, a worker's): that is a failure to show, not a reader's choice
        kill_children()
        with suppress(OSError, ValueError):  # the interpreter's last flush then writes nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAIL
    except (UserError, ConfigError) as error:
        print(f"{runs.program_name()}: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        # a full disk, or output sent to one (`> /dev/full`): one line, not a traceback; what the
        # command still had to print goes nowhere (the interpreter's last flush would fail again)
        kill_children()
        where = error.filename or "its output"
        print(f"{runs.program_name()}: error: no space left to write {where}", file=sys.stderr)
        with suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAIL
    except KeyboardInterrupt:
        kill_children()
        print(f"{runs.program_name()}: interrupted; every process it started has been stopped", file=sys.stderr)
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
            spent = now - self.start
            left = spent / self.done * (self.total - self.done)  # at the pace so far
            note(f"{self.what}: {self.done} of {self.total} ({spent:.0f} s; about {left:.0f} s more at this pace)")


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


def replay_checks(records: Sequence[replay.Record], problems: list[str], *, name: str, tool: str) -> int:
    """Replay `records` in both simulators (``replay.replay``), print each one's verdict line and
    add its problems to `problems`; returns the checks made (one a simulator), for ``finish``."""
    verdicts = replay.replay(records, name=name, tool=tool)
    for v in verdicts:
        print(f"{v.simulator:10s} {v.line}")
        problems += v.problems
    return len(verdicts)


def report_only(checked_by: str) -> int:
    """The end of a command that reports figures and checks none: a last line saying so (on stderr,
    so its printed output stays what the book shows) and exit status 0. `checked_by` names where
    the code behind the figures is checked."""
    note(f"a report: nothing it printed is checked here ({checked_by})")
    return EXIT_PASS


def require_decode(steps: int, what: str) -> None:
    """ToolError (one line, exit 2) when the structured model's decode of `steps` tokens does not
    compile on the active configuration (an external memory too small, say): refused before any
    work instead of failing halfway with the compiler's traceback."""
    import tiny_lm
    from host.limits import compile_error

    error = compile_error(tiny_lm.make_model("structured"), steps)
    if error is not None:
        raise ToolError(f"{what}: the {steps}-step decode does not compile: {error}")


def own_chip(what: str = "this command") -> None:
    """Refuse another chip (``no_chip``) for a command that runs the mixed model on a chip of its own
    (``inference.mixed_chip.CHIP``), which GA2_CONFIG and GA2_EXT do not change."""
    from inference.mixed_chip import CHIP

    no_chip(f"{what} runs the mixed model's own chip ({CHIP.label()}), which they do not change")


def chip_argument(option: str, key: str) -> config.Config:
    """The configuration a command-line key names (`option` is the argument that gave it), or
    BadArgument naming it: an empty key too, which Config.parse reads as the default chip (GA2_CONFIG
    may be empty to mean that; an argument given empty is a mistake)."""
    if not key.replace(",", "").strip():
        raise BadArgument(option, 'an empty key (name a configuration, e.g. "n=8,ext_words=2")')
    try:
        return config.Config.parse(key)
    except ConfigError as error:
        raise BadArgument(option, str(error)) from None


def chip_line(active: config.Config | None = None) -> str | None:
    """The line that names the chip a command runs (`active`, default the active configuration) on
    its output, with what set it (GA2_CONFIG / GA2_EXT, --stall / --stall-seed) and what differs from
    the default (the chip, or only its memory's stalls); None on the default chip (whose output
    stays the book's)."""
    active = config.active() if active is None else active
    if active == config.DEFAULT:
        return None
    environment = config.from_environment()
    given = [name for name, differs in (
        ("GA2_CONFIG / GA2_EXT", environment != config.DEFAULT),
        ("--stall / --stall-seed",
         (active.ext_stall, active.ext_seed) != (environment.ext_stall, environment.ext_seed)),
    ) if differs]
    chip_differs = active.compile_key() != config.DEFAULT.compile_key()  # all but the stall schedule
    what = "the chip and the model are built for it" if chip_differs else "the chip is the default, its memory stalls"
    return f"configuration: {active.label()} ({' and '.join(given) + '; ' if given else ''}{what})"


def no_chip(why: str) -> None:
    """ToolError (one line, exit 2) when GA2_CONFIG or GA2_EXT asks for another chip than the
    default, for a command that runs no GA2 chip whose configuration they could set (`why` says
    what it runs instead): a setting a command cannot honour is refused, not ignored."""
    if config.active() != config.DEFAULT:
        raise ToolError(f"GA2_CONFIG / GA2_EXT ask for {config.active().label()}, but {why}: unset them")


def memory_per_program(what: str) -> None:
    """ToolError (one line, exit 2) when GA2_CONFIG or GA2_EXT set the external memory's size for a
    command that gives every program an external memory of the program's own size (its K and V run
    to hundreds of thousands of words): the size asked for could not be honoured, so it is refused.
    The chip's other settings (array, scratchpad, latency, port) are honoured as given."""
    asked = config.active().ext_memory
    if asked != config.DEFAULT.ext_memory:
        raise ToolError(f"GA2_CONFIG / GA2_EXT ask for an external memory of {asked} words, but {what} gives "
                        f"each program a memory of its own size, which they do not change: unset the memory's size")


class _FirstLine:
    """Standard output that writes `line` before the first thing written to it (and nothing when
    nothing is written: a refusal prints only its one line on stderr)."""

    def __init__(self, stream, line: str) -> None:
        self._stream, self._line = stream, line

    def write(self, text: str) -> int:
        if self._line is not None and text:
            self._stream.write(self._line)
            self._line = None
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def naming_chip() -> Iterator[None]:
    """While a command that runs the configured chip runs: its output starts with ``chip_line()``,
    so what it ran is on its output and not only in its environment."""
    line = chip_line()
    if line is None:
        yield
        return
    before = sys.stdout
    sys.stdout = _FirstLine(before, line + "\n")
    try:
        yield
    finally:
        sys.stdout = before


def check_context(argument: str, context: int, model: dict) -> None:
    """Refuse (BadArgument: one line, exit 2) a decode that needs a context past the largest the
    chip can run (found by compiling: host/limits.py)."""
    from host.limits import largest_context

    limit = largest_context(model)
    if limit.largest == 0:
        raise ToolError(f"not even a one-token decode fits GA2: {limit.reason}")
    if context > limit.largest:
        raise BadArgument(argument, f"{context} is past {limit.describe()}")
