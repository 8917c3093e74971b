"""One HTML page with every result the toolkit makes (make report writes out/report.html).

Each section is one kind of result: what it shows, the command that makes it, its figures and
tables, and under each figure and table a footer line saying what made it (runs.footer: the chip,
the sources, the commit). The page only reads what is in out/: a result this checkout never made
is named with the command that makes it, never drawn from anything else, and a result made from
other sources than this checkout's says so. The roofline section is the run that writes the page.

Figures are the PNG files the tools wrote, referenced from the page by relative paths (the page
and out/ go together); a figure's footer is the one its file keeps (runs.figure_footer). A script
at the end of the page checks, once it has loaded, that every figure loaded and carries a footer,
and writes what it found into the page (`#figure-check`, and one line per figure in
`#figure-checks`): tests/test_report_page.py reads that back from a headless Chromium.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from capra import config
from replay import runs

NOT_RECORDED = "sources and commit not recorded (the file was written before results kept them)"


@dataclass
class Figure:
    path: Path  # the PNG file
    caption: str
    footer: str
    recorded: bool = True  # the footer is the one the figure's file keeps, not a note that it keeps none


@dataclass
class Table:
    lines: list[str]
    footer: str
    caption: str = ""


@dataclass
class Section:
    anchor: str
    title: str
    what: str
    commands: list[str]
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what this checkout never made, and the command that makes it
    notes: list[str] = field(default_factory=list)


@dataclass
class Roofline:
    """The roofline of the run that writes the page (capra report): its printed lines, the figure
    it drew and the configuration it ran."""

    lines: list[str]
    figure: Path | None
    prov: dict


# ---- footers ----------------------------------------------------------------------------------


def result_footer(prov: dict | None, config_key: str | None = None) -> str:
    """The footer of a result file: runs.footer of its provenance, saying when its sources are not
    this checkout's; from its configuration alone when it keeps no provenance."""
    if prov:
        line = runs.footer(prov)
        today = runs.sources_hash()
        if prov.get("sources") != today:
            line += f" · made from other sources than this checkout's ({today})"
        return line
    if config_key:
        return f"{chip_label(config_key)} · {NOT_RECORDED}"
    return f"configuration, {NOT_RECORDED}"


def chip_label(config_key: str) -> str:
    try:
        return config.Config.parse(config_key).label()
    except config.ConfigError:
        return f"configuration {config_key!r} (not one this checkout reads)"


def figure(out: Path, name: str, caption: str, command: str, section: Section) -> None:
    """Add out/<name> to the section, or say that it was never drawn and which command draws it."""
    path = out / name
    if not path.exists():
        section.missing.append(f"{caption}: no out/{name} in this checkout; `{command}` draws it")
        return
    line = runs.figure_footer(path)
    today = runs.sources_hash()
    if line is not None and "sources " in line and f"sources {today}" not in line:
        line += f" · made from other sources than this checkout's ({today})"
    if line is None:
        section.figures.append(Figure(path, caption, "the file keeps no footer line (drawn before figures kept one, "
                                      f"or not a PNG this page can read): `{command}` draws it again", False))
    else:
        section.figures.append(Figure(path, caption, line))


def read(out: Path, name: str, section: Section, command: str) -> object | None:
    """out/<name>'s JSON, or None with the reason in the section (missing or damaged)."""
    path = out / name
    if not path.exists():
        section.missing.append(f"no out/{name} in this checkout: `{command}` writes it")
        return None
    try:
        return runs.read_json(path, f"written by `{command}`")
    except runs.UserError as error:
        section.missing.append(f"{error}; `{command}` writes it again")
        return None


# ---- the sections -----------------------------------------------------------------------------


def roofline_section(out: Path, roofline: Roofline | None) -> Section:
    s = Section("roofline", "Roofline: decode steps against their bound",
                "Cycles of every decode step (machine model, equal to the RTL's) against the roofline bound "
                "max(words moved, MACs / N^2), the windows' totals and the cost of one more token of context.",
                ["make report", "python tools/decode_report.py"])
    if roofline is None:
        s.missing.append("this page was written without the roofline run: `make report` runs it")
        return s
    footer = runs.footer(roofline.prov)
    s.tables.append(Table(roofline.lines, footer))
    if roofline.figure is not None:
        s.figures.append(Figure(roofline.figure, "Cycles per decode step and the roofline bound",
                                runs.figure_footer(roofline.figure) or footer))
    return s


