"""The tiny language model of Chapters 11-12: one decoder layer, a vocabulary of 16 tokens.

A decode step for token `tok` with cached keys `kc` and values `vc` (one row per earlier token)::

    x      = E[tok]                       the host looks the embedding up
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    p      = softmax([kc; k] @ q / sqrt(D))    attention over the cached rows and the new token
    h      = x + (p @ [vc; v]) @ Wo       residual
    y      = h + relu(h @ W1) @ W2        feed-forward, residual
    logits = y @ Wout

Two kinds of model. "structured": embeddings are one-hot and Wout maps token t to 5t + 3 mod 16
with a large margin, while attention and the feed-forward only add small terms, so greedy decode
follows f(t) = 5t + 3 mod 16 whatever the attention sees (any window, any quantization).
"random": every weight is random, scaled so that attention changes the answer (a window of 8
agrees with full attention on about 80% of greedy decisions) while the attention logits stay
well-conditioned for int8: with query and key weights about 2.5 times larger, int8 rounding of q and k
(about 0.15 in a logit) flips near-tied attention rows and the chip's logits can stray by 50%.

At this book-level API tokens are ints and rows / logits are Python lists; numpy does the work.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

V = 16  # vocabulary
D = 16  # model width (one attention head of width D)
F = 32  # feed-forward width


def f_next(t: int) -> int:
    """The structured model's rule: the token that follows t."""
    return (5 * t + 3) % V


def make_model(kind: str = "structured", seed: int = 0, **kwargs) -> dict:
    """A model as a dict of numpy weights: E, Wq, Wk, Wv, Wo, W1, W2, Wout (and "kind").

    kind "mixed" (or "windowed") builds the multi-layer model of the inference path instead
    (model/inference/mixed_lm.py); extra keyword arguments go to it.
    """
    if kind in ("mixed", "windowed"):
        from inference import mixed_lm

        return mixed_lm.make_mixed_model(seed=seed, kind=kind, **kwargs)
    if kwargs:
        raise TypeError(f"make_model({kind!r}) takes no options, got {sorted(kwargs)}")
    rng = np.random.default_rng(seed)

    def normal(rows: int, cols: int, scale: float) -> np.ndarray:
        return rng.standard_normal((rows, cols)) * scale

    if kind == "structured":
        wout = np.zeros((D, V))
        for t in range(V):
            wout[t, f_next(t)] = 4.0
        m = {
            "E": np.eye(V, D),
            "Wq": normal(D, D, 0.6),
            "Wk": normal(D, D, 0.6),
            "Wv": normal(D, D, 0.5),
            "Wo": normal(D, D, 0.05),
            "W1": normal(D, F, 0.3),
            "W2": normal(F, D, 0.05),
            "Wout": wout,
        }
    elif kind == "random":
        m = {
            "E": normal(V, D, 1.0),
            "Wq": normal(D, D, 0.2),
            "Wk": normal(D, D, 0.2),
            "Wv": normal(D, D, 0.5),
            "Wo": normal(D, D, 0.3),
            "W1": normal(D, F, 0.35),
            "W2": normal(F, D, 0.3),
            "Wout": normal(D, V, 0.5),
        }
    else:
        raise ValueError(f"unknown model kind {kind!r}: use 'structured', 'random', 'mixed' or 'windowed'")
    m["kind"] = kind
    return m


def mv(x, W) -> list[float]:
    """Row vector times matrix, as a Python list."""
    return (np.asarray(x, dtype=np.float64) @ np.asarray(W, dtype=np.float64)).tolist()


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())
    return e / e.sum()


def float_step(m: dict, tok: int, kc, vc) -> tuple[list[float], list[float], list[float], dict]:
    """One float decode step attending the cached rows kc/vc plus the new token.

    Returns (logits, k, v, info): the new token's key and value rows are what the host caches;
    info holds the attention probabilities and the hidden vectors for inspection.
    """
    x = np.asarray(m["E"][tok], dtype=np.float64)
    q = x @ m["Wq"]
    k = x @ m["Wk"]
    v = x @ m["Wv"]
    keys = np.vstack([np.asarray(kc, dtype=np.float64).reshape(-1, D), k[None, :]])
    values = np.vstack([np.asarray(vc, dtype=np.float64).reshape(-1, D), v[None, :]])
    p = softmax(keys @ q / math.sqrt(D))
    h = x + (p @ values) @ m["Wo"]
    y = h + np.maximum(h @ m["W1"], 0.0) @ m["W2"]
    logits = y @ m["Wout"]
    return logits.tolist(), k.tolist(), v.tolist(), {"p": p.tolist(), "h": h.tolist(), "y": y.tolist()}


