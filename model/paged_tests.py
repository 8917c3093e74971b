"""Chapter 15: the software checks of the page table, the window rule and the paged host.

``check_all()`` returns a list of problems; an empty list means every check passed.

 (1) The page table against a shadow model (a dict of plain Python lists) under 6 x 400 random
     operations (new, append, fork, trim, release, and reads of released rows), with the
     invariants checked after EVERY operation; a failed operation must leave the table unchanged.
 (2) Exhaustion raises OutOfPages, changes nothing, and nothing leaks.
 (3) The pages in use equal, at every step, exactly what the window rule predicts. (A bound is not
     enough: a host that keeps one page too many is wasteful, never wrong, and only an exact count
     sees it.)
 (4) The paged host and a plain-list host give identical integers on the chip, for several
     (window, page) pairs, including pages of one row and a window that is not a multiple of the page.
 (5) The window really is a window: a window wider than the context changes nothing; a small window
     changes a random model; the windowed step equals a from-scratch recomputation over exactly the
     last W tokens; the chip runs context min(L, W) and follows the windowed float reference.
 (6) The structured model follows its rule f(t) = 5t + 3 mod 16 under every window.
"""

from __future__ import annotations

import math
import pickle
import random

import numpy as np
import paged_lm as PL
import tiny_lm as T

# The (window, page) pairs of checks (3), (4) and (6).
HOST_CASES = ((None, 4), (8, 4), (6, 2), (4, 4), (3, 1))
# Further windows for the rule alone (6): the smallest ones and one wider than the decode.
RULE_ONLY_WINDOWS = (1, 2, 5, 30)
DECODE_STEPS = 24


def deep_copy(value):
    """A copy that shares nothing with `value` (a pickle round trip: the same as copy.deepcopy for
    the lists, dicts and numbers of a page table, in a fraction of its time)."""
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def snapshot(pt: PL.PageTable) -> dict:
    """Everything a page-table operation may change, deep-copied, to compare before and after."""
    pool = pt.pool.copy() if isinstance(pt.pool, np.ndarray) else deep_copy(pt.pool)
    return {
        "pool": pool,
        "ref": list(pt.ref),
        "free": list(pt.free),
        "table": deep_copy(pt.table),
        "length": dict(pt.length),
        "dropped": dict(pt.dropped),
    }


def same_state(a: dict, b: dict) -> bool:
    """Two snapshots are equal (numpy pools compared element by element)."""
    for key in a:
        x, y = a[key], b[key]
        if hasattr(x, "shape"):
            if x.shape != y.shape or not (x == y).all():
                return False
        elif x != y:
            return False
    return True


# ---- (1) the page table against a shadow model ---------------------------------------------------


