"""The checks of exercise 3's worked answer (answers/sinks.py): attention sinks on the paged host.

Every expected value comes from outside the code under test: the rows a step reads from the
exercise's words (``attended``, a predicate on row numbers, not the answer's ranges), keys and
values recomputed from the token ids, the pages a step needs counted from those rows.

 (1) the chip: the rows each step is given are the chip's own earlier (k, v) rows at exactly the
     attended positions; the paged host and a plain-list host give identical integers; the chip
     runs context min(L, W) and its tokens equal the float reference's (teacher forcing on a
     random model, greedy on the structured one, whose rule f(t) must still hold); its logits are
     as near the float reference as int8 allows (``chapter_error``);
 (2) the float reference: a float step over the rows gathered from a page table (the answer's
     gather and release) equals a step over keys and values recomputed from the token ids, and so
     does ``float_sinks``; and the sinks change a random model's logits (they are attended);
 (3) the page table: after every step its invariants (paged_tests.pool_invariants), every row
     reads back or raises RowsReleased exactly as the rows still needed say, and the pages held are
     the pages those rows touch, and a partly written last page (middle release; bounded), or every
     page written (front-only trim);
     random operations with forks against a shadow, and a failed release changes nothing;
 (4) the calibration: every input set of every program holds the keys and values of the attended
     tokens, recomputed from the token ids.

``run_all(W, S, steps, page)`` returns a ``Result``: the problems (empty: all pass), the number of
checks, and one table row per step for the command to print (tools/ch15_sinks.py).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
import paged_lm as PL
import paged_tests as PT
import tiny_lm as T

from answers import sinks as A

MODEL_SEED = 2  # the random model of paged_tests' check (5)
START = 3
TOLERANCE = 1e-9  # float steps whose rows come by two routes: equal but for the order of sums


def attended(L: int, W: int, S: int) -> list[int]:
    """The previous rows step L reads, by the exercise's words: every row while L <= W; after
    that a row is read when it is a sink (row < S) or one of the W - 1 - S most recent."""
    return [i for i in range(L - 1) if L <= W or i < S or i >= (L - 1) - (W - 1 - S)]


def recomputed(m: dict, toks: list[int], rows: list[int]) -> tuple[list, list]:
    """Keys and values of the tokens at those positions, from the token ids alone."""
    return [T.mv(m["E"][toks[i]], m["Wk"]) for i in rows], [T.mv(m["E"][toks[i]], m["Wv"]) for i in rows]


def largest_difference(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def relative_error(got, ref) -> float:
    return math.sqrt(sum((a - b) ** 2 for a, b in zip(got, ref, strict=True)) / sum(b * b for b in ref))


def forced_tokens(steps: int, seed: int = 0) -> list[int]:
    """Teacher-forcing inputs of every kind: a seeded random token sequence from START."""
    R = random.Random(seed)
    return [START] + [R.randrange(T.V) for _ in range(steps)]


@dataclass
class Result:
    problems: list[str] = field(default_factory=list)
    checks: int = 0
    table: list[dict] = field(default_factory=list)  # one row per step (the command prints it)
    peaks: dict[str, int] = field(default_factory=dict)
    error_sinks: float = 0.0  # the chip's largest relative error against the float with sinks ...
    error_window: float = 0.0  # ... and against the float without them (steps past the window)
    error_chapter: float = 0.0  # the chapter's windowed chip against its own float reference (int8's error)

    counts: dict[str, int] = field(default_factory=dict)  # checks per group, "(1)" .. "(4)"

    def row(self, L: int) -> dict:
        """The table's row of step L (rows up to it are made as needed)."""
        while len(self.table) < L:
            self.table.append({"L": len(self.table) + 1})
        return self.table[L - 1]

    def check(self, ok: bool, problem: str) -> None:
        """One check; `problem` (what failed, starting with its group) is kept when not ok."""
        self.checks += 1
        group = problem[:3]
        self.counts[group] = self.counts.get(group, 0) + 1
        if not ok:
            self.problems.append(problem)


# ---- (1) the chip --------------------------------------------------------------------------------


def check_chip(res: Result, W: int, S: int, steps: int, page: int) -> None:
    """(1), with (3) after every step: the random model, teacher-forced with the float reference's
    greedy tokens (as check (5) does for the window), then the structured model, greedy."""
    m = T.make_model("random", MODEL_SEED)
    forced = A.float_generate_sinks(m, START, steps, W, S)
    chip = A.SinkChip(m, steps, W, S, page, n_pages=steps + 2)
    _, records = chip.generate(START, steps, force=forced, after_step=table_watch(res, W, S, page, "middle"))
    check_given_rows(res, chip, records, forced, W, S, steps)
    check_tokens(res, m, forced, records, W, S, steps, page)
    structured = T.make_model("structured")
    toks, _ = A.SinkChip(structured, steps, W, S, page, n_pages=steps + 2).generate(0, steps)
    rule = PT.rule_tokens(0, steps)
    res.check(toks == rule, f"(1) the structured model with sinks breaks its rule f(t): {toks}")
    res.check(A.float_generate_sinks(structured, 0, steps, W, S) == rule,
              "(1) the structured model's float decode with sinks breaks its rule f(t)")


