"""tools/decode_report.py checks its goals: it exits 0 only when they hold, 1 when one fails,
2 for a bad argument."""

from __future__ import annotations

import decode_report
import pytest


def run(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    monkeypatch.setattr("sys.argv", ["decode_report.py", *args])
    rc = decode_report.main()
    return rc, capsys.readouterr().out


def test_the_goals_hold_for_a_short_decode(monkeypatch, capsys):
    rc, out = run(monkeypatch, capsys, "--steps", "4")
    assert rc == 0, out
    assert "VERDICT: PASS" in out
    assert [line.split()[0] for line in out.splitlines() if line.startswith("window")] == ["window"] * 3


@pytest.mark.parametrize("goal, value, named", [
    ("GOAL_EFFICIENCY", 0.999, "of its bound"),
    ("GOAL_PER_TOKEN", 0.01, "x the ideal"),
])
def test_a_missed_goal_fails_and_says_which(monkeypatch, capsys, goal, value, named):
    monkeypatch.setattr(decode_report, goal, value)
    rc, out = run(monkeypatch, capsys, "--steps", "4")
    assert rc == 1
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("VERDICT: FAIL") and named in verdict, verdict


@pytest.mark.parametrize("args", [["--steps", "1"], ["--steps", "40"], ["--model", "big"]])
def test_a_bad_argument_exits_2(monkeypatch, capsys, args):
    monkeypatch.setattr("sys.argv", ["decode_report.py", *args])
    with pytest.raises(SystemExit) as exc:
        decode_report.main()
    assert exc.value.code == 2
    assert args[0] in capsys.readouterr().err
