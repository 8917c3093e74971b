"""The guides' worked examples stay true to the sources: the patches of docs/changing_rtl.md apply
to the files as they are (a change to rtl/ga2_sm.v, model/capra/isa.py or tests/test_machine.py
that moves their lines is a reason to make the example again), and every page the README's "where
to go next" and docs/architecture.md's map name exists."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from replay import runs

PATCHES = sorted((runs.ROOT / "docs" / "patches").glob("*.patch"))
GUIDES = ("docs/changing_rtl.md", "docs/own_model.md", "docs/waveforms.md", "docs/report.md")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_the_guides_patch_applies_to_the_sources(patch):
    proc = subprocess.run(["git", "apply", "--check", str(patch)], cwd=runs.ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"{patch.name} no longer applies: {proc.stderr.strip()}"


def test_the_patches_are_the_guides_two_and_the_read_latency_estimate():
    """changing_rtl.md's RTL and model halves; synthesis.md's estimate of a read latency of 3 (the
    machine model's formulas only) and serving.md's scores in the BROWS form (the compiler's
    choice of form, the timeline unchecked: cycles only)."""
    assert [p.name for p in PATCHES] == ["scores_brows_cycles.patch", "smax_recip_model.patch",
                                         "smax_recip_rtl.patch", "sram_read_latency_3.patch"]
    scores, model, rtl, latency = (p.read_text() for p in PATCHES)
    assert re.findall(r"^\+\+\+ b/(\S+)", rtl, re.M) == ["rtl/ga2_sm.v"]
    assert "+SMAX_LATENCY = 19" in model
    assert re.findall(r"^\+\+\+ b/(\S+)", latency, re.M) == ["model/capra/dma.py", "model/capra/isa.py"]
    assert "+SRAM_RD_LAT = 3 " in latency
    assert re.findall(r"^\+\+\+ b/(\S+)", scores, re.M) == ["model/capra/compiler.py", "tools/capra_cli/timeline.py"]


@pytest.mark.parametrize("page", ["README.md", "docs/architecture.md"])
def test_every_guide_is_linked_from_the_readme_and_the_map(page):
    text = (runs.ROOT / page).read_text()
    for guide in GUIDES:
        assert (runs.ROOT / guide).exists(), guide
        assert guide.removeprefix("docs/") in text, f"{page} does not name {guide}"


def test_the_first_graph_of_own_model_md_prints_what_the_page_shows(tmp_path):
    """The page's snippet, run as the page says, prints the page's output line for line."""
    text = (runs.ROOT / "docs" / "own_model.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"it prints:\n\n(?:<!-- output: [^\n]* -->\n)?```\n(.*?)```", text, re.S).group(1)
    (tmp_path / "tiny.py").write_text(code)
    proc = subprocess.run([sys.executable, "tiny.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == shown.splitlines()


def test_the_wider_model_of_own_model_md_prints_the_lines_the_page_shows():
    """The page's `--no-rtl` run of a wider model: every line it shows (its "..." stands for the
    listing) is a line the command prints, in the same order."""
    text = (runs.ROOT / "docs" / "own_model.md").read_text()
    command = "python tools/own_model.py --dim 32 --hidden 64 --no-rtl"
    shown = re.search(rf"```\n{re.escape(command)}\n(.*?)```", text, re.S).group(1)
    proc = subprocess.run([sys.executable, "tools/own_model.py", *command.split()[2:]], cwd=runs.ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    printed = iter(proc.stdout.splitlines())
    for line in shown.splitlines():
        if line != "...":
            assert line in printed, f"{line!r} is not printed (in this order) by {command}"