def check_given_rows(res: Result, chip: A.SinkChip, records: list, forced: list[int], W: int, S: int,
                     steps: int) -> None:
    """The contexts and programs are the window's; each step is given the chip's own earlier rows
    at exactly the attended positions; the plain-list host gives the same integers."""
    res.check([r["ctx"] for r in records] == [PL.context_size(L, W) for L in range(1, steps + 1)],
              f"(1) the chip's contexts are {[r['ctx'] for r in records]}, not min(L, {W})")
    res.check(sorted(chip.progs) == list(range(1, min(W, steps) + 1)),
              f"(1) programs compiled for contexts {sorted(chip.progs)}, the window's are 1..{min(W, steps)}")
    written = [np.array([r.k[0], r.v[0]]) for r in records]  # row L - 1 is what step L wrote
    wrong = [r["L"] for r in records
             if not np.array_equal(r.read, np.array([written[i] for i in attended(r["L"], W, S)]).reshape(-1, 2, T.D))]
    res.check(not wrong, f"(1) steps {wrong[:5]} were not given the chip's own rows at the attended positions")
    chip.paged = False
    _, plain = chip.generate(forced[0], steps, force=forced)
    differ = [a["L"] for a, b in zip(records, plain, strict=True) if a["ints"] != b["ints"]]
    res.check(not differ, f"(1) steps {differ[:5]}: the paged host and the plain-list host give different integers")


def check_tokens(res: Result, m: dict, forced: list[int], records: list, W: int, S: int, steps: int,
                 page: int) -> None:
    """Every token equals the float reference's, and the logits are as near it as int8 allows."""
    kc: list = []
    vc: list = []
    disagree = []
    for r in records:
        L = r["L"]
        logits, k, v, _ = A.float_sinks(m, forced[L - 1], kc, vc, W, S)
        window = PL.float_windowed(m, forced[L - 1], kc, vc, W)[0]
        kc.append(k)
        vc.append(v)
        if r["tok"] != logits.index(max(logits)):
            disagree.append(L)
        res.error_sinks = max(res.error_sinks, relative_error(r["logits"], logits))
        if L > W:
            res.error_window = max(res.error_window, relative_error(r["logits"], window))
        res.row(L).update(chip=r["tok"], float=logits.index(max(logits)))
    res.check(not disagree, f"(1) steps {disagree[:5]}: the chip's token differs from the float reference's")
    res.error_chapter = chapter_error(m, W, steps, page)
    bound = max(0.15, 1.5 * res.error_chapter)
    res.check(res.error_sinks <= bound, f"(1) the chip's logits differ from the float with sinks by "
                                        f"{res.error_sinks:.2f} (relative), more than {bound:.2f}")


def chapter_error(m: dict, W: int, steps: int, page: int) -> float:
    """The largest relative error of the chapter's windowed chip (paged_lm.PagedChip, teacher-forced
    like check (5)) against float_windowed: what int8 costs at this window. It grows with the
    context (about 0.03 at W = 8, 0.18 at W = 64), so the chip with sinks is allowed the larger of
    paged_tests' 0.15 and one and a half times this."""
    forced = PL.float_generate(m, START, steps, W)
    _, records = PL.PagedChip(m, steps, W, page, steps + 2).generate(START, steps, force=forced)
    kc: list = []
    vc: list = []
    worst = 0.0
    for r in records:
        logits, k, v, _ = PL.float_windowed(m, forced[r["L"] - 1], kc, vc, W)
        kc.append(k)
        vc.append(v)
        worst = max(worst, relative_error(r["logits"], logits))
    return worst


# ---- (2) the float reference ---------------------------------------------------------------------


