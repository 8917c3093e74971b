"""How long a decode the chip can run, found from the code itself rather than written down.

Step L of a decode runs the program compiled for context L (Chapter 12; with a window W, for
min(L, W)). Whether that program exists is the compiler's business: the scratchpad, the instruction
memory, the array's longest reduction and the external memory (GA2_EXT) all enter through its own
checks. So the limit is found by compiling: ``largest_context`` bisects on ``compile_graph`` for the
tiny model's decode graph, and a tool refuses a step count past it up front, with the compiler's
reason the next size fails, instead of calibrating for minutes and failing on the scratchpad.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

import capra  # noqa: E402
import cli  # noqa: E402
import numpy as np  # noqa: E402
import tiny_lm as T  # noqa: E402
from capra import isa  # noqa: E402


@dataclass(frozen=True)
class ContextLimit:
    largest: int  # the largest context whose program compiles
    reason: str  # why context largest + 1 does not

    def describe(self) -> str:
        return (f"the largest decode context GA2 can run, {self.largest} (GA2_EXT={capra.ext_limit()}); "
                f"context {self.largest + 1} does not compile: {self.reason}")


def compile_error(model: dict, n: int) -> str | None:
    """None when the tiny model's decode program for context n compiles, else the compiler's reason.
    Sizes do not depend on the values, so any calibration input of the right shapes will do."""
    rng = np.random.default_rng(0)
    feed = {"x": rng.uniform(-1, 1, (1, T.D)).tolist()}
    if n > 1:
        feed["kc"] = rng.uniform(-1, 1, (n - 1, T.D)).tolist()
        feed["vc"] = rng.uniform(-1, 1, (n - 1, T.D)).tolist()
    try:
        capra.compile_graph(T.build_graph(model, n), [feed], ranges={"x": 1.0, "k": 1.0, "v": 1.0})
    except capra.CompileError as error:
        return str(error)
    return None


_found: dict[tuple, ContextLimit] = {}


def largest_context(model: dict) -> ContextLimit:
    """The largest context whose decode program compiles, by bisection (a larger context needs more
    of every memory, so the programs that compile are the contexts 1 .. largest). ToolError when
    not even context 1 compiles (GA2_EXT too small)."""
    key = (capra.ext_limit(), capra.config.active().key(),  # the scratchpad's size is the configuration's
           tuple((k, np.shape(v)) for k, v in sorted(model.items()) if hasattr(v, "shape")))
    if key not in _found:
        first = compile_error(model, 1)
        if first is not None:
            raise cli.ToolError(f"not even a one-token decode fits GA2 (GA2_EXT={capra.ext_limit()}): {first}")
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


def require_decode(steps: int, what: str) -> None:
    """ToolError (one line, exit 2) when GA2_EXT is bad or the structured model's decode of `steps`
    tokens does not compile, for a tool whose own decode has a fixed length: it is refused before
    any work instead of failing halfway with the compiler's traceback."""
    cli.ext_words()
    error = compile_error(T.make_model("structured"), steps)
    if error is not None:
        raise cli.ToolError(f"{what}: the {steps}-step decode does not compile "
                            f"(GA2_EXT={capra.ext_limit()}): {error}")


def check_context(ap: cli.Parser, argument: str, context: int, model: dict) -> None:
    """Refuse (one line, exit 2) a decode that would need a context past ``largest_context``."""
    limit = largest_context(model)
    if context > limit.largest:
        ap.refuse(argument, f"{context} is past {limit.describe()}")
