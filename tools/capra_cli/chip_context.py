"""Cycles per decode step of the mixed model on GA2 against the context: mixed, all-global, all-windowed.

    capra chip-context                                # contexts 128 .. 32768
    capra chip-context --contexts 1024 4096 --no-figure
    capra chip-context --kv paged                     # the K/V in pages, read through GATHER

The hardware version of kv-bench's decode cost: the mixed windowed/global model compiled for GA2 in
int8 (inference/mixed_chip.py; a 16,384-word scratchpad), one decode step at each context, for the
four layers as the model has them (windowed / global / windowed / global, W = 128), all global and
all windowed. Attention over more than a tile of keys streams K and V from external memory with the
online softmax. Per step it prints the machine model's cycles, the word bound (the words the step
must move at one a cycle: every weight and every K and V row its attention reads), their ratio, the
programs run, the KV memory the layout keeps (rows over every layer and KV head, and words), and
the words the host writes into the chip's external memory for the step (every program's inputs,
and the K/V: with --kv contiguous a copy of every row each attention reads, with --kv paged the new
token's rows and the descriptors that changed, counted by the host's page bookkeeping run up to
that step). With --kv paged every attention is the tiled program with its tiles gathered from the
pages (inference/chip_pages.py, capra.paged_attention), and the table adds the cycles of the same
programs loading each tile from a contiguous copy, so the gathers' cost stands apart.

Cycles are exact machine-model cycles, found once per distinct program (a program's cycles depend on
its code, not its data: inference/chip_context.py); a row marked '*' keeps more KV and weights
than the largest external memory the configuration allows (its cycles are those of a larger one).
Writes out/chip_context.png and out/chip_context.json (configuration and commit; with --kv paged
out/chip_context_paged.*) unless --no-figure.

Exit status 0 when every step takes at least its word bound and, if --goal-context is among the
contexts, the mixed step there reaches --goal of its bound (the default goal context outside the
contexts asked for is said to be not checked; one named with --goal-context must be among them); 1
otherwise; 2 for a bad argument, a context whose programs do not fit the chip's largest external
memory among them (found before the table, by working out that context's step first).
"""

from __future__ import annotations

import time

from capra import config
from inference.chip_context import LAYOUTS, StepCycles, step_cost
from inference.chip_pages import ChipPages
from inference.mixed_chip import KV_MODES, MixedChip, MixedChipError, calibrate, equalize
from inference.mixed_lm import make_mixed_model
from replay import runs

from .common import BadArgument, Parser, Progress, distinct, finish, in_range, int_range, own_chip
from .mixed_chip import CALIB_SEED, _prompts

CONTEXTS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
MAX_CONTEXT = 1 << 17
GOAL_CONTEXT = 4096
GOAL = 0.85


def arguments(ap: Parser) -> None:
    ap.add_argument("--kv", choices=KV_MODES, default="contiguous",
                    help="where the K/V lies: contiguous (each attention program's image gets a copy of the rows it "
                         "reads, every step) or paged (pages of the chip's external memory, every tile gathered "
                         "through the block table; the host writes the new rows and changed descriptors) "
                         "(default contiguous)")
    ap.add_argument("--contexts", type=int_range(1, MAX_CONTEXT), nargs="+", default=list(CONTEXTS), metavar="T",
                    help=f"contexts in tokens, 1..{MAX_CONTEXT} (default {' '.join(map(str, CONTEXTS))})")
    ap.add_argument("--goal-context", type=int_range(1, MAX_CONTEXT), default=None, metavar="T",
                    help=f"the context whose mixed step is held to --goal, one of --contexts (default {GOAL_CONTEXT}, "
                         "checked when it is among them)")
    ap.add_argument("--goal", type=in_range(float, 0.0, 1.0), default=GOAL,
                    help=f"the least word bound / cycles accepted there, 0..1 (default {GOAL})")
    ap.add_argument("--no-figure", action="store_true", help="print the table only (no PNG, no JSON)")


def chip_for_benchmark(kv: str = "contiguous") -> MixedChip:
    """The chip as ``capra mixed-chip`` calibrates it (the scales only change immediates, not cycles)."""
    model = make_mixed_model()
    calib, _ = _prompts(model, [64, 200], 3, CALIB_SEED)
    chip_model, _ = equalize(model, [ids for ids, _k in calib])
    return MixedChip(chip_model, calibrate(chip_model, [ids for ids, _k in calib]), kv=kv)


