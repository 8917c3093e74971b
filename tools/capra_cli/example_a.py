"""Chapter 15, example A: the page table at work, event by event.

Part 1: one request decodes 14 tokens with pages of 4 rows and a window of 6 tokens; each step
shows the rows it reads, the block table, the pages released and the free list, so the reuse of
page 0 is visible. Part 2: a second request is forked from a first one and appends into the shared
tail page (copy-on-write). Writes out/ch15_example_a.json.

Usage: python tools/ch15_example_a.py [--free-order sorted|next-first]

The free list is a stack: the page handed out next is the last entry of ``pt.free`` (what the
book calls its front) and a freed page is pushed there. The free list is printed sorted, as in the
book; ``--free-order next-first`` prints it in the order the pages will be handed out. (In this
trace the two agree, because every page freed is the lowest free one; after other sequences of
frees they do not: python tools/ch15_selfcheck.py -q 3.)
"""

from __future__ import annotations

import paged_lm as PL
from replay import runs

from .common import Parser, report_only

PAGE, WINDOW, STEPS, POOL = 4, 6, 14, 8


FREE_ORDERS = {
    "sorted": lambda free: sorted(free),
    "next-first": lambda free: free[::-1],  # free[-1] is handed out next
}


def describe(pt: PL.PageTable, rid, show_free) -> str:
    return f"table {pt.table[rid]}  dropped pages {pt.dropped[rid]}  free {show_free(pt.free)}"


def refcounts(pt: PL.PageTable, pages) -> dict[int, int]:
    return {p: pt.ref[p] for p in sorted(set(pages))}


def window_trace(show_free) -> list[dict]:
    """Part 1: the host's loop with a row written as its token index."""
    print(f"== 1. one request, pages of {PAGE} rows, window of {WINDOW} tokens "
          f"(the step attends the new token and the {WINDOW - 1} before it)")
    print(f"   a row is written as 'token index'; the page pool has {POOL} physical pages "
          f"(numbered 0..{POOL - 1}, handed out from the top of the free list)")
    pt = PL.PageTable(POOL, PAGE)
    pt.new("A")
    log = []
    for L in range(1, STEPS + 1):
        lo = L - PL.context_size(L, WINDOW)
        gathered = pt.rows("A", lo, L - 1)
        pt.append("A", L - 1)
        pt.trim("A", max(0, L + 1 - WINDOW))
        state = describe(pt, "A", show_free)
        print(f"  step {L:2d}: reads rows {gathered} + the new one; wrote row {L - 1} -> {state}")
        log.append({"step": L, "gathered": gathered, "table": list(pt.table["A"]),
                    "dropped": pt.dropped["A"], "free": sorted(pt.free)})
    print(f"   pages in use at the end: {pt.used()} (a request with no window would hold {-(-STEPS // PAGE)})")
    return log


def fork_walk(show_free) -> dict:
    """Part 2: fork shares pages; the first write into the shared tail copies it."""
    print("\n== 2. fork a second request B from A (shares every page), then B appends: "
          "the last page is shared, so B copies it first")
    pt = PL.PageTable(POOL, PAGE)
    pt.new("A")
    for i in range(10):
        pt.append("A", i)
    print("   before the fork:  A", pt.table["A"], "refcounts", refcounts(pt, pt.table["A"]))
    pt.fork("A", "B")
    print("   after the fork:   A", pt.table["A"], " B", pt.table["B"], "refcounts", refcounts(pt, pt.table["A"]),
          " (no copy: the prefix is stored once)")
    pt.append("B", 100)
    both = pt.table["A"] + pt.table["B"]
    print("   B appends row 100 (A's last page holds rows 8, 9 and has room, but is shared): A", pt.table["A"],
          " B", pt.table["B"], "refcounts", refcounts(pt, both))
    print("   A's rows are untouched:", pt.rows("A", 0, 10), "  B's rows:", pt.rows("B", 0, 11))
    after_cow = {"A": list(pt.table["A"]), "B": list(pt.table["B"]), "ref": refcounts(pt, both)}
    pt.release("B")
    print("   release B: A's pages keep their counts:", refcounts(pt, pt.table["A"]), "free", show_free(pt.free))
    return {"after_copy_on_write": after_cow, "free_after_release": sorted(pt.free)}


def arguments(ap: Parser) -> None:
    ap.add_argument("--free-order", choices=list(FREE_ORDERS), default="sorted",
                    help="how to print the free list: sorted (as the book) or next-first (hand-out order)")


def main(args) -> int:
    show_free = FREE_ORDERS[args.free_order]
    result = {"log": window_trace(show_free), "fork": fork_walk(show_free)}
    runs.write_json(runs.OUT / "ch15_example_a.json", {**result, "provenance": runs.provenance()})  # what made it
    return report_only("make test checks the page table and the window against a shadow model")
