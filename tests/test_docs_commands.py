"""Every command README.md and docs/*.md show runs as written: each `python tools/<script>.py ...`
names a script of tools/ whose parser accepts every option the page gives it, each
`python -m capra_cli <command> ...` (or `capra <command>`) names a command that exists, each
`make <target> VAR=value` names a target of the Makefile and each variable reaches the command
the target runs (read from `make -n`, whose tool lines are parsed in turn), each GA2_CONFIG a page
sets is a configuration the project accepts, and each file a command names exists.

The commands are read from the pages themselves (fenced blocks and `inline code`), so a page that
gains a command is checked by the same rules. Nothing runs: the parsers only parse (a few seconds
for every page); running the commands themselves is what make test and make sim do.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from capra import config
from capra_cli.__main__ import COMMANDS, command_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# A page's placeholders, and what stands for them when the command is parsed.
PLACEHOLDERS = {"N": "3", "N=...": "N=3", "KEY": "n=8"}
PYTHONS = ("python", "python3", ".venv/bin/python")


@dataclass(frozen=True)
class Shown:
    """One command as a page shows it."""

    page: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _candidates(page: Path) -> list[Shown]:
    """Every line of a fenced block, and every inline code span, with its line number."""
    text = page.read_text()
    name = str(page.relative_to(ROOT))
    found: list[Shown] = []
    for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if block.group(1) not in ("", "sh", "bash", "shell"):
            continue
        first = text.count("\n", 0, block.start(2)) + 1
        for offset, line in enumerate(block.group(2).splitlines()):
            found.append(Shown(name, first + offset, line.strip()))
    for span in re.finditer(r"`([^`\n]+)`", text):
        found.append(Shown(name, text.count("\n", 0, span.start()) + 1, span.group(1).strip()))
    return found


def _words(shown: Shown) -> tuple[dict[str, str], list[str]] | None:
    """The command's environment assignments and words, without a trailing `# comment`; None when
    the text is no command this test knows (prose in a code span, a program's output)."""
    try:
        words = shlex.split(shown.text, comments=True)
    except ValueError:
        return None
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    if not words:
        return None
    head = words[0]
    if head == "make" or head in (".venv/bin/capra", "capra"):
        return env, words
    if head in PYTHONS and len(words) > 1 and (words[1].startswith("tools/") or words[1:3] == ["-m", "capra_cli"]):
        return env, words
    return None


def _commands() -> list[tuple[Shown, dict[str, str], list[str]]]:
    out = []
    for page in PAGES:
        for shown in _candidates(page):
            parsed = _words(shown)
            if parsed is not None:
                env, words = parsed
                words = [PLACEHOLDERS.get(w, w) for w in words if w != "..."]
                out.append((shown, env, words))
    return out


COMMANDS_SHOWN = _commands()
SCRIPT_COMMAND = {p.stem: m.group(1) for p in (ROOT / "tools").glob("*.py")
                  if (m := re.search(r'^\s*bootstrap\.run\("([a-z0-9-]+)"\)$', p.read_text(), re.M))}
# A command a page shows to make the point that it is refused (one line, exit 2).
REFUSED = {"GA2_CONFIG=n=3 python tools/decode_report.py"}


def _check_tool(shown: Shown, words: list[str]) -> None:
    """`python tools/X.py args` or `python -m capra_cli cmd args` or `capra cmd args`: the script
    or command exists and its parser takes the arguments."""
    if words[0] in PYTHONS and words[1].startswith("tools/"):
        script = words[1]
        assert (ROOT / script).is_file(), f"{shown}: {script} does not exist"
        stem = Path(script).stem
        assert stem in SCRIPT_COMMAND, f"{shown}: {script} is not one of the book's scripts"
        command, args = SCRIPT_COMMAND[stem], words[2:]
    else:
        if words[0] in PYTHONS:  # python -m capra_cli ...
            assert words[0] == ".venv/bin/python", (
                f"{shown}: `{words[0]} -m capra_cli` needs the project on the path; "
                "the page is to say .venv/bin/python or .venv/bin/capra")
            words = words[2:]
        if len(words) < 2 or words[1].startswith("<") or words[1:] in (["--help"], ["-h"]):
            return  # the command line itself: `capra <command>`, `capra --help`
        command, args = words[1], words[2:]
        assert command in COMMANDS, f"{shown}: there is no command {command!r}"
    parser = command_parser(command)
    try:
        parser.parse_args(args)
    except SystemExit as done:
        pytest.fail(f"{shown}: its parser refuses {args} (exit {done.code})")


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][a-z0-9-]*):(?!=)", text, re.M))


def _check_make(shown: Shown, env: dict[str, str], words: list[str]) -> None:
    """`make [target] [VAR=value]`: the target exists, each value reaches a command of its recipe
    (make -n), and every tool line of that recipe parses."""
    targets = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
    variables = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    known = _make_targets()
    for target in targets:
        assert target in known, f"{shown}: the Makefile has no target {target!r}"
    if not variables:
        return
    dry = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env})
    assert dry.returncode == 0, f"{shown}: make -n fails: {dry.stderr.strip()}"
    recipe = [line for line in dry.stdout.splitlines() if re.search(r"tools/\w+\.py|-m (pytest|capra_cli)", line)]
    for key, value in variables.items():
        assert any(value in line for line in recipe), (
            f"{shown}: {key}={value} reaches no command of make {' '.join(targets)}: {recipe}")
    for line in recipe:
        run = shlex.split(line)
        run = [w for w in run if not re.fullmatch(r"[A-Z_]+=.*", w)]
        if len(run) > 1 and run[1].startswith("tools/"):
            _check_tool(shown, [".venv/bin/python", *run[1:]])


