"""The integer semantics of a compiled program, executed directly in numpy (no machine model).

This is what ``capra.run(P, inputs)`` computes: every node in int8 / int32 with the program's own
multipliers and shifts, using the hardware's requantization and softmax definitions. The machine
model must reproduce it exactly from the generated code; the tests hold them to that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

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
    return evaluate(P, dict(quantize_inputs(P, inputs)))


def _matmul32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return wrap32(a @ b)


def _softmax_each_row(x: np.ndarray, sink: int | None, smul: int) -> np.ndarray:
    return np.vstack([softmax_int8(row, sink, smul) for row in x])


def evaluate(P: Program, vals: dict[str, np.ndarray], *,
             matmul: Callable[[np.ndarray, np.ndarray], np.ndarray] = _matmul32,
             requant: Callable[[np.ndarray, int, int], np.ndarray] = requantize,
             softmax: Callable[[np.ndarray, int | None, int], np.ndarray] = _softmax_each_row,
             ) -> dict[str, np.ndarray]:
    """The integer value of every node of `P`, given the int8 value of every input in `vals`.

    The one statement of what each graph op computes. Tensors are (rows x cols), or carry leading
    axes of independent runs (the mixed model's vectorised prefill evaluates every prompt position
    at once that way), so every op works on the last two axes. The three arithmetic steps can be
    swapped for faster ones that give the same integers: `matmul` (the int32 accumulator of an MM),
    `requant` (int32 -> int8) and `softmax` (each row of the last axis). Adds to `vals` and
    returns it."""
    for node in P.graph.nodes.values():
        name, op = node.name, node.op
        args = [vals[i] for i in node.inputs]
        p = P.params.get(name, {})
        if op == "input":
            continue
        if op == "const":
            vals[name] = np.asarray(P.consts[name], dtype=np.int64)
        elif op == "matmul":
            a, b = args
            acc = matmul(a, np.swapaxes(b, -1, -2) if node.attrs["transpose_b"] else b)
            if node.attrs["relu"]:
                acc = np.maximum(acc, 0)
            vals[name] = requant(acc, p["qa"], p["qs"])
        elif op == "concat":
            lead = max((a.shape[:-2] for a in args), key=len)
            vals[name] = np.concatenate([np.broadcast_to(a, lead + a.shape[-2:]) for a in args], axis=-2)
        elif op == "rows":
            vals[name] = args[0][..., node.attrs["lo"]:node.attrs["hi"], :]
        elif op == "softmax":
            vals[name] = softmax(args[0], p["sink"], p["smul"])
        elif op == "add":
            vals[name] = requant(args[0] * p["qa"] + args[1] * p["qb"], 1, p["qs"])
        elif op == "mul":
            vals[name] = requant(args[0] * args[1], p["qa"], p["qs"])
        elif op == "relu":
            vals[name] = np.maximum(args[0], 0)
        elif op == "argmax":
            vals[name] = np.argmax(args[0], axis=-1)[..., None]
        else:
            raise ValueError(f"program {P.name!r}: node {name!r} has op {op!r}, which has no integer semantics here")
    return vals