def decode_section(out: Path) -> Section:
    s = Section("decode", "Decode steps on the RTL (Chapter 15)",
                "Cycles of each of the 32 decode steps without a window and with windows of 8 and 4, replayed on "
                "Icarus and Verilator and equal to the machine model's (Figure 15.2 draws them).",
                ["make sim", "make figures"])
    data = read(out, "ch15_run.json", s, "make sim")
    if isinstance(data, dict) and isinstance(data.get("cycles"), dict):
        windows = list(data["cycles"])
        lines = [f"{'step':>5}" + "".join(f"{'W=' + w:>10}" for w in windows)]
        for i in range(len(data["cycles"][windows[0]])):
            lines.append(f"{i + 1:5d}" + "".join(f"{data['cycles'][w][i]:10d}" for w in windows))
        lines.append(f"{'total':>5}" + "".join(f"{sum(data['cycles'][w]):10d}" for w in windows))
        s.tables.append(Table(lines, result_footer(data.get("provenance"), data.get("config")),
                              f"verdict {data.get('verdict')}; {data.get('source', '')}"))
    figure(out, "fig15_2_cycles_per_step.png", "Figure 15.2: cycles per step", "make figures", s)
    return s


CHAPTER_FIGURES = (
    ("fig15_1_block_table.png", "Figure 15.1: the block table and the pool"),
    ("fig15_3_window.png", "Figure 15.3: the window"),
    ("fig15_4_memory_waste.png", "Figure 15.4: memory waste by page size"),
    ("fig15_5_prefix_sharing.png", "Figure 15.5: prefix sharing"),
    ("fig15_6_accuracy_vs_window.png", "Figure 15.6: accuracy against window"),
    ("fig15_7_serving.png", "Figure 15.7: serving arithmetic"),
)


def chapter_section(out: Path) -> Section:
    s = Section("chapter15", "Chapter 15's other figures",
                "The page table, the window and the four studies of example B.", ["make figures"])
    for name, caption in CHAPTER_FIGURES:
        figure(out, name, caption, "make figures", s)
    return s


def serving_section(out: Path) -> Section:
    s = Section("serving", "Serving: continuous batching",
                "Many requests on one chip with B_max = 1, 2, 4, 8, each checked against the request decoded "
                "alone; one run replayed on both simulators.", ["make serve"])
    data = read(out, "serve_run.json", s, "make serve")
    if isinstance(data, dict) and isinstance(data.get("runs"), list):
        lines = [f"{'B_max':>5} {'window':>6} {'steps':>6} {'cycles':>8} {'tokens':>6} {'tok/kcyc':>8} "
                 f"{'peak pages':>10} {'mean batch':>10}"]
        for r in data["runs"]:
            lines.append(f"{r.get('b_max', '?')!s:>5} {r.get('window')!s:>6} {r.get('steps', '?')!s:>6} "
                         f"{r.get('cycles', '?')!s:>8} {r.get('tokens', '?')!s:>6} "
                         f"{r.get('tokens_per_kcycle', 0):8.2f} {r.get('peak_pages', '?')!s:>10} "
                         f"{r.get('mean_batch', 0):10.2f}")
        caption = (f"{data.get('requests')} requests, {data.get('pages')} pages of {data.get('page')} rows; "
                   f"verdict {data.get('verdict')}, {data.get('replayed_steps')} steps replayed on the RTL")
        s.tables.append(Table(lines, result_footer(data.get("provenance"), data.get("config")), caption))
    figure(out, "serve_run.png", "Tokens per kilocycle and pages in use", "make serve", s)
    return s


def timeline_section(out: Path) -> Section:
    s = Section("timeline", "Timeline: where a step's cycles go",
                "A solo and a batch-8 decode step unit by unit (the traces open in Perfetto); the RTL's events "
                "checked against the model's.", ["make timeline"])
    lines, prov = [], None
    for name in ("solo", "batch8"):
        data = read(out, f"timeline/{name}.json", s, "make timeline")
        if isinstance(data, dict):
            meta = data.get("otherData", {})
            prov = meta.get("provenance") or prov
            lines.append(f"{name:<7} B={meta.get('batch')} context {meta.get('context')}: {meta.get('cycles')} cycles "
                         f"(out/timeline/{name}.json)")
    if lines:
        s.tables.append(Table(lines, result_footer(prov)))
    figure(out, "timeline/timeline.png", "The two steps, unit by unit", "make timeline", s)
    return s


