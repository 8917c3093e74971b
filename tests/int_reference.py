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


def softmax_ref(x: list[int], sink: int | None, smul: int = 1024) -> list[int]:
    """max, table index min(255, ((max - x) * smul + 512) >> 10), table sum, one reciprocal
    floor(2^31 / S), p = min(127, (E*R + 2^23) >> 24)."""
    m = max(x) if sink is None else max(max(x), sink)

    def step(d: int) -> int:
        return min(255, (d * smul + 512) >> 10)

    e = [EXP[step(m - int(v))] for v in x]
    s = sum(e) + (EXP[step(m - sink)] if sink is not None else 0)
    r = (1 << 31) // s
    return [min(127, (v * r + (1 << 23)) >> 24) for v in e]


def _wrap32(v: int) -> int:
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def quantize_ref(x: float, scale: float) -> int:
    """Round half away from zero, clip to +-127."""
    q = x / scale
    r = math.floor(abs(q) + 0.5)
    return max(-127, min(127, int(r if q >= 0 else -r)))


def eval_program(P, feeds: dict) -> dict[str, list[list[int]]]:
    """Every node's integers, from the program's scales and integer parameters, element by element."""
    vals: dict[str, list[list[int]]] = {}
    for node in P.graph.nodes.values():
        name, op = node.name, node.op
        p = P.params.get(name, {})
        args = [vals[i] for i in node.inputs]
        if op == "input":
            t = P.tensors[name]
            flat = [float(v) for row in feeds[name] for v in (row if hasattr(row, "__len__") else [row])]
            vals[name] = [[quantize_ref(flat[r * t.cols + c], t.scale) for c in range(t.cols)] for r in range(t.rows)]
        elif op == "const":
            vals[name] = [[int(v) for v in row] for row in P.consts[name]]
        elif op == "matmul":
            a, b = args
            bt = b if node.attrs["transpose_b"] else [list(col) for col in zip(*b)]
            out = []
            for row in a:
                acc = [_wrap32(sum(x * y for x, y in zip(row, col))) for col in bt]
                if node.attrs["relu"]:
                    acc = [max(0, v) for v in acc]
                out.append([requantize_ref(v, p["qa"], p["qs"]) for v in acc])
            vals[name] = out
        elif op == "rows":  # a view of some rows of its input: the same integers
            vals[name] = args[0][node.attrs["lo"]:node.attrs["hi"]]
        elif op == "concat":
            vals[name] = args[0] + args[1]
        elif op == "softmax":
            vals[name] = [softmax_ref(row, p["sink"], p["smul"]) for row in args[0]]
        elif op == "add":
            vals[name] = [[requantize_ref(x * p["qa"] + y * p["qb"], 1, p["qs"]) for x, y in zip(r1, r2)]
                          for r1, r2 in zip(*args)]
        elif op == "mul":
            vals[name] = [[requantize_ref(x * y, p["qa"], p["qs"]) for x, y in zip(r1, r2)] for r1, r2 in zip(*args)]
        elif op == "relu":
            vals[name] = [[max(0, v) for v in row] for row in args[0]]
        elif op == "argmax":
            vals[name] = [[row.index(max(row))] for row in args[0]]
        else:
            raise ValueError(f"node {name!r}: the reference does not know op {op!r}")
    return vals
