"""The program store: compiled programs and calibrations kept on disk between runs.

A program read back from the store must be the program a compile gives now (the expected value is
a compile with no store at all), a damaged file must be compiled again, a refusal must be kept
with its reason, and any change to the code under model/ must change the names of the files, so
a store never serves what an older compiler made."""

from __future__ import annotations

import os
import pickle
import random
import shutil

import numpy as np
import paged_lm as PL
import pytest
import tiny_lm as T
from capra import CompileError
from host import calibration, programs


@pytest.fixture(scope="module")
def setup():
    m = T.make_model("structured")
    calib, ranges = PL.calibrate(m, 4, None)
    return m, calib, ranges


def same_program(a, b) -> bool:
    """Equal in everything a replay or a host reads: code, constants, tensors, external size."""
    return (a.code == b.code and a.const_words == b.const_words and a.ext_words == b.ext_words
            and a.inputs == b.inputs and a.outputs == b.outputs
            and {k: vars(t) for k, t in a.tensors.items()} == {k: vars(t) for k, t in b.tensors.items()}
            and a.consts.keys() == b.consts.keys()
            and all(np.array_equal(a.consts[k], b.consts[k]) for k in a.consts))


def test_a_stored_program_is_the_program_a_compile_gives(setup, tmp_path):
    m, calib, ranges = setup
    fresh = programs.ProgramCache().get(m, [3], ranges, calib[3])  # no store: the expected value
    store = programs.ProgramStore(tmp_path)
    first = programs.ProgramCache(store=store)
    first.get(m, [3], ranges, calib[3])
    assert first.compiled == 1 and len(list(tmp_path.glob("*.pkl"))) == 1
    second = programs.ProgramCache(store=store)
    kept = second.get(m, [3], ranges, calib[3])
    assert (second.compiled, second.loaded) == (0, 1)
    assert same_program(kept, fresh)
    # another context is another key: compiled, not served the stored one
    third = programs.ProgramCache(store=store)
    assert not same_program(third.get(m, [2], ranges, calib[2]), fresh) and third.compiled == 1


def test_a_damaged_file_is_compiled_again(setup, tmp_path):
    m, calib, ranges = setup
    store = programs.ProgramStore(tmp_path)
    programs.ProgramCache(store=store).get(m, [3], ranges, calib[3])
    (path,) = tmp_path.glob("*.pkl")
    path.write_bytes(path.read_bytes()[:100])
    again = programs.ProgramCache(store=store)
    program = again.get(m, [3], ranges, calib[3])
    assert (again.compiled, again.loaded) == (1, 0)
    assert same_program(program, programs.ProgramCache().get(m, [3], ranges, calib[3]))


def _stored_key(path) -> tuple:
    """The key a store file was written under, read straight from its (kind, key, value) tuple."""
    return pickle.loads(path.read_bytes())[1]


