"""Mutation runs: one-line breaks of the code, each made in a temporary copy (never in your files),
and whether the checks notice.

    python tools/mut_ch15.py             the book's eighteen and yours (tools/mut_ch15.py)
    python tools/mut_ch15.py --all       ... and the compiler, machine-model and RTL mutants
    python tools/mut_ch15.py --list      print the mutants (file, old text, new text); run nothing
    python tools/mut_ch15.py -k WORD     only the mutants whose area, description or file contains WORD
    capra mut --all --tier test          judge every mutant by a whole test tier instead of its check
    capra mut --all --scheduler ADDRESS  the mutants on an existing Dask cluster (default: a local
                                         one of --workers 2, the machine's cores; executor.py)
    python tools/mut_ch15.py --answers   exercise 5's worked answer (docs/paged_host.md): its
                                         mutant survives check_all() and the check that closes the
                                         gap catches it

It prints one line per mutant, then "page table, window and host: <k> of <n> broken versions
caught". 'caught' is the expected result: the checks noticed the break. The exit status is 0 only
when the unbroken code passes and every mutant is caught (or shown equivalent).

With --tier (fast, test or full: make test-fast, make test, make test-full), each mutant is judged
by that tier of the test suite itself, stopping at its first failure, and the result is written to
out/mut/tier-<tier>.json with the commit it was measured on: which mutants the tier catches alone.
Every run that judges its mutants keeps its result in out/mut/score.json (make report shows it).
"""

from __future__ import annotations

import importlib.util

from replay import runs

from . import executor
from . import mutants as extended
from .common import BadArgument, Parser, require_decode
from .mutation import CAUGHT, SURVIVED, TIER_PARTS, TIERS, Mutant, accounted_for, report, run_mutant, summary_by_area

BOOK_FILE = runs.ROOT / "tools" / "mut_ch15.py"
SCORE = runs.OUT / "mut" / "score.json"  # the last run's result (make report shows it)


def write_score(run, args, prov: dict) -> None:
    """out/mut/score.json: the last run's mutants, what became of each, the caught / total of each
    area and what the run was made on (for make report's page)."""
    which = ("every mutant" if args.all else f"-k {args.word}" if args.word else "the book's and yours")
    if args.tier is not None:
        which += f", judged by the tier {args.tier}"
    runs.write_json(SCORE, {"which": which, "seconds": round(run.seconds), "provenance": prov,
                            "areas": {area: {"caught": c, "equivalent": e, "total": t}
                                      for area, (c, e, t) in summary_by_area(run.results).items()},
                            "mutants": [{"area": r.mutant.area, "what": r.mutant.what, "status": r.status}
                                        for r in run.results]})


def book() -> tuple[list[Mutant], list[Mutant]]:
    """The book's eighteen and the reader's own (exercise 5), from tools/mut_ch15.py, where the
    chapter puts them."""
    spec = importlib.util.spec_from_file_location("mut_ch15", BOOK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.BOOK), list(module.ADDED)


# Exercise 5's worked answer: trim releases the right pages, newest first. Every row read back,
# every reference count and every page count is unchanged, so check_all() cannot see it; the free
# list's order can (the next page handed out), which the PageTable documents: a gap, closed by
# paged_tests.check_release_order.
TRIM_LOOP = """        while t and (self.dropped[rid] + 1) * self.page <= keep_from:
            self._unref(t.pop(0))
            self.dropped[rid] += 1"""
TRIM_NEWEST_FIRST = """        gone = []
        while t and (self.dropped[rid] + 1) * self.page <= keep_from:
            gone.append(t.pop(0))
            self.dropped[rid] += 1
        for p in reversed(gone):
            self._unref(p)"""
ANSWER_5 = Mutant("page table", "model/paged_lm.py", TRIM_LOOP, TRIM_NEWEST_FIRST,
                  "trim releases its pages newest first (exercise 5's worked answer)", "paged")


