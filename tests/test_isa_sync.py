"""The ISA is defined once in Python; the Verilog constants and the exponent table must agree."""

import re
import subprocess
import sys
from pathlib import Path

from capra import config, isa

ROOT = Path(__file__).resolve().parents[1]


def _verilog_params() -> dict[str, int]:
    """The constants at the default configuration: a configurable one is `NAME_D (its `ifndef default
    in rtl/ga2_cfg.vh), an address width $clog2 of one."""
    text = (ROOT / "rtl" / "ga2_defs.vh").read_text()
    cfg_text = (ROOT / "rtl" / "ga2_cfg.vh").read_text()
    macros = {name: int(value) for name, value in re.findall(r"`define\s+(\w+)\s+(\d+)", cfg_text)}
    found = {}
    for name, value in re.findall(r"localparam\s+(?:integer|\[\d+:0\])\s+(\w+)\s*=\s*([^;]+);", text):
        value = re.sub(r"`(\w+)", lambda m: str(macros[m.group(1)]), value.strip())
        m = re.fullmatch(r"\d+'d(\d+)", value)
        c = re.fullmatch(r"\$clog2\((\d+)(?:\s*\+\s*(\d+))?\)", value)
        found[name] = (int(m.group(1)) if m else (int(c.group(1)) + int(c.group(2) or 0) - 1).bit_length() if c
                       else int(value))
    return found


def test_every_verilog_constant_equals_python():
    v = _verilog_params()
    with config.use(config.DEFAULT):  # the RTL's defaults, whatever GA2_CONFIG says
        expected = _python_constants()
    assert {k: v.get(k) for k in expected} == expected
    assert set(v) == set(expected), f"constants only in Verilog: {set(v) - set(expected)}"


def _python_constants() -> dict[str, int]:
    expected = {
        "GA2_N": isa.N, "GA2_LANES": isa.LANES, "GA2_SRAM_WORDS": isa.SRAM_WORDS,
        "GA2_SRAM_AW": isa.SRAM_WORDS.bit_length() - 1, "GA2_SRAM_GROUPS": isa.SRAM_GROUPS,
        "GA2_SRAM_RD_LAT": isa.SRAM_RD_LAT, "GA2_IMEM_INSTRS": isa.IMEM_INSTRS,
        "GA2_IMEM_AW": isa.IMEM_INSTRS.bit_length() - 1, "GA2_MM_MAX_K": isa.MM_MAX_K,
        "GA2_DMA_QUEUE": isa.DMA_QUEUE, "GA2_DMA_QW": isa.DMA_QUEUE.bit_length(),
        "GA2_DMA_PENDING": isa.DMA_PENDING, "GA2_EXT_WORDS": isa.EXT_WORDS, "GA2_DIV_CYCLES": isa.DIV_CYCLES,
        "GA2_MAX_SHIFT": isa.MAX_SHIFT, "GA2_SM_SCALE_SHIFT": isa.SM_SCALE_SHIFT,
        "GA2_SM_RECIP_BITS": isa.SM_RECIP_BITS, "GA2_SM_OUT_SHIFT": isa.SM_OUT_SHIFT, "GA2_SM_OUT_MAX": isa.SM_OUT_MAX,
        "MM_OUT8": isa.MM_OUT8, "MM_RELU": isa.MM_RELU, "MM_BIAS": isa.MM_BIAS,
        "MM_BROWS": isa.MM_BROWS, "SM_SINK": isa.SM_SINK, "LD_GATHER": isa.LD_GATHER,
        "GA2_GATHER_DESC_CYCLES": isa.GATHER_DESC_CYCLES,
        "SM_SOFTMAX": isa.SM_SOFTMAX, "SM_STEP": isa.SM_STEP, "SM_ACC": isa.SM_ACC, "SM_NORM": isa.SM_NORM,
        "SM_LAST": isa.SM_LAST, "GA2_SM_ALPHA_BITS": isa.SM_ALPHA_BITS, "GA2_SM_NORM_SHIFT": isa.SM_NORM_SHIFT,
    }
    for name in ("HALT", "LOAD", "STORE", "WAIT", "QCFG", "MM", "VEC", "SMAX"):
        expected[f"OP_{name}"] = getattr(isa, f"OP_{name}")
    for code, op in isa.VEC_OPS.items():  # the table is the one definition of the sub-ops
        expected[f"VEC_{op.name.upper()}"] = code
    expected["VEC_LAST"] = isa.VEC_LAST
    for code, name in isa.STATUS_NAMES.items():
        expected[f"ST_{name}"] = code
    return expected


def test_defaults_are_the_default_configuration():
    """These tests read the RTL's defaults: they hold for capra.config.DEFAULT."""
    with config.use(config.DEFAULT):
        assert (isa.SRAM_WORDS, isa.DMA_QUEUE, isa.EXT_LATENCY, isa.EXT_WORDS, isa.N) == (4096, 4, 4, 1, 4)


def test_testbench_default_latency_is_the_model_default():
    text = (ROOT / "tb" / "ga2_tb.v").read_text()
    found = re.search(r"localparam integer LATENCY\s*=\s*(\d+);", text)  # +LATENCY when none is given
    assert found and int(found.group(1)) == config.DEFAULT.ext_latency


def test_exp_lut_verilog_is_generated_from_the_model_table():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_exp_lut.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_instruction_encoding_round_trips():
    ins = isa.Instr(op=isa.OP_MM, flags=0xF, sub=3, cnt=0xFFFF, a=1, b=0xFFFF, c=2, d=3, e=0xFFFFFFFF)
    assert isa.Instr.decode(ins.encode()) == ins


def test_field_overflow_is_an_error_naming_the_field():
    import pytest

    with pytest.raises(ValueError, match="field cnt=65536"):
        isa.Instr(op=isa.OP_VEC, cnt=1 << 16).encode()
