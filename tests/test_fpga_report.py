"""`capra fpga` (tools/capra_cli/fpga.py) reads nextpnr-ecp5's reports into its table: these tests
run no tool, on reports captured from real runs. tests/data/fpga/ holds what one seed of `divu`
placed and routed on the LFE5U-45F left (nextpnr's --report JSON, its SDF and the names of the nets
its cells drive, as fpga.py keeps them); the inline snippets are lines of the whole ga2's report and
SDF. The whole flow takes minutes a seed, so it runs in no test tier (docs/synthesis.md)."""

import gzip
import json
from pathlib import Path

import pytest
from capra import config
from capra_cli import ecp5, fpga

DATA = Path(__file__).resolve().parent / "data" / "fpga"

# The --report utilization of the whole default ga2 on the LFE5U-45F (seed 1, target 100 MHz).
GA2_UTILIZATION = {
    "TRELLIS_COMB": {"used": 15959, "available": 43848},
    "TRELLIS_FF": {"used": 6535, "available": 43848},
    "DP16KD": {"used": 32, "available": 108},
    "MULT18X18D": {"used": 51, "available": 72},
    "TRELLIS_RAMW": {"used": 66, "available": 5481},
    "TRELLIS_IO": {"used": 0, "available": 245},
}

# From the whole ga2's SDF: the instruction memory's read port (clock to out 5.830 ns at most) drives
# a flip-flop's M input over a 2.008 ns route; the flip-flop's setup on M is 0.
GA2_SDF = r"""(DELAYFILE
  (SDFVERSION "3.0")
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "ga2")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT g_imem\[0\].u_ram.mem.0.1/DOB2 u_vec.op_TRELLIS_FF_Q/M (1549:1778:2008) (1549:1778:2008))
      )
    )
  )
  (CELL
    (CELLTYPE "DP16KD")
    (INSTANCE g_imem\[0\].u_ram.mem.0.1)
    (DELAY
      (ABSOLUTE
        (IOPATH CLKB DOB2 (5795:5812:5830) (5795:5812:5830))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge ADB5) (posedge CLKB) (205:205:205) (101:101:101))
    )
    )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE u_vec.op_TRELLIS_FF_Q)
    (DELAY
      (ABSOLUTE
        (IOPATH CLK Q (430:477:525) (430:477:525))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge M) (posedge CLK) (0:0:0) (233:268:303))
      (SETUPHOLD (posedge CE) (posedge CLK) (0:0:0) (144:147:151))
    )
    )
)
"""


def divu_report() -> dict:
    return ecp5.load_report((DATA / "divu_report.json").read_text())


def divu_timing() -> ecp5.Timing:
    with gzip.open(DATA / "divu_timing.sdf.gz", "rt") as f:
        return ecp5.read_sdf(f)


def divu_names() -> ecp5.Names:
    with gzip.open(DATA / "divu_names.json.gz", "rt") as f:
        kept = json.load(f)
    return ecp5.Names({(c, p): n for c, p, n in kept["driven"]}, kept["outputs"])


def test_utilization_reads_the_four_resources_as_nextpnr_counted_them():
    rows = ecp5.utilization({"utilization": GA2_UTILIZATION})
    assert [(r.name, r.bel, r.used, r.available) for r in rows] == [
        ("LUT4", "TRELLIS_COMB", 15959, 43848), ("FF", "TRELLIS_FF", 6535, 43848),
        ("BRAM", "DP16KD", 32, 108), ("DSP", "MULT18X18D", 51, 72)]
    assert round(rows[3].percent, 1) == 70.8  # 51 / 72


def test_a_report_without_a_resource_or_not_json_is_refused_by_name():
    partial = {k: v for k, v in GA2_UTILIZATION.items() if k != "DP16KD"}
    with pytest.raises(ecp5.ReportError, match="DP16KD"):
        ecp5.utilization({"utilization": partial})
    with pytest.raises(ecp5.ReportError, match="not JSON"):
        ecp5.load_report('{"utilization": {')
    with pytest.raises(ecp5.ReportError, match="no Fmax for clock 'clk'"):
        ecp5.fmax({"fmax": {"other": {"achieved": 1.0}}})


def test_fmax_and_critical_path_of_a_captured_report():
    report = divu_report()
    assert ecp5.fmax(report) == pytest.approx(204.165, abs=1e-3)
    path = ecp5.critical_path(report)
    assert path[0].kind == "clk-to-q" and path[-1].kind == "setup"
    assert path[0].source == "remainder_TRELLIS_FF_Q_1/Q"
    # nextpnr's Fmax is one over the path's delay
    assert 1000 / sum(s.delay for s in path) == pytest.approx(ecp5.fmax(report), rel=1e-4)


