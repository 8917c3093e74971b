"""Chapter 15: the page table, the window rule and the paged host (model/paged_lm.py).

Expected block ids come from the allocation order the book states (page 0 first, a freed page is
reused first), worked out by hand on tiny pools; the stateful test compares the table with a plain
shadow model under hypothesis-chosen operation sequences.
"""

from __future__ import annotations

import numpy as np
import paged_lm as PL
import paged_tests as PT
import pytest
import tiny_lm as T
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule


def filled(n_pages: int, page: int, rows: dict) -> PL.PageTable:
    """A table with requests rid -> number of rows (row i of rid is the tuple (rid, i))."""
    pt = PL.PageTable(n_pages, page)
    for rid, n in rows.items():
        pt.new(rid)
        for i in range(n):
            pt.append(rid, (rid, i))
    return pt


def assert_fails_unchanged(pt, operation, error):
    before = PT.snapshot(pt)
    with pytest.raises(error) as info:
        operation()
    assert isinstance(info.value, PL.PagedError)
    assert str(info.value), "the error must carry a message"
    assert PT.same_state(before, PT.snapshot(pt)), f"a failed operation ({error.__name__}) changed the table"


# ---- the chapter's checks ------------------------------------------------------------------------


# check_all() itself (every check of the chapter, on the code as it is) runs in
# tests/test_mutation.py, on the unbroken copy the mutation tool starts from.


# ---- exact block ids on tiny pools ---------------------------------------------------------------


def test_pages_are_handed_out_from_page_zero_up():
    pt = filled(4, 2, {"A": 5})
    assert pt.table["A"] == [0, 1, 2]
    assert pt.free == [3]
    assert pt.ref == [1, 1, 1, 0]
    assert pt.used() == 3


def test_a_freed_page_is_the_first_reused():
    pt = filled(4, 2, {"A": 4, "B": 2})  # A: pages 0, 1; B: page 2
    pt.release("A")  # pages go back in table order: 0, then 1 (on top)
    assert pt.free == [3, 0, 1]
    pt.new("C")
    pt.append("C", "c0")
    assert pt.table["C"] == [1]


def test_window_trace_reuses_page_zero():
    """Example A's trace: pages of 4, window 6; page 0 is released at step 9 and reused at step 13."""
    pt = PL.PageTable(8, 4)
    pt.new("A")
    tables = {}
    for L in range(1, 15):
        pt.append("A", L - 1)
        pt.trim("A", max(0, L + 1 - 6))
        tables[L] = (list(pt.table["A"]), pt.dropped["A"])
    assert tables[8] == ([0, 1], 0)
    assert tables[9] == ([1, 2], 1)
    assert tables[13] == ([2, 0], 2)
    assert pt.rows("A", 8, 14) == list(range(8, 14))


# ---- trim boundaries -----------------------------------------------------------------------------


@pytest.mark.parametrize("keep_from, dropped", [(0, 0), (3, 0), (4, 1), (7, 1), (8, 2), (10, 2)])
def test_trim_releases_only_pages_entirely_before_keep_from(keep_from, dropped):
    pt = filled(4, 4, {"A": 10})  # pages 0 (rows 0-3), 1 (4-7), 2 (8-9)
    pt.trim("A", keep_from)
    assert pt.dropped["A"] == dropped
    assert pt.table["A"] == [0, 1, 2][dropped:]
    assert pt.rows("A", dropped * 4, 10) == [("A", i) for i in range(dropped * 4, 10)]


def test_trim_keeps_page_with_one_needed_row():
    pt = filled(4, 4, {"A": 8})
    pt.trim("A", 3)  # row 3 is still needed: page 0 stays
    assert pt.table["A"] == [0, 1]
    pt.trim("A", 4)
    assert pt.table["A"] == [1] and pt.free[-1] == 0


def test_trim_to_the_end_of_a_full_page_then_append_takes_a_fresh_page():
    pt = filled(4, 4, {"A": 8})
    pt.trim("A", 8)
    assert pt.table["A"] == [] and pt.used() == 0
    pt.append("A", "r8")
    assert pt.table["A"] == [1] and pt.rows("A", 8, 9) == ["r8"]


def test_trim_below_what_is_already_released_is_a_no_op():
    pt = filled(4, 2, {"A": 6})
    pt.trim("A", 4)
    before = PT.snapshot(pt)
    pt.trim("A", 1)
    assert PT.same_state(before, PT.snapshot(pt))


