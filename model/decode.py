"""The host loop of Chapter 12: decode token by token, one compiled program per context size.

The host keeps the cache as plain lists of float rows. Step L (context n = L) runs the program
compiled for n on the inputs x = E[token], kc, vc (the L - 1 cached rows), reads back the logits,
the token the chip chose, and the new key and value rows, and appends those to its cache.

Calibration runs the float model over every start token for the whole decode, so each context
size gets calibration inputs, and one set of ranges for x, k and v is shared by every program:
a key row quantized by one program is read back exactly by the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import capra
import tiny_lm as T
from capra.machine import Counters


def calibrate(m: dict, steps: int, starts=range(T.V), W: int | None = None
              ) -> tuple[dict[int, list[dict]], dict[str, float]]:
    """Calibration inputs per context size, and the shared ranges of x, k and v.

    Runs the float decode for `steps` tokens from every start token. With a window W, step L
    attends min(L, W) tokens (Chapter 15), so only contexts 1 .. W get calibration inputs.
    """
    calib: dict[int, list[dict]] = {}
    ranges = {"x": 0.0, "k": 0.0, "v": 0.0}
    for start in starts:
        tok, kc, vc = start, [], []
        for L in range(1, steps + 1):
            n = L if W is None else min(L, W)
            x = list(m["E"][tok])
            feed = {"x": [x]}
            if n > 1:
                feed["kc"] = [list(r) for r in kc[L - n :]]
                feed["vc"] = [list(r) for r in vc[L - n :]]
            calib.setdefault(n, []).append(feed)
            logits, k, v, _ = T.float_step(m, tok, kc[L - n :], vc[L - n :])
            ranges["x"] = max(ranges["x"], max(abs(a) for a in x))
            ranges["k"] = max(ranges["k"], max(abs(a) for a in k))
            ranges["v"] = max(ranges["v"], max(abs(a) for a in v))
            kc.append(k)
            vc.append(v)
            tok = logits.index(max(logits))
    return calib, ranges


@dataclass
class StepRecord:
    """What one decode step produced, and how it ran on the machine model."""

    L: int
    ctx: int
    code: list[int]
    ext: list[int]
    logits: list[float]
    ints: list[int]
    tok: int
    counters: Counters = field(default_factory=Counters)

    def __getitem__(self, key: str):  # records read like the book's dicts: r["ints"]
        return getattr(self, key)


class ChipHost:
    """Decodes on the chip's machine model with the cache kept by the host as plain lists."""

    def __init__(self, m: dict, steps: int, starts=range(T.V)) -> None:
        self.m = m
        self.steps = steps
        self.calib, self.ranges = calibrate(m, steps, starts)
        self.progs: dict[int, capra.Program] = {}

    def program(self, n: int) -> capra.Program:
        """The program for context n, compiled on first use."""
        if n not in self.progs:
            if n not in self.calib:
                raise capra.CompileError(f"no calibration for context {n}: the host was calibrated for "
                                         f"{self.steps} steps")
            self.progs[n] = capra.compile_graph(T.build_graph(self.m, n), self.calib[n], ranges=self.ranges)
        return self.progs[n]

    def generate(self, start: int, n: int, force: list[int] | None = None) -> tuple[list[int], list[StepRecord]]:
        """Decode n tokens from `start`; with `force` (force[0] = start), feed force[L] instead of
        the chip's choice (teacher forcing)."""
        if force is not None and len(force) < n + 1:
            raise ValueError(f"force has {len(force)} tokens, generate({start}, {n}) needs {n + 1}")
        toks, kc, vc, records = [start], [], [], []
        for L in range(1, n + 1):
            feed = {"x": [list(self.m["E"][toks[-1]])]}
            if L > 1:
                feed["kc"], feed["vc"] = kc, vc
            P = self.program(L)
            out, mach = capra.run(P, feed, machine=True)
            tok = out["tok"][0][0][0]
            records.append(StepRecord(L, L, P.code, capra.ext_image(P, feed), out["logits"][1][0],
                                      out["logits"][0][0], tok, mach.counters))
            kc = kc + [out["k_new"][1][0]]
            vc = vc + [out["v_new"][1][0]]
            toks.append(force[L] if force is not None else tok)
        return toks, records
