"""Chapter 15's figures 15.1-15.7 as PNG files in out/.

  15.1 block table and pool        (the page table of example A after 14 steps)
  15.2 cycles per step             (out/ch15_run.json if present, else the machine model, whose
                                    counters are exact and equal to the RTL's)
  15.3 the window                  (rows, pages and the window at one step)
  15.4 memory waste by page size   (example B, study 1)
  15.5 prefix sharing              (example B, study 2)
  15.6 accuracy against window     (example B, study 3)
  15.7 serving arithmetic          (example B, study 4)

Example B's numbers come from out/ch15_example_b.json when present, else example B is run.

Only a complete, passing run is plotted under the RTL's name: out/ch15_run.json must carry the
"verdict": "PASS" that tools/ch15_run.py writes only when every replay and check passed, and hold
a whole series of cycles for every window; a file that does not (an edited or truncated one, one
from a failing run) is refused in one line (exit status 2), as is an example B file without every
study. Each PNG is written to a temporary file and renamed, so a figure is never half-written.

Usage: python tools/ch15_figures.py      (``make figures`` runs it)
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import matplotlib
import paged_lm as PL
import tiny_lm as T
from capra import isa
from replay import runs

from . import example_b as study_b
from . import sim
from .common import Parser, ToolError, require_decode

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

COLOURS = {"None": "#444444", "8": "#1f77b4", "4": "#d62728"}
RELEASED, HELD, FREE, WINDOW = "#dddddd", "#9ecae1", "#ffffff", "#fdae6b"


def save(fig, name: str, footer: str | None = None) -> Path:
    """The figure as out/<name>, with a footer line below everything else on it: the chip, the
    sources and the commit that made its numbers (`footer`; by default those of this checkout)."""
    low = min([t.get_position()[1] for t in fig.texts] + [0.0])
    footer = footer or runs.footer(runs.provenance())
    fig.text(0.01, low - 0.03, footer, fontsize=6, color="0.4", va="top")
    path = runs.OUT / name
    with runs.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=130, bbox_inches="tight", format="png", metadata=runs.figure_metadata(footer))
    plt.close(fig)
    return path


def box(ax, x, y, w, h, colour, text="", **kw):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor="black", lw=1))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=kw.get("fontsize", 8))


# ---- 15.1 ----------------------------------------------------------------------------------------


def figure_block_table() -> Path:
    """The state of example A after step 14: logical pages 0, 1 released, 2 -> page 2, 3 -> page 0."""
    page, window, steps = 4, 6, 14
    pt = PL.PageTable(8, page)
    pt.new("A")
    for L in range(1, steps + 1):
        pt.append("A", L - 1)
        pt.trim("A", max(0, L + 1 - window))
    fig, ax = plt.subplots(figsize=(9, 4.2))
    n_logical = -(-steps // page)
    ax.text(0, 5.6, "logical rows of request A (4 per page)", fontsize=9, weight="bold")
    for lp in range(n_logical):
        released = lp < pt.dropped["A"]
        for off in range(page):
            row = lp * page + off
            colour = RELEASED if released else (HELD if row < steps else FREE)
            box(ax, lp * 2.3 + off * 0.55, 4.6, 0.55, 0.7, colour, str(row) if row < steps else "")
        ax.text(lp * 2.3 + 1.1, 4.35, f"logical page {lp}" + (" (released)" if released else ""),
                ha="center", va="top", fontsize=7)
    ax.text(0, 3.3, "block table", fontsize=9, weight="bold")
    for lp in range(n_logical):
        entry = lp - pt.dropped["A"]
        label = str(pt.table["A"][entry]) if entry >= 0 else "-"
        box(ax, lp * 2.3 + 0.8, 2.5, 0.6, 0.6, HELD if entry >= 0 else RELEASED, label, fontsize=9)
    ax.text(0, -0.25, "physical pool (8 pages)", fontsize=9, weight="bold", va="top")
    for p in range(len(pt.ref)):
        colour = HELD if pt.ref[p] else FREE
        box(ax, p * 1.15, 0.2, 1.0, 0.9, colour, f"page {p}\n" + ("held" if pt.ref[p] else "free"))
    for lp in range(pt.dropped["A"], n_logical):
        p = pt.table["A"][lp - pt.dropped["A"]]
        ax.add_patch(FancyArrowPatch((lp * 2.3 + 1.1, 2.5), (p * 1.15 + 0.5, 1.1), arrowstyle="->",
                                     mutation_scale=12, color="#1f77b4"))
    ax.text(9.4, 0.6, "page 0 held rows 0-3,\nwas freed at step 9\nand now holds rows 12-13",
            fontsize=8, va="center")
    ax.set_xlim(-0.2, 12)
    ax.set_ylim(-0.7, 6)
    ax.axis("off")
    ax.set_title("Figure 15.1: logical rows, the block table and the physical pool (pages of 4, window 6, "
                 "after 14 steps)", fontsize=10)
    return save(fig, "fig15_1_block_table.png")


# ---- 15.2 ----------------------------------------------------------------------------------------


def _numbers(value, n: int | None = None, positive: bool = False) -> bool:
    """A list of n (any, if None) finite numbers, all > 0 if `positive` (JSON: no NaN, no bools)."""
    return (isinstance(value, list) and (n is None or len(value) == n) and len(value) > 0
            and all(isinstance(x, int | float) and not isinstance(x, bool) and x == x and abs(x) != float("inf")
                    and (x > 0 or not positive) for x in value))


def run_cycles(path: Path) -> dict[str, list[int]]:
    """The cycles per step of a complete, passing tools/ch15_run.py run, or ToolError naming what
    is wrong with the file."""
    data = runs.read_json(path, "written by tools/ch15_run.py")
    redo = "run `make sim` again (or delete the file to plot the machine model's counters)"
    if not isinstance(data, dict) or data.get("verdict") != sim.RUN_VERDICT:
        raise ToolError(f"{path} is not from a passing run of tools/ch15_run.py (no \"verdict\": "
                        f"\"{sim.RUN_VERDICT}\"): {redo}")
    steps, cycles = data.get("steps"), data.get("cycles")
    windows = [str(W) for W in sim.WINDOWS]
    if (steps != sim.N_STEPS or not isinstance(cycles, dict) or sorted(cycles) != sorted(windows)
            or not all(_numbers(cycles[W], steps, positive=True) and all(isinstance(c, int) for c in cycles[W])
                       for W in windows)):
        raise ToolError(f"{path} does not hold {sim.N_STEPS} positive integer cycle counts for each of "
                        f"the windows {', '.join(windows)}: {redo}")
    return {W: cycles[W] for W in windows}


RTL_SOURCE = "RTL replay: Icarus = Verilator = machine model"


def machine_cycles() -> tuple[dict[str, list[int]], str]:
    """The cycles per step of each window on the machine model (equal to the RTL's): for a checkout
    without out/ch15_run.json."""
    m = T.make_model("structured")
    cycles = {}
    for W in sim.WINDOWS:
        _, records = PL.PagedChip(m, sim.N_STEPS, W).generate(0, sim.N_STEPS)
        cycles[str(W)] = [r["counters"][0] for r in records]
    return cycles, "machine model, whose counters equal the RTL's"


def staircase_period(series: list[int]) -> int | None:
    """The spacing of the large jumps in a growing series (at least 3x the median step), if regular."""
    steps = [b - a for a, b in zip(series, series[1:])]
    typical = sorted(steps)[len(steps) // 2]
    jumps = [i for i, d in enumerate(steps) if d >= 3 * max(typical, 1)]
    gaps = {b - a for a, b in zip(jumps, jumps[1:])}
    return gaps.pop() if len(jumps) >= 3 and len(gaps) == 1 else None


def figure_cycles(cycles: dict[str, list[int]], source: str, footer: str | None = None) -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for W, series in cycles.items():
        label = "no window" if W == "None" else f"window {W}"
        steps = range(1, len(series) + 1)
        left.plot(steps, series, marker="o", ms=3, color=COLOURS.get(W), label=label)
        right.plot(steps, [c - series[0] for c in series], marker="o", ms=3, color=COLOURS.get(W), label=label)
        if W != "None":
            for ax in (left, right):
                ax.axvline(int(W), color=COLOURS.get(W), ls=":", lw=1, label=f"window {W} full from step {W}")
    left.set_ylim(0, max(max(s) for s in cycles.values()) * 1.08)
    left.set_ylabel("cycles per step")
    left.set_title("cycles per step (the axis starts at 0)", fontsize=9)
    left.legend(fontsize=8, loc="lower right")
    right.set_ylim(0, None)
    right.set_ylabel("cycles above step 1")
    right.set_title("the growth alone: cycles above those of step 1", fontsize=9)
    right.legend(fontsize=8, loc="upper left")
    period = staircase_period(cycles["None"])
    if period is not None:
        why = (f": the scores matmul gains a column tile of the {isa.N} x {isa.N} array every {isa.N} tokens"
               if period == isa.N else "")
        fig.text(0.5, -0.06, f"Without a window the cost grows by a larger step every {period} tokens of context{why}.",
                 ha="center", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("decode step L (context = min(L, W) tokens)")
        ax.grid(alpha=0.3)
    fig.suptitle(f"Figure 15.2: cycles per decode step; {source}", fontsize=10)
    return save(fig, "fig15_2_cycles_per_step.png", footer)


# ---- 15.3 ----------------------------------------------------------------------------------------


def figure_window() -> Path:
    """Step L = 15 with W = 6 and pages of 4: rows 9-13 gathered, row 14 new, row 8 held but outside
    the window (its page still holds needed rows), pages 0 and 1 released."""
    L, W, page = 15, 6, 4
    lo = L - min(L, W)
    first_kept = (max(0, L - W) // page) * page  # pages released after step L - 1
    fig, ax = plt.subplots(figsize=(9, 2.6))
    for row in range(L):
        if row == L - 1:
            colour, text = "#31a354", str(row)
        elif row >= lo:
            colour, text = WINDOW, str(row)
        elif row >= first_kept:
            colour, text = HELD, str(row)
        else:
            colour, text = RELEASED, str(row)
        box(ax, row * 0.6, 1.0, 0.6, 0.7, colour, text)
    for p in range(-(-L // page)):
        ax.plot([p * page * 0.6] * 2, [0.8, 1.9], color="black", lw=2)
        ax.text((p * page + page / 2) * 0.6, 0.65, f"logical page {p}", ha="center", va="top", fontsize=8)
    ax.annotate("", xy=(lo * 0.6, 2.05), xytext=(L * 0.6, 2.05), arrowprops={"arrowstyle": "<->"})
    ax.text((lo + L) * 0.3, 2.15, f"window: the new token and the {W - 1} before it", ha="center", fontsize=8)
    legend = [(RELEASED, "released (never read again)"), (HELD, "held, outside the window"),
              (WINDOW, "gathered into kc/vc"), ("#31a354", "new token")]
    for i, (colour, text) in enumerate(legend):
        box(ax, i * 2.6, -0.4, 0.3, 0.3, colour)
        ax.text(i * 2.6 + 0.4, -0.25, text, va="center", fontsize=8)
    ax.set_xlim(-0.2, L * 0.6 + 0.3)
    ax.set_ylim(-0.6, 2.5)
    ax.axis("off")
    ax.set_title(f"Figure 15.3: the window at step {L} (W = {W}, pages of {page} rows)", fontsize=10)
    return save(fig, "fig15_3_window.png")


# ---- 15.4 - 15.7: example B ----------------------------------------------------------------------


EXAMPLE_B_ROWS = {"paged": 3, "share": 3, "win": 3, "serve": 4}  # study -> numbers per entry


def example_b() -> dict:
    path = study_b.json_path()
    if not path.exists():
        with contextlib.redirect_stdout(io.StringIO()):
            study_b.main(None)
    b = runs.read_json(path, "written by tools/ch15_example_b.py")
    complete = (isinstance(b, dict) and _numbers(b.get("contig"), 3, positive=True)
                and all(isinstance(b.get(k), dict) and b[k] and all(_numbers(v, n) for v in b[k].values())
                        for k, n in EXAMPLE_B_ROWS.items()))
    if not complete or not _figures_can_read(b):
        raise ToolError(f"{path} does not hold every study of example B: run tools/ch15_example_b.py again")
    return b


def _figures_can_read(b: dict) -> bool:
    """What the figures divide by and parse is there: the rows reserved per page size, the prompt
    rows copied, the decisions compared per window are positive, and the windows and contexts are
    whole numbers (JSON keys are strings)."""
    def whole(key: str) -> bool:
        return key.isascii() and key.isdigit() and int(key) > 0

    return (all(v[2] > 0 for v in b["paged"].values()) and all(v[0] > 0 for v in b["share"].values())
            and all(whole(w) and v[1] > 0 for w, v in b["win"].items()) and all(whole(c) for c in b["serve"]))


def figure_memory(b: dict, footer: str | None = None) -> Path:
    names = ["contiguous\n(reserve 2048)"] + [f"page {p}" for p in b["paged"]]
    rows = [b["contig"]] + list(b["paged"].values())
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.bar(names, [r[0] for r in rows], color=["#d62728"] + ["#1f77b4"] * len(b["paged"]))
    left.set_ylabel("requests held")
    left.set_title("requests that fit in 8,192 rows", fontsize=9)
    waste = [100 * (r[2] - r[1]) / r[2] for r in rows]
    right.bar(names, waste, color=["#d62728"] + ["#1f77b4"] * len(b["paged"]))
    right.set_ylabel("reserved but unused (%)")
    right.set_title("waste", fontsize=9)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8)
    for i, w in enumerate(waste):
        right.text(i, w + 1, f"{w:.1f}%", ha="center", fontsize=8)
    fig.suptitle("Figure 15.4: paging against reservation (400 sampled request lengths)", fontsize=10)
    return save(fig, "fig15_4_memory_waste.png", footer)


def figure_sharing(b: dict, footer: str | None = None) -> Path:
    keys = list(b["share"])
    copied = [b["share"][k][0] for k in keys]
    shared = [b["share"][k][1] for k in keys]
    x = range(len(keys))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    ax.bar([i - 0.2 for i in x], copied, width=0.4, label="prompt copied per request", color="#bbbbbb")
    ax.bar([i + 0.2 for i in x], shared, width=0.4, label="prompt shared (fork + copy-on-write)", color="#1f77b4")
    for i, k in enumerate(keys):
        ax.text(i + 0.2, shared[i] + 2, f"{b['share'][k][2]} copies", ha="center", fontsize=7)
        saved = 100 * (copied[i] - shared[i]) / copied[i]
        ax.text(i, copied[i] + 6, f"saved {saved:.0f}%", ha="center", fontsize=8, weight="bold")
    ax.set_ylim(0, max(copied) * 1.18)
    ax.set_xticks(list(x), [f"prompt {k.split('/')[0]}\npage {k.split('/')[1]}" for k in keys], fontsize=8)
    ax.set_ylabel("pages in use")
    ax.legend(fontsize=8)
    ax.set_title("Figure 15.5: eight requests with a common prompt, 40 rows of their own each", fontsize=10)
    return save(fig, "fig15_5_prefix_sharing.png", footer)


def figure_accuracy(b: dict, footer: str | None = None) -> Path:
    windows = [int(w) for w in b["win"]]
    agreement = [100 * a / t for a, t, _ in b["win"].values()]
    error = [100 * e for _, _, e in b["win"].values()]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.plot(windows, agreement, marker="o", label="argmax agrees with full attention (%)")
    ax.plot(windows, error, marker="s", label="mean relative logit error (%)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(windows, [str(w) for w in windows])
    ax.set_xlabel("window W (24 = the whole context here)")
    ax.set_ylabel("percent")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Figure 15.6: what a window costs on random models\n(teacher-forced, 1,152 decisions per W)",
                 fontsize=10)
    return save(fig, "fig15_6_accuracy_vs_window.png", footer)


def figure_serving(b: dict, footer: str | None = None) -> Path:
    contexts = [int(c) for c in b["serve"]]
    full = [v[2] for v in b["serve"].values()]
    windowed = [v[3] for v in b["serve"].values()]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.plot(contexts, full, marker="o", color="#444444", label="full attention")
    ax.plot(contexts, windowed, marker="o", color="#1f77b4", label="window of 4,096")
    for c, f, w in zip(contexts, full, windowed, strict=True):
        ax.text(c, f * 0.8, str(f), ha="center", va="top", fontsize=8, color="#444444")
        ax.text(c, w * 1.15, str(w), ha="center", fontsize=8, color="#1f77b4")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(1, 300)
    ax.set_xticks(contexts, [f"{c // 1024}K" for c in contexts])
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("largest batch the memory allows")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Figure 15.7: serving arithmetic (DERIVED; assumed 80 GB chip,\n7 GB of weights, "
                 "256 KiB of cache per token)", fontsize=10)
    return save(fig, "fig15_7_serving.png", footer)


def arguments(ap: Parser) -> None:
    """No options: the chapter's figures are fixed."""


def example_b_footer(b: dict, path: Path) -> str:
    """The footer of Figures 15.4-15.7, drawn from example B's file: the sources and commit that
    computed its studies, with a note when they are not today's (its studies use no chip, so only
    the sources are compared)."""
    prov = b.get("provenance")
    if not isinstance(prov, dict) or not {"chip", "sources", "commit"} <= prov.keys():
        return f"from {path.name}, which did not keep its sources; rerun tools/ch15_example_b.py"
    line = runs.footer(prov)
    if prov["sources"] != runs.sources_hash():
        note = f"{path.name} was made with other sources than these"
        print(f"Figures 15.4-15.7: {note} ({line}); they are labelled with its own")
        line += f" ({note})"
    return line


def run_footer(path: Path) -> str:
    """The footer of Figure 15.2 drawn from a recorded run: that run's chip, sources and commit,
    with a note when they are not those of today's checkout and configuration (the figure shows
    what that run measured, labelled as such, not numbers of this code)."""
    prov = runs.read_json(path, "written by tools/ch15_run.py").get("provenance")
    if not isinstance(prov, dict) or not {"chip", "sources", "commit", "config"} <= prov.keys():
        return f"recorded by a run that did not keep its chip or sources ({path.name}); rerun make sim"
    now = runs.provenance()
    other = [what for what, key in (("chip", "config"), ("sources", "sources")) if prov[key] != now[key]]
    line = runs.footer(prov)
    if other:
        note = f"{path.name} was made with another {' and '.join(other)} than the active ones"
        print(f"Figure 15.2: {note} ({runs.footer(prov)}; active: {runs.footer(now)}); it is labelled with its own")
        line += f" ({note})"
    return line


def main(args) -> int:
    # both inputs are checked before any figure is written, and a run file before any work
    recorded = run_cycles(sim.RUN_JSON) if sim.RUN_JSON.exists() else None
    recorded_footer = run_footer(sim.RUN_JSON) if recorded is not None else None
    if recorded is None:  # Figure 15.2 from the machine model: a chip too small for the decode is refused first
        require_decode(sim.N_STEPS, "Figure 15.2")
    b = example_b()
    cycles, source = (recorded, RTL_SOURCE) if recorded is not None else machine_cycles()
    b_footer = example_b_footer(b, study_b.json_path())
    made = [figure_block_table(), figure_cycles(cycles, source, recorded_footer), figure_window(),
            figure_memory(b, b_footer), figure_sharing(b, b_footer), figure_accuracy(b, b_footer),
            figure_serving(b, b_footer)]
    for path in made:
        print("wrote", path.relative_to(runs.ROOT))
    return 0
