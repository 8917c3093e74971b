"""Batched decode: one GA2 program for a batch of requests, each with its own context length.

A decode step of the tiny model moves about 600 words, and the weights are 576 of them. A program
that decodes B requests at once reads the weights once, so the words per token fall almost B-fold.
The batch graph (``build_batch_graph``), for requests i = 0 .. B-1 with contexts n_i::

    x       B x D           the batch's embeddings, one row per request
    q       x @ Wq          one matmul of B rows
    k_i     x_i @ Wk        x_i is row i of x (a view); k_i is written straight after request i's
    v_i     x_i @ Wv        n_i - 1 cached rows, so [kc_i; k_i] is one region with no copy
    s_i     q_i @ [kc_i; k_i].T / sqrt(D)      q_i is row i of q (a view)
    a_i     softmax(s_i) @ [vc_i; v_i]         written as row i of A = [a_0; ...; a_B-1]
    h       x + A @ Wo      then the feed-forward and the logits, B rows each, and the argmax per row

Why k_i and v_i are one matmul per request: a request's new key row must sit right after its
cached rows, and a matmul writes its output rows next to each other.

One set of scales for every program. Every tensor is in a range group whose range comes from one
calibration (``calibrate_ranges``), so each program, whatever its batch, quantizes every tensor
with the same scale; matmul rows are independent and the element-wise ops work row by row, so a
request's integers in a batch are exactly those of its decode alone (B = 1). The tests hold the
compiler to that.

``BatchPrograms`` compiles on demand and keeps a bounded cache keyed by the batch's contexts (the
slots ordered by context, longest first, so the order requests joined in does not matter). It
also answers the scheduler's question "does a batch with these contexts fit the chip?" by
compiling that batch's program: the scratchpad, the instruction memory and external memory are
the compiler's to check.
"""

from __future__ import annotations

import math
import os
import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import capra as C  # noqa: E402
import tiny_lm as T  # noqa: E402
from capra import config, isa  # noqa: E402
from capra.analysis import roofline  # noqa: E402
from capra.graph import Graph  # noqa: E402

# the range group of every tensor a batch program computes (inputs: x, k, v)
GROUPS = ("x", "q", "k", "v", "scores", "attn", "o", "h", "u", "f", "y", "logits")


def batch_key(contexts: Iterable[int]) -> tuple[int, ...]:
    """The contexts as a tuple of ints, each 1 .. isa.MM_MAX_K, or ValueError naming the bad one.
    A bool, a float or a numpy float is not a context, even when it equals one (True == 1)."""
    try:
        contexts = list(contexts)
    except TypeError:
        raise ValueError(f"contexts {contexts!r}: give a list of context lengths") from None
    if not contexts:
        raise ValueError("a batch needs at least one request")
    for i, n in enumerate(contexts):
        if isinstance(n, bool | np.bool_) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"request {i} of the batch: context {n!r} is not an int >= 1")
        if n > isa.MM_MAX_K:  # refused before any array of that many rows is made
            raise ValueError(f"request {i} of the batch: context {n} is past {isa.MM_MAX_K}, the longest "
                             "reduction GA2's matmul can do")
    return tuple(int(n) for n in contexts)


def build_batch_graph(m: dict, contexts: Sequence[int]) -> Graph:
    """The graph of one decode step for a batch of len(contexts) requests (module docstring).

    Inputs: x (B x D); for each request i with contexts[i] > 1, kc_i and vc_i (contexts[i] - 1
    rows). Outputs: logits (B x V), tok (B x 1), and k_i, v_i per request (the rows the host
    appends to request i's cache).
    """
    contexts = batch_key(contexts)
    B = len(contexts)
    g = Graph("batch_" + "_".join(str(n) for n in contexts))
    x = g.input("x", (B, T.D), range_group="x")
    q = g.matmul("q", x, g.const("Wq", m["Wq"]), range_group="q")
    wk, wv = g.const("Wk", m["Wk"]), g.const("Wv", m["Wv"])
    attn = None
    for i, n in enumerate(contexts):
        xi = g.rows(f"x_{i}", x, i, i + 1)
        if n > 1:
            kc = g.input(f"kc_{i}", (n - 1, T.D), range_group="k")
            vc = g.input(f"vc_{i}", (n - 1, T.D), range_group="v")
        k = g.matmul(f"k_{i}", xi, wk, range_group="k")
        v = g.matmul(f"v_{i}", xi, wv, range_group="v")
        keys = g.concat(f"K_{i}", kc, k) if n > 1 else k
        values = g.concat(f"V_{i}", vc, v) if n > 1 else v
        s = g.matmul(f"s_{i}", g.rows(f"q_{i}", q, i, i + 1), keys, transpose_b=True,
                     scale=1.0 / math.sqrt(T.D), range_group="scores")
        a = g.matmul(f"a_{i}", g.softmax(f"p_{i}", s), values, range_group="attn")
        attn = a if attn is None else g.concat(f"A_{i}", attn, a)
    h = g.add("h", x, g.matmul("o", attn, g.const("Wo", m["Wo"]), range_group="o"), range_group="h")
    u = g.matmul("u", h, g.const("W1", m["W1"]), relu=True, range_group="u")
    y = g.add("y", h, g.matmul("f", u, g.const("W2", m["W2"]), range_group="f"), range_group="y")
    logits = g.matmul("logits", y, g.const("Wout", m["Wout"]), range_group="logits")
    g.argmax("tok", logits)
    g.set_outputs(["logits", "tok"] + [f"{kv}_{i}" for i in range(B) for kv in ("k", "v")])
    return g


