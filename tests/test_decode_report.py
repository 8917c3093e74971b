"""tools/decode_report.py checks its goals: it exits 0 only when they hold, 1 when one fails,
2 for a bad argument."""

from __future__ import annotations

import decode_report
import pytest


def run(capsys, *args: str) -> tuple[int, str]:
    rc = decode_report.main(list(args))
    return rc, capsys.readouterr().out


def test_the_goals_hold_for_the_32_step_decode_in_every_window(capsys):
    """The compiler's schedule meets the roofline goals (a slower schedule fails here)."""
    rc, out = run(capsys, "--steps", "32")
    assert rc == 0, out
    worst = {line.split()[1].rstrip(":"): float(line.split()[-1]) for line in out.splitlines()
             if line.startswith("window")}
    assert set(worst) == {"None", "8", "4"}
    assert min(worst.values()) >= decode_report.GOAL_EFFICIENCY, worst


@pytest.mark.parametrize("goal, value, named", [
    ("GOAL_EFFICIENCY", 0.999, "of its bound"),
    ("GOAL_PER_TOKEN", 0.01, "x the ideal"),
])
def test_a_missed_goal_fails_and_says_which(monkeypatch, capsys, goal, value, named):
    monkeypatch.setattr(decode_report, goal, value)
    rc, out = run(capsys, "--steps", "4")
    assert rc == 1
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("VERDICT: FAIL") and named in verdict, verdict


@pytest.mark.parametrize("args", [["--steps", "1"], ["--steps", "100000"], ["--model", "big"]])
def test_a_bad_argument_exits_2(capsys, args):
    with pytest.raises(SystemExit) as exc:
        decode_report.main(args)
    assert exc.value.code == 2
    assert args[0] in capsys.readouterr().err


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
