"""What the pages show a command printing is what it prints: every block of README.md and
docs/*.md marked as a command's output is checked by running that command.

The marker is an HTML comment on the line before a fenced block (a blank line between is allowed),
invisible in the rendered page:

    <!-- output: python tools/own_model.py --dim 32 --hidden 64 --no-rtl -->
    <!-- output slow sim: make sim -->
    <!-- output exit=2 stderr: python tools/own_model.py --dim 64 --hidden 128 -->
    <!-- output slow vary=seconds: .venv/bin/capra mixed-chip --no-rtl -->

The words between `output` and the colon are options: `slow` (the command takes over ~20 s: only
make test-full runs it; otherwise it is `heavy`, run by make test and not make test-fast), `sim`
(the command runs Icarus and Verilator: the test is marked so, tests/conftest.py; a command that
prints a replay's PASS line needs it), `exit=N` (the exit status the command must end with; 0
without it), `stderr` (the block shows what it prints on stderr rather than stdout), and
`vary=NAME,...` (the masks below that apply to this block, and no others). After the colon comes the
command as a reader types it: `python tools/<script>.py ...`, `.venv/bin/capra <command> ...` (or
`capra`, or `.venv/bin/python -m capra_cli`), `make <target> [VAR=value]` (the one tool line `make
-n` gives), optionally after `VAR=value` environment assignments such as GA2_CONFIG; or
`.venv/bin/python -c "..."`, run as it is; or `the block above`: the fenced Python block just above
the marker, run as a file in a temporary folder, or the shell block there, run by bash in the
checkout (a page that shows a snippet, then what it prints).

The block is an excerpt: every line it shows appears among the lines the command prints, in the
same order (a subsequence; lines the block leaves out are allowed anywhere, and a line `...`
only tells the reader so). Lines are compared whole, trailing spaces aside. A first line equal to
the marker's command is the command the page shows above its output, not output. Cycles,
counters and every other number are compared exactly; a mask replaces, in the shown and the
printed line alike, only what legitimately varies between runs (MASKS: wall-clock times, the
folders of a path, commit hashes, dates), and only in the blocks that name it.

How the command runs: in a fresh Python (the page's command, its script mapped to the command it
runs through tools/bootstrap.py), with every path the command modules keep under out/ pointed into
a temporary folder (what tests/test_cli.py's sandbox does in-process), so the check writes no file
another run writes; simulator builds stay in the shared cache and the program store stays off
(tests/conftest.py). A marker whose command fails, a marked block with nothing to compare, and a
marker this reader cannot parse fail the test, and so does a set of pages with no marked block.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import needs_icarus, needs_verilator
from replay import runs

ROOT = runs.ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHONS = ("python", "python3", ".venv/bin/python")
TIMEOUT = {"heavy": 300, "slow": 3600}  # seconds a command may take, by tier

# What may differ between two runs of the same command, each replaced by its name in angle
# brackets on both sides. Narrow on purpose: a cycle count or a counter is never masked.
MASKS = {
    # a wall-clock time: "(1.3 s)", "0.139 ms", "54 min"
    "seconds": re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|min)\b"),
    # the folders of a path (what comes before its last slash): the page writes "/…/" or "…/" for
    # the checkout's
    "path": re.compile(r"(?:(?:…|[A-Za-z_.][\w.+-]*)(?:/…|/[\w.+-]+)*|(?:/…|/[\w.+-]+)+)(?=/)"),
    # a commit (twelve or more hex digits)
    "commit": re.compile(r"\b[0-9a-f]{12,40}\b"),
    # a date, optionally with a time of day
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?\b"),
}

MARKER_START = re.compile(r"^<!--\s*output\b")
MARKER = re.compile(r"^<!-- output(?P<options>(?: [\w=,.-]+)*): (?P<command>\S.*?) -->$")
FENCE = re.compile(r"^```\w*$")
ABOVE = "the block above"  # the marker's command when the block shows what the block above it prints


@dataclass(frozen=True)
class Marked:
    """One marked block: where it is, what runs, and what the page shows it printing."""

    page: str
    line: int  # the marker's line
    command: str
    tier: str = "heavy"
    simulators: bool = False  # the command runs Icarus and Verilator
    exit: int = 0
    stream: str = "stdout"
    vary: tuple[str, ...] = ()
    shown: tuple[tuple[int, str], ...] = field(default=())  # (line number, text) of each line shown
    code: str = ""  # the block above, for a marker `the block above`
    language: str = ""  # that block's info string (python, or a shell block)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


class MarkerError(ValueError):
    """A marker this reader cannot use: a typo, an unknown option or mask, no block after it."""


def _options(text: str, where: str) -> dict:
    found: dict = {}
    for word in text.split():
        key, _, value = word.partition("=")
        if key == "slow" and not value:
            found["tier"] = "slow"
        elif key == "sim" and not value:
            found["simulators"] = True
        elif key == "stderr" and not value:
            found["stream"] = "stderr"
        elif key == "exit" and value.isdigit():
            found["exit"] = int(value)
        elif key == "vary" and value and set(value.split(",")) <= set(MASKS):
            found["vary"] = tuple(value.split(","))
        else:
            raise MarkerError(f"{where}: unknown option {word!r} (slow, sim, stderr, exit=N, vary={','.join(MASKS)})")
    return found


def _block_above(lines: list[str], marker: int, where: str) -> dict:
    """The fenced block that ends closest above the marker: its code, info string and first line."""
    closing = next((i for i in range(marker - 1, -1, -1) if lines[i].startswith("```")), None)
    opening = None if closing is None else next((i for i in range(closing - 1, -1, -1) if FENCE.match(lines[i])), None)
    if opening is None:
        raise MarkerError(f"{where}: `{ABOVE}`, but no fenced block is above the marker")
    language = lines[opening].removeprefix("```")
    if language not in ("", "python", "sh", "bash"):
        raise MarkerError(f"{where}: the block above is {language!r}, which this check does not run")
    return {"code": "\n".join(lines[opening + 1:closing]) + "\n", "language": language, "line": opening + 1}


def marked_blocks(page: Path) -> list[Marked]:
    """Every marked block of one page, in page order; MarkerError for a marker it cannot use."""
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name
    lines = page.read_text().splitlines()
    found = []
    for index, text in enumerate(lines):
        if not MARKER_START.match(text):
            continue
        where = f"{name}:{index + 1}"
        match = MARKER.match(text)
        if match is None:
            raise MarkerError(f"{where}: a marker is `<!-- output[ options]: command -->`, not {text!r}")
        opening = index + 1
        if opening < len(lines) and not lines[opening].strip():
            opening += 1
        if opening >= len(lines) or not FENCE.match(lines[opening]):
            raise MarkerError(f"{where}: no fenced block follows the marker")
        closing = next((i for i in range(opening + 1, len(lines)) if lines[i].startswith("```")), None)
        if closing is None:
            raise MarkerError(f"{where}: the block after the marker is never closed")
        command = match.group("command")
        above = {}
        if command == ABOVE:
            above = _block_above(lines, index, where)
            command = f"the {above['language'] or 'shell'} block of {name}:{above.pop('line')}"
        shown = [(i + 1, lines[i].rstrip()) for i in range(opening + 1, closing)]
        if shown and shown[0][1].strip() == command:
            shown = shown[1:]  # the page shows the command above its output
        shown = [(n, t) for n, t in shown if t.strip() not in ("", "...")]
        found.append(Marked(name, index + 1, command, shown=tuple(shown), **above,
                            **_options(match.group("options"), where)))
    return found


def _all_marked() -> tuple[list[Marked], list[str]]:
    blocks, problems = [], []
    for page in PAGES:
        try:
            blocks.extend(marked_blocks(page))
        except MarkerError as error:
            problems.append(str(error))
    return blocks, problems


MARKED, MARKER_PROBLEMS = _all_marked()

# Script -> the command of capra_cli it runs (tools/bootstrap.py's run("...")).
SCRIPT_COMMAND = {p.stem: m.group(1) for p in (ROOT / "tools").glob("*.py")
                  if (m := re.search(r'^\s*bootstrap\.run\("([a-z0-9-]+)"\)$', p.read_text(), re.M))}

# Runs one command of capra_cli with out/ in a temporary folder: argv is the folder, the program
# name the command prints under, the command and its arguments.
SANDBOXED = """
import importlib, os, sys
from pathlib import Path
from replay import runs
out, prog, command, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
real = runs.OUT
os.environ.setdefault("CAPRA_SIM_CACHE", str(real / "sim"))