# ---- fork and copy-on-write ----------------------------------------------------------------------


def test_fork_shares_every_page_without_copying():
    pt = filled(6, 4, {"A": 10})
    pt.fork("A", "B")
    assert pt.table["B"] == [0, 1, 2]
    assert pt.ref[:3] == [2, 2, 2]
    assert pt.used() == 3
    assert pt.rows("B", 0, 10) == pt.rows("A", 0, 10)


def test_copy_on_write_copies_the_shared_tail_and_leaves_the_owner_untouched():
    pt = filled(6, 4, {"A": 10})
    pt.fork("A", "B")
    pt.append("B", "new")
    assert pt.table["A"] == [0, 1, 2]
    assert pt.table["B"] == [0, 1, 3]
    assert pt.ref[:4] == [2, 2, 1, 1]
    assert pt.rows("A", 0, 10) == [("A", i) for i in range(10)]
    assert pt.rows("B", 0, 11) == [("A", i) for i in range(10)] + ["new"]
    pt.append("B", "newer")  # B's tail is private now: no second copy
    assert pt.table["B"] == [0, 1, 3] and pt.used() == 4


def test_no_copy_when_the_shared_prefix_ends_on_a_page_boundary():
    pt = filled(6, 4, {"A": 8})
    pt.fork("A", "B")
    pt.append("B", "new")
    assert pt.table["B"] == [0, 1, 2]
    assert pt.ref[:3] == [2, 2, 1]


def test_release_of_a_fork_keeps_the_shared_pages():
    pt = filled(6, 4, {"A": 10})
    pt.fork("A", "B")
    pt.append("B", "new")
    pt.release("B")
    assert pt.ref[:4] == [1, 1, 1, 0]
    assert sorted(pt.free) == [3, 4, 5]
    pt.release("A")
    assert pt.used() == 0 and not any(pt.ref)


def test_trim_of_a_fork_does_not_free_pages_the_other_owner_holds():
    pt = filled(6, 4, {"A": 10})
    pt.fork("A", "B")
    pt.trim("B", 8)
    assert pt.table["B"] == [2] and pt.table["A"] == [0, 1, 2]
    assert pt.ref[:3] == [1, 1, 2] and 0 not in pt.free


# ---- every misuse raises a named error and changes nothing ---------------------------------------


def misuse_table() -> PL.PageTable:
    """A full pool of 4 pages of 2 rows: A holds pages 1, 2 (page 0 trimmed, rows 0-1 gone),
    C is a fork of A (shares pages 1, 2; page 2 half full), B holds page 0 (full), D page 3."""
    pt = filled(4, 2, {"A": 5})
    pt.trim("A", 2)
    pt.new("B")
    pt.append("B", "b0")
    pt.append("B", "b1")
    pt.fork("A", "C")
    pt.new("D")
    pt.append("D", "d0")
    assert pt.table == {"A": [1, 2], "B": [0], "C": [1, 2], "D": [3]} and not pt.free
    return pt


@pytest.mark.parametrize("name, operation, error", [
    ("append to an unknown request", lambda pt: pt.append("Z", 0), PL.UnknownRequest),
    ("read an unknown request", lambda pt: pt.rows("Z", 0, 0), PL.UnknownRequest),
    ("trim an unknown request", lambda pt: pt.trim("Z", 0), PL.UnknownRequest),
    ("release an unknown request", lambda pt: pt.release("Z"), PL.UnknownRequest),
    ("fork from an unknown request", lambda pt: pt.fork("Z", "Y"), PL.UnknownRequest),
    ("fork onto an existing request", lambda pt: pt.fork("A", "B"), PL.RequestExists),
    ("new on an existing request", lambda pt: pt.new("A"), PL.RequestExists),
    ("read rows already released", lambda pt: pt.rows("A", 1, 3), PL.RowsReleased),
    ("read past the end", lambda pt: pt.rows("A", 2, 6), PL.RowOutOfRange),
    ("read a negative row", lambda pt: pt.rows("B", -1, 1), PL.RowOutOfRange),
    ("read a reversed range", lambda pt: pt.rows("A", 4, 3), PL.RowOutOfRange),
    ("trim past the end", lambda pt: pt.trim("A", 6), PL.RowOutOfRange),
    ("trim to a negative row", lambda pt: pt.trim("A", -1), PL.RowOutOfRange),
    ("append needing a new page, pool full", lambda pt: pt.append("B", 9), PL.OutOfPages),
    ("append into a shared tail, no page for the copy", lambda pt: pt.append("C", 9), PL.OutOfPages),
    ("owner appends into its shared tail, no page", lambda pt: pt.append("A", 9), PL.OutOfPages),
    # indices are integers: 2.5 used to release pages, False / True to read rows
    ("trim to a fractional row", lambda pt: pt.trim("A", 2.5), PL.RowOutOfRange),
    ("read fractional rows", lambda pt: pt.rows("A", 2, 3.0), PL.RowOutOfRange),
    ("read rows named by bools", lambda pt: pt.rows("B", False, True), PL.RowOutOfRange),
    ("read rows named by None", lambda pt: pt.rows("B", None, 1), PL.RowOutOfRange),
])
def test_misuse_raises_and_leaves_the_table_unchanged(name, operation, error):
    pt = misuse_table()
    assert_fails_unchanged(pt, lambda: operation(pt), error)


