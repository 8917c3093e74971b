"""Runs never share a file: every run writes in a folder of its own, outputs are renamed into place,
and two tools (or two configurations) can run at once in one checkout and both pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import replay
from capra import asm
from conftest import needs_simulators
from replay import image, runs


def test_each_run_gets_a_folder_of_its_own_removed_at_the_end(tmp_path):
    with runs.run_folder("sim", parent=tmp_path) as first, runs.run_folder("sim", parent=tmp_path) as second:
        assert first.path != second.path and first.path.is_dir() and second.path.is_dir()
        (first / "image.hex").write_text("x")
        kept = second.keep()
    assert not first.path.exists(), "a finished run leaves nothing behind"
    assert kept.is_dir(), "a run that asked to keep its folder (a failed replay) keeps it"


def test_a_folder_is_removed_when_the_run_fails(tmp_path):
    with pytest.raises(RuntimeError), runs.run_folder("sim", parent=tmp_path) as run:
        raise RuntimeError("the run stops")
    assert not run.path.exists()


def test_an_interrupted_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "result.json"
    runs.write_json(path, {"verdict": "PASS"})
    with pytest.raises(KeyboardInterrupt), runs.atomic_path(path) as tmp:
        tmp.write_text("half a fi")
        raise KeyboardInterrupt
    assert runs.read_json(path, "a test") == {"verdict": "PASS"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


@needs_simulators
def test_a_passing_replay_leaves_no_file_and_a_failing_one_keeps_its_image(tmp_path):
    good = image.record(asm.load(0, 0, 1, 4) + asm.store(0, 8, 1, 4) + asm.halt(), [1, 2, 3, 4])
    bad = image.record(asm.halt(), [])
    bad.counters[0] += 1  # a wrong expectation: the testbench reports a MISMATCH
    with runs.run_folder("test", parent=tmp_path) as run:
        assert all(v.passed for v in replay.replay([good], folder=run))
    assert not run.path.exists()
    verdicts = replay.replay([bad], name="wrong_counter", tool=f"test-{os.getpid()}")
    assert not any(v.passed for v in verdicts)
    kept = {v.image for v in verdicts}
    assert len(kept) == 1, kept
    path = kept.pop()
    assert os.path.exists(path), "the failing image is kept for a look"
    shutil.rmtree(os.path.dirname(path))


@needs_simulators
def test_two_configurations_replay_at_once_in_one_checkout():
    """The default chip on two memories (latencies 4 and 16), each a Chapter 12 decode replayed on
    both simulators, started together: each writes only in its own run folder, and both need the
    same simulator builds (one makes them, the other waits for them), so both pass."""
    def start(config: str) -> subprocess.Popen:
        env = {**os.environ, "GA2_CONFIG": config}
        return subprocess.Popen([sys.executable, "-m", "capra_cli", "ch12", "--steps", "6"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    procs = [start(""), start("ext_latency=16")]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out[-2000:]
        assert "VERDICT: PASS: 6 programs replayed in both simulators" in out, out[-2000:]


def test_a_file_where_a_folder_goes_is_named(tmp_path):
    """An output folder that is a file (or lies under one) is a UserError naming that file, for an
    output written atomically and for a run folder alike; a folder where a file goes, too."""
    blocker = tmp_path / "out"
    blocker.write_text("not a folder")
    for attempt in (lambda: runs.make_folder(blocker / "timeline"),
                    lambda: runs.write_text(blocker / "timeline" / "x.json", "{}"),
                    lambda: runs.run_folder("soak", parent=blocker).__enter__()):
        with pytest.raises(runs.UserError, match=f"{blocker} is a file, where a folder is to be"):
            attempt()
    assert blocker.read_text() == "not a folder"
    (tmp_path / "ga2.vcd").mkdir()
    with pytest.raises(runs.UserError, match="is a folder, where a file is to be written"):
        runs.write_text(tmp_path / "ga2.vcd", "")
    assert runs.make_folder(tmp_path / "a" / "b").is_dir()