def repoint(module):
    for name, value in list(vars(module).items()):
        if name.isupper() and isinstance(value, Path) and value.is_relative_to(real):
            setattr(module, name, out / value.relative_to(real))

repoint(runs)  # what is imported from here on reads the sandbox's runs.OUT
from capra_cli.__main__ import COMMANDS, run_command
importlib.import_module(f"capra_cli.{COMMANDS[command][0]}" if command in COMMANDS else "capra_cli")
for module in list(sys.modules.values()):
    if str(getattr(module, "__file__", None) or "").startswith(str(runs.ROOT)):
        repoint(module)
sys.argv[0] = prog
raise SystemExit(run_command(command, args, prog=prog))
"""


def resolve(command: str) -> tuple[dict[str, str], list[str]]:
    """The page's command as (environment, [program name, capra_cli command, arguments...]); a
    `make` target through the one tool line of `make -n`; a `python -c CODE` as (environment,
    ["-c", CODE, ...]). ValueError when it is none of these."""
    words = shlex.split(command)
    env = {}
    while words and re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    if words and words[0] == "make":
        dry = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={**os.environ, **env})
        tools = [line for line in dry.stdout.splitlines() if re.search(r"tools/\w+\.py|-m capra_cli ", line)]
        if dry.returncode != 0 or len(tools) != 1:
            raise ValueError(f"`{command}` is not one tool line under make -n: {dry.stdout}{dry.stderr}")
        more, argv = resolve(tools[0])
        return {**env, **more}, argv
    if words and words[0] in PYTHONS and len(words) > 1 and re.fullmatch(r"tools/\w+\.py", words[1]):
        stem = Path(words[1]).stem
        if stem not in SCRIPT_COMMAND:
            raise ValueError(f"{words[1]} is not one of the scripts that run a command")
        return env, [Path(words[1]).name, SCRIPT_COMMAND[stem], *words[2:]]
    if words and words[0] in PYTHONS and words[1:2] == ["-c"] and len(words) > 2:
        return env, words[1:]
    if words[:3] == [".venv/bin/python", "-m", "capra_cli"]:
        words = ["capra", *words[3:]]
    if len(words) > 1 and words[0] in ("capra", ".venv/bin/capra"):
        return env, [f"capra {words[1]}", words[1], *words[2:]]
    raise ValueError(f"`{command}` is no command this check runs (python tools/X.py, capra X, make X)")


def run_marked(block: Marked, out: Path, tier: str = "heavy") -> subprocess.CompletedProcess:
    """Run the block's command (a tool in the sandbox of SANDBOXED; the block above as a Python
    file in `out`'s parent, or as a shell script in the checkout; a `python -c` as it is)."""
    timeout = TIMEOUT[tier]
    if block.code and block.language == "python":
        out.parent.mkdir(parents=True, exist_ok=True)
        (out.parent / "snippet.py").write_text(block.code)
        return subprocess.run([sys.executable, "snippet.py"], cwd=out.parent, capture_output=True, text=True,
                              timeout=timeout)
    if block.code:
        return subprocess.run(["bash", "-c", block.code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    env, argv = resolve(block.command)
    if argv[0] == "-c":
        run = [sys.executable, *argv]
    else:
        run = [sys.executable, "-c", SANDBOXED, str(out), *argv]
    return subprocess.run(run, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)


def masked(text: str, vary: tuple[str, ...]) -> str:
    for name in vary:
        text = MASKS[name].sub(f"<{name}>", text)
    return text.rstrip()


def first_difference(block: Marked, printed: list[str]) -> str | None:
    """None when every shown line is printed, in order; otherwise the first shown line that is not
    (after the lines before it matched), and the printed line closest to it from there on."""
    at = 0
    lines = [masked(p, block.vary) for p in printed]
    for number, text in block.shown:
        want = masked(text, block.vary)
        try:
            at = lines.index(want, at) + 1
        except ValueError:
            rest = printed[at:]
            closest = max(rest, key=lambda p: difflib.SequenceMatcher(None, masked(p, block.vary), want).ratio(),
                          default=None)
            actual = f"the command's closest line after the ones matched:\n    {closest!r}" if closest is not None \
                else "the command printed nothing more"
            return (f"{block.page}:{number}: this line is not printed (in this order) by `{block.command}`:\n"
                    f"    {text!r}\n{actual}")
    return None


def test_the_pages_mark_output_blocks():
    """The reader finds the markers (a change to how they are written that hid them from this test
    would fail here), and every marker is one it can use."""
    assert not MARKER_PROBLEMS, "\n".join(MARKER_PROBLEMS)
    assert len(MARKED) >= 10, [str(b) for b in MARKED]
    assert {b.page for b in MARKED} >= {"README.md", "docs/own_model.md", "docs/paged_host.md"}


@pytest.mark.parametrize("block", MARKED, ids=str)
def test_a_marked_command_resolves_and_its_block_shows_output(block):
    """Cheap, in every tier: the command is one this check can run, and the block shows lines."""
    assert block.shown, f"{block}: the marked block shows no output of `{block.command}`"
    if block.code:
        return
    try:
        resolve(block.command)
    except ValueError as error:
        pytest.fail(f"{block}: {error}")


def test_the_comparison_finds_a_wrong_figure_and_names_its_line():
    """The check itself: an excerpt in order passes, a changed number or a swapped order fails with
    the page's line and the command's line."""
    printed = ["== head", "  a 681 cycles", "  b 729 cycles", "took 1.5 s", "end"]
    good = Marked("p.md", 1, "cmd", vary=("seconds",), shown=((3, "  a 681 cycles"), (4, "took 2 s"), (5, "end")))
    assert first_difference(good, printed) is None
    wrong = Marked("p.md", 1, "cmd", shown=((3, "  a 681 cycles"), (4, "  b 730 cycles")))
    message = first_difference(wrong, printed)
    assert message.startswith("p.md:4:") and "'  b 729 cycles'" in message, message
    swapped = Marked("p.md", 1, "cmd", shown=((3, "  b 729 cycles"), (4, "  a 681 cycles")))
    assert first_difference(swapped, printed).startswith("p.md:4:")
    unmasked = Marked("p.md", 1, "cmd", shown=((3, "took 2 s"),))
    assert first_difference(unmasked, printed) is not None, "a time matched without its mask"


def test_the_reader_takes_a_marker_its_options_and_the_block_above(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n```\n\nprints\n\n"
                    "<!-- output slow sim exit=1 vary=seconds,path: the block above -->\n\n```\n1\n...\n```\n"
                    "<!-- output: capra sim -->\n```\ncapra sim\n  problems: none\n```\n")
    above, sim = marked_blocks(page)
    assert (above.tier, above.simulators, above.exit, above.vary) == ("slow", True, 1, ("seconds", "path"))
    assert (above.code, above.language, sim.simulators) == ("print(1)\n", "python", False)
    assert above.command == "the python block of page.md:1" and above.shown == ((10, "1"),)
    assert (sim.tier, sim.exit, sim.stream, sim.shown) == ("heavy", 0, "stdout", ((16, "  problems: none"),))
    assert resolve("GA2_CONFIG=n=8 .venv/bin/capra sim --stall 5") == (
        {"GA2_CONFIG": "n=8"}, ["capra sim", "sim", "--stall", "5"])
    assert resolve("python tools/ch15_run.py") == ({}, ["ch15_run.py", "sim"])


@pytest.mark.parametrize("text,says", [
    ("<!-- output:make sim -->\n```\nx\n```\n", "a marker is"),
    ("<!-- output fast: make sim -->\n```\nx\n```\n", "unknown option 'fast'"),
    ("<!-- output vary=cycles: make sim -->\n```\nx\n```\n", "unknown option 'vary=cycles'"),
    ("<!-- output: make sim -->\ntext\n```\nx\n```\n", "no fenced block follows"),
    ("<!-- output: make sim -->\n```\nx\n", "never closed"),
    ("<!-- output: the block above -->\n```\nx\n```\n", "no fenced block is above"),
])
def test_a_marker_the_reader_cannot_use_is_an_error(tmp_path, text, says):
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(MarkerError, match=re.escape(says)):
        marked_blocks(page)


def test_a_mask_leaves_cycles_and_counters_alone():
    for name, pattern in MASKS.items():
        for exact in ("681 cycles", "25512 cycles in total", "c4 390", "10010001 00000000 00440044"):
            assert pattern.sub("<x>", exact) == exact, (name, exact)


def _by_command() -> list:
    """The marked blocks grouped by command (the command runs once for all its blocks), each
    group in the slowest tier any of its markers names."""
    groups: dict[tuple[str, int], list[Marked]] = {}
    for block in MARKED:
        groups.setdefault((block.command, block.exit), []).append(block)
    params = []
    for blocks in groups.values():
        marks = [pytest.mark.slow if any(b.tier == "slow" for b in blocks) else pytest.mark.heavy]
        if any(b.simulators for b in blocks):
            marks += [needs_icarus, needs_verilator]
        params.append(pytest.param(blocks, id=str(blocks[0]), marks=marks))
    return params


@pytest.mark.parametrize("blocks", _by_command())
def test_a_marked_block_is_what_its_command_prints(blocks, tmp_path):
    first = blocks[0]
    assert all(b.shown for b in blocks), f"{first}: a block marked as `{first.command}`'s output shows nothing"
    proc = run_marked(first, tmp_path / "out", "slow" if any(b.tier == "slow" for b in blocks) else "heavy")
    assert proc.returncode == first.exit, (
        f"{first}: `{first.command}` exits {proc.returncode}, not {first.exit}:\n{proc.stderr[-2000:]}")
    replayed = re.search(r"\b(Icarus|Verilator)\s+PASS\b", proc.stdout)
    assert not replayed or any(b.simulators for b in blocks), (
        f"{first}: `{first.command}` replays on a simulator; its marker is to say `sim`")
    differences = [first_difference(b, (proc.stdout if b.stream == "stdout" else proc.stderr).splitlines())
                   for b in blocks]
    differences = [d for d in differences if d is not None]
    assert not differences, "\n".join(differences)
