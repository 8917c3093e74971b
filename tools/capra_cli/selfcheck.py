"""Chapter 15's eight self-check questions, answered by this project's own code.

Each answer is computed with the page table, the window rule and the host (model/paged_lm.py)
or with example B, and then checked against the chapter's arithmetic worked out independently
(a closed form such as ceil(9 / 4)). Prints each question in short, the answer, and one line per
check; exits 1 if any answer disagrees with its check.

Usage: python tools/ch15_selfcheck.py [-q N [N ...]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import paged_lm as PL
import tiny_lm as T

from . import example_b
from .common import Parser, distinct, finish, int_range, require_decode


@dataclass
class Answer:
    question: str
    lines: list[str] = field(default_factory=list)
    checks: list[tuple[str, object, object]] = field(default_factory=list)  # (closed form, code, arithmetic)

    def say(self, line: str) -> None:
        self.lines.append(line)

    def check(self, closed_form: str, from_code, from_arithmetic) -> None:
        self.checks.append((closed_form, from_code, from_arithmetic))


def filled(n_pages: int, page: int, rows: dict) -> PL.PageTable:
    """A page table holding requests rid -> number of rows (row i of a request is i)."""
    pt = PL.PageTable(n_pages, page)
    for rid, n in rows.items():
        pt.new(rid)
        for i in range(n):
            pt.append(rid, i)
    return pt


def host(W: int | None) -> PL.PagedChip:
    """A host with window W, for its window rule (trim_point); it compiles nothing until generate."""
    return PL.PagedChip(T.make_model("structured"), 1, W)


def first_needed(L: int, W: int) -> int:
    """The first row step L + 1 reads: the host's context rule, lo = L' - min(L', W) at L' = L + 1."""
    return (L + 1) - PL.context_size(L + 1, W)


# ---- the questions -------------------------------------------------------------------------------


def q1() -> Answer:
    a = Answer("A request of 9 rows, pages of 4: how many pages in its block table, how many rows unused?")
    pt = filled(8, 4, {"r": 9})
    pages = len(pt.table["r"])
    unused = pages * pt.page - pt.length["r"]
    a.say(f"{pages} pages (block table {pt.table['r']}); the last page holds row 8 only, so {unused} rows are unused")
    a.check("pages = ceil(9 / 4)", pages, math.ceil(9 / 4))
    a.check("unused = ceil(9 / 4) * 4 - 9", unused, math.ceil(9 / 4) * 4 - 9)
    return a


def q2() -> Answer:
    a = Answer("After step L with window W, which row does the next step need first? W = 6, L = 8, pages of 4: "
               "which pages can go?")
    W, L, page = 6, 8, 4
    keep_from = host(W).trim_point(L)
    pt = filled(8, page, {"r": L})
    pt.trim("r", keep_from)
    a.say(f"row L + 1 - W = {keep_from}: step {L + 1} attends the new token and the {W - 1} rows before it, "
          f"rows {keep_from}..{L - 1}")
    a.say(f"no page can go yet: page 0 holds rows 0-3 and row 3 is still needed (trim leaves the table "
          f"{pt.table['r']}, {pt.dropped['r']} pages dropped); it goes after step {L + 1}")
    a.check("first row needed = L + 1 - W", keep_from, L + 1 - W)
    a.check("the host's context rule gives the same row", first_needed(L, W), L + 1 - W)
    a.check("pages released = floor((L + 1 - W) / 4)", pt.dropped["r"], (L + 1 - W) // page)
    return a


def decode_footprint(steps: int, W: int, page: int, n_pages: int, reuse: bool) -> tuple[int, int | None]:
    """One request decoding `steps` tokens under the window rule. With reuse=False every page freed
    is kept aside (taken off the free list for good). Returns (most pages in use, the step that
    found no free page or None)."""
    trim_point = host(W).trim_point
    pt = PL.PageTable(n_pages, page)
    pt.new(0)
    ever_used: set[int] = set()
    peak = 0
    for L in range(1, steps + 1):
        try:
            pt.append(0, L - 1)
        except PL.OutOfPages:
            return peak, L
        ever_used.update(pt.table[0])
        pt.trim(0, trim_point(L))
        if not reuse:
            pt.free[:] = [p for p in pt.free if p not in ever_used]
        peak = max(peak, pt.used())
    return peak, None


def q3() -> Answer:
    a = Answer("Why does a freed page go back on the free list (its front) instead of being kept aside? "
               "What would a long run do to memory if freed pages were not reused?")
    pt = filled(4, 2, {"A": 4, "B": 2})  # A holds pages 0 and 1, B page 2
    pt.release("A")
    order = pt.free[::-1]
    pt.new("C")
    pt.append("C", 0)
    a.say(f"the free list is a stack: after A (pages 0, 1) is released it is free = {order[::-1]}; "
          f"the page handed out next is free[-1] = {order[0]}, the one freed last (the book's 'front')")
    a.say(f"  in hand-out order: {order}; sorted, {sorted(order)}, it would suggest page {min(order)}")
    a.check("the next append takes the page freed last (page 1)", pt.table["C"][0], 1)

    steps, W, page, n_pages = 1000, 8, 4, 64
    peak, ran_out = decode_footprint(steps, W, page, n_pages, reuse=True)
    aside_peak, aside_out = decode_footprint(steps, W, page, n_pages, reuse=False)
    a.say(f"reused: a pool of {n_pages} pages serves {steps} tokens with window {W} and pages of {page}, "
          f"never more than {peak} pages in use")
    a.say(f"kept aside: every page is used once; the pool runs out at step {aside_out}, after "
          f"{aside_peak} pages; memory grows by a page every {page} tokens, without end")
    a.check("reused: at most ceil((W - 1) / P) + 1 pages", peak, math.ceil((W - 1) / page) + 1)
    a.check("reused: never out of pages", ran_out, None)
    a.check("kept aside: out of pages at step n_pages * P + 1", aside_out, n_pages * page + 1)
    return a


def q4() -> Answer:
    a = Answer("Two requests share a page (count 2) and one finishes: what happens to the page? "
               "And when both have finished?")
    pt = filled(4, 4, {"A": 4})
    pt.fork("A", "B")
    shared = pt.table["A"][0]
    before = pt.ref[shared]
    pt.release("B")
    after_one = pt.ref[shared]
    held_after_one = shared not in pt.free
    pt.release("A")
    fate = "stays with A, off the free list" if held_after_one else "goes back on the free list"
    a.say(f"page {shared} has count {before}; B finishes: count {after_one}, the page {fate}")
    a.say(f"A finishes too: count {pt.ref[shared]}, the page is back on the free list, next to be handed out "
          f"(free[-1] = {pt.free[-1]})")
    a.check("count after one release = 2 - 1", after_one, 2 - 1)
    a.check("still held after one release", held_after_one, True)
    a.check("count after both = 0, and the page is free", (pt.ref[shared], shared in pt.free), (0, True))
    return a


def q5() -> Answer:
    a = Answer("What is copy-on-write for? What goes wrong if two requests write into a shared page without it?")
    pt = filled(8, 4, {"A": 10})
    pt.fork("A", "B")
    # Where the next append of each request would write, by the append rule: last page, offset length % page.
    slot = {rid: (pt.table[rid][-1], pt.length[rid] % pt.page) for rid in ("A", "B")}
    pt.append("B", "B's row 10")
    pt.append("A", "A's row 10")
    a.say(f"after the fork both requests would write row 10 into the same slot: A {slot['A']}, B {slot['B']} "
          "(physical page, offset)")
    a.say("without copy-on-write the second write would overwrite the first: one request would then read "
          "the other's row 10 as its own")
    a.say(f"with it, B's first append copies the shared page into page {pt.table['B'][-1]} (a whole page of "
          f"{pt.page} rows) and writes there: A {pt.table['A']}, B {pt.table['B']}, "
          f"A's row 10 = {pt.rows('A', 10, 11)[0]!r}, B's = {pt.rows('B', 10, 11)[0]!r}")
    a.check("both appends aim at the same slot before the copy", slot["A"], slot["B"])
    a.check("each keeps its own row 10", (pt.rows("A", 10, 11), pt.rows("B", 10, 11)),
            (["A's row 10"], ["B's row 10"]))
    a.check("the shared rows 0..9 are unchanged and still shared", pt.rows("A", 0, 10) == pt.rows("B", 0, 10),
            True)
    return a


def q6() -> Answer:
    a = Answer("Why is the number of compiled programs W and not the number of steps? What does it save?")
    steps = 32
    m = T.make_model("structured")
    compiled = {}
    for W in (None, 8, 4):
        chip = PL.PagedChip(m, steps, W)
        _, records = chip.generate(0, steps)
        contexts = sorted({r["ctx"] for r in records})
        words = sum(len(P.code) for P in chip.progs.values())
        compiled[W] = len(chip.progs)
        a.say(f"window {W!s:>4}: contexts used {contexts[0]}..{contexts[-1]}, {len(chip.progs)} programs "
              f"compiled ({words} words of code)")
        a.check(f"window {W}: programs = min(steps, W)", len(chip.progs), min(steps, W or steps))
    a.say("a step attends min(L, W) tokens, so from step W on every step has context W and reuses one program: "
          f"{compiled[None] - compiled[8]} and {compiled[None] - compiled[4]} fewer compilations than without a "
          "window, fewer programs to keep, and a step that costs the same from then on")
    return a


def pages_when_each_step_starts(W: int, page: int, steps: int, shift) -> list[int]:
    """Pages in use when each step starts, trimming at shift(the host's trim point, page)."""
    trim_point = host(W).trim_point
    pt = PL.PageTable(64, page)
    pt.new(0)
    counts = []
    for L in range(1, steps + 1):
        counts.append(pt.used())
        pt.append(0, L - 1)
        pt.trim(0, max(0, shift(trim_point(L), page)))
    return counts


def q7() -> Answer:
    a = Answer("Why did the check 'pages in use stay within a bound' miss two mutants that the exact count caught?")
    steps = 24
    mutants = {  # each mutant's effect, as a change of the point trim is called with
        "the trim point is one token late": lambda k, page: k - 1,
        "trim keeps one page too many": lambda k, page: k - page,
    }
    for W, page in ((8, 4), (6, 2), (4, 4), (3, 1)):  # the (window, page) pairs of paged_tests
        bound = math.ceil((W - 1) / page) + 1
        exact = [math.ceil((L - 1) / page) - max(0, L - W) // page for L in range(1, steps + 1)]
        correct = pages_when_each_step_starts(W, page, steps, lambda k, page: k)
        a.check(f"W={W} P={page}: the host keeps ceil((L-1)/P) - floor(max(0, L-W)/P) pages at every step",
                correct, exact)
        for name, shift in mutants.items():
            counts = pages_when_each_step_starts(W, page, steps, shift)
            within = max(counts) <= bound + 1 and counts[-1] <= bound
            wrong = sum(c != e for c, e in zip(counts, exact, strict=True))
            if (W, page) == (8, 4):
                a.say(f"W={W}, pages of {page}, {name}: at most {max(counts)} pages, {counts[-1]} at the end "
                      f"(the bound check allows {bound + 1} at the peak, {bound} at the end); "
                      f"wrong at {wrong} of {steps} steps")
            a.check(f"W={W} P={page}, {name}: within the bound, yet not the exact count", (within, wrong > 0),
                    (True, True))
    a.say("both keep one page too many at some steps: the rows a step reads are still right, so only memory "
          "is wasted, and one page more fits inside the bound ceil((W-1)/P) + 1 (one more at the peak); only "
          "the exact count the rule predicts at every step sees it (the same holds for the three other "
          "(W, P) pairs of the checks)")
    return a


def q8() -> Answer:
    a = Answer("Derive the 87.5% waste of the contiguous scheme (4 requests of 2,048 reserved rows, 1,022 used).")
    held, used, reserved = example_b.admit_contiguous(example_b.sample_lengths())
    waste = Fraction(reserved - used, reserved)
    a.say(f"example B: {held} requests held, each reserving {example_b.LONGEST} rows = {reserved} rows reserved, "
          f"{used} used")
    a.say(f"waste = ({reserved} - {used}) / {reserved} = {float(waste):.4f} = {100 * float(waste):.1f}%")
    a.check("requests held = floor(8192 / 2048)", held, 8192 // 2048)
    a.check("waste = 1 - 1022 / (4 * 2048)", waste, 1 - Fraction(1022, 4 * 2048))
    a.check("as the chapter prints it", f"{100 * float(waste):.1f}%", "87.5%")
    return a


QUESTIONS = (q1, q2, q3, q4, q5, q6, q7, q8)


def show(number: int, answer: Answer) -> bool:
    """Print one answer and its checks; True when every check agrees."""
    print(f"{number}. {answer.question}")
    for line in answer.lines:
        print(f"   {line}")
    ok = bool(answer.checks)  # an answer that checks nothing is not an answer
    for closed_form, got, want in answer.checks:
        agrees = got == want
        ok &= agrees
        verdict = "ok" if agrees else f"DISAGREES: the code gives {got!r}, the arithmetic {want!r}"
        print(f"   check: {closed_form}: {verdict}")
    print()
    return ok


def arguments(ap: Parser) -> None:
    ap.add_argument("-q", "--question", type=int_range(1, len(QUESTIONS)), nargs="+", metavar="N",
                    help=f"answer only these questions (1..{len(QUESTIONS)}); default all")


def main(args) -> int:
    distinct("-q/--question", args.question)
    numbers = args.question or range(1, len(QUESTIONS) + 1)
    if 6 in numbers:  # question 6 compiles the chapter's decode: a chip too small for it is refused first
        require_decode(32, "question 6")
    results = [show(n, QUESTIONS[n - 1]()) for n in numbers]
    failed = [n for n, ok in zip(numbers, results, strict=True) if not ok]
    if failed:
        print(f"questions {failed}: an answer disagrees with the chapter's arithmetic")
    else:
        print(f"{len(results)} answers, every one agrees with the chapter's arithmetic")
    return finish([f"question {n} disagrees with the chapter's arithmetic" for n in failed],
                  checks=len(results), passed=f"{len(results)} answers checked")