def test_a_released_request_is_unknown():
    pt = filled(4, 2, {"A": 3})
    pt.release("A")
    for operation in (lambda: pt.release("A"), lambda: pt.append("A", 0), lambda: pt.rows("A", 0, 0)):
        assert_fails_unchanged(pt, operation, PL.UnknownRequest)


def test_out_of_pages_stays_catchable_as_in_the_book():
    pt = PL.PageTable(1, 1)
    pt.new(0)
    pt.append(0, None)
    with pytest.raises(PL.OutOfPages, match="no free page"):
        pt.append(0, None)
    assert issubclass(PL.OutOfPages, Exception)


def test_array_pool_rejects_a_row_of_the_wrong_shape_unchanged():
    pt = PL.ArrayPageTable(2, 2, row_shape=(2, 3))
    pt.new(0)
    assert_fails_unchanged(pt, lambda: pt.append(0, [1.0, 2.0]), PL.BadRow)


@pytest.mark.parametrize("row, dtype", [([None, None], np.float64), ([1 + 2j, 3.0], np.float64),
                                        ([np.nan, 1.0], np.float64), ([np.inf, 1.0], np.float64),
                                        ([2.7, 3.0], np.int8), ([300, 1], np.int8), (["1", "2"], np.float64),
                                        ([[1.0], [2.0, 3.0]], np.float64)])
def test_array_pool_refuses_a_row_it_would_change_unchanged(row, dtype):
    """Each of these used to be stored converted: None as NaN, a complex value without its
    imaginary part, 2.7 as 2 and 300 as 44 in int8."""
    pt = PL.ArrayPageTable(2, 2, row_shape=(2,), dtype=dtype)
    pt.new(0)
    assert_fails_unchanged(pt, lambda: pt.append(0, row), PL.BadRow)