def check_float(res: Result, W: int, S: int, steps: int, page: int) -> None:
    """(2) on a random model, with seeded random tokens as the inputs."""
    m = T.make_model("random", MODEL_SEED)
    toks = forced_tokens(steps)
    cache = A.SinkPageTable(steps + 2, page, row_shape=(2, T.D))
    cache.new(0)
    kc: list = []
    vc: list = []
    worst_gather = worst_reference = effect = 0.0
    for L in range(1, steps + 1):
        keys, values = recomputed(m, toks, attended(L, W, S))
        want = T.float_step(m, toks[L - 1], keys, values)[0]
        rows = A.gather_rows(cache, 0, L, W, S) if L > 1 else np.zeros((0, 2, T.D))
        got, k, v, _ = T.float_step(m, toks[L - 1], rows[:, 0], rows[:, 1])
        worst_gather = max(worst_gather, largest_difference(got, want))
        reference = A.float_sinks(m, toks[L - 1], kc, vc, W, S)[0]
        worst_reference = max(worst_reference, largest_difference(reference, want))
        effect = max(effect, largest_difference(reference, PL.float_windowed(m, toks[L - 1], kc, vc, W)[0]))
        kc.append(k)
        vc.append(v)
        cache.append(0, np.array([k, v]))
        hi = min(A.first_recent(L, W, S), L)
        cache.release_rows(0, min(S, hi), hi)
    res.check(worst_gather <= TOLERANCE, f"(2) a float step over the gathered rows differs from one over the attended "
                                         f"keys and values recomputed from the token ids by {worst_gather:.2g}")
    res.check(worst_reference <= TOLERANCE, f"(2) float_sinks differs from the recomputation by {worst_reference:.2g}")
    if steps > W:
        res.check(effect >= 1e-3, f"(2) the sinks changed the random model's logits by {effect:.2g}: not attended")


# ---- (3) the page table --------------------------------------------------------------------------


