"""Chapter 15, exercise 3's worked answer (model/answers/sinks.py): attention sinks on the paged
host. Its checks pass on one small configuration, and they catch a gather that drops the sinks,
a release of one page too many and a calibration that ignores the sinks. Expected block ids on
tiny pools are worked out by hand. No simulator runs: the chip is GA2's machine model.
"""

from __future__ import annotations

import paged_lm as PL
import paged_tests as PT
import pytest
from answers import sinks as A
from answers import sinks_checks as checks

SMALL = {"W": 4, "S": 1, "steps": 12}  # the window fills at step 4 and a middle page goes by step 9


def window_gather(cache, rid, L, W, S):
    """A broken gather: the window's last W - 1 rows, the sinks dropped (the chapter's own gather)."""
    return cache.gather(rid, L - min(L, W), L - 1)


def test_the_worked_answers_checks_pass_on_a_small_configuration():
    res = checks.run_all(page=2, **SMALL)
    assert res.problems == [], res.problems
    assert res.checks > 20 and set(res.counts) == {"(1)", "(2)", "(3)", "(4)"}, res.counts
    assert res.peaks["middle"] < res.peaks["front"] == res.peaks["none"], res.peaks


@pytest.mark.parametrize("page", [2, 16], ids=["pages of 2: a released row is read", "pages of 16: nothing released"])
def test_a_gather_that_drops_the_sinks_is_caught(monkeypatch, page):
    monkeypatch.setattr(A, "gather_rows", window_gather)
    res = checks.run_all(page=page, **SMALL)
    caught = {p[:3] for p in res.problems}
    assert {"(1)", "(2)"} <= caught, res.problems


def test_a_calibration_on_the_windows_rows_is_caught(monkeypatch):
    monkeypatch.setattr(A, "calibrate_sinks", lambda m, steps, W, S, starts: PL.calibrate(m, steps, W, starts))
    res = checks.run_all(page=2, **SMALL)
    assert [p for p in res.problems if p.startswith("(4)")], res.problems


def test_a_release_of_one_page_too_many_is_caught(monkeypatch):
    release_rows = A.SinkPageTable.release_rows

    def one_page_too_many(self, rid, lo, hi):
        return release_rows(self, rid, lo, min(hi + self.page, self.length[rid]))

    monkeypatch.setattr(A.SinkPageTable, "release_rows", one_page_too_many)
    res = checks.run_all(page=2, **SMALL)
    assert [p for p in res.problems if p.startswith("(3)")], res.problems


def test_read_ranges_are_all_rows_then_sinks_and_the_most_recent():
    assert A.read_ranges(1, 4, 1) == [(0, 0)]
    assert A.read_ranges(4, 4, 1) == [(0, 3)]
    assert A.read_ranges(9, 4, 1) == [(0, 1), (6, 8)]  # row 0, then rows 6 and 7: W - 1 = 3 rows
    assert A.read_ranges(9, 4, 3) == [(0, 3), (8, 8)]  # S = W - 1: the sinks alone


def test_a_middle_release_frees_whole_pages_between_the_sinks_and_the_recent_rows():
    pt = A.SinkPageTable(6, 2)
    pt.new("A")
    for i in range(9):  # pages 0, 1, 2, 3, 4 (the last one half full)
        pt.append("A", i)
    assert pt.release_rows("A", 1, 7) == [1, 2]  # rows 2-3 and 4-5; page 0 keeps sink row 0, page 3 row 7
    assert pt.table["A"] == [0, 3, 4] and pt.dropped["A"] == 2
    assert pt.free == [5, 1, 2]  # released oldest first: page 2 is handed out next
    assert pt.rows("A", 0, 2) == [0, 1] and pt.rows("A", 6, 9) == [6, 7, 8]
    with pytest.raises(PL.RowsReleased):
        pt.rows("A", 1, 7)
    assert PT.pool_invariants(pt, "after the release") == []
    pt.append("A", 9)
    pt.append("A", 10)  # a new page: the last one released
    assert pt.table["A"] == [0, 3, 4, 2] and pt.rows("A", 8, 11) == [8, 9, 10]


def test_a_shared_page_released_by_one_request_stays_for_the_other():
    pt = A.SinkPageTable(4, 2)
    pt.new("A")
    for i in range(6):
        pt.append("A", i)
    pt.fork("A", "B")
    pt.release_rows("A", 2, 4)
    assert pt.ref == [2, 1, 2, 0] and pt.free == [3]
    assert pt.rows("B", 2, 4) == [2, 3]
    assert PT.expect_unchanged(pt, lambda: pt.release_rows("A", 0, 7), PL.RowOutOfRange, "past the end") == []
    assert PT.pool_invariants(pt, "after the fork") == []


@pytest.mark.parametrize("W, S", [(1, 1), (4, 4), (4, 0), (4.0, 1), (True, 1)])
def test_sinks_that_do_not_fit_the_window_are_refused(W, S):
    with pytest.raises(ValueError):
        A.check_sinks(W, S)