def calibrate_ranges(m: dict, steps: int, windows: Iterable[int | None] = (None,),
                     starts: Iterable[int] = range(T.V)) -> dict[str, float]:
    """The range of every group: the largest magnitude each reaches in the float decode of `steps`
    tokens, greedy from every start token, with each window. One calibration for every batch."""
    ranges = dict.fromkeys(GROUPS, 0.0)
    graphs: dict[int, Graph] = {}
    for W in windows:
        for start in starts:
            tok, kc, vc = start, [], []
            for L in range(1, steps + 1):
                n = L if W is None else min(L, W)
                feeds = {"x": [list(m["E"][tok])]}
                if n > 1:
                    feeds["kc_0"], feeds["vc_0"] = kc[L - n:], vc[L - n:]
                g = graphs.setdefault(n, build_batch_graph(m, [n]))
                vals = g.evaluate(feeds)
                for node in g.nodes.values():
                    group = node.attrs.get("range_group")
                    if group is not None:
                        ranges[group] = max(ranges[group], float(np.max(np.abs(vals[node.name]))))
                kc.append(vals["k_0"][0].tolist())
                vc.append(vals["v_0"][0].tolist())
                tok = int(vals["tok"][0, 0])
    return ranges


class MachineMismatch(RuntimeError):
    """The machine model and the program's numpy integer semantics disagree (a bug in one of them)."""


@dataclass
class StepResult:
    """One batched step on the machine model: per slot (in the order given) the token, the int8
    logits, the float k and v rows; and the program's code, memory image and counters."""

    toks: list[int]
    logits: list[list[int]]
    k: list[np.ndarray]
    v: list[np.ndarray]
    key: tuple[int, ...]
    code: list[int]
    ext: list[int]
    counters: list[int]
    bound: float