def sweep_section(out: Path) -> Section:
    from . import dse

    s = Section("sweep", "Design-space sweep", "Cycles, roofline efficiency, batched throughput, ECP5 area, Fmax and "
                "tokens a second of each configuration of the grid, each replayed on both simulators; the Pareto "
                "front.", ["make dse"])
    src = dse.sources_hash()
    rows = []
    for cfg in dse.GRID:
        f = dse.cached_point(cfg, src, dse.DEFAULT_RANDOM, out / "dse")
        if f.exists():
            try:
                rows.append(dse.read_point(f, cfg))
            except runs.UserError as error:
                s.notes.append(f"{error}; `make dse` measures it again")
    others = len(list((out / "dse").glob("*.json"))) - len(rows) if (out / "dse").is_dir() else 0
    if not rows:
        extra = f" ({others} cached points from other sources or other options)" if others > 0 else ""
        s.missing.append(f"no point of the sweep measured on this checkout's sources in out/dse/{extra}: "
                         "`make dse` measures them (hours; `make dse DSE_ARGS=\"--only n=2\"` one point)")
    else:
        measured = any(r.get("area") for r in rows)
        axes = dse.axes_for(measured)
        lines = dse.table(rows, dse.pareto(rows, axes.cost, axes.speed, axes.higher), measured)
        footer = runs.footer({**runs.provenance(), "chip": "each point on its own configuration"})
        s.tables.append(Table(lines, footer, f"{len(rows)} of {len(dse.GRID)} points measured on these sources "
                                             "(* the Pareto front among them)"))
    figure(out, "dse_pareto.png", "The Pareto front", "make dse", s)
    return s


def synthesis_section(out: Path) -> Section:
    from . import synth

    s = Section("synthesis", "Synthesis", "LUTs, flip-flops, block RAMs and post-route Fmax of every RTL block on "
                "the iCE40 HX8K; the whole chip on an ECP5.", ["make synth", "make fpga"])
    results, devices, changed = [], set(), []
    for path in sorted((out / "synth" / "cache").glob("*.full.json")):
        try:
            entry = runs.read_json(path, "a cached synthesis result")
            result = synth.Result(entry["result"]["name"])
            synth.restore(result, entry["result"])
            finger = entry["fingerprint"]
        except (runs.UserError, KeyError, TypeError) as error:
            s.notes.append(f"{path.name}: {error}")
            continue
        devices.add((finger.get("device", {}).get("label", "?"), finger.get("seed"), finger.get("target_mhz"),
                     finger.get("yosys", ""), finger.get("nextpnr", "")))
        for name, digest in entry.get("sources", {}).items():
            if not (runs.ROOT / name).exists() or synth.sha256_file(runs.ROOT / name) != digest:
                changed.append(result.name)
                result.note = (result.note + "; " if result.note else "") + "from other sources than this checkout's"
                break
        results.append(result)
    if not results:
        s.missing.append("no synthesized block in out/synth/cache/: `make synth` synthesizes them (minutes; needs "
                         "yosys and nextpnr-ice40)")
    else:
        label, seed, mhz, yosys, nextpnr = sorted(devices, key=str)[0]
        device = next((d for d in (synth.HX8K, synth.UP5K) if d.label == label), synth.HX8K)
        options = synth.Options(out=out / "synth", device=device, seed=seed or 1, target_mhz=mhz or 100.0)
        fresh = len(results) - len(changed)
        footer = (f"iCE40 {label} · {yosys or 'yosys ?'} · {nextpnr or 'nextpnr ?'} · {fresh} of {len(results)} blocks "
                  f"from this checkout's RTL sources · commit not recorded (the cache keeps each source's digest)")
        s.tables.append(Table(list(synth.table(results, options)), footer))
    from . import fpga

    measured = fpga.measured_fmax(config.active(), out / "fpga")
    if measured is None:
        s.missing.append("the whole chip on the ECP5: no seed kept in out/fpga/ for these RTL sources and this "
                         "configuration: `make fpga` places and routes it (minutes a seed)")
    else:
        s.tables.append(Table([f"ga2 on the ECP5: {measured.line()}"], runs.footer(runs.provenance())))
    return s