# The range group of every tensor a decode step computes (inputs: x, k, v). A group has one scale in
# every program, so a key row a program writes as k_new is read back unchanged as a kc row by the
# next, and a request's integers in a batch are those of its decode alone.
GROUPS = ("x", "q", "k", "v", "scores", "attn", "o", "h", "u", "f", "y", "logits")


class SlotNames(NamedTuple):
    """The graph's names for one request's tensors: cached keys and values in, new rows out."""

    kc: str
    vc: str
    k: str
    v: str


def slot_names(batch: int, i: int) -> SlotNames:
    """The names of request i's tensors in the decode graph of a batch of `batch` requests: the
    book's ``kc``, ``vc``, ``k_new``, ``v_new`` for one request, ``kc_i`` ... ``v_i`` in a batch."""
    if batch == 1:
        return SlotNames("kc", "vc", "k_new", "v_new")
    return SlotNames(f"kc_{i}", f"vc_{i}", f"k_{i}", f"v_{i}")


def build_graph(m: dict, n: int):
    """The graph of one decode step with context n: n - 1 cached rows plus the new token.

    Inputs: x (1 x D) and, when n > 1, kc and vc (n - 1 x D). Outputs: logits (1 x V), tok (the
    argmax, computed on the chip), k_new and v_new (1 x D, the rows the host appends to its cache).
    It is ``decode_graph`` for a batch of one.
    """
    return decode_graph(m, [n])


def decode_graph(m: dict, contexts):
    """The graph of one decode step for a batch of requests, request i with context contexts[i]
    (its contexts[i] - 1 cached rows plus its new token); the one builder of a decode graph.

    Inputs: x (B x D), one row per request, and each request's cached rows (``slot_names``) when its
    context is over 1. Outputs: logits (B x V), tok (B x 1, the argmax per row, on the chip) and each
    request's new key and value rows. The weights are read once for the whole batch::

        q       = x @ Wq                         one matmul of B rows
        k_i     = x_i @ Wk, v_i = x_i @ Wv       x_i is row i of x (a view); k_i lands right after
                                                 request i's cached rows, so [kc_i; k_i] is one region
        a_i     = softmax(q_i @ [kc_i; k_i].T / sqrt(D)) @ [vc_i; v_i]
        h       = x + [a_0; ...; a_B-1] @ Wo,    then the feed-forward and the logits, B rows each

    Every tensor is in a range group (GROUPS), so scales come from one calibration for every batch.
    """
    from capra.graph import Graph

    contexts = [int(n) for n in contexts]
    if not contexts or any(n < 1 for n in contexts):
        raise ValueError(f"contexts must be a non-empty list of contexts >= 1, got {contexts}")
    B = len(contexts)
    name = f"tiny_lm_step_n{contexts[0]}" if B == 1 else "batch_" + "_".join(map(str, contexts))
    g = Graph(name)
    x = g.input("x", (B, D), range_group="x")
    q = g.matmul("q", x, g.const("Wq", m["Wq"]), range_group="q")
    wk, wv = g.const("Wk", m["Wk"]), g.const("Wv", m["Wv"])
    attn = None
    for i, n in enumerate(contexts):
        names = slot_names(B, i)
        xi = g.rows(f"x_{i}", x, i, i + 1)
        if n > 1:
            kc = g.input(names.kc, (n - 1, D), range_group="k")
            vc = g.input(names.vc, (n - 1, D), range_group="v")
        k = g.matmul(names.k, xi, wk, range_group="k")
        v = g.matmul(names.v, xi, wv, range_group="v")
        keys = g.concat(f"K_{i}", kc, k) if n > 1 else k
        values = g.concat(f"V_{i}", vc, v) if n > 1 else v
        s = g.matmul(f"scores_{i}", g.rows(f"q_{i}", q, i, i + 1), keys, transpose_b=True,
                     scale=1.0 / math.sqrt(D), range_group="scores")
        a = g.matmul(f"attn_{i}", g.softmax(f"p_{i}", s), values, range_group="attn")
        attn = a if attn is None else g.concat(f"A_{i}", attn, a)
    h = g.add("h", x, g.matmul("o", attn, g.const("Wo", m["Wo"]), range_group="o"), range_group="h")
    u = g.matmul("u", h, g.const("W1", m["W1"]), relu=True, range_group="u")
    y = g.add("y", h, g.matmul("f", u, g.const("W2", m["W2"]), range_group="f"), range_group="y")
    logits = g.matmul("logits", y, g.const("Wout", m["Wout"]), range_group="logits")
    g.argmax("tok", logits)
    g.set_outputs(["logits", "tok"] + [name for i in range(B) for name in slot_names(B, i)[2:]])
    return g