def test_the_timing_analysis_finds_nextpnrs_critical_path_as_its_worst():
    """The check fpga.py makes on every seed: the SDF read here gives nextpnr's own worst path, to
    the picosecond (the SDF holds delays in ps)."""
    report = divu_report()
    [worst, *rest] = ecp5.worst_paths(divu_timing(), divu_names(), 5)
    assert worst.delay == pytest.approx(sum(s.delay for s in ecp5.critical_path(report)), abs=2e-3)
    assert (worst.start, worst.end) == ("remainder", "remainder")  # flip-flops remainder_TRELLIS_FF_Q_*
    assert all(p.delay <= worst.delay for p in rest)


def test_worst_paths_give_each_pair_of_registers_once_bits_of_a_bus_together():
    paths = ecp5.worst_paths(divu_timing(), divu_names(), 5)
    pairs = [(ecp5.without_bit(p.start), ecp5.without_bit(p.end)) for p in paths]
    assert len(pairs) == 5 and len(set(pairs)) == 5, pairs
    assert [p.delay for p in paths] == sorted((p.delay for p in paths), reverse=True)


def test_a_memory_read_port_starts_a_path_at_its_clock_to_out():
    timing = ecp5.read_sdf(GA2_SDF.splitlines())
    dob2 = ("g_imem[0].u_ram.mem.0.1", "DOB2")
    assert timing.launch[dob2] == pytest.approx(5.830)
    assert dob2 not in timing.edges  # not a path through the memory from its clock
    names = ecp5.Names({dob2: "u_mm.win_tiles[0]", ("u_vec.op_TRELLIS_FF_Q", "Q"): "u_sm.done_LUT4_A_Z[0]"},
                       {"u_vec.op_TRELLIS_FF_Q": ["Q"]})
    [path] = ecp5.worst_paths(timing, names, 5)
    assert path.delay == pytest.approx(5.830 + 2.008)
    # the memory by its array (not by the name nextpnr gave its read data net), the flip-flop by its register
    assert (path.start, path.end, path.cells) == ("g_imem[0].u_ram.mem", "u_vec.op", 0)
    assert path.blocks() == ("g_imem[0].u_ram", "u_vec")


def test_an_sdf_without_its_timescale_is_refused():
    with pytest.raises(ecp5.ReportError, match="TIMESCALE"):
        ecp5.read_sdf(GA2_SDF.replace("(TIMESCALE 1ps)", "").splitlines())


def test_worst_paths_by_start_give_one_path_from_each_launching_block():
    paths = ecp5.worst_paths(divu_timing(), divu_names(), 5, by="start")
    assert [p.start for p in paths] == ["remainder"]  # divu's worst paths all start at its top; one block
    assert ecp5.any_copy("g_imem[2].u_ram") == "g_imem[*].u_ram"
    with pytest.raises(ValueError, match="registers or start"):
        ecp5.worst_paths(divu_timing(), divu_names(), 5, by="blocks")


@pytest.mark.parametrize(("cell", "cell_type", "net", "name"), [
    ("u_sm.state_TRELLIS_FF_Q_2", "TRELLIS_FF", "u_sm.done_LUT4_A_Z[0]", "u_sm.state"),
    ("u_sram.g_bank[9].u_ram.mem.0.0", "DP16KD", "u_mm.a[3]", "u_sram.g_bank[9].u_ram.mem"),
    ("u_dma.dq.0.25$DPRAM_COMB3", "TRELLIS_COMB", "u_dma.dq.0.25_DO_3[0]", "u_dma.dq"),  # a LUT RAM
    ("u_dma.dq_rp_LUT4_C_Z_TRELLIS_FF_DI", "TRELLIS_FF", "u_dma.busy", "u_dma.busy"),
    ("u_dma.dq_rp_LUT4_C_Z_TRELLIS_FF_DI", "TRELLIS_FF", "$abc$12$n4", "u_dma.dq_rp"),
    ("$auto$ff.cc:266$77", "TRELLIS_FF", "", "$auto$ff.cc:266$77"),
])
def test_a_register_is_named_by_its_rtl_name_not_a_made_up_one(cell, cell_type, net, name):
    assert ecp5.register_name(cell, cell_type, net) == name


@pytest.mark.parametrize(("name", "split"), [
    ("u_mm.u_sys.acc[3]", ("u_mm.u_sys", "acc[3]")),
    ("g_imem[0].u_ram.rdata[2]", ("g_imem[0].u_ram", "rdata[2]")),
    ("state[1]", ("ga2", "state[1]")),
    ("u_sram.g_bank[1.5].q", ("u_sram.g_bank[1.5]", "q")),
])
def test_a_name_splits_into_its_block_and_signal(name, split):
    assert ecp5.block_and_signal(name) == split


def test_a_block_runs_own_registers_are_named_by_the_block():
    assert ecp5.block_and_signal("e[2]", "ga2_sm") == ("ga2_sm", "e[2]")
    assert ecp5.block_and_signal("u_div.d", "ga2_sm") == ("u_div", "d")