def mutation_section(out: Path) -> Section:
    s = Section("mutation", "Mutation score", "One-line breaks of the code, each in a copy, and whether the checks "
                "notice: caught, or shown equivalent.", ["make mut", "make mut-all", "make mut-tiers"])
    data = read(out, "mut/score.json", s, "make mut")
    if isinstance(data, dict) and isinstance(data.get("areas"), dict):
        lines = [f"{'area':<40} {'caught':>6} {'equivalent':>10} {'total':>5}"]
        for area, a in data["areas"].items():
            lines.append(f"{area:<40} {a['caught']:6d} {a['equivalent']:10d} {a['total']:5d}")
        left = [m for m in data.get("mutants", []) if m.get("status") not in ("caught", "survived, equivalent")]
        lines += [f"  {m['status']}: {m['area']}: {m['what']}" for m in left]
        s.tables.append(Table(lines, result_footer(data.get("provenance")),
                              f"{data.get('which')}; {data.get('seconds')} s"))
    for path in sorted((out / "mut").glob("tier-*.json")):
        try:
            tier = runs.read_json(path, "written by `capra mut --tier`")
            caught = sum(m["status"] == "caught" for m in tier["mutants"])
            line = f"tier {tier['tier']}: {caught} of {len(tier['mutants'])} mutants caught by the tier alone"
        except (runs.UserError, KeyError, TypeError) as error:
            s.notes.append(f"{path.name}: {error}")
            continue
        s.tables.append(Table([line], f"commit {str(tier.get('commit', '?'))[:12]} · chip and sources not recorded",
                              f"out/mut/{path.name}"))
    return s


def soak_section(out: Path) -> Section:
    s = Section("soak", "Soak", "Random programs through the machine model and both simulators at every latency, "
                "compared word for word and counter for counter.", ["make soak N=10000"])
    states = sorted((out / "soak").glob("state-*.json"))
    if not states:
        s.missing.append("no soak state in out/soak/: `make soak N=1000` runs one")
        return s
    from . import soak

    today = soak.sources_hash()  # what a soak's verdict depends on
    lines = [f"{'chip':<28} {'seed':>4} {'batch':>5} {'stall':>5} {'programs':>8} {'mismatches':>10} {'seconds':>8}  "
             "sources"]
    chips, sources = set(), set()
    for path in states:
        try:
            st = runs.read_json(path, "a soak state")
            done = st["done"].values() if isinstance(st["done"], dict) else []
            programs = sum(b.get("programs", 0) for b in done)
            mismatches = sum(len(b.get("mismatches", [])) for b in done)
        except (runs.UserError, KeyError, TypeError, AttributeError) as error:
            s.notes.append(f"{path.name}: {error}")
            continue
        chip = chip_label(st.get("config", ""))
        chips.add(chip)
        sources.add(st.get("sources", "?"))
        mark = "this checkout's" if st.get("sources") == today else "other"
        lines.append(f"{chip:<28} {st.get('seed')!s:>4} {st.get('batch')!s:>5} {st.get('stall', 0)!s:>5} "
                     f"{programs:8d} {mismatches:10d} {float(st.get('seconds', 0)):8.0f}  {st.get('sources')} ({mark})")
    footer = (f"{' / '.join(sorted(chips))} · sources {' / '.join(sorted(sources))} · commit not recorded "
              "(a soak state keeps its configuration and the hash of its sources)")
    s.tables.append(Table(lines, footer, "one row per soak state (out/soak/state-*.json)"))
    return s


BUILDERS = (decode_section, chapter_section, serving_section, timeline_section, sweep_section, synthesis_section,
            mutation_section, soak_section)


def sections(out: Path, roofline: Roofline | None) -> list[Section]:
    """Every section; one whose files are not in the form their command writes (edited, from another
    version of the tool) says so instead of stopping the page."""
    found = [roofline_section(out, roofline)]
    for build in BUILDERS:
        try:
            found.append(build(out))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            anchor = build.__name__.removesuffix("_section")
            found.append(Section(anchor, anchor.capitalize(), "", [], notes=[
                f"its files in out/ are not in the form their command writes ({type(error).__name__}: {error}); "
                "run the command again"]))
    return found


# ---- the page ---------------------------------------------------------------------------------

STYLE = """
body { font-family: sans-serif; max-width: 70em; margin: 1em auto; padding: 0 1em; color: #222; }
section { border-top: 1px solid #ccc; margin-top: 1.5em; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; font-size: 0.8em; }
img { max-width: 100%; border: 1px solid #ddd; }
.footer { color: #666; font-size: 0.8em; margin: 0.2em 0 1em; }
.missing { color: #a33; }
.command code { background: #eef; }
#figure-check { font-weight: bold; }
"""

