"""How long a decode the chip can run, found from the code itself rather than written down.

Step L of a decode runs the program compiled for context L (with a window W, for min(L, W)).
Whether that program exists is the compiler's business: the scratchpad, the instruction memory,
the array's longest reduction and the external memory all enter through its own checks. So the
limit is found by compiling: ``largest_context`` bisects on ``compile_graph`` for the tiny model's
decode graph, and a tool refuses a step count past it up front, with the compiler's reason the
next size fails, instead of calibrating for minutes and failing on the scratchpad.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tiny_lm as T
from capra import CompileError, compile_graph, config, isa


@dataclass(frozen=True)
class ContextLimit:
    largest: int  # the largest context whose program compiles (0: not even context 1)
    reason: str  # why context largest + 1 does not

    def describe(self) -> str:
        return (f"the largest decode context GA2 can run, {self.largest} (external memory "
                f"{isa.EXT_MEMORY} words); context {self.largest + 1} does not compile: {self.reason}")


def compile_error(model: dict, n: int) -> str | None:
    """None when the tiny model's decode program for context n compiles, else the compiler's reason.
    Sizes do not depend on the values, so any calibration input of the right shapes will do."""
    rng = np.random.default_rng(0)
    feed = {"x": rng.uniform(-1, 1, (1, T.D)).tolist()}
    if n > 1:
        feed["kc"] = rng.uniform(-1, 1, (n - 1, T.D)).tolist()
        feed["vc"] = rng.uniform(-1, 1, (n - 1, T.D)).tolist()
    try:
        compile_graph(T.build_graph(model, n), [feed], ranges={"x": 1.0, "k": 1.0, "v": 1.0})
    except CompileError as error:
        return str(error)
    return None


_found: dict[tuple, ContextLimit] = {}


def largest_context(model: dict) -> ContextLimit:
    """The largest context whose decode program compiles on the active configuration, by bisection
    (a larger context needs more of every memory, so the contexts that compile are 1 .. largest)."""
    shapes = tuple((k, np.shape(v)) for k, v in sorted(model.items()) if hasattr(v, "shape"))
    key = (config.active().compile_key(), shapes)
    if key not in _found:
        first = compile_error(model, 1)
        if first is not None:
            _found[key] = ContextLimit(0, first)
            return _found[key]
        lo, hi = 1, isa.MM_MAX_K + 1  # no context past the array's longest reduction can compile
        reason = compile_error(model, hi)
        if reason is None:
            lo, reason = hi, f"past {hi} the attention's reduction is longer than GA2's limit {isa.MM_MAX_K}"
        while hi - lo > 1:
            mid = (lo + hi) // 2
            error = compile_error(model, mid)
            if error is None:
                lo = mid
            else:
                hi, reason = mid, error
        _found[key] = ContextLimit(lo, reason)
    return _found[key]
