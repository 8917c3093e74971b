"""Mutation runs: one-line breaks of the code, each made in a temporary copy (never in your files),
and whether the checks notice.

    python tools/mut_ch15.py             the book's eighteen and yours (tools/mut_ch15.py)
    python tools/mut_ch15.py --all       ... and the compiler, machine-model and RTL mutants
    python tools/mut_ch15.py --list      print the mutants (file, old text, new text); run nothing
    python tools/mut_ch15.py -k WORD     only the mutants whose area or description contains WORD
    capra mut --all --tier test          judge every mutant by a whole test tier instead of its check

It prints one line per mutant, then "page table, window and host: <k> of <n> broken versions
caught". 'caught' is the expected result: the checks noticed the break. The exit status is 0 only
when the unbroken code passes and every mutant is caught (or shown equivalent).

With --tier (fast, test or full: make test-fast, make test, make test-full), each mutant is judged
by that tier of the test suite itself, stopping at its first failure, and the result is written to
out/mut/tier-<tier>.json with the commit it was measured on: which mutants the tier catches alone.
"""

from __future__ import annotations

import importlib.util

from replay import runs

from . import mutants as extended
from .common import BadArgument, Parser, int_range, require_decode
from .mutation import TIER_PARTS, TIERS, Mutant, accounted_for, report

BOOK_FILE = runs.ROOT / "tools" / "mut_ch15.py"


def book() -> tuple[list[Mutant], list[Mutant]]:
    """The book's eighteen and the reader's own (exercise 5), from tools/mut_ch15.py, where the
    chapter puts them."""
    spec = importlib.util.spec_from_file_location("mut_ch15", BOOK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.BOOK), list(module.ADDED)


def arguments(ap: Parser) -> None:
    ap.add_argument("--all", action="store_true", help="add the compiler, machine-model and RTL mutants")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit (runs nothing)")
    ap.add_argument("-k", dest="word", help="only mutants whose area or description contains WORD")
    ap.add_argument("-j", "--jobs", type=int_range(1, 64), default=2,
                    help="mutants checked at once, 1..64 (default 2)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print what each check reported")
    ap.add_argument("--tier", choices=list(TIERS),
                    help="judge every mutant by this test tier (fast, test, full) instead of its own check")


def main(args) -> int:
    own, added = book()
    mutants = own + added + (extended.EXTENDED if args.all else [])
    if args.word is not None:
        if not args.word.strip():
            raise BadArgument("-k", "an empty WORD would select every mutant; leave -k out for that")
        mutants = [m for m in mutants if args.word.lower() in f"{m.area}: {m.what}".lower()]
        if not mutants:
            raise BadArgument("-k", f"no mutant's area or description contains {args.word!r} (see --list)")
    if args.list:
        for m in mutants:
            print(f"{m.area}: {m.what}\n    {m.file}: {m.old!r} -> {m.new!r}  [check: {m.check}]")
        return 0
    # Every check runs in a child that inherits GA2_EXT and GA2_CONFIG: a bad one (or a memory too
    # small for the chapter's 32-step decode) is one line here, not an unbroken model that "fails
    # its own checks" with a child's traceback.
    require_decode(32, "the chapter's checks")
    commit = runs.source_commit()
    run = report(mutants, jobs=args.jobs, verbose=args.verbose, tier=args.tier,
                 full=args.all or bool(args.word) or args.tier is not None)
    if run is None:
        return 1
    if args.tier is not None:
        path = runs.OUT / "mut" / f"tier-{args.tier}.json"
        runs.write_json(path, {"tier": args.tier, "markers": TIERS[args.tier],
                               "parts": list(TIER_PARTS[args.tier]), "commit": commit,
                               "seconds": round(run.seconds),
                               "mutants": [{"area": r.mutant.area, "what": r.mutant.what, "file": r.mutant.file,
                                            "status": r.status} for r in run.results]})
        print(f"wrote {path.relative_to(runs.ROOT)}")
    return 0 if all(accounted_for(r) for r in run.results) else 1