# Damaged contents for a store file, each a function of the file's good bytes and its key. Unpickling
# damaged bytes raises many kinds of error (the first two: EOFError/UnpicklingError, OverflowError),
# and a well-formed pickle may hold the wrong thing; every one must be a miss, not a crash.
DAMAGE = {
    "truncated": lambda good, key: good[: len(good) // 2],
    "empty": lambda good, key: b"",
    "huge length": lambda good, key: b"\x80\x05\x8e\xff\xff\xff\xff\xff\xff\xff\x7f",
    "garbage": lambda good, key: b"\x80\x05" + random.Random(7).randbytes(200),
    "not a tuple": lambda good, key: pickle.dumps({"a": 1}),
    "two fields": lambda good, key: pickle.dumps(("program", key)),
    "unknown kind": lambda good, key: pickle.dumps(("weights", key, 1)),
    "not a program": lambda good, key: pickle.dumps(("program", key, "a program")),
    "not a reason": lambda good, key: pickle.dumps(("refused", key, 42)),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_file_of_any_kind_is_compiled_again_and_rewritten(setup, tmp_path, damage):
    m, calib, ranges = setup
    fresh = programs.ProgramCache().get(m, [3], ranges, calib[3])  # no store: the expected value
    store = programs.ProgramStore(tmp_path)
    programs.ProgramCache(store=store).get(m, [3], ranges, calib[3])
    (path,) = tmp_path.glob("*.pkl")
    path.write_bytes(DAMAGE[damage](path.read_bytes(), _stored_key(path)))
    again = programs.ProgramCache(store=store)
    assert same_program(again.get(m, [3], ranges, calib[3]), fresh)
    assert (again.compiled, again.loaded) == (1, 0)
    # rewritten whole, under the same name, with no temporary file left: the next run loads it
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    later = programs.ProgramCache(store=store)
    assert same_program(later.get(m, [3], ranges, calib[3]), fresh)
    assert (later.compiled, later.loaded) == (0, 1)


def test_a_damaged_calibration_is_calibrated_again(tmp_path, monkeypatch):
    m = T.make_model("random", 3)
    monkeypatch.setattr(programs, "STORE", None)
    fresh = calibration.calibrate(m, 2, [None], range(2))
    monkeypatch.setattr(programs, "STORE", programs.ProgramStore(tmp_path))
    calibration.calibrate(m, 2, [None], range(2))
    (path,) = tmp_path.glob("*.pkl")
    for damaged in (b"\x80\x05\x8e\xff\xff\xff\xff\xff\xff\xff\x7f",
                    pickle.dumps(("calibration", _stored_key(path), {"ranges": 1}))):
        path.write_bytes(damaged)
        again = calibration.calibrate(m, 2, [None], range(2))
        assert isinstance(again, calibration.Calibration) and again.ranges == fresh.ranges
        assert isinstance(pickle.loads(path.read_bytes())[2], calibration.Calibration)  # rewritten


def test_a_refusal_is_kept_with_its_reason(setup, tmp_path):
    m, _calib, ranges = setup
    full = calibration.calibrate(m, 4).ranges  # every group's range: a batch needs no input sets
    store = programs.ProgramStore(tmp_path)
    with pytest.raises(CompileError) as first:
        programs.ProgramCache(store=store).get(m, [4000], full)
    later = programs.ProgramCache(store=store)
    with pytest.raises(CompileError) as second:
        later.get(m, [4000], full)
    assert str(second.value) == str(first.value) and (later.compiled, later.loaded) == (0, 1)
    assert ranges  # the fixture's ranges are the chapter's three shared groups only


def test_the_code_version_follows_every_model_source(tmp_path, monkeypatch):
    copy = tmp_path / "model"
    shutil.copytree(programs.MODEL_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(programs, "MODEL_DIR", copy)
    programs.code_version.cache_clear()
    try:
        before = programs.code_version()
        compiler = copy / "capra" / "compiler.py"
        compiler.write_text(compiler.read_text() + "\n# a change\n")
        programs.code_version.cache_clear()
        assert programs.code_version() != before
    finally:
        programs.code_version.cache_clear()


def test_the_store_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv(programs.STORE_ENV, "off")
    assert programs.default_store() is None
    monkeypatch.setenv(programs.STORE_ENV, str(tmp_path))
    assert programs.default_store().folder == tmp_path


def test_a_stored_calibration_is_the_calibration_a_decode_gives(tmp_path, monkeypatch):
    m = T.make_model("random", 3)
    monkeypatch.setattr(programs, "STORE", None)
    fresh = calibration.calibrate(m, 3, [None, 2], range(4))
    monkeypatch.setattr(programs, "STORE", programs.ProgramStore(tmp_path))
    calibration.calibrate(m, 3, [None, 2], range(4))
    assert len(list(tmp_path.glob("*.pkl"))) == 1
    kept = calibration.calibrate(m, 3, [None, 2], range(4))
    assert kept.ranges == fresh.ranges and kept.feeds.keys() == fresh.feeds.keys()
    assert all(a == b for n in fresh.feeds for a, b in zip(kept.feeds[n], fresh.feeds[n], strict=True))
    # a lambda has no name to key it by: never stored
    calibration.calibrate(m, 3, [None], range(2), attended=lambda kc, n: kc[len(kc) - (n - 1):])
    assert len(list(tmp_path.glob("*.pkl"))) == 1


def test_the_store_keeps_at_most_its_bound(tmp_path, monkeypatch):
    store = programs.ProgramStore(tmp_path)
    monkeypatch.setattr(programs.ProgramStore, "KEEP", 8)
    for i in range(12):
        old = tmp_path / f"old{i:02d}.pkl"
        old.write_bytes(b"x")
        os.utime(old, (1000 + i, 1000 + i))  # used long ago, the first one first
    store.save(("a key",), "program", 1)
    left = sorted(p.name for p in tmp_path.glob("*.pkl"))
    assert len(left) == 6 and store._path(("a key",)).name in left and "old06.pkl" not in left
    assert store.load(("a key",)) == ("program", 1) and store.load(("another",)) is None