class BatchPrograms:
    """Compiled batch programs, on demand, in a bounded cache keyed by the batch's contexts.

    ``compiled`` counts compilations (admission checks compile too), ``distinct`` the different
    batches that ran; a batch compiled again after the cache dropped it counts once there.
    """

    def __init__(self, m: dict, ranges: dict[str, float], capacity: int = 256) -> None:
        if not isinstance(m, dict) or any(name not in m for name in ("E", "Wq", "Wk", "Wv")):
            raise ValueError("m must be the tiny model's weights (tiny_lm.make_model)")
        if not isinstance(ranges, dict):
            raise ValueError(f"ranges={ranges!r}: give a dict of group -> range (calibrate_ranges)")
        missing = [g for g in GROUPS if g not in ranges]
        if missing:
            raise ValueError(f"ranges lack the groups {missing}: every tensor needs one fixed scale")
        bad = {g: ranges[g] for g in GROUPS if not isinstance(ranges[g], int | float | np.integer | np.floating)
               or isinstance(ranges[g], bool) or not math.isfinite(ranges[g]) or ranges[g] <= 0}
        if bad:
            raise ValueError(f"ranges {bad}: each must be a finite number > 0")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity={capacity!r}: it must be an integer >= 1")
        self.m = m
        self.ranges = dict(ranges)
        self.capacity = capacity
        # Keyed by the active configuration too: a program compiled for one chip (its array, its
        # scratchpad) is neither right nor known to fit on another.
        self.cache: OrderedDict[tuple[str, tuple[int, ...]], C.Program] = OrderedDict()
        self.compiled = 0
        self.seen: set[tuple[str, tuple[int, ...]]] = set()
        self.refused: OrderedDict[tuple[str, tuple[int, ...]], str] = OrderedDict()  # as bounded as the cache

    @property
    def distinct(self) -> int:
        return len(self.seen)

    def program(self, key: Sequence[int]) -> C.Program:
        """The program for contexts `key` (longest first); CompileError if it does not fit GA2,
        ValueError if `key` is not a list of contexts."""
        contexts = batch_key(key)  # checked before the cache, which equal-hashing keys would fool
        key = (config.active().key(), contexts)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        if key in self.refused:
            raise C.CompileError(self.refused[key])
        g = build_batch_graph(self.m, contexts)
        zeros = {name: np.zeros(g.shape(name)) for name in g.inputs}  # every scale comes from the ranges
        try:
            P = C.compile_graph(g, [zeros], ranges=self.ranges)
        except C.CompileError as error:
            self.refused[key] = str(error)
            if len(self.refused) > self.capacity:
                self.refused.popitem(last=False)
            raise
        self.compiled += 1
        self.cache[key] = P
        if len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
        return P

    def fits(self, contexts: Iterable[int]) -> str | None:
        """None if a batch with these contexts compiles for GA2, else the reason it does not (the
        compiler's, or what is wrong with the contexts). A batch that fits keeps fitting when any of
        its contexts shrinks (the compiler's placement guarantees it; the tests check it)."""
        try:
            key = sorted(batch_key(contexts), reverse=True)
        except ValueError as error:
            return str(error)
        try:
            self.program(key)
        except C.CompileError as error:
            return str(error)
        return None

    def run(self, tokens: Sequence[int], caches: Sequence[tuple[np.ndarray, np.ndarray]],
            check: bool = False) -> StepResult:
        """One step for the batch: slot i feeds tokens[i] and attends caches[i] = (kc, vc) rows.

        The slots go to the program longest context first; the results come back in slot order.
        With `check`, the program's integer semantics (capra.run without the machine, numpy) are
        computed too and every output must equal the machine model's (MachineMismatch if not).
        """
        try:
            tokens, caches = list(tokens), list(caches)
        except TypeError:
            raise ValueError("tokens and caches must be lists, one entry per slot") from None
        if len(tokens) != len(caches) or not tokens:
            raise ValueError(f"a batch of {len(tokens)} tokens and {len(caches)} caches")
        for i, t in enumerate(tokens):
            if isinstance(t, bool | np.bool_) or not isinstance(t, int | np.integer) or not 0 <= t < T.V:
                raise ValueError(f"slot {i}: token {t!r} is not a token 0..{T.V - 1}")
        shapes = []
        for i, pair in enumerate(caches):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise ValueError(f"slot {i}: the cache must be a pair (kc, vc) of row arrays")
            try:
                kc, vc = np.shape(pair[0]), np.shape(pair[1])
            except ValueError:
                raise ValueError(f"slot {i}: cached rows of uneven lengths") from None
            empty = kc in ((0,), (0, T.D)) and vc in ((0,), (0, T.D))  # context 1: no rows
            if not empty and (kc != vc or len(kc) != 2 or kc[1] != T.D):
                raise ValueError(f"slot {i}: cached rows of shapes {kc} and {vc}; both must be (n, {T.D})")
            shapes.append(kc)
        contexts = [kc[0] + 1 for kc in shapes]
        order = sorted(range(len(tokens)), key=lambda i: -contexts[i])  # stable: ties keep slot order
        key = tuple(contexts[i] for i in order)
        P = self.program(key)
        feeds: dict = {"x": np.asarray([self.m["E"][tokens[i]] for i in order], dtype=np.float64)}
        for j, i in enumerate(order):
            if contexts[i] > 1:
                feeds[f"kc_{j}"], feeds[f"vc_{j}"] = caches[i]
        out, mach = C.run(P, feeds, machine=True)  # the feeds are checked here (NaN, shapes)
        self.seen.add((config.active().key(), key))
        if check:
            ref = C.run(P, feeds)
            bad = [name for name in P.outputs if ref[name][0] != out[name][0]]
            if bad:
                raise MachineMismatch(f"program {P.name}: the machine model's {bad} differ from the "
                                      f"program's integer semantics")
        slot = {i: j for j, i in enumerate(order)}
        return StepResult(
            toks=[out["tok"][0][slot[i]][0] for i in range(len(tokens))],
            logits=[out["logits"][0][slot[i]] for i in range(len(tokens))],
            k=[np.asarray(out[f"k_{slot[i]}"][1][0]) for i in range(len(tokens))],
            v=[np.asarray(out[f"v_{slot[i]}"][1][0]) for i in range(len(tokens))],
            key=key, code=P.code, ext=C.ext_image(P, feeds), counters=mach.counters.as_list(),
            bound=roofline(P.code).bound)