def test_the_part_is_the_smaller_one_the_netlist_fits():
    default = {"LUT4": 11015, "CCU2C": 1842, "TRELLIS_DPR16X4": 66, "DP16KD": 32, "MULT18X18D": 51}
    device, why = ecp5.choose_device(default)
    assert device is ecp5.DEVICES["45k"], why
    # the 8 x 8 array's netlist (synth_ecp5 of ga2 with GA2_N_D=8)
    eight = {"LUT4": 19122, "CCU2C": 2637, "TRELLIS_DPR16X4": 67, "DP16KD": 36, "MULT18X18D": 99}
    device, why = ecp5.choose_device(eight)
    assert device is ecp5.DEVICES["85k"] and "fit the LFE5U-85F" in why
    device, why = ecp5.choose_device(dict(default, MULT18X18D=200))
    assert device is None and "200 MULT18X18D > 156" in why


def test_two_configurations_never_share_a_folder():
    a, b = config.Config(), config.Config(n=8)
    assert fpga.rtl_label(a) == "S4096_Q4" and fpga.rtl_label(b) == "S4096_Q4_N8"
    assert fpga.yosys_script(a, "n.json") != fpga.yosys_script(b, "n.json")
    assert "-DGA2_N_D=8" in fpga.yosys_script(b, "n.json") and "synth_ecp5 -top ga2" in fpga.yosys_script(a, "n.json")


def test_a_block_has_a_folder_and_script_of_its_own():
    """--block ga2_sm synthesizes that module alone, in a folder named by it first: never the chip's."""
    cfg = config.Config()
    script = fpga.yosys_script(cfg, "n.json", "ga2_sm")
    assert "synth_ecp5 -top ga2_sm " in script and "rtl/ga2_mm.v" not in script
    assert fpga.yosys_script(cfg, "n.json") == fpga.yosys_script(cfg, "n.json", fpga.TOP)
    assert fpga.folder_label(cfg, "ga2_sm") == "ga2_sm-S4096_Q4" and fpga.folder_label(cfg) == "S4096_Q4"
    assert "ga2_sm" in fpga.BLOCK_NAMES and "ga2_mm" in fpga.BLOCK_NAMES


def _kept_run(out: Path, cfg: config.Config, rtl: str, fmaxes: list[float], part: str = "LFE5U-45F",
              top: str | None = None) -> None:
    """A make fpga run as it is kept in out/fpga: the synthesis result and one folder per seed (with
    `top`, a --block run of that block, kept as a chip's folder would be)."""
    run = out / f"{fpga.rtl_label(cfg)}-0123456789ab"
    (run / "synth").mkdir(parents=True)
    synthesized = {"rtl": rtl, "config": cfg.key(), **({"top": top} if top else {})}
    (run / "synth" / "result.json").write_text(json.dumps(synthesized))
    for seed, mhz in enumerate(fmaxes, 1):
        folder = run / f"45k-100mhz-seed{seed}"
        folder.mkdir()
        (folder / "result.json").write_text(json.dumps({"seed": seed, "device": part}))
        (folder / "report.json").write_text(json.dumps({"utilization": {}, "fmax": {"clk": {"achieved": mhz}}}))


def test_tokens_per_second_use_the_lowest_seed_of_these_sources(tmp_path, monkeypatch):
    """The rate is tokens x the lowest seed's Fmax / cycles, for a run of today's RTL sources; a
    kept run of other sources (an older RTL) gives no rate, only the note that none is measured."""
    monkeypatch.setattr(fpga, "OUT", tmp_path)
    cfg = config.active()
    _kept_run(tmp_path / "old", cfg, "not-these-sources", [90.0])
    monkeypatch.setattr(fpga, "OUT", tmp_path / "old")
    assert fpga.measured_fmax(cfg) is None
    assert "no Fmax measured" in fpga.tokens_line([("B=1", 1, 738)], cfg)
    _kept_run(tmp_path / "new", cfg, fpga.rtl_hash(), [61.5, 52.25, 70.0])
    monkeypatch.setattr(fpga, "OUT", tmp_path / "new")
    measured = fpga.measured_fmax(cfg)
    assert (measured.mhz, measured.seeds, measured.part) == (52.25, 3, "LFE5U-45F")
    line = fpga.tokens_line([("B=1", 1, 738), ("B=8", 8, 2610)], cfg)
    assert f"B=1 {52.25e6 / 738:,.0f} tokens/s" in line and f"B=8 {8 * 52.25e6 / 2610:,.0f} tokens/s" in line
    assert "52.2 MHz, the lowest of 3 placement seeds on the LFE5U-45F" in line


def test_a_block_run_never_gives_the_chips_tokens_per_second(tmp_path, monkeypatch):
    """A --block run of today's sources is no Fmax of the chip, even where a chip's run would be kept."""
    cfg = config.active()
    _kept_run(tmp_path, cfg, fpga.rtl_hash(), [140.0], top="ga2_sm")
    monkeypatch.setattr(fpga, "OUT", tmp_path)
    assert fpga.measured_fmax(cfg) is None