def answers() -> int:
    """Exercise 5's worked answer, run: the mutant against check_all() alone (it must survive:
    the exercise's premise) and against check_all() plus check_release_order (it must be caught)."""
    alone = run_mutant(ANSWER_5)
    closed = run_mutant(Mutant(**{**vars(ANSWER_5), "check": "paged_release_order"}))
    print(f"exercise 5: {ANSWER_5.what}")
    print(f"  check_all() alone: {alone.status} (expected {SURVIVED}: the gap the exercise asks for)")
    print(f"  check_all() + check_release_order(): {closed.status} (expected {CAUGHT}: the gap closed)")
    ok = alone.status == SURVIVED and closed.status == CAUGHT
    print(f"VERDICT: {'PASS' if ok else 'FAIL'}: the worked answer {'holds' if ok else 'does not hold'}")
    return 0 if ok else 1


def arguments(ap: Parser) -> None:
    ap.add_argument("--all", action="store_true", help="add the compiler, machine-model and RTL mutants")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit (runs nothing)")
    ap.add_argument("-k", dest="word", help="only mutants whose area, description or file contains WORD")
    executor.arguments(ap, "mutants", each="; a mutant's check takes a core")
    ap.add_argument("-v", "--verbose", action="store_true", help="print what each check reported")
    ap.add_argument("--answers", action="store_true",
                    help="run exercise 5's worked answer (its mutant, with and without the check that closes it)")
    ap.add_argument("--tier", choices=list(TIERS),
                    help="judge every mutant by this test tier (fast, test, full) instead of its own check")


def main(args) -> int:
    if args.list:  # lists and runs nothing: an option that sets how mutants run would be ignored
        unused = [flag for flag, given in (("--tier", args.tier is not None),
                                           ("-j/--workers", args.workers is not None),
                                           ("--scheduler", args.scheduler is not None), ("-v", args.verbose))
                  if given]
        if unused:
            raise BadArgument("--list", f"runs nothing; leave out {', '.join(unused)}")
    executor.check(args)
    if args.answers:
        others = [flag for flag, given in (("--all", args.all), ("--list", args.list), ("-k", args.word is not None),
                                           ("--tier", args.tier is not None)) if given]
        if others:
            raise BadArgument("--answers", f"runs the worked answer alone; leave out {', '.join(others)}")
        require_decode(32, "the chapter's checks")
        return answers()
    own, added = book()
    mutants = own + added + (extended.EXTENDED if args.all else [])
    if args.word is not None:
        if not args.word.strip():
            raise BadArgument("-k", "an empty WORD would select every mutant; leave -k out for that")
        mutants = [m for m in mutants if args.word.lower() in f"{m.area}: {m.what} {m.file}".lower()]
        if not mutants:
            raise BadArgument("-k", f"no mutant's area, description or file contains {args.word!r} (see --list)")
    if args.list:
        for m in mutants:
            print(f"{m.area}: {m.what}\n    {m.file}: {m.old!r} -> {m.new!r}  [check: {m.check}]")
        return 0
    # Every check runs in a child that inherits GA2_EXT and GA2_CONFIG: a bad one (or a memory too
    # small for the chapter's 32-step decode) is one line here, not an unbroken model that "fails
    # its own checks" with a child's traceback.
    require_decode(32, "the chapter's checks")
    commit = runs.source_commit()
    prov = runs.provenance()
    run = report(mutants, jobs=args.workers, scheduler=args.scheduler, verbose=args.verbose, tier=args.tier,
                 full=args.all or bool(args.word) or args.tier is not None)
    if run is None:
        return 1
    write_score(run, args, prov)
    if args.tier is not None:
        path = runs.OUT / "mut" / f"tier-{args.tier}.json"
        runs.write_json(path, {"tier": args.tier, "markers": TIERS[args.tier],
                               "parts": list(TIER_PARTS[args.tier]), "commit": commit,
                               "seconds": round(run.seconds),
                               "mutants": [{"area": r.mutant.area, "what": r.mutant.what, "file": r.mutant.file,
                                            "status": r.status} for r in run.results]})
        print(f"wrote {path.relative_to(runs.ROOT)}")
    return 0 if all(accounted_for(r) for r in run.results) else 1
