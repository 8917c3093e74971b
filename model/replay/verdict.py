"""What a replay printed, judged: the one reader of the testbench's output.

The testbench prints exactly one verdict line (``PASS: <n> programs match ...``, or a line starting
``FAIL`` or ``MISMATCH`` that names the program, the word or counter, expected and got) and, built
with ``DUMP``, lines ``COUNTERS <i> <c0> <c1> <c2> <c3> <c4>`` and ``HOLDS <i> <h_unit> <h_sync>``
per program. ``judge`` turns that,
the simulator's exit status and what the image holds into a ``Verdict``: passed only when the
simulator exited 0, printed one verdict line, PASS for exactly the image's programs, and (with
the counters expected) printed every program's counters, equal to the machine model's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

VERDICT_RE = re.compile(r"^(PASS|FAIL|MISMATCH)\b.*$", re.M)
PASS_COUNT_RE = re.compile(r"^PASS: (\d+) programs?\b")
COUNTERS_RE = re.compile(r"^COUNTERS (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)$", re.M)
HOLDS_RE = re.compile(r"^HOLDS (\d+) (\d+) (\d+)$", re.M)
PROGRAM_RE = re.compile(r"\bprogram (\d+)\b")


def verdict_line(output: str) -> str:
    """The testbench's first verdict line, else the last lines it printed (what a report shows)."""
    found = VERDICT_RE.search(output)
    return found.group(0) if found else (" | ".join(output.strip().splitlines()[-2:]) or "(no output)")


def parse_counters(output: str) -> dict[int, list[int]]:
    """Program index -> its seven counters (c0..c4, then h_unit and h_sync), from the testbench's
    COUNTERS and HOLDS lines (define DUMP); a program with one line and not the other has what it printed."""
    found = {int(m.group(1)): [int(c) for c in m.groups()[1:]] for m in COUNTERS_RE.finditer(output)}
    for m in HOLDS_RE.finditer(output):
        found.setdefault(int(m.group(1)), []).extend(int(c) for c in m.groups()[1:])
    return found


def failed_program(line: str) -> int | None:
    """The program a FAIL or MISMATCH line names, if it names one."""
    found = PROGRAM_RE.search(line)
    return int(found.group(1)) if found else None


@dataclass
class Verdict:
    """One simulator's run of a replay image, judged."""

    simulator: str
    rc: int  # the simulator's exit status
    line: str  # the testbench's verdict line (or what it printed last): for the reader
    problems: list[str] = field(default_factory=list)  # empty = PASS
    counters: list[list[int]] = field(default_factory=list)  # per program, in order (with DUMP)
    seconds: float = 0.0  # wall time of the run
    image: str = ""  # the image replayed, when it was kept for a look

    @property
    def passed(self) -> bool:
        return not self.problems


def judge(simulator: str, rc: int, output: str, programs: int, *, dump: bool = False,
          expected: Sequence[Sequence[int]] | None = None) -> Verdict:
    """The verdict of one replay of an image of `programs` programs (module docstring). With
    `dump`, the counters printed are collected; with `expected` (each program's seven counters from
    the machine model), they must equal it."""
    verdicts = [m.group(0) for m in VERDICT_RE.finditer(output)]
    last = " | ".join(output.strip().splitlines()[-2:]) or "(no output)"
    verdict = Verdict(simulator, rc, verdicts[0] if verdicts else last)
    problems = verdict.problems
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
    if dump or expected is not None:
        found = parse_counters(output)
        verdict.counters = [found[i] for i in sorted(found)]
        if verdict.passed and sorted(found) != list(range(programs)):
            problems.append(f"{simulator} printed counters for {len(found)} of {programs} programs")
    if expected is not None and verdict.passed:
        wrong = next((i for i, (got, want) in enumerate(zip(verdict.counters, expected, strict=True))
                      if list(got) != list(want)), None)
        if wrong is not None:
            problems.append(f"{simulator}: program {wrong} counters {verdict.counters[wrong]}, the machine model "
                            f"says {list(expected[wrong])}")
    return verdict


def one_verdict(output: str) -> str:
    """The verdict line of an output that must hold exactly one (tests of the testbench itself);
    ValueError naming what it printed otherwise."""
    lines = [m.group(0) for m in VERDICT_RE.finditer(output)]
    if len(lines) != 1:
        raise ValueError(f"expected exactly one verdict line, got {lines!r} in:\n{output[-2000:]}")
    return lines[0]