@pytest.mark.parametrize("make, match", [
    (lambda: PL.PageTable(True, True), "n_pages >= 1"), (lambda: PL.PageTable(2.5, 4), "n_pages >= 1"),
    (lambda: PL.PageTable(10**9, 4), "more than"),  # used to build lists for 40 s, then run out of memory
    (lambda: PL.ArrayPageTable(2, 2, row_shape=(0,)), "row_shape"),
    (lambda: PL.ArrayPageTable(2, 2, dtype=object), "dtype=object"),
    (lambda: PL.ArrayPageTable(4096, 1024, row_shape=(2, 32)), "GiB"),
])
def test_pool_sizes_are_checked_when_it_is_made(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ---- the numpy pool gathers the same rows --------------------------------------------------------


def test_array_pool_gather_equals_list_pool_rows_through_a_scrambled_table():
    rng = np.random.default_rng(0)
    listed, arrayed = PL.PageTable(16, 3), PL.ArrayPageTable(16, 3, row_shape=(2, 4))
    for pt in (listed, arrayed):
        pt.new("filler")
        pt.new("A")
    rows = []
    for i in range(30):  # interleave two requests so A's pages are not consecutive
        row = rng.standard_normal((2, 4))
        rows.append(row)
        for pt in (listed, arrayed):
            pt.append("A", row)
            if i % 2:
                pt.append("filler", row)
    for pt in (listed, arrayed):
        pt.trim("A", 7)
    assert listed.table["A"] == arrayed.table["A"]
    got = arrayed.gather("A", 7, 30)
    assert got.shape == (23, 2, 4)
    np.testing.assert_array_equal(got, np.array(listed.rows("A", 7, 30)))
    np.testing.assert_array_equal(got, np.array(rows[7:30]))
    assert arrayed.gather("A", 9, 9).shape == (0, 2, 4)


# ---- the host ------------------------------------------------------------------------------------


def test_paged_chip_compiles_one_program_per_context_of_the_window():
    chip = PL.PagedChip(T.make_model("structured"), 12, W=5, page=2, n_pages=8)
    toks, records = chip.generate(0, 12)
    assert sorted(chip.progs) == [1, 2, 3, 4, 5]
    assert [r["ctx"] for r in records] == [1, 2, 3, 4, 5] + [5] * 7
    assert toks == PT.rule_tokens(0, 12)
    assert set(records[0]) >= {"L", "ctx", "code", "ext", "logits", "ints", "tok", "pages", "counters"}
    # pages held after step L by the window rule alone: ceil(L / page) - floor(keep_from / page)
    rule = [-(-L // 2) - max(0, L + 1 - 5) // 2 for L in range(1, 13)]
    assert chip.peak == max(rule) == 3
    # and at every step: a step starts with the pages the step before it kept (a page released one
    # step late leaves the peak as it is, not the count)
    assert [r["pages"] for r in records] == [0] + rule[:-1]


def test_paged_chip_runs_out_of_pages_with_a_clear_error():
    chip = PL.PagedChip(T.make_model("structured"), 10, W=None, page=2, n_pages=2)
    with pytest.raises(PL.OutOfPages, match="page"):
        chip.generate(0, 10)


def test_a_decode_the_pool_cannot_hold_is_refused_before_a_step_runs():
    """The pages a decode holds follow from the window rule: 16 steps in pages of 2 need 8, and a
    pool of 3 is refused before any step (the chip used to run 6 steps and keep their cache)."""
    chip = PL.PagedChip(T.make_model("structured"), 16, W=None, page=2, n_pages=3)
    chip.generate(0, 2)
    cache, peak, progs = chip.cache, chip.peak, dict(chip.progs)
    with pytest.raises(PL.OutOfPages, match="holds up to 8 pages of 2 rows at once; the pool has 3"):
        chip.generate(0, 16)
    assert chip.cache is cache and chip.peak == peak and chip.progs == progs
    for W in (None, 8, 4):  # the count is the peak a decode reaches
        chip = PL.PagedChip(T.make_model("structured"), 32, W)
        chip.generate(0, 32)
        assert chip.pages_held(32) == chip.peak, W


def test_array_pool_refuses_sizes_and_values_it_cannot_hold():
    """row_shape=5 said "'int' object is not iterable", a huge row_shape overflowed np.prod to 0 past
    the size limit, and 1e6 became an infinity in a float16 pool."""
    with pytest.raises(ValueError, match="row_shape=5: give a tuple"):
        PL.ArrayPageTable(4, 2, row_shape=5)
    with pytest.raises(ValueError, match="GiB, more than"):
        PL.ArrayPageTable(4, 2, row_shape=(2**32, 2**32))
    table = PL.ArrayPageTable(4, 2, row_shape=(2,), dtype=np.float16)
    table.new(0)
    with pytest.raises(PL.BadRow, match="past the range of the pool's float16"):
        table.append(0, [1e6, 0.0])
    assert table.length == {0: 0} and table.used() == 0


def test_generate_keeps_the_start_token_as_an_int():
    chip = PL.PagedChip(T.make_model("structured"), 2, W=None, page=2, n_pages=4)
    tokens, _records = chip.generate(np.int64(3), 2)
    assert type(tokens[0]) is int and tokens[0] == 3


def test_steps_past_the_longest_context_are_refused_when_the_chip_is_made():
    with pytest.raises(ValueError, match="steps=1025: no decode context past 1024"):
        PL.PagedChip(T.make_model("structured"), 1025)


@pytest.mark.parametrize("call, match", [
    (lambda m: PL.float_windowed(m, -1, [], [], 2), "tok -1"),
    (lambda m: PL.float_windowed(m, 0, np.zeros((16, 3)), np.zeros((16, 3)), None), r"kc must be rows of 16"),
    (lambda m: PL.float_windowed(m, 0, np.zeros((3, 2, 16)), np.zeros((3, 2, 16)), None), r"got shape \(3, 2, 16\)"),
    (lambda m: PL.float_windowed(m, 0, np.zeros((3, 16)), np.zeros((1, 16)), 2), "kc has 3 rows and vc 1"),
    (lambda m: PL.float_windowed(m, 0, np.full((2, 16), np.nan), np.zeros((2, 16)), None), "kc holds a NaN"),
    (lambda m: PL.float_generate(m, 0, -3), "n must be"),
    (lambda m: PL.float_generate(m, 0, True), "n must be"),
    (lambda m: PL.float_generate(m, 0, 0, -1), "window W"),
    (lambda m: PL.float_generate(m, 16, 2), "start 16"),
    (lambda m: PL.calibrate(m, 0, 4, [0]), "steps"),
    (lambda m: PL.calibrate(m, True, 4, [0]), "steps"),
    (lambda m: PL.calibrate(m, 4, 4, [-1]), "start token -1"),
    (lambda m: PL.calibrate(m, 4, 4, []), "starts is empty"),
])
def test_the_float_reference_and_calibration_name_a_bad_argument(call, match):
    """float_step reshapes what it is given: a transposed or 3-D cache was read as other rows, -1
    was the last token's embedding, and calibrate took 0 steps or no start as an empty calibration."""
    with pytest.raises(ValueError, match=match):
        call(T.make_model("structured"))


@pytest.mark.parametrize("call, match", [
    (lambda chip: chip.generate(-1, 3), "start -1"), (lambda chip: chip.generate(16, 3), "start 16"),
    (lambda chip: chip.generate(True, 3), "start True"), (lambda chip: chip.generate(1.0, 3), "start 1.0"),
    (lambda chip: chip.generate(0, -1), "n must be"), (lambda chip: chip.generate(0, 7), "context 7"),
    (lambda chip: chip.generate(0, 3, force=[1, 2, 3, 4]), "force.0."),
    (lambda chip: chip.generate(0, 3, force=[0, -1, 20, 3]), r"force\[1\] -1"),
])
def test_paged_chip_refuses_bad_arguments_before_touching_its_state(call, match):
    """-1 used to be embedding row -1 (silently), 16 an IndexError halfway, and every failure
    replaced the chip's cache and peak first."""
    chip = PL.PagedChip(T.make_model("structured"), 6, W=None, page=2, n_pages=8)  # contexts 1..6
    chip.generate(0, 6)
    cache, peak = chip.cache, chip.peak
    with pytest.raises((ValueError, PL.C.CompileError), match=match):
        call(chip)
    assert chip.cache is cache and chip.peak == peak


@pytest.mark.parametrize("kwargs, match", [({"steps": 0}, "steps"), ({"steps": 2.5}, "steps"), ({"page": 0}, "page"),
                                           ({"n_pages": 0}, "n_pages"), ({"starts": []}, "starts"),
                                           ({"starts": [16]}, "start token 16"), ({"W": True}, "window W"),
                                           ({"paged": "no"}, "paged must be True or False")])
def test_paged_chip_settings_are_checked_when_it_is_made(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PL.PagedChip(T.make_model("structured"), **({"steps": 4} | kwargs))


def test_context_size_takes_a_step_and_a_window():
    assert [PL.context_size(L, 3) for L in (1, 2, 3, 4, 9)] == [1, 2, 3, 3, 3]
    for L, W in ((5, 0), (5, -2), (0, 3), (5, True)):
        with pytest.raises(ValueError):
            PL.context_size(L, W)


def test_window_must_be_a_positive_int():
    with pytest.raises(ValueError, match="window W"):
        PL.float_windowed(T.make_model("structured"), 0, [], [], 0)


def test_window_of_one_attends_only_the_new_token():
    m = T.make_model("random", 1)
    _, k, v, _ = T.float_step(m, 3, [], [])
    alone = T.float_step(m, 5, [], [])[0]
    assert PL.float_windowed(m, 5, [k, k], [v, v], 1)[0] == alone


# ---- stateful: the page table against a shadow model ---------------------------------------------


class PageTableMachine(RuleBasedStateMachine):
    """Random sequences of operations, with the table compared to plain lists after each one."""

    def __init__(self):
        super().__init__()
        self.pt = PL.PageTable(6, 2)
        self.shadow: dict[int, list] = {}
        self.kept: dict[int, int] = {}  # the highest keep_from asked of each request (its own count)
        self.next_id = 0
        self.counter = 0

    def live(self, data):
        return data.draw(st.sampled_from(sorted(self.shadow)))

    @rule()
    def new(self):
        self.pt.new(self.next_id)
        self.shadow[self.next_id] = []
        self.kept[self.next_id] = 0
        self.next_id += 1

    @precondition(lambda self: self.shadow)
    @rule(data=st.data())
    def append(self, data):
        rid = self.live(data)
        self.counter += 1
        before = PT.snapshot(self.pt)
        try:
            self.pt.append(rid, self.counter)
        except PL.OutOfPages:
            assert not self.pt.free
            assert PT.same_state(before, PT.snapshot(self.pt))
        else:
            self.shadow[rid].append(self.counter)

    @precondition(lambda self: self.shadow)
    @rule(data=st.data())
    def fork(self, data):
        src = self.live(data)
        self.pt.fork(src, self.next_id)
        self.shadow[self.next_id] = list(self.shadow[src])
        self.kept[self.next_id] = self.kept[src]
        self.next_id += 1

    @precondition(lambda self: self.shadow)
    @rule(data=st.data())
    def trim(self, data):
        rid = self.live(data)
        keep_from = data.draw(st.integers(0, len(self.shadow[rid])))
        self.pt.trim(rid, keep_from)
        self.kept[rid] = max(self.kept[rid], keep_from)

    @precondition(lambda self: self.shadow)
    @rule(data=st.data())
    def release(self, data):
        rid = self.live(data)
        self.pt.release(rid)
        del self.shadow[rid], self.kept[rid]

    @rule(data=st.data())
    def misuse(self, data):
        """Any of the misuses, on any state: a named error, and nothing changes."""
        rid = data.draw(st.sampled_from(sorted(self.shadow) + [999]))
        length = len(self.shadow.get(rid, []))
        operation, error = data.draw(st.sampled_from([
            (lambda: self.pt.release(rid), PL.UnknownRequest),
            (lambda: self.pt.rows(rid, 0, length + 1), PL.PagedError),
            (lambda: self.pt.trim(rid, length + 1), PL.PagedError),
            (lambda: self.pt.fork(999, rid), PL.PagedError),
        ]))
        if rid != 999 and error is PL.UnknownRequest:
            return
        assert_fails_unchanged(self.pt, operation, error)

    @invariant()
    def matches_shadow(self):
        problems = PT.invariants(self.pt, self.shadow, "stateful")
        assert not problems, problems
        for rid, rows in self.shadow.items():  # trim, counted here: every page wholly before keep_from is gone
            page = self.pt.page
            assert self.pt.dropped[rid] == self.kept[rid] // page
            assert len(self.pt.table[rid]) == -(-len(rows) // page) - self.kept[rid] // page
            first = self.kept[rid] // page * page
            assert self.pt.rows(rid, first, len(rows)) == rows[first:]


TestPageTableStateful = PageTableMachine.TestCase
TestPageTableStateful.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])


def test_array_gather_equals_row_by_row_reads_on_both_paths():
    """Short windows are sliced page by page, long ones taken in one np.take: both equal a row-by-row
    read through the plain PageTable that was fed the same rows."""
    rng = np.random.default_rng(5)
    arrayed = PL.ArrayPageTable(64, 3, row_shape=(2, 4))
    plain = PL.PageTable(64, 3)
    for pt in (arrayed, plain):
        pt.new("A")
    rows = [rng.normal(size=(2, 4)) for _ in range(150)]
    for row in rows:
        arrayed.append("A", row)
        plain.append("A", row)
    arrayed.trim("A", 7)
    plain.trim("A", 7)
    for lo, hi in [(9, 9), (9, 10), (9, 12), (10, 17), (7, 40), (8, 150), (100, 150), (149, 150)]:
        want = np.array(plain.rows("A", lo, hi)).reshape(hi - lo, 2, 4)
        np.testing.assert_array_equal(arrayed.gather("A", lo, hi), want, err_msg=f"rows {lo}..{hi}")
