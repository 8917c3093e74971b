"""`capra dse`'s area side without Yosys (tools/capra_cli/dse.py): the Pareto front against a
synthesized area, the table's area columns, one synthesis per RTL configuration (ext_latency changes
no RTL), and `capra synth`'s defines reaching the Yosys script and the cache key. Seconds; the real
synthesis is `make dse`. Its argument mistakes are in tests/test_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from capra.config import Config
from capra_cli import dse, synth


def row(name: str, per_token: float, lut4: int | None, bram: int | None, problems: tuple[str, ...] = ()) -> dict:
    return {"config": name, "label": name, "per_token": per_token, "problems": list(problems), "brams": 0,
            "area": {"lut4": lut4, "bram": bram}}


def area(r: dict) -> float | None:
    return dse.measured_area(r["area"])


def test_area_is_lut4_plus_240_per_block_ram():
    # The HX8K: 7680 logic cells and 32 block RAMs, so one RAM is the share of 240 LUT4.
    assert dse.BRAM_LUT4 == 240
    assert dse.measured_area({"lut4": 27267, "bram": 77}) == 27267 + 240 * 77 == 45747
    assert dse.measured_area({"lut4": None, "bram": None}) is None
    assert dse.measured_area(None) is None


def test_pareto_front_against_area_worked_by_hand():
    rows = [
        row("a", 12.0, 20000, 40),   # area 29600, slowest: on the front (smallest area)
        row("b", 10.0, 21000, 60),   # 35400: on the front
        row("c", 10.0, 20500, 70),   # 37300: b is as fast and smaller
        row("d", 8.0, 22000, 80),    # 41200: on the front (fastest)
        row("e", 8.0, 22000, 80),    # equal to d: both kept
        row("f", 9.0, 30000, 80),    # 49200: d is faster and smaller
        row("g", 7.0, 20000, 40, ("g: mismatch",)),  # failed its checks: never on the front
        row("h", 6.0, None, None),   # no area measured (synthesis failed): left out
    ]
    assert dse.pareto(rows, area) == {"a", "b", "d", "e"}
    # Against block RAMs alone (40, 60, 70, 80, 80, 80): the same front, f (9, 80) still behind d (8, 80).
    assert dse.pareto(rows, lambda r: r["area"]["bram"]) == {"a", "b", "d", "e"}
    # Against LUT4 alone c (20500) beats b (21000) at the same speed: the weighting changes the front.
    assert dse.pareto(rows, lambda r: r["area"]["lut4"]) == {"a", "c", "d", "e"}


def test_compile_error_points_are_not_on_the_front():
    rows = [row("a", 10.0, 100, 1), {"config": "b", "label": "b", "fits": "x does not fit", "problems": [],
                                      "brams": 16}]
    assert dse.pareto(rows, area) == {"a"}


def measured_row(name: str, lut4: int | None, fmax: float | None, note: str) -> dict:
    return {"config": name, "label": name, "step1": 690, "step32": 930, "per_token": 7.7, "eff32": 0.904,
            "batch_tok_per_kcyc": 2.1, "brams": 32, "problems": [],
            "area": {"lut4": lut4, "ff": 7000 if lut4 else None, "bram": 77 if lut4 else None,
                     "dsp": 0 if lut4 else None, "fmax": fmax, "note": note}}


def test_table_shows_the_synthesized_columns_or_says_analytic():
    rows = [measured_row("L4 S4096 Q4", 27267, None, "does not fit the hx8k: ICESTORM_LC 28000/7680"),
            measured_row("L4 S2048 Q4", None, None, "")]
    head, fits, failed = dse.table(rows, {"L4 S4096 Q4"}, measured=True)
    assert head.split()[-8:] == ["LUT4", "FF", "BRAM", "DSP", "Fmax", "area", "exact", "pareto"]
    assert fits.split()[-9:] == ["27267", "7000", "77", "0", "no", "fit", "45747", "PASS", "*"]
    assert failed.split()[-7:] == ["-", "-", "-", "-", "-", "-", "PASS"]
    [head, line] = dse.table(rows[:1], set(), measured=False)
    assert "BRAM (analytic)" in head and "LUT4" not in head
    assert line.split()[-2:] == ["32", "PASS"]


def test_one_synthesis_per_rtl_configuration_in_order(monkeypatch):
    calls = []

    def fake(defines, *, place, timeout, no_cache, children):
        calls.append(defines)
        return synth.Result("ga2", counts={"lut4": 1, "ff": 2, "bram": 3, "dsp": 0}, memory_ok=True)

    monkeypatch.setattr(synth, "synthesize_top", fake)
    points = tuple(Config(ext_latency=lat, sram_words=s) for s in (2048, 4096) for lat in (0, 4, 8))
    areas = dse.synthesize_areas(points, place=True, no_cache=False, timeout=10)
    assert calls == [("GA2_SRAM_WORDS_D=2048",), ()]
    assert areas[()]["lut4"] == 1 and dse.measured_area(areas[()]) == 1 + 240 * 3


def test_a_failed_synthesis_fails_the_sweep_and_no_fit_does_not():
    areas = {(): {"error": "", "memory_ok": True, "memory_lines": []},
             ("GA2_DMA_QUEUE_D=8",): {"error": "yosys synth_ice40 timed out after 1800 s", "memory_ok": True,
                                      "memory_lines": []}}
    labels = {(): "S4096 Q4", ("GA2_DMA_QUEUE_D=8",): "S4096 Q8"}
    assert dse.area_problems(areas, labels) == ["area of S4096 Q8: yosys synth_ice40 timed out after 1800 s"]


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


def test_one_point_alone_draws_no_front_and_says_so(monkeypatch, tmp_path, capsys):
    """--only with one point and nothing else cached: no figure of one dot, a line saying why; the
    same point with cached points of the grid behind it: a figure, and the front counts them."""
    monkeypatch.setattr(dse, "FIGURE", tmp_path / "pareto.png")
    chosen = [row("a", 8.0, 100, 1)]
    assert dse.draw(chosen, {"a"}, area, "area") is None
    assert "no Pareto front to draw" in capsys.readouterr().err
    rest = [row("b", 7.0, 300, 1), row("c", 9.0, 400, 1)]
    front = dse.pareto(chosen + rest, area)
    assert front == {"a", "b"}
    assert dse.draw(chosen, front, area, "area", rest, "--no-area: left out") == tmp_path / "pareto.png"
    assert (tmp_path / "pareto.png").stat().st_size > 0


def test_the_estimate_comes_from_the_times_the_cache_recorded():
    cached = [{"seconds": 20.0}, {"seconds": 40.0}, {"seconds": 30.0}, {}]
    # 4 points, 2 at a time: 2 rounds of the median 30 s
    assert "4 points to measure: about 60 s (30 s a point, the median of 3 in the cache, 2 at a time)" \
        in dse.estimate(4, cached, 2, synthesis=False)
    assert "no time in the cache" in dse.estimate(1, [], 2, synthesis=False)
    assert "every point is cached" in dse.estimate(0, cached, 2, synthesis=False)
    synthesized = [{"seconds": 9.0, "area": {"seconds": 600.0, "cached": False}}]
    assert "about 10 min each here" in dse.estimate(3, synthesized, 2, synthesis=True)


def test_only_draws_against_the_grids_other_cached_points(tmp_path):
    """cached_rest: the grid's points other than the chosen ones that have a readable cache file."""
    files = {cfg.key(): tmp_path / f"{i}.json" for i, cfg in enumerate(dse.GRID)}
    chosen, other, damaged = dse.GRID[0], dse.GRID[1], dse.GRID[2]
    for cfg in (chosen, other):
        files[cfg.key()].write_text(f'{{"config": "{cfg.key()}"}}')
    files[damaged.key()].write_text('{"config": ')
    rest = dse.cached_rest((chosen,), lambda cfg: files[cfg.key()])
    assert [r["config"] for r in rest] == [other.key()]
