"""Quantization: per-tensor symmetric int8 scales from calibration, and the integer parameters.

The scheme (docs/quantization.md):

* Every tensor is int8 with one scale s and zero point 0: real = s * q, q in [-127, 127] for
  quantized inputs and weights (round half away from zero), [-128, 127] for computed tensors.
* s = max|value| / 127 over the calibration runs, or from the caller's ``ranges`` for a named
  range group (a group shares one scale: a cached key row and a new key row must agree).
* A softmax output has the fixed scale 1/128. A softmax input keeps its calibrated scale; the
  instruction carries smul = 2**14 * s so the hardware converts differences to the exponent
  table's steps of 1/16.
* A multiplier M (real) becomes an unsigned 16-bit integer and a right shift: M ~ qa / 2**qs,
  with the largest shift that keeps qa < 2**16.
"""

from __future__ import annotations

import math

import numpy as np

from . import checks, isa

SOFTMAX_IN_SCALE = 1.0 / (1 << isa.SM_IN_FRAC)
SOFTMAX_OUT_SCALE = 1.0 / 128.0
QMAX = 127


class CompileError(ValueError):
    """The graph cannot be compiled for GA2; the message names the node and the limit."""


def scale_for(max_abs: float, what: str = "a tensor") -> float:
    """The int8 scale that maps max_abs to 127 (1.0 for an all-zero tensor).

    max_abs must be a finite number >= 0: a NaN used to fail ``max_abs > 0`` and give the scale
    1.0, which quantized every value of the tensor wrongly and said nothing."""
    max_abs = checks.number(max_abs, f"largest magnitude of {what}", CompileError)
    if max_abs < 0:
        raise CompileError(f"largest magnitude of {what} must be >= 0, got {max_abs!r}")
    return max_abs / QMAX if max_abs > 0 else 1.0


def quantize(values, scale: float, what: str = "values") -> np.ndarray:
    """float -> int8, round half away from zero, clipped to [-127, 127].

    The values must be finite and the scale a finite number > 0 (ValueError naming ``what``):
    NaN has no int8, and numpy would make it an arbitrary integer without a word."""
    scale = checks.number(scale, f"scale of {what}", positive=True)
    x = checks.finite_array(values, what) / scale
    q = np.sign(x) * np.floor(np.abs(x) + 0.5)
    return np.clip(q, -QMAX, QMAX).astype(np.int64)


def multiplier(m: float, node: str, what: str = "requantization multiplier") -> tuple[int, int]:
    """Represent a positive real multiplier as (qa, qs) with m ~ qa / 2**qs, qa < 2**16."""
    if not m > 0 or not math.isfinite(m):
        raise CompileError(f"node {node!r}: {what} {m!r} is not a positive number")
    if m >= (1 << 16):
        raise CompileError(f"node {node!r}: {what} {m:.3g} exceeds the 16-bit limit {1 << 16}")
    shift = min(isa.MAX_SHIFT, max(0, int(math.floor(math.log2((1 << 16) / m))) - 1))
    qa = int(math.floor(m * (1 << shift) + 0.5))
    while qa >= (1 << 16) and shift > 0:
        shift -= 1
        qa = int(math.floor(m * (1 << shift) + 0.5))
    if not 0 < qa < (1 << 16):
        raise CompileError(f"node {node!r}: {what} {m:.3g} cannot be written as a 16-bit multiplier and a shift "
                           f"of at most {isa.MAX_SHIFT} (it would be {qa} / 2**{shift})")
    return qa, shift


def pair_multiplier(ma: float, mb: float, node: str) -> tuple[int, int, int]:
    """Two multipliers sharing one shift (for y = a*ma + b*mb): (qa, qb, qs)."""
    big = max(ma, mb)
    _, shift = multiplier(big, node, "residual multiplier")
    qa = int(math.floor(ma * (1 << shift) + 0.5))
    qb = int(math.floor(mb * (1 << shift) + 0.5))
    while max(qa, qb) >= (1 << 16) and shift > 0:
        shift -= 1
        qa = int(math.floor(ma * (1 << shift) + 0.5))
        qb = int(math.floor(mb * (1 << shift) + 0.5))
    if max(qa, qb) >= (1 << 16) or (ma > 0 and qa == 0) or (mb > 0 and qb == 0):
        raise CompileError(f"node {node!r}: residual multipliers {ma:.3g}, {mb:.3g} do not fit 16 bits with one shift")
    return qa, qb, shift