def figure(rows: list[dict], prov: dict, goal_context: int, name: str = "chip_context.png"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .figures import save

    colours = {"mixed": "#1f77b4", "all-global": "#d62728", "all-windowed": "#2ca02c"}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for layout in LAYOUTS:
        mine = [r for r in rows if r["layout"] == layout]
        t = [r["context"] for r in mine]
        ax.plot(t, [r["cycles"] for r in mine], "o-", color=colours[layout], label=f"{layout}: cycles")
        ax.plot(t, [r["word_bound"] for r in mine], "--", color=colours[layout], alpha=0.6,
                label=f"{layout}: word bound")
        bx.plot(t, [r["kv_words"] for r in mine], "o-", color=colours[layout], label=layout)
    ax.axvline(goal_context, color="0.6", lw=0.8)
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        a.set_xlabel("context (tokens)")
        a.grid(True, which="both", alpha=0.3)
    ax.set_ylabel("cycles per decode step")
    ax.set_title("GA2 decode step (machine model)")
    ax.legend(fontsize=7)
    bx.axhline(config.EXT_MEMORY_MAX, color="0.3", lw=0.8, ls=":")
    bx.text(rows[0]["context"], config.EXT_MEMORY_MAX * 1.1, "largest external memory", fontsize=7)
    bx.set_ylabel("KV words kept (K and V, every layer)")
    bx.set_title("KV memory")
    bx.legend(fontsize=7)
    return save(fig, name, runs.footer(prov))


def main(args) -> int:
    distinct("--contexts", args.contexts)
    own_chip()
    contexts = sorted(args.contexts)
    if args.goal_context is not None and args.goal_context not in contexts:
        asked = " ".join(map(str, contexts))
        raise BadArgument("--goal-context", f"{args.goal_context} is not among the contexts ({asked})")
    goal_context = GOAL_CONTEXT if args.goal_context is None else args.goal_context
    start = time.monotonic()
    chip = chip_for_benchmark(args.kv)
    paged = args.kv == "paged"
    costs = StepCycles(chip)
    loads = StepCycles(chip, fetch="load") if paged else None
    for layout in LAYOUTS:  # the longest context first: one whose programs do not fit is refused before the table
        try:
            step_cost(costs, layout, contexts[-1])
        except (MixedChipError, config.ConfigError) as error:
            raise BadArgument("--contexts", f"{contexts[-1]} with --kv {args.kv} ({layout} layers): {error}") from None
    if paged:
        print(f"chip: {chip.cfg.n}x{chip.cfg.n} array, scratchpad {chip.cfg.sram_words} words; K/V in pages of "
              f"{ChipPages.page_of(chip)} rows in external memory, every attention tiled ({chip.paged_tile}-key "
              "tiles, online softmax), each K and V tile gathered through the block table, split into programs of "
              "at most 1,024 instructions")
    else:
        print(f"chip: {chip.cfg.n}x{chip.cfg.n} array, scratchpad {chip.cfg.sram_words} words; attention over more "
              f"than {chip.tile} keys tiled ({chip.tile}-key tiles, online softmax), split into programs of at most "
              "1,024 instructions; K and V copied contiguous into each attention program's image")
    print("cycles: the machine model's, exact; each distinct program run once on a zero image (a program's "
          "cycles do not depend on its data)")
    print("host words: what the host writes into the chip's external memory for the step (inputs, K/V rows, "
          "descriptors; the weights stay)")
    extra = f" {'LOAD cycles':>11} {'gather +':>8}" if paged else ""
    print(f"{'context':>8} {'layout':>13} {'cycles':>10} {'word bound':>11} {'bound/cycles':>12} {'programs':>8} "
          f"{'KV rows':>8} {'KV words':>9} {'host words':>10}{extra}")
    rows, problems, checks = [], [], 0
    progress = Progress("contexts", len(contexts))
    for t in contexts:
        for layout in LAYOUTS:
            c = step_cost(costs, layout, t)
            weights = c.word_bound - c.kv_words  # the weights: the bound less the K/V rows read
            over = c.kv_words + weights > config.EXT_MEMORY_MAX
            rows.append({"context": t, "layout": layout, "cycles": c.cycles, "word_bound": c.word_bound,
                         "ratio": round(c.efficiency, 4), "programs": c.programs, "kv_rows": c.kv_rows,
                         "kv_words": c.kv_words, "host_words": c.host_words, "beyond_ext_memory": over})
            extra = ""
            if paged:
                load_cycles = step_cost(loads, layout, t).cycles
                rows[-1]["load_cycles"] = load_cycles
                extra = f" {load_cycles:>11} {c.cycles - load_cycles:>8}"
            print(f"{t:>8} {layout:>13} {c.cycles:>10} {c.word_bound:>11} {c.efficiency:>12.3f} {c.programs:>8} "
                  f"{c.kv_rows:>8} {c.kv_words:>9} {c.host_words:>10}{extra}{' *' if over else ''}", flush=True)
            checks += 1
            if c.cycles < c.word_bound:
                problems.append(f"{layout} at {t}: {c.cycles} cycles, below the word bound {c.word_bound}")
            if layout == "mixed" and t == goal_context:
                checks += 1
                verdict = "reached" if c.efficiency >= args.goal else "MISSED"
                goal_line = (f"goal: the mixed step at {t} tokens takes {c.cycles} cycles for a word bound of "
                             f"{c.word_bound}: {c.efficiency:.3f} of its bound (goal >= {args.goal}: {verdict})")
                if c.efficiency < args.goal:
                    problems.append(goal_line)
        progress.step()
    if any(r["beyond_ext_memory"] for r in rows):
        print(f"* the layout's KV and weights exceed the largest external memory ({config.EXT_MEMORY_MAX} words); "
              + ("the cycles are those of a larger one (the pages' programs on a compact image of their own rows)"
                 if paged else "each program's own image fits it"))
    if paged:
        print("LOAD cycles: the same programs with each K and V tile LOADed from a contiguous copy; gather +: what "
              "the gathers add (three cycles a page for its descriptor, and each program's load of its table slice, "
              "where not hidden)")
    if goal_context in contexts:
        print(goal_line)
    else:
        print(f"goal: not checked (the goal context, {goal_context} tokens, is not among the contexts)")
    if not args.no_figure:
        prov = runs.provenance(chip.cfg)
        data = {"command": "capra chip-context" + (" --kv paged" if paged else ""), "contexts": contexts,
                "kv": args.kv, "tile": chip.paged_tile if paged else chip.tile,
                "cycles_method": "machine model, each distinct program once on a zero image", "rows": rows,
                "provenance": prov}
        name = "chip_context_paged" if paged else "chip_context"
        png = figure(rows, prov, goal_context, name + ".png")
        js = runs.write_json(runs.OUT / f"{name}.json", data)
        print(f"wrote {png} and {js} ({time.monotonic() - start:.0f} s)")
    return finish(problems, checks, "every step takes at least its word bound"
                  + (f"; the mixed step at {goal_context} reaches {args.goal} of its bound"
                     if goal_context in contexts else ""))
