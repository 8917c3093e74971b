"""An integer reference for GA2's arithmetic, written from the ISA document, not from the model.

Plain Python integers, one element at a time: slow and obvious, so it can judge the numpy code.
"""

from __future__ import annotations

import math


def requantize_ref(acc: int, mult: int, shift: int) -> int:
    """sat8((acc * mult + 2^(shift-1)) >> shift), floor shift, no rounding term for shift 0."""
    p = int(acc) * int(mult)
    if shift:
        p += 1 << (shift - 1)
    p >>= shift
    return max(-128, min(127, p))


EXP = [math.floor(32768 * math.exp(-d / 16) + 0.5) for d in range(256)]


def softmax_ref(x: list[int], sink: int | None) -> list[int]:
    """max, table sum, one reciprocal floor(2^31 / S), p = min(127, (E*R + 2^23) >> 24)."""
    m = max(x) if sink is None else max(max(x), sink)
    e = [EXP[m - int(v)] for v in x]
    s = sum(e) + (EXP[m - sink] if sink is not None else 0)
    r = (1 << 31) // s
    return [min(127, (v * r + (1 << 23)) >> 24) for v in e]
