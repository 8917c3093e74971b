"""`capra report` (tools/capra_cli/report.py, the book's tools/decode_report.py) checks its goals:
it exits 0 only when they hold and 1 when one fails, and each step's bound is the model's own words
and MACs. Its argument mistakes (exit 2) are in tests/test_cli.py."""

from __future__ import annotations

import pytest
from capra_cli import report
from capra_cli.__main__ import run_command


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = run_command("report", [*args, "--no-page"], prog="decode_report.py")  # the page: test_report_page.py
    return rc, capsys.readouterr().out


def test_the_goals_hold_for_the_32_step_decode_in_every_window(capsys):
    """The compiler's schedule meets the roofline goals (a slower schedule fails here)."""
    rc, out = run(capsys, "--steps", "32")
    assert rc == 0, out
    worst = {line.split()[1].rstrip(":"): float(line.split()[-1]) for line in out.splitlines()
             if line.startswith("window")}
    assert set(worst) == {"None", "8", "4"}
    assert min(worst.values()) >= report.GOAL_EFFICIENCY, worst
    assert out.strip().splitlines()[-1].startswith("VERDICT: PASS")


@pytest.mark.parametrize("goal, value, named, steps", [
    ("GOAL_EFFICIENCY", 0.999, "of its bound", "4"),
    ("GOAL_PER_TOKEN", 0.01, "x the ideal", str(report.SLOPE_STEPS)),
])
def test_a_missed_goal_fails_and_says_which(monkeypatch, capsys, goal, value, named, steps):
    monkeypatch.setattr(report, goal, value)
    rc, out = run(capsys, "--steps", steps)
    assert rc == 1
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("VERDICT: FAIL") and named in verdict, verdict


def test_too_few_steps_to_measure_a_token_leave_its_goal_unchecked_and_say_so(monkeypatch, capsys):
    """Steps 1 and 2 take the same cycles (their K and V rows hide behind the weights' loads): 0.00x
    the ideal, which passed the goal; a decode shorter than SLOPE_STEPS is not held to it."""
    monkeypatch.setattr(report, "GOAL_PER_TOKEN", 0.01)
    rc, out = run(capsys, "--steps", "2")
    assert rc == 0, out
    assert "not held to the goal: 2 steps" in out
    verdict = out.strip().splitlines()[-1]
    assert verdict.endswith(f"one more token not checked (2 steps, fewer than {report.SLOPE_STEPS})"), verdict


def test_each_steps_bound_is_the_models_own_words_and_macs(capsys):
    """Every printed step against a count from the model's shapes alone (D = 16, MLP 32, V = 16):
    the DMA moves the seven weight matrices once (576 words of four int8), the input row (4), the
    outputs (13) and the K and V rows attended (8 a row); the MACs are 2,304 for the projections,
    the MLP and the logits plus 32 per attended token (scores and p.V); the bound is the larger of
    words (one a cycle) and MACs / 16, and no step takes fewer cycles than its bound."""
    rc, out = run(capsys, "--steps", "12")
    assert rc == 0, out
    rows = [line.split() for line in out.splitlines() if len(line.split()) > 6 and line.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == list(range(1, 13))  # the decode without a window, step by step
    for step, ctx, cycles, words, macs, bound, eff, *_ in rows:
        ctx, cycles, words, macs = int(ctx), int(cycles), int(words), int(macs)
        assert words == 576 + 4 + 13 + 8 * (ctx - 1), (step, ctx)
        assert macs == 2304 + 32 * ctx, (step, ctx)
        assert round(float(bound)) == round(max(words, macs / 16)), (step, ctx)
        assert cycles >= max(words, macs / 16) and float(eff) <= 1.0, (step, ctx)