def test_the_pages_show_commands():
    """The reader exists: the pages hold the commands this file checks (a change to how commands
    are written that hid them from this test would fail here)."""
    kinds = {"make": 0, "tools": 0}
    for _shown, _env, words in COMMANDS_SHOWN:
        kinds["make" if words[0] == "make" else "tools"] += 1
    assert kinds["make"] >= 100 and kinds["tools"] >= 60, kinds


@pytest.mark.parametrize("shown,env,words", COMMANDS_SHOWN, ids=[f"{s.page}:{s.line}" for s, _e, _w in COMMANDS_SHOWN])
def test_a_command_in_the_docs_runs_as_written(shown, env, words):
    if shown.text in REFUSED:
        with pytest.raises(config.ConfigError):
            config.from_environment(env)
        return
    if "GA2_CONFIG" in env and env["GA2_CONFIG"] not in ("", "..."):
        try:
            config.from_environment({"GA2_CONFIG": env["GA2_CONFIG"]})
        except config.ConfigError as error:
            pytest.fail(f"{shown}: {error}")
    if words[0] == "make":
        if shutil.which("make") is None:
            pytest.skip("make is not installed")
        _check_make(shown, env, words)
    else:
        _check_tool(shown, words)


def _pytest_lines() -> list[Shown]:
    shown = (s for page in PAGES for s in _candidates(page))
    return [s for s in shown if re.match(r"\.venv/bin/python (-m pytest|\S+\.py)", s.text)]


@pytest.mark.parametrize("shown", _pytest_lines(), ids=lambda s: f"{s.page}:{s.line}")
def test_a_file_or_test_the_docs_name_exists(shown):
    """`.venv/bin/python -m pytest tests/x.py::test_y[...]` and `.venv/bin/python file.py`: the file
    exists (a file the page has the reader write, ex2.py and the like, excepted) and so does the test."""
    words = shlex.split(shown.text, comments=True)
    for word in words[1:]:
        path, _, node = word.partition("::")
        if not path.endswith(".py") or "/" not in path:
            continue
        assert (ROOT / path).is_file(), f"{shown}: {path} does not exist"
        if node:
            function = node.split("[")[0]
            assert re.search(rf"^def {re.escape(function)}\(", (ROOT / path).read_text(), re.M), (
                f"{shown}: {path} has no test {function}")


def test_a_command_runs_its_products_on_one_blas_thread():
    """Every command runs inside common.run, which holds numpy's BLAS to one thread (a thread per
    core multiplies an inference tool's time whenever anything else runs). Checked in a fresh
    Python, since this test process holds BLAS to one thread itself (conftest)."""
    probe = ("import sys, numpy, threadpoolctl\n"
             "from capra_cli import common\n"
             "outside = [p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas']\n"
             "inside = common.run(lambda: max(p['num_threads'] for p in threadpoolctl.threadpool_info()\n"
             "                                if p['user_api'] == 'blas'))\n"
             "print(max(outside), inside)\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["OPENBLAS_NUM_THREADS"] = "2"  # two threads outside, whatever the machine's cores
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    outside, inside = map(int, proc.stdout.split())
    assert outside == 2, f"the probe's BLAS starts with {outside} threads, so it shows nothing"
    assert inside == 1, f"a command's BLAS runs {inside} threads"


# Words that tell a page's history instead of what is (a page says what the code does and what a
# command prints; a measured comparison names the two commits or RTLs it compares).
CHANGE_LOG = re.compile(r"\b(now|used to|previously|no longer|any ?more|before this|became|formerly)\b", re.I)
# passages where such a word says what is: a window that can no longer see a row, a check's printed
# NO LONGER APPLIES, "now and then"
PRESENT_TENSE = ("can no longer", "NO LONGER APPLIES", "now and then")


def test_the_pages_say_what_is_not_what_changed():
    """Prose outside code blocks (printed output may say anything) has no change-log wording."""
    found = []
    for page in PAGES:
        fenced = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            prose = line
            for allowed in PRESENT_TENSE:
                prose = prose.replace(allowed, "")
            if not fenced and CHANGE_LOG.search(prose):
                found.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_readme_counts_the_design_space_exercises():
    """The README's line for docs/design_space.md says how many exercises the page has."""
    page = (ROOT / "docs" / "design_space.md").read_text()
    exercises = page.split("\n## Exercises", 1)[1]
    count = len(re.findall(r"^\d+\. \*\*", exercises, re.M))
    words = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
    line = next(x for x in (ROOT / "README.md").read_text().splitlines() if x.startswith("* `docs/design_space.md`"))
    assert f"{words[count]} one-line exercises" in line, (count, line)
