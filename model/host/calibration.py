"""Calibration: the float decode that every program's int8 scales come from, run once.

``calibrate(m, steps, windows, starts)`` decodes greedily in float64, `steps` tokens from every
start token with every window, evaluating each step's decode graph (``tiny_lm.decode_graph``) as
the compiler would, and records

* ``feeds[n]``: the inputs of every step that ran with context n (the book's calibration sets);
* ``ranges``: every range group's largest magnitude over the whole decode, the scales a batch
  program uses, so a request's integers in any batch are those of its decode alone.

The Chapter 15 host shares only the ranges of x, k and v between its programs (a key row written
by one is read back by the next) and scales the rest of the program of context n from
``feeds[n]`` (the compiler's own calibration), as the book does.

A calibration is kept in the program store (``programs.STORE``) under the model's fingerprint,
its arguments and the code's version, so a second run with unchanged code reads it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import tiny_lm as T

from . import programs


@dataclass
class Calibration:
    feeds: dict[int, list[dict]] = field(default_factory=dict)
    ranges: dict[str, float] = field(default_factory=lambda: dict.fromkeys(T.GROUPS, 0.0))


def last_rows(cached: Sequence, n: int) -> Sequence:
    """The cached rows a step of context n attends under the window rule: the last n - 1."""
    return cached[len(cached) - (n - 1):]


def calibrate(m: dict, steps: int, windows: Iterable[int | None] = (None,),
              starts: Iterable[int] = range(T.V),
              attended: Callable[[Sequence, int], Sequence] = last_rows) -> Calibration:
    """The float decode of `steps` tokens from every start with every window (module docstring).
    With window W, step L attends min(L, W) tokens: only contexts 1 .. W occur. ``attended(kc, n)``
    picks the n - 1 cached rows (of the L - 1 in kc) a step of context n reads: the last ones by
    default; a host that gathers other rows (attention sinks) passes its own rule, so every
    program is calibrated on the rows it will be given."""
    windows, starts = list(windows), list(starts)
    rule = f"{attended.__module__}.{attended.__qualname__}"
    # a rule that is not a module's own function (a lambda, a closure) has no name to key it by
    key = None if "<" in rule else ("calibration", programs.model_fingerprint(m), steps, tuple(windows),
                                    tuple(starts), rule)
    kept = programs.STORE.load(key) if key is not None and programs.STORE is not None else None
    if kept is not None and kept[0] == "calibration" and isinstance(kept[1], Calibration):
        return kept[1]
    cal = _calibrate(m, steps, windows, starts, attended)
    if key is not None and programs.STORE is not None:
        programs.STORE.save(key, "calibration", cal)
    return cal


def _calibrate(m: dict, steps: int, windows: list[int | None], starts: list[int],
               attended: Callable[[Sequence, int], Sequence]) -> Calibration:
    cal = Calibration()
    graphs: dict[int, object] = {}
    names = T.slot_names(1, 0)
    for W in windows:
        for start in starts:
            tok, kc, vc = start, [], []
            for L in range(1, steps + 1):
                n = L if W is None else min(L, W)
                feed = {"x": [list(m["E"][tok])]}
                if n > 1:
                    feed[names.kc] = [list(r) for r in attended(kc, n)]
                    feed[names.vc] = [list(r) for r in attended(vc, n)]
                cal.feeds.setdefault(n, []).append(feed)
                if n not in graphs:
                    graphs[n] = T.build_graph(m, n)
                graph = graphs[n]
                values = graph.evaluate(feed)
                for node in graph.nodes.values():
                    group = node.attrs.get("range_group")
                    if group is not None:
                        cal.ranges[group] = max(cal.ranges[group], float(np.abs(values[node.name]).max()))
                kc.append(values[names.k][0].tolist())
                vc.append(values[names.v][0].tolist())
                tok = int(values["tok"][0, 0])
    return cal