def table_watch(res: Result, W: int, S: int, page: int, release: str):
    """An ``after_step`` for SinkChip.generate: (3) after step L, and the pages for the table."""

    def after(L: int, cache: A.SinkPageTable, plain: list) -> None:
        tag = f"(3) {release} release, after step {L}"
        needed = attended(L + 1, W, S)  # what the next step reads; later steps read no older row
        held = {j // page for j in needed}
        if L % page:  # a partly written last page stays (the next rows go there) even with no row needed
            held.add((L - 1) // page)
        problems = PT.pool_invariants(cache, tag)
        for i in range(L):
            kept = release == "front" or i // page in held
            try:
                ok = np.array_equal(cache.gather(0, i, i + 1)[0], plain[i]) and kept
            except PL.RowsReleased:
                ok = not kept
            if not ok:
                problems.append(f"{tag}: row {i} {'does not read back' if kept else 'was not released'}")
                break
        want = -(-L // page) if release == "front" else len(held)
        if cache.used() != want:
            problems.append(f"{tag}: {cache.used()} pages held, the rows still needed (and a partly written "
                            f"last page) take {want}")
        bound = -(-S // page) + -(-(W - 1 - S) // page) + 1
        if release == "middle" and cache.used() > bound:
            problems.append(f"{tag}: {cache.used()} pages held, more than the bound {bound}")
        res.check(not problems, "; ".join(problems[:2]) or tag)
        res.row(L)

    return after


def pages_per_step(res: Result, W: int, S: int, steps: int, page: int) -> None:
    """Pages held when each step starts: no window, the window alone (the chapter's host), and the
    window with sinks under front-only trim (with its checks (3)) and under the middle release."""
    m = T.make_model("structured")
    columns = {"none": PL.PagedChip(m, steps, None, page, steps + 2),
               "window": PL.PagedChip(m, steps, W, page, steps + 2),
               "front": A.SinkChip(m, steps, W, S, page, steps + 2, release="front"),
               "middle": A.SinkChip(m, steps, W, S, page, steps + 2)}
    for name, chip in columns.items():
        watch = table_watch(res, W, S, page, "front") if name == "front" else None
        _, records = chip.generate(0, steps, after_step=watch) if watch else chip.generate(0, steps)
        for r in records:
            res.row(r["L"])[name] = r["pages"]
        res.peaks[name] = chip.peak


def check_table_random(res: Result, seeds: int = 4, n_ops: int = 300, n_pages: int = 24, page: int = 3) -> None:
    """(3) SinkPageTable under random operations (forks included) against a shadow: the rows of
    every request and which of them are released; invariants after every operation; a release
    outside the rows raises and changes nothing; nothing leaks."""
    for seed in range(seeds):
        R = random.Random(seed)
        pt = A.SinkPageTable(n_pages, page)
        shadow: dict = {}  # rid -> (rows, set of released logical pages)
        problems: list[str] = []
        for op_number in range(n_ops):
            op, problems = random_table_operation(R, pt, shadow, op_number)
            tag = f"(3) random table, seed {seed} op {op_number} ({op})"
            problems += PT.pool_invariants(pt, tag) + rows_against_shadow(pt, shadow, tag)
            if problems:
                break
        for rid in list(shadow):
            pt.release(rid)
        if not problems and (pt.used() or any(pt.ref)):
            problems.append(f"(3) random table, seed {seed}: pages leaked after every request was released")
        res.check(not problems, "; ".join(problems[:2]) or f"(3) random table, seed {seed}")


def random_table_operation(R: random.Random, pt: A.SinkPageTable, shadow: dict, op_number: int) -> tuple[str, list]:
    """One random operation on the table and the shadow; returns (its name, problems). A release
    of rows lo .. hi-1 marks released, in the shadow, the pages lying entirely in that range."""
    ids = list(shadow)
    op = R.choice(["append"] * 5 + ["new", "fork", "release rows", "trim", "release", "bad release"])
    problems: list[str] = []
    if op == "new" and len(ids) < 4:
        rid = max(ids, default=-1) + 1
        pt.new(rid)
        shadow[rid] = ([], set())
    elif op == "fork" and ids and len(ids) < 4:
        src, rid = R.choice(ids), max(ids) + 1
        pt.fork(src, rid)
        shadow[rid] = (list(shadow[src][0]), set(shadow[src][1]))
    elif op == "append" and ids:
        rid = R.choice(ids)
        try:
            pt.append(rid, op_number)
            shadow[rid][0].append(op_number)
        except PL.OutOfPages:
            pass
    elif op in ("release rows", "trim") and ids:
        rid = R.choice(ids)
        n = len(shadow[rid][0])
        hi = R.randrange(n + 1)
        lo = 0 if op == "trim" else R.randrange(hi + 1)
        if op == "trim":
            pt.trim(rid, hi)
        else:
            pt.release_rows(rid, lo, hi)
        shadow[rid][1].update(q for q in range(n // pt.page + 1) if q * pt.page >= lo and (q + 1) * pt.page <= hi)
    elif op == "release" and ids:
        rid = R.choice(ids)
        pt.release(rid)
        del shadow[rid]
    elif op == "bad release" and ids:
        rid = R.choice(ids)
        n = len(shadow[rid][0])
        problems += PT.expect_unchanged(pt, lambda: pt.release_rows(rid, 0, n + 1), PL.RowOutOfRange,
                                        "(3) a release past the last row")
    return op, problems


def rows_against_shadow(pt: A.SinkPageTable, shadow: dict, tag: str) -> list[str]:
    """Every row of every request reads back as the shadow's, or raises RowsReleased, exactly as
    the shadow's released pages say."""
    for rid, (rows, gone) in shadow.items():
        for i, row in enumerate(rows):
            try:
                ok = pt.rows(rid, i, i + 1) == [row] and i // pt.page not in gone
            except PL.RowsReleased:
                ok = i // pt.page in gone
            if not ok:
                return [f"{tag}: request {rid} row {i} differs from the shadow"]
    return []


# ---- (4) the calibration -------------------------------------------------------------------------


def check_calibration(res: Result, W: int, S: int, steps: int) -> None:
    """(4) From one start, the program of context n is calibrated on the step of context n (n < W)
    or on steps W, W + 1, ... in order: each input set's kc / vc must be the attended tokens' keys
    and values, the tokens read back from the input sets' own x rows."""
    m = T.make_model("random", MODEL_SEED)
    feeds, _ = A.calibrate_sinks(m, steps, W, S, [START])
    by_step = {}
    for n, sets in feeds.items():
        for j, feed in enumerate(sets):
            by_step[n + j if n == W else n] = feed
    toks = [int(np.argmin(np.abs(m["E"] - np.asarray(by_step[L]["x"][0])).sum(axis=1))) for L in sorted(by_step)]
    worst = 0.0
    for L in range(2, steps + 1):
        keys, values = recomputed(m, toks, attended(L, W, S))
        worst = max(worst, largest_difference(by_step[L]["kc"], keys), largest_difference(by_step[L]["vc"], values))
    res.check(sorted(by_step) == list(range(1, steps + 1)), f"(4) the calibration ran steps {sorted(by_step)}")
    res.check(worst <= TOLERANCE, f"(4) a calibration input set differs from the attended tokens' keys and values "
                                  f"by {worst:.2g}: the programs are calibrated on rows they are never given")


# ---- all of them ---------------------------------------------------------------------------------


def run_all(W: int, S: int, steps: int, page: int = 4) -> Result:
    """Every check for window W, S sinks, a decode of `steps` tokens and pages of `page` rows."""
    W, S = A.check_sinks(W, S)
    res = Result()
    groups = (("(1)", lambda: check_chip(res, W, S, steps, page)),
              ("(3)", lambda: pages_per_step(res, W, S, steps, page)),
              ("(2)", lambda: check_float(res, W, S, steps, page)),
              ("(3)", lambda: check_table_random(res)),
              ("(4)", lambda: check_calibration(res, W, S, steps)))
    for group, run in groups:
        try:
            run()
        except PL.PagedError as error:  # a gather of a released row, say: a failed check, not a crash
            res.check(False, f"{group} stopped by {type(error).__name__}: {error}")
    return res