def invariants(pt: PL.PageTable, shadow: dict, tag: str) -> list[str]:
    """The invariants of a page table, and its rows against the shadow's."""
    problems = pool_invariants(pt, tag)
    if set(pt.table) != set(shadow):
        problems.append(f"{tag}: live requests {sorted(pt.table, key=str)} differ from the shadow's")
        return problems
    for rid, rows in shadow.items():
        first_kept = pt.dropped[rid] * pt.page
        if pt.length[rid] != len(rows):
            problems.append(f"{tag}: request {rid} has length {pt.length[rid]}, the shadow {len(rows)}")
        elif len(pt.table[rid]) != -(-len(rows) // pt.page) - pt.dropped[rid]:
            problems.append(f"{tag}: request {rid} holds {len(pt.table[rid])} pages for rows {first_kept}..")
        elif pt.rows(rid, first_kept, len(rows)) != rows[first_kept:]:
            problems.append(f"{tag}: rows of request {rid} differ from the shadow")
    return problems


def pool_invariants(pt: PL.PageTable, tag: str) -> list[str]:
    """The pool's own invariants: reference counts equal block-table entries, the free list holds
    exactly the unreferenced pages, once each, and every table holds the pages its length needs."""
    problems = []
    owners = [0] * len(pt.ref)
    for pages in pt.table.values():
        for p in pages:
            owners[p] += 1
    if owners != pt.ref:
        problems.append(f"{tag}: reference counts differ from the number of block-table entries")
    if len(set(pt.free)) != len(pt.free):
        problems.append(f"{tag}: a page is on the free list twice")
    if any(pt.ref[p] != 0 for p in pt.free):
        problems.append(f"{tag}: a referenced page is on the free list")
    in_use = sum(1 for r in pt.ref if r > 0)
    if len(pt.free) + in_use != len(pt.ref):
        problems.append(f"{tag}: a page is neither free nor referenced (leak)")
    for rid, pages in pt.table.items():
        if len(pages) != -(-pt.length[rid] // pt.page) - pt.dropped[rid]:
            problems.append(f"{tag}: request {rid!r} holds {len(pages)} pages for {pt.length[rid]} rows "
                            f"({pt.dropped[rid]} pages released)")
    return problems


def expect_unchanged(pt: PL.PageTable, operation, error: type, tag: str) -> list[str]:
    """Run an operation that must fail with `error`, and check that it changed nothing."""
    before = snapshot(pt)
    try:
        operation()
    except error:
        pass
    else:
        return [f"{tag}: expected {error.__name__}, nothing was raised"]
    if not same_state(before, snapshot(pt)):
        return [f"{tag}: a failed operation ({error.__name__}) changed the table"]
    return []


def random_operation(R: random.Random, pt: PL.PageTable, shadow: dict, state: dict) -> tuple[str, list[str]]:
    """Apply one random operation to the page table and the shadow; returns (name, problems)."""
    op = R.choice(["append"] * 6 + ["new", "fork", "trim", "release", "read"])
    ids = list(shadow)
    problems: list[str] = []
    if op == "new" and len(ids) < 5:
        pt.new(state["next_id"])
        shadow[state["next_id"]] = []
        state["next_id"] += 1
    elif op == "append" and ids:
        rid = R.choice(ids)
        state["counter"] += 1
        row = (state["counter"], -state["counter"])
        before = snapshot(pt)
        had_free_page = bool(pt.free)
        try:
            pt.append(rid, row)
            shadow[rid].append(row)
        except PL.OutOfPages:
            if had_free_page:
                problems.append("OutOfPages raised while a page was free")
            if not same_state(before, snapshot(pt)):
                problems.append("a failed append (OutOfPages) changed the table")
    elif op == "fork" and ids and len(ids) < 5:
        src = R.choice(ids)
        pt.fork(src, state["next_id"])
        shadow[state["next_id"]] = list(shadow[src])
        state["next_id"] += 1
    elif op == "trim" and ids:
        rid = R.choice(ids)
        pt.trim(rid, R.randrange(0, len(shadow[rid]) + 1))
    elif op == "release" and ids:
        rid = R.choice(ids)
        pt.release(rid)
        del shadow[rid]
        problems += expect_unchanged(pt, lambda: pt.release(rid), PL.UnknownRequest, "release twice")
    elif op == "read" and ids:
        rid = R.choice(ids)
        first_kept = pt.dropped[rid] * pt.page
        if first_kept > 0:
            problems += expect_unchanged(pt, lambda: pt.rows(rid, first_kept - 1, first_kept),
                                         PL.RowsReleased, "read a released row")
    return op, problems


def check_pagetable(seed: int, n_ops: int = 400, n_pages: int = 24, page: int = 4) -> list[str]:
    """(1) n_ops random operations on a page table and a shadow, invariants after every one."""
    R = random.Random(seed)
    pt = PL.PageTable(n_pages, page)
    shadow: dict = {}
    state = {"next_id": 0, "counter": 0}
    for step in range(n_ops):
        op, problems = random_operation(R, pt, shadow, state)
        problems = [f"(1) seed {seed} op {step} ({op}): {p}" for p in problems]
        problems += invariants(pt, shadow, f"(1) seed {seed} op {step} ({op})")
        if problems:
            return problems[:3]
    for rid in list(shadow):
        pt.release(rid)
    if len(pt.free) != n_pages or any(pt.ref):
        return [f"(1) seed {seed}: pages leaked after releasing every request"]
    return []


# ---- (2) exhaustion ------------------------------------------------------------------------------


def check_exhaustion() -> list[str]:
    """(2) A pool of 3 pages of 2 rows: every append that needs a page it cannot get raises
    OutOfPages and changes nothing, including the copy a shared tail page needs; nothing leaks."""
    problems = []
    pt = PL.PageTable(3, 2)
    pt.new("A")
    for i in range(5):  # three pages, the last one half full
        pt.append("A", i)
    pt.fork("A", "B")  # B shares all three pages; writing into the shared tail needs a copy
    problems += expect_unchanged(pt, lambda: pt.append("B", 100), PL.OutOfPages, "(2) copy-on-write, full pool")
    problems += expect_unchanged(pt, lambda: pt.append("A", 5), PL.OutOfPages, "(2) shared tail, full pool")
    pt.release("B")
    pt.append("A", 5)  # the tail is A's alone again: it has room, no page needed
    problems += expect_unchanged(pt, lambda: pt.append("A", 6), PL.OutOfPages, "(2) append to a full pool")
    if pt.length["A"] != 6 or pt.rows("A", 0, 6) != list(range(6)):
        problems.append(f"(2) after the failed appends request A holds {pt.length['A']} rows")
    pt.release("A")
    if pt.used() != 0 or sorted(pt.free) != [0, 1, 2] or any(pt.ref):
        problems.append("(2) pages leaked after an exhausted pool was released")
    return problems


# ---- (3), (4), (6): the host decodes -------------------------------------------------------------


def rule_tokens(start: int, n: int) -> list[int]:
    toks = [start]
    for _ in range(n):
        toks.append(T.f_next(toks[-1]))
    return toks


def pages_by_rule(L: int, W: int | None, page: int) -> int:
    """Pages in use when step L starts: rows 0..L-2 written, pages before row L - W released."""
    written = L - 1
    keep_from = 0 if W is None else max(0, L - W)
    return -(-written // page) - keep_from // page


def check_page_counts(W, page, records, peak) -> list[str]:
    """(3) The exact page count at every step, and the footprint bound of the window."""
    problems = []
    for r in records:
        expected = pages_by_rule(r["L"], W, page)
        if r["pages"] != expected:
            problems.append(f"(3) W={W} page={page} step {r['L']}: {r['pages']} pages in use, "
                            f"the window rule says {expected}")
    n = len(records)
    if W is None:
        if records[-1]["pages"] != -(-(n - 1) // page):
            problems.append(f"(3) W=None page={page}: without a window every page must stay")
    else:
        bound = -(-(W - 1) // page) + 1  # the window's rows, straddling at most one extra page
        if peak > bound:
            problems.append(f"(3) W={W} page={page}: peak {peak} pages, the window allows {bound}")
    return problems


def check_hosts(m) -> list[str]:
    """(3), (4), (6) on the structured model for each (window, page) pair."""
    problems = []
    expected = rule_tokens(0, DECODE_STEPS)
    for W, page in HOST_CASES:
        chip = PL.PagedChip(m, DECODE_STEPS, W, page, 64)
        paged_toks, paged_recs = chip.generate(0, DECODE_STEPS)
        peak = chip.peak
        chip.paged = False
        plain_toks, plain_recs = chip.generate(0, DECODE_STEPS)
        if [r["ints"] for r in paged_recs] != [r["ints"] for r in plain_recs] or paged_toks != plain_toks:
            problems.append(f"(4) W={W} page={page}: paged host and plain host give different integers")
        if paged_toks != expected:
            problems.append(f"(6) W={W} page={page}: the chip does not follow the rule")
        problems += check_page_counts(W, page, paged_recs, peak)
    for W in RULE_ONLY_WINDOWS:
        toks, _ = PL.PagedChip(m, DECODE_STEPS, W, 4, 64).generate(0, DECODE_STEPS)
        if toks != expected:
            problems.append(f"(6) W={W}: the chip does not follow the rule")
    return problems


# ---- (5) the window is a window ------------------------------------------------------------------


def relative_error(got, ref) -> float:
    return math.sqrt(sum((a - b) ** 2 for a, b in zip(got, ref, strict=True)) / sum(b * b for b in ref))


def check_wide_window_is_full(m, toks) -> list[str]:
    """A window wider than the context is no window: identical to full attention."""
    kc: list = []
    vc: list = []
    for L in range(1, 14):
        windowed = PL.float_windowed(m, toks[L - 1], kc, vc, 20)
        full = T.float_step(m, toks[L - 1], kc, vc)
        if max(abs(a - b) for a, b in zip(windowed[0], full[0], strict=True)) > 1e-12:
            return [f"(5) step {L}: a window larger than the context changed the result"]
        kc.append(full[1])
        vc.append(full[2])
    return []


def check_small_window_matters(m, toks) -> list[str]:
    """A window of 3 must change a random model's logits (otherwise it is not applied)."""
    kc: list = []
    vc: list = []
    diff = 0.0
    for L in range(1, 14):
        windowed = PL.float_windowed(m, toks[L - 1], kc, vc, 3)
        full = T.float_step(m, toks[L - 1], kc, vc)
        diff = max(diff, max(abs(a - b) for a, b in zip(windowed[0], full[0], strict=True)))
        kc.append(full[1])
        vc.append(full[2])
    return [] if diff >= 1e-3 else ["(5) a window of 3 made no difference to a random model: not applied"]


def check_recomputation(m, toks) -> list[str]:
    """The windowed step over the whole cache equals a step over exactly the last W tokens,
    their keys and values recomputed from the token ids (not read from the cache)."""
    for W in (1, 2, 3, 5):
        kc: list = []
        vc: list = []
        for L in range(1, 12):
            got, k, v, _ = PL.float_windowed(m, toks[L - 1], kc, vc, W)
            previous = toks[max(0, L - W) : L - 1]  # the W - 1 tokens before the new one
            keys = [T.mv(m["E"][t], m["Wk"]) for t in previous]
            values = [T.mv(m["E"][t], m["Wv"]) for t in previous]
            ref = T.float_step(m, toks[L - 1], keys, values)[0]
            if max(abs(a - b) for a, b in zip(ref, got, strict=True)) > 1e-9:
                return [f"(5) W={W} step {L}: windowed step differs from a recomputation over the last {W} tokens"]
            kc.append(k)
            vc.append(v)
    return []


def check_chip_window(m, start: int = 3, n: int = 16) -> list[str]:
    """The chip runs context min(L, W), compiles W programs, and follows the windowed float."""
    problems = []
    for W in (None, 4):
        chip = PL.PagedChip(m, n, W, 4, 64)
        forced = PL.float_generate(m, start, n, W)
        _, records = chip.generate(start, n, force=forced)
        if [r["ctx"] for r in records] != [PL.context_size(L, W) for L in range(1, n + 1)]:
            problems.append(f"(5) W={W}: the chip's contexts are {[r['ctx'] for r in records]}")
        if sorted(chip.progs) != list(range(1, (W or n) + 1)):
            problems.append(f"(5) W={W}: programs compiled for contexts {sorted(chip.progs)}")
        kc: list = []
        vc: list = []
        for L in range(1, n + 1):
            logits, k, v, _ = PL.float_windowed(m, forced[L - 1], kc, vc, W)
            kc.append(k)
            vc.append(v)
            e = relative_error(records[L - 1]["logits"], logits)
            if e > 0.15:
                problems.append(f"(5) W={W} step {L}: chip logits differ from the windowed float by {e:.2f}")
    return problems


def check_window_semantics() -> list[str]:
    """(5) on a random model, whose attention matters by construction."""
    m = T.make_model("random", 2)
    toks = PL.float_generate(m, 3, 16, None)
    return (check_wide_window_is_full(m, toks) + check_small_window_matters(m, toks)
            + check_recomputation(m, toks) + check_chip_window(m))


# ---- all of them ---------------------------------------------------------------------------------


def check_release_order(seeds: int = 20, n_pages: int = 12, page: int = 2) -> list[str]:
    """Exercise 5's worked answer (not part of check_all, so the exercise keeps its premise): a trim
    that releases several pages must put them on the free list in block-table order, oldest first,
    so the next page handed out is the newest one it released. Computed from that rule alone: the
    free list after the trim is the one before it plus the released pages no one else holds, in
    the order they left the table."""
    problems: list[str] = []
    for seed in range(seeds):
        r = random.Random(seed)
        pt = PL.PageTable(n_pages, page)
        pt.new("A")
        for row in range(r.randint(3 * page, (n_pages - 2) * page)):
            pt.append("A", row)
        if r.random() < 0.5:  # a sharer holds some of A's pages: those stay off the free list
            pt.fork("A", "B")
        keep_from = r.randint(2 * page, pt.length["A"])
        released = pt.table["A"][: keep_from // page - pt.dropped["A"]]
        want = list(pt.free) + [p for p in released if pt.ref[p] == 1]
        pt.trim("A", keep_from)
        if pt.free != want:
            problems.append(f"(exercise 5) seed {seed}: after trim('A', {keep_from}) the free list is {pt.free}, "
                            f"the release order says {want}")
    return problems


def check_all() -> list[str]:
    """Every check of the chapter; returns the problems found (empty: all pass)."""
    problems: list[str] = []
    for seed in range(6):
        problems += check_pagetable(seed)
    problems += check_exhaustion()
    problems += check_hosts(T.make_model("structured"))
    problems += check_window_semantics()
    return problems


if __name__ == "__main__":
    found = check_all()
    print("problems:", found if found else "none")
