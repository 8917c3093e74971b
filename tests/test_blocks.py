"""Every GA2 block under cocotb (Icarus), driven with random inputs against its Python model.

Each case builds one block (or a small bench wrapper from tb/cocotb/) into a folder of its own
(pytest's tmp_path) with cocotb's Python runner and runs the cocotb tests of
tests/benches/cocotb_<block>.py. A case fails when any of its cocotb tests fails, or when the
simulator dies before writing its results.
Set COCOTB_RANDOM_SEED to replay other random vectors (the default seed is fixed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[1]
RTL = ROOT / "rtl"
BENCHES = ROOT / "tb" / "cocotb"
DEFAULT_SEED = 20240601
# cocotb imports a bench's test module by name in the simulator's Python, with this process's
# sys.path: the benches are the package tests/benches (pytest puts tests/ on the path, as for
# conftest and int_reference), and the project's own packages come from the installed project.

from capra.config import Config  # noqa: E402
from conftest import REQUIRE_SIMULATORS, needs_icarus  # noqa: E402

try:
    import cocotb_tools.runner as cocotb_runner
except ImportError as error:  # a plain pytest may skip the benches; make test may not
    if os.environ.get(REQUIRE_SIMULATORS) == "1":
        raise ImportError(f"cocotb is not importable ({error}): {REQUIRE_SIMULATORS}=1 needs the RTL benches; "
                          "run make (it installs cocotb into .venv from pyproject.toml)") from None
    pytest.skip(f"cocotb is not importable: {error}", allow_module_level=True)

from benches import PROGRAMS_ENV  # noqa: E402

pytestmark = needs_icarus  # every bench runs on Icarus


@dataclass(frozen=True)
class Block:
    case: str  # build directory name under out/cocotb/
    toplevel: str
    sources: tuple[str, ...]  # relative to the repository root
    module: str  # test module in tests/benches/
    parameters: dict[str, int] = field(default_factory=dict)
    config: str = ""  # a configuration other than the default (GA2_CONFIG syntax): its defines and model
    programs: str = ""  # the whole chip's random programs this case runs ("<first>:<end>"; benches.PROGRAMS_ENV)


def _rtl(*names: str) -> tuple[str, ...]:
    return tuple(f"rtl/{name}.v" for name in names)


# Icarus finds the modules a block instantiates in rtl/ by name (-y), so a row names its top only
GA2_SOURCES = _rtl("ga2") + ("tb/extmem_rw.v", "tb/ga2_sys.v", "tb/cocotb/ga2_wrap.v")

BLOCKS = [
    Block("requant", "requant", _rtl("requant"), "cocotb_requant"),
    Block("divu", "divu", _rtl("divu"), "cocotb_divu"),
    Block("systolic_n4", "systolic", _rtl("systolic"), "cocotb_systolic", {"N": 4}),
    Block("systolic_n2", "systolic", _rtl("systolic"), "cocotb_systolic", {"N": 2}),
    Block("systolic_n8", "systolic", _rtl("systolic"), "cocotb_systolic", {"N": 8}),
    Block("exp_lut", "exp_lut", _rtl("exp_lut"), "cocotb_exp_lut"),
    Block("rowmem", "rowmem", _rtl("rowmem"), "cocotb_rowmem"),
    Block("sram", "sram", _rtl("sram"), "cocotb_sram"),
    Block("dma", "dma_wrap", _rtl("dma") + ("tb/cocotb/dma_wrap.v",), "cocotb_dma"),
    Block("ga2_vec", "vec_wrap", _rtl("ga2_vec") + ("tb/cocotb/vec_wrap.v",),
          "cocotb_ga2_vec"),
    Block("ga2_sm", "sm_wrap", _rtl("ga2_sm") + ("tb/cocotb/sm_wrap.v",),
          "cocotb_ga2_sm"),
    Block("ga2_mm", "mm_wrap", _rtl("ga2_mm") + ("tb/cocotb/mm_wrap.v",), "cocotb_ga2_mm"),
    # the matmul engine around a 2 x 2 and an 8 x 8 array (the same matmuls, their own cycle counts)
    Block("ga2_mm_n2", "mm_wrap", _rtl("ga2_mm") + ("tb/cocotb/mm_wrap.v",), "cocotb_ga2_mm", {}, "n=2"),
    Block("ga2_mm_n8", "mm_wrap", _rtl("ga2_mm") + ("tb/cocotb/mm_wrap.v",), "cocotb_ga2_mm", {}, "n=8"),
    Block("ga2", "ga2_wrap", GA2_SOURCES, "cocotb_ga2"),
    # the same programs against a memory whose channels stall a quarter of the cycles (the model on the
    # same schedule: every counter exact); make test runs the first half of the random programs (and
    # every hand-written and illegal one), make test-full the second half as a case of its own
    Block("ga2_not_ready", "ga2_wrap", GA2_SOURCES, "cocotb_ga2", {"STALL": 25, "SEED": 7}, programs="0:20"),
    Block("ga2_not_ready_second_half", "ga2_wrap", GA2_SOURCES, "cocotb_ga2", {"STALL": 25, "SEED": 7},
          programs="20:40"),
    # a two-word external interface (beats of two words), with an always-ready and a refusing memory
    # (the always-ready one in make test-full: the refusing memory covers the same programs and more)
    Block("ga2_e2", "ga2_wrap", GA2_SOURCES, "cocotb_ga2", {}, "ext_words=2"),
    Block("ga2_e2_not_ready", "ga2_wrap", GA2_SOURCES, "cocotb_ga2", {"STALL": 50, "SEED": 3}, "ext_words=2",
          programs="0:20"),
    Block("ga2_e2_not_ready_second_half", "ga2_wrap", GA2_SOURCES, "cocotb_ga2", {"STALL": 50, "SEED": 3},
          "ext_words=2", programs="20:40"),
    # ga2 itself on cocotbext-axi's AxiRam (a memory nobody here wrote), every channel pausing at random:
    # in make test the first 12 random programs (the AxiRam is Python: a program costs a third of a
    # second), the hand-written ones and the transfers past ext_limit; the other 28 and the two-word
    # bus in make test-full
    Block("ga2_axi", "ga2", _rtl("ga2"), "cocotb_ga2_axi", programs="0:12"),
    Block("ga2_axi_rest", "ga2", _rtl("ga2"), "cocotb_ga2_axi", programs="12:40"),
    Block("ga2_axi_e2", "ga2", _rtl("ga2"), "cocotb_ga2_axi", {}, "ext_words=2"),
]


def _failures(results: Path) -> tuple[int, list[str]]:
    """The number of tests in a cocotb results file and a line per failed one."""
    tests, failed = 0, []
    for case in ElementTree.parse(results).getroot().iter("testcase"):
        tests += 1
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            failed.append(f"{case.get('name')}: {bad.get('message') or (bad.text or '').strip()}")
    return tests, failed


# The always-ready benches of the whole chip run in make test-full only: the refusing memory runs the
# same programs (and the illegal ones) through the same wrapper, and the replays (tests/test_replay.py)
# compare every counter exactly on an always-ready memory, for these random programs and more.
SLOW_BLOCKS = {"ga2", "ga2_e2", "ga2_axi_e2", "ga2_not_ready_second_half", "ga2_e2_not_ready_second_half",
               "ga2_axi_rest"}


@pytest.mark.parametrize("block", [pytest.param(b, marks=pytest.mark.slow) if b.case in SLOW_BLOCKS else b
                                   for b in BLOCKS], ids=[b.case for b in BLOCKS])
def test_block_against_python_model(block: Block, tmp_path) -> None:
    build_dir = tmp_path / block.case
    cfg = Config.parse(block.config)
    runner = cocotb_runner.get_runner("icarus")
    runner.build(
        sources=[ROOT / s for s in block.sources],
        includes=[RTL],
        hdl_toplevel=block.toplevel,
        parameters=block.parameters,
        defines=dict(d.split("=") for d in cfg.rtl_defines()),
        build_dir=build_dir,
        timescale=("1ns", "1ps"),
        build_args=["-Wall", "-Wno-timescale", "-y", str(RTL)],
        always=True,  # Icarus builds in milliseconds, and the runner does not track ga2_defs.vh
    )
    results = build_dir / "results.xml"
    seed = os.environ.get("COCOTB_RANDOM_SEED", str(DEFAULT_SEED))
    try:
        runner.test(
            test_module=f"benches.{block.module}",
            hdl_toplevel=block.toplevel,
            build_dir=build_dir,
            test_dir=build_dir,
            results_xml=str(results),
            seed=seed,
            log_file=build_dir / "sim.log",
            # the test module's machine model follows the configuration
            extra_env={"GA2_CONFIG": cfg.key(), **({PROGRAMS_ENV: block.programs} if block.programs else {})},
        )
    except SystemExit as stop:  # the runner exits when a test fails under pytest; report which one
        if not results.is_file():
            pytest.fail(f"{block.case}: the simulator stopped (exit {stop.code}) before writing {results}; "
                        f"see {build_dir / 'sim.log'}")
    tests, failed = _failures(results)
    assert tests > 0, f"{block.case}: no cocotb test ran (see {build_dir / 'sim.log'})"
    assert not failed, f"{block.case} (seed {seed}): " + "; ".join(failed)
