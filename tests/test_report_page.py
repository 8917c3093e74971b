"""The page of every result (make report's out/report.html, tools/capra_cli/report_page.py): what
this checkout never made is named with the command that makes it, a result from other sources
says so, and in a real browser (headless Chromium) every figure loads and carries its footer.

The inputs are made here, small: a figure drawn as the tools draw theirs (its footer kept in the
PNG), a result file with its provenance; the page is written into a temporary out/."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from capra_cli import report_page
from replay import runs

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def draw(path: Path, footer: str | None) -> None:
    """A small figure written as the tools write theirs (footer kept in the file unless None)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([1, 2, 3], [3, 1, 2])
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=40, **({"metadata": runs.figure_metadata(footer)} if footer else {}))
    plt.close(fig)


def run_json(prov: dict) -> dict:
    return {"verdict": "PASS", "steps": 2, "page": 4, "config": prov["config"], "source": "RTL",
            "provenance": prov, "cycles": {"None": [690, 700], "8": [690, 700], "4": [690, 690]}}


def made(secs: list[report_page.Section]) -> dict[str, bool]:
    return {s.anchor: bool(s.figures or s.tables) for s in secs}


def test_every_result_never_made_names_the_command_that_makes_it(tmp_path):
    page, secs = report_page.write(tmp_path, None)
    text = page.read_text()
    assert not any(made(secs).values()), made(secs)
    assert "<img" not in text  # nothing is drawn from anything else
    for s in secs:
        assert s.missing, s.anchor
        assert all("`" in m for m in s.missing), s.missing  # each names a command
    for command in ("make report", "make sim", "make figures", "make serve", "make timeline", "make dse",
                    "make synth", "make fpga", "make mut", "make soak N=1000"):
        assert f"<code>{html.escape(command)}</code>" in text, command


def test_a_result_names_what_made_it_and_says_when_its_sources_are_not_these(tmp_path):
    now = runs.provenance()
    (tmp_path / "ch15_run.json").write_text(json.dumps(run_json(now)))
    _page, secs = report_page.write(tmp_path, None)
    decode = next(s for s in secs if s.anchor == "decode")
    assert decode.tables[0].footer == runs.footer(now)
    assert decode.tables[0].lines[-1].split() == ["total", "1390", "1390", "1380"]

    (tmp_path / "ch15_run.json").write_text(json.dumps(run_json({**now, "sources": "0123456789abcdef"})))
    _page, secs = report_page.write(tmp_path, None)
    footer = next(s for s in secs if s.anchor == "decode").tables[0].footer
    assert "sources 0123456789abcdef" in footer and "other sources than this checkout's" in footer, footer

    (tmp_path / "ch15_run.json").write_text(json.dumps({**run_json(now), "cycles": {"None": [1], "8": []}}))
    _page, secs = report_page.write(tmp_path, None)  # a file not in the form make sim writes: said, not a crash
    decode = next(s for s in secs if s.anchor == "decode")
    assert not decode.tables and "IndexError" in decode.notes[0], decode.notes

    (tmp_path / "ch15_run.json").write_text('{"verdict": "PA')  # a damaged file is named, not read
    _page, secs = report_page.write(tmp_path, None)
    decode = next(s for s in secs if s.anchor == "decode")
    assert not decode.tables and "ch15_run.json" in decode.missing[0], decode.missing


def test_make_report_prints_its_roofline_and_writes_the_page_with_it(tmp_path, monkeypatch, capsys):
    from capra_cli.__main__ import run_command

    monkeypatch.setattr(runs, "OUT", tmp_path)
    capsys.readouterr()
    rc = run_command("report", ["--steps", "3"], prog="decode_report.py")
    out = capsys.readouterr().out.splitlines()
    assert rc == 0, out
    assert out[0].split()[:3] == ["step", "ctx", "cycles"] and out[-1].startswith("VERDICT: PASS")
    wrote = next(line for line in out if line.startswith("wrote "))
    assert str(tmp_path / "report.html") in wrote and "1 of 9 kinds of result, 1 figure" in wrote, wrote
    text = (tmp_path / "report.html").read_text()
    assert 'src="report/roofline.png"' in text and runs.figure_footer(tmp_path / "report" / "roofline.png")
    for line in out[:3]:  # the printed table is the page's
        assert html.escape(line) in text, line