# Runs once the page and its figures have loaded: every <img> must have a natural width and its
# <figure> a non-empty footer. What it finds goes into the page, for a reader and for the test.
CHECK_SCRIPT = """
window.addEventListener('load', function () {
  var figures = document.querySelectorAll('figure');
  var lines = [], good = 0;
  figures.forEach(function (f) {
    var img = f.querySelector('img'), foot = f.querySelector('.footer[data-recorded="yes"]');
    var loaded = !!img && img.complete && img.naturalWidth > 0;
    var footer = foot ? foot.textContent.trim() : '';
    if (loaded && footer) good += 1;
    lines.push(JSON.stringify({src: img ? img.getAttribute('src') : null, naturalWidth: img ? img.naturalWidth : 0,
                               loaded: loaded, footer: footer}));
  });
  document.getElementById('figure-checks').textContent = lines.join('\\n');
  document.getElementById('figure-check').textContent =
    good + ' of ' + figures.length + ' figures loaded with the footer their file keeps' +
    (good === figures.length ? '' : ': see the lines below');
});
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def inline(text: str) -> str:
    """Escape, then show `command` spans as code."""
    parts = esc(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def render(page: Path, secs: list[Section], prov: dict) -> str:
    made = sum(bool(s.figures or s.tables) for s in secs)
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">', "<title>Capra: every result</title>",
           f"<style>{STYLE}</style></head><body>", "<h1>Capra: every result in this checkout</h1>",
           f"<p>Written by <code>make report</code> at {esc(datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC'))} "
           f"from what is in <code>out/</code>: {made} of {len(secs)} kinds of result are there; the others name "
           "the command that makes them.</p>",
           f'<p class="footer">this checkout: {esc(runs.footer(prov))}</p>',
           '<p id="figure-check">figures not checked yet (the check runs in the browser once the page has loaded)</p>',
           '<details><summary>each figure</summary><pre id="figure-checks"></pre></details>', "<ul>"]
    out += [f'<li><a href="#{s.anchor}">{esc(s.title)}</a>{"" if s.figures or s.tables else " (not made)"}</li>'
            for s in secs]
    out.append("</ul>")
    for s in secs:
        out.append(f'<section id="{s.anchor}" data-made="{"yes" if s.figures or s.tables else "no"}">')
        out.append(f"<h2>{esc(s.title)}</h2><p>{esc(s.what)}</p>")
        out.append('<p class="command">Command: ' + ", ".join(f"<code>{esc(c)}</code>" for c in s.commands) + "</p>")
        for m in s.missing:
            out.append(f'<p class="missing">Not made in this checkout: {inline(m)}</p>')
        for n in s.notes:
            out.append(f'<p class="missing">{inline(n)}</p>')
        for t in s.tables:
            if t.caption:
                out.append(f"<p>{inline(t.caption)}</p>")
            out.append(f'<pre class="table">{esc(chr(10).join(t.lines))}</pre>')
            out.append(f'<p class="footer">{esc(t.footer)}</p>')
        for f in s.figures:
            src = quote(Path(os.path.relpath(f.path, page.parent)).as_posix())
            out.append(f'<figure><img src="{esc(src)}" alt="{esc(f.caption)}">'
                       f"<figcaption>{esc(f.caption)} (<code>{esc(f.path.name)}</code>)</figcaption>"
                       f'<p class="footer" data-recorded="{"yes" if f.recorded else "no"}">{inline(f.footer)}</p>'
                       "</figure>")
        out.append("</section>")
    out.append(f"<script>{CHECK_SCRIPT}</script></body></html>")
    return "\n".join(out) + "\n"


def write(out: Path = runs.OUT, roofline: Roofline | None = None,
          page: Path | None = None) -> tuple[Path, list[Section]]:
    """Write the page (out/report.html by default); the page and its sections."""
    page = page or out / "report.html"
    secs = sections(out, roofline)
    runs.write_text(page, render(page, secs, roofline.prov if roofline else runs.provenance()))
    return page, secs


def summary(secs: list[Section]) -> str:
    made = [s.anchor for s in secs if s.figures or s.tables]
    not_made = [s.anchor for s in secs if not (s.figures or s.tables)]
    figures = sum(len(s.figures) for s in secs)
    return (f"{len(made)} of {len(secs)} kinds of result, {figures} figure{'s' * (figures != 1)}"
            + (f"; not made here: {', '.join(not_made)}" if not_made else ""))
