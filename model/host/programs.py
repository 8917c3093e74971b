"""The one program cache: a compiled decode program per everything that decides it.

A program is decided by the model's weights, what its scales come from (the ranges of the range
groups, which carry the calibration's steps, windows and start tokens, and the calibration input
sets for a group without a range), the chip configuration (its array, scratchpad and memory) and
the graph's shape (the contexts of the batch). ``ProgramCache`` keys every program by exactly
those, so a host that asks again, or another host with the same model and calibration, gets the
same program without compiling, and a program compiled for one chip is never handed to another.
A batch the chip cannot hold is remembered as refused, with the compiler's reason, so asking
whether it fits costs one compile.

``PROGRAMS`` is the process's cache, shared by every host unless one is given its own.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
import tiny_lm as T
from capra import CompileError, Program, compile_graph, config

Key = tuple[str, tuple, str, str, tuple[int, ...]]


def model_fingerprint(m: Mapping) -> str:
    """A digest of the model's weights (names, shapes and values)."""
    h = hashlib.sha256()
    for name in sorted(k for k, v in m.items() if isinstance(v, np.ndarray)):
        w = np.ascontiguousarray(m[name], dtype=np.float64)
        h.update(f"{name}{w.shape}".encode())
        h.update(w.tobytes())
    return h.hexdigest()[:20]


class ProgramCache:
    """Compiled decode programs, at most `capacity` of them (the least recently used go first).

    ``compiled`` counts compilations; ``refused`` remembers batches that do not fit, as bounded.
    """

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self.programs: OrderedDict[Key, Program] = OrderedDict()
        self.refused: OrderedDict[Key, str] = OrderedDict()
        self.compiled = 0

    def key(self, m: Mapping, contexts: Sequence[int], ranges: Mapping[str, float],
            calib: Sequence[Mapping] | None = None) -> Key:
        return (model_fingerprint(m), tuple(sorted((g, float(r)) for g, r in ranges.items())),
                _digest(calib), config.active().compile_key(), tuple(int(n) for n in contexts))

    def get(self, m: Mapping, contexts: Sequence[int], ranges: Mapping[str, float],
            calib: Sequence[Mapping] | None = None) -> Program:
        """The program of the decode graph for `contexts` (in this order), compiled as
        ``compile_graph(decode_graph(m, contexts), calib, ranges=ranges)``: a group with a range takes
        its scale from it, any other from the calibration sets `calib` (without them, every group of
        tiny_lm.GROUPS needs a range). CompileError, with the compiler's reason, if it does not fit."""
        key = self.key(m, contexts, ranges, calib)
        if key in self.programs:
            self.programs.move_to_end(key)
            return self.programs[key]
        if key in self.refused:
            raise CompileError(self.refused[key])
        missing = [g for g in T.GROUPS if g not in ranges]
        if calib is None and missing:
            raise ValueError(f"ranges lack the groups {missing}: every tensor needs one fixed scale")
        graph = T.decode_graph(m, contexts)
        if calib is None:  # every scale is from the ranges: any input set of the right shapes will do
            calib = [{name: np.zeros(graph.shape(name)) for name in graph.inputs}]
        try:
            program = compile_graph(graph, calib, ranges=dict(ranges))
        except CompileError as error:
            _bounded_put(self.refused, key, str(error), self.capacity)
            raise
        self.compiled += 1
        _bounded_put(self.programs, key, program, self.capacity)
        return program

    def fits(self, m: Mapping, contexts: Sequence[int], ranges: Mapping[str, float],
             calib: Sequence[Mapping] | None = None) -> str | None:
        """None if the batch compiles for the active configuration, else the compiler's reason."""
        try:
            self.get(m, contexts, ranges, calib)
        except CompileError as error:
            return str(error)
        return None


def _digest(calib: Sequence[Mapping] | None) -> str:
    """A digest of calibration input sets (their names, shapes and values), or "" for none."""
    if calib is None:
        return ""
    h = hashlib.sha256()
    for i, feeds in enumerate(calib):
        for name in sorted(feeds):
            value = np.asarray(feeds[name], dtype=np.float64)
            h.update(f"{i}{name}{value.shape}".encode())
            h.update(value.tobytes())
    return h.hexdigest()[:20]


def _bounded_put(store: OrderedDict, key, value, capacity: int) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > capacity:
        store.popitem(last=False)


PROGRAMS = ProgramCache()