@pytest.mark.heavy
def test_the_verdict_docs_report_md_shows_is_make_reports(tmp_path, monkeypatch, capsys):
    """The page's `make report` ends with the line the command prints (its worst efficiency and
    its cost of one more token are the machine model's, so a change of cycles shows here)."""
    from capra_cli.__main__ import run_command

    shown = re.search(r"```\nmake report\n(.*?)```", (runs.ROOT / "docs" / "report.md").read_text(), re.S)[1]
    monkeypatch.setattr(runs, "OUT", tmp_path)
    capsys.readouterr()
    assert run_command("report", [], prog="decode_report.py") == 0
    assert capsys.readouterr().out.splitlines()[-1] == shown.splitlines()[-1]


def browser_checks(page: Path) -> tuple[str, list[dict]]:
    """The page's own check of its figures, as a headless Chromium leaves it in the DOM."""
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = re.search(r'<p id="figure-check">(.*?)</p>', proc.stdout)
    checks = re.search(r'<pre id="figure-checks">(.*?)</pre>', proc.stdout, re.S)
    assert line and checks, proc.stdout[:2000]
    return html.unescape(line.group(1)), [json.loads(x) for x in html.unescape(checks.group(1)).splitlines() if x]


@pytest.mark.heavy
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")
def test_in_a_browser_every_figure_loads_and_carries_its_footer(tmp_path):
    now = runs.provenance()
    footer = runs.footer(now)
    (tmp_path / "ch15_run.json").write_text(json.dumps(run_json(now)))
    for name in ("fig15_2_cycles_per_step.png", "serve_run.png", "timeline/timeline.png"):
        draw(tmp_path / name, footer)
    page, secs = report_page.write(tmp_path, None)
    assert sum(len(s.figures) for s in secs) == 3
    line, checks = browser_checks(page)
    assert line == "3 of 3 figures loaded with the footer their file keeps", line
    assert sorted(c["src"] for c in checks) == ["fig15_2_cycles_per_step.png", "serve_run.png",
                                                "timeline/timeline.png"]
    for c in checks:
        assert c["loaded"] and c["naturalWidth"] > 0 and c["footer"] == footer, c

    # the check checks: a file that is no image does not load, and a figure without its footer is counted
    (tmp_path / "serve_run.png").write_bytes(b"not a png")
    draw(tmp_path / "fig15_3_window.png", None)
    page, _secs = report_page.write(tmp_path, None)
    line, checks = browser_checks(page)
    assert line.startswith("2 of 4 figures loaded"), line
    by_src = {c["src"]: c for c in checks}
    assert not by_src["serve_run.png"]["loaded"] and by_src["serve_run.png"]["naturalWidth"] == 0
    assert by_src["fig15_3_window.png"]["loaded"] and by_src["fig15_3_window.png"]["footer"] == ""


def test_a_malformed_sweep_row_is_named_and_the_other_rows_shown(tmp_path):
    """A cached point that is JSON but not a row of `capra dse` (no figures, a list) is a note naming
    its file, as a truncated one is; the page still shows the grid's valid rows."""
    from capra_cli import dse

    src = dse.sources_hash()
    files = [dse.cached_point(cfg, src, dse.DEFAULT_RANDOM, tmp_path / "dse") for cfg in dse.GRID[:4]]
    files[0].parent.mkdir(parents=True)
    good = dse.GRID[0]
    files[0].write_text(json.dumps({"config": good.key(), "label": good.label(), "brams": 32, "problems": [],
                                    "step1": 690, "step32": 930, "per_token": 7.7, "eff32": 0.9,
                                    "batch_tok_per_kcyc": 2.1}))
    files[1].write_text('{"a": 1}')
    files[2].write_text("[]")
    files[3].write_text('{"config": ')
    _page, secs = report_page.write(tmp_path, None)
    sweep = next(s for s in secs if s.anchor == "sweep")
    assert [line.split()[0] for line in sweep.tables[0].lines[1:]] == [good.label().split()[0]], sweep.tables
    assert [next(str(f) for f in files[1:] if str(f) in n) for n in sweep.notes] == [str(f) for f in files[1:]]
    assert all(n.endswith("`make dse` measures it again") for n in sweep.notes), sweep.notes
