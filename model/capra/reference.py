"""The integer semantics of a compiled program, executed directly in numpy (no machine model).

This is what ``capra.run(P, inputs)`` computes: every node in int8 / int32 with the program's own
multipliers and shifts, using the hardware's requantization and softmax definitions. The machine
model must reproduce it exactly from the generated code; the tests hold them to that.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import checks
from .compiler import Program
from .machine import requantize, softmax_int8, wrap32
from .quant import quantize


def quantize_inputs(P: Program, inputs: dict) -> dict[str, np.ndarray]:
    """The int8 rows of every graph input, checked against the shapes the program was built for.

    Every run-time entry (``run``, ``run(machine=True)``, ``ext_image``) comes through here, so an
    input of the wrong shape, or with a NaN or an infinity (which has no int8), is a ValueError
    naming the program and the input, before anything is computed."""
    if not isinstance(inputs, Mapping):
        raise ValueError(f"program {P.name!r}: inputs must map input names to rows, got {type(inputs).__name__}")
    q = {}
    for name in P.inputs:
        t = P.tensors[name]
        if name not in inputs:
            raise ValueError(f"program {P.name!r}: input {name!r} is missing")
        value = checks.feed(inputs[name], (t.rows, t.cols), f"program {P.name!r}: input {name!r}",
                            expects="the program expects")
        q[name] = quantize(value, t.scale, f"program {P.name!r}: input {name!r}")
    return q


def run_reference(P: Program, inputs: dict) -> dict[str, np.ndarray]:
    """Integer value of every node."""
    vals: dict[str, np.ndarray] = dict(quantize_inputs(P, inputs))
    for node in P.graph.nodes.values():
        name, op = node.name, node.op
        args = [vals[i] for i in node.inputs]
        p = P.params.get(name, {})
        if op == "input":
            continue
        if op == "const":
            vals[name] = P.consts[name]
        elif op == "matmul":
            a, b = args
            acc = wrap32(a @ (b.T if node.attrs["transpose_b"] else b))
            if node.attrs["relu"]:
                acc = np.maximum(acc, 0)
            vals[name] = requantize(acc, p["qa"], p["qs"])
        elif op == "concat":
            vals[name] = np.vstack(args)
        elif op == "rows":
            vals[name] = args[0][node.attrs["lo"] : node.attrs["hi"]]
        elif op == "softmax":
            vals[name] = np.vstack([softmax_int8(row, p["sink"], p["smul"]) for row in args[0]])
        elif op == "add":
            vals[name] = requantize(args[0] * p["qa"] + args[1] * p["qb"], 1, p["qs"])
        elif op == "mul":
            vals[name] = requantize(args[0] * args[1], p["qa"], p["qs"])
        elif op == "relu":
            vals[name] = np.maximum(args[0], 0)
        elif op == "argmax":
            vals[name] = np.argmax(args[0], axis=1)[:, None]
    return vals
