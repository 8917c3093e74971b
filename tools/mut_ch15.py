"""Mutation run of Chapter 15 (and, with --all, of the compiler, the machine model and the RTL).

Each mutant breaks one line of a temporary copy of the code; the checks must notice it. The
logic and the list of mutants live in model/mutation.py; this script parses arguments and prints.

    python tools/mut_ch15.py             the book's eighteen page-table, window and host breaks
    python tools/mut_ch15.py --all       ... and the compiler, machine-model and RTL mutants
    python tools/mut_ch15.py --list      print the mutants (file, old text, new text), run nothing
    python tools/mut_ch15.py -k WORD     only the mutants whose area or description contains WORD
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))

import mutation as M  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="add the compiler, machine-model and RTL mutants")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("-k", dest="word", help="only mutants whose area or description contains WORD")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="mutants checked at once (default 2)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print what each check reported")
    args = ap.parse_args(argv)

    mutants = M.BOOK + (M.EXTENDED if args.all else [])
    if args.word:
        mutants = [m for m in mutants if args.word.lower() in f"{m.area}: {m.what}".lower()]
    if args.list:
        for m in mutants:
            print(f"{m.area}: {m.what}\n    {m.file}: {m.old!r} -> {m.new!r}  [check: {m.check}]")
        return 0
    return M.report(mutants, jobs=args.jobs, verbose=args.verbose, full=args.all or bool(args.word))


if __name__ == "__main__":
    sys.exit(main())
