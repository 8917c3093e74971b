#!/usr/bin/env python3
"""Chapter 15's mutation run: one-line breaks of the page table, the window and the host, each made
in a temporary copy of the code (never in your files) and judged by paged_tests.check_all().

    python tools/mut_ch15.py             the book's eighteen (BOOK in this file) and yours (ADDED)
    python tools/mut_ch15.py --all       ... and the compiler, machine-model and RTL mutants
    python tools/mut_ch15.py --list      print the mutants (file, old text, new text); run nothing
    python tools/mut_ch15.py -k WORD     only the mutants whose area, description or file contains WORD
    python tools/mut_ch15.py --all --scheduler tcp://HOST:8786    ... on an existing Dask cluster
                                         (default: a local one of --workers 2; docs/design_space.md)

It prints one line per mutant, then "page table, window and host: <k> of <n> broken versions
caught". 'caught' is the expected result: the checks noticed the break. The exit status is 0 only
when the unbroken code passes and every mutant is caught (or shown equivalent).

A mutant is an exact edit: replace OLD with NEW in FILE, where OLD must occur exactly once. The
book's mutants are judged by check_all() alone, so a break that only tests/test_paged.py would see
(the exact block ids of its tiny pools) survives here: to close such a gap, add a check to
model/paged_tests.py.

Re-anchoring after an exercise. When you edit model/paged_lm.py, a mutant whose OLD text you
changed prints NO LONGER APPLIES with the text it looked for. Find the line that now does that
job, copy it exactly (spaces included) into the mutant's OLD in this file, write the same break
of it as NEW, and check it alone: python tools/mut_ch15.py -k "<a word of its description>". If
the job is gone from your code, delete the mutant and say why in your commit.

The command is `capra mut` (tools/capra_cli/mut.py); the engine (copying, applying, running the
checks) is tools/capra_cli/mutation.py, and the compiler, machine-model and RTL mutants of --all
are in tools/capra_cli/mutants.toml. This file holds the book's list and yours.
"""

if __name__ == "__main__":
    import bootstrap

    bootstrap.need("numpy", "capra_cli")  # restart under .venv when this Python lacks the project

from capra_cli.mutation import Mutant  # noqa: E402

PAGED_LM = "model/paged_lm.py"


def _book(area: str, old: str, new: str, what: str) -> Mutant:
    return Mutant(area, PAGED_LM, old, new, what, "paged")


# The book's eighteen, on this project's model/paged_lm.py (``mutation.BOOK`` is this list).
BOOK: list[Mutant] = [
    _book("page table", "            self.free.append(p)", "            pass",
          "a page freed by its last owner is not returned to the free list"),
    _book("page table", "        if self.ref[p] == 0:", "        if self.ref[p] <= 1:",
          "a freed page is put on the free list while others still share it"),
    _book("page table", "            self.ref[p] += 1", "            pass",
          "fork does not count the new owner"),
    _book("page table", "shared_tail = not starts_page and self.ref[t[-1]] > 1", "shared_tail = False",
          "no copy before writing into a shared page"),
    _book("page table", "            self.pool[private][:] = self.pool[shared]", "            pass",
          "the copy-on-write copy is empty"),
    _book("page table", "            self._unref(shared)", "            pass",
          "the copy keeps the shared page's reference"),
    _book("page table", "off = self.length[rid] % self.page", "off = self.length[rid] % (self.page + 1)",
          "a new page is taken from a full page's neighbour (offset uses page+1)"),
    _book("page table", "drop = self.dropped[rid]", "drop = 0",
          "the block-table lookup ignores pages already dropped"),
    _book("page table", "(self.dropped[rid] + 1) * self.page <= keep_from",
          "(self.dropped[rid] + 1) * self.page <= keep_from + 1",
          "trim releases a page that still holds a needed row"),
    _book("page table", "(self.dropped[rid] + 1) * self.page <= keep_from",
          "(self.dropped[rid] + 2) * self.page <= keep_from",
          "trim keeps pages that are completely outside the window"),
    _book("page table", "for p in self.table.pop(rid):", "for p in self.table.pop(rid)[:0]:",
          "release forgets the request's pages"),
    _book("page table", "if (starts_page or shared_tail) and not self.free:", "if False:",
          "exhaustion is not reported"),
    _book("window", "return kc[len(kc) - (W - 1):]", "return kc[len(kc) - W:]",
          "the float reference keeps W rows, not W-1"),
    _book("window", "return L if W is None else min(L, W)", "return L if W is None else min(L, W + 1)",
          "the chip's context is W+1"),
    _book("host", "stop = start + hi - lo", "start, stop = start + 1, start + 1 + hi - lo",
          "the gather starts one row late"),
    _book("host", 'inputs["kc"] = rows[:, 0]', 'inputs["kc"] = rows[:, 1]',
          "the gather returns values where keys belong"),
    _book("host", "cache.trim(0, self.trim_point(L))", "cache.trim(0, 0)",
          "pages outside the window are never released"),
    _book("host", "max(0, L + 1 - self.W)", "max(0, L - self.W)",
          "the trim point is one token too late"),
]

# Exercise 5: your own mutants, in the same form; they run with the book's and count in its line.
ADDED: list[Mutant] = []


if __name__ == "__main__":
    bootstrap.run("mut")
