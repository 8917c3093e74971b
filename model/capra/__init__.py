"""Capra: the int8 graph compiler for GA2 and the exact machine model of the chip.

Book-level API (Chapters 11-12):

    P = compile_graph(graph, calib, ranges=...)      a Program, with P.code
    out = run(P, inputs)                              the program's integer semantics in numpy
    out, mach = run(P, inputs, machine=True)          the same, executed by the machine model
    ext = ext_image(P, inputs)                        the external memory image for the RTL

``out[name] = (ints, floats)``: both lists of rows (argmax results are rows of one int).
"""

from __future__ import annotations

import numpy as np

from . import asm, checks, config, isa
from .compiler import CompileError, Program, compile_graph
from .graph import Graph, GraphError
from .machine import HazardError, Machine, ProgramError, run_program
from .reference import quantize_inputs, run_reference

__all__ = [
    "CompileError", "Graph", "GraphError", "HazardError", "Machine", "Program", "ProgramError",
    "asm", "compile_graph", "config", "ext_image", "isa", "outputs_of", "run", "run_program",
]


def ext_image(P: Program, inputs: dict) -> list[int]:
    """The program's external memory at start: constants, quantized inputs, zeroed outputs."""
    words = list(P.const_words) + [0] * (P.ext_words - len(P.const_words))
    for name, q in quantize_inputs(P, inputs).items():
        t = P.tensors[name]
        words[t.ext : t.ext + t.words] = isa.pack_int8_rows(q).tolist()
    return words


def _read_output(P: Program, name: str, ext) -> np.ndarray:
    t = P.tensors[name]
    words = np.asarray(ext[t.ext : t.ext + t.words], dtype=np.int64)
    if t.kind == "int32":
        return words.astype(np.uint32).view(np.int32).astype(np.int64).reshape(t.rows, 1)
    return isa.unpack_int8_rows(words, t.rows, t.cols)


def _as_output(P: Program, name: str, ints: np.ndarray) -> tuple[list[list[int]], list[list[float]]]:
    t = P.tensors[name]
    return ints.astype(int).tolist(), (ints * t.scale).astype(float).tolist()


def run(P: Program, inputs: dict, machine: bool = False):
    """Run a program. machine=False: the numpy integer semantics. machine=True: the GA2 machine
    model on the program's memory image; returns (outputs, machine) so counters can be read."""
    if not checks.flag(machine, "machine"):
        vals = run_reference(P, inputs)
        return {name: _as_output(P, name, vals[name]) for name in P.outputs}
    mach = run_program(P.code, ext_image(P, inputs), isa.EXT_MEMORY)
    return outputs_of(P, mach.ext), mach


def outputs_of(P: Program, ext) -> dict[str, tuple[list[list[int]], list[list[float]]]]:
    """Every output of the program as ``run`` gives it, read from a final external memory."""
    return {name: _as_output(P, name, _read_output(P, name, ext)) for name in P.outputs}
