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
    (model/mixed_lm.py); extra keyword arguments go to it.
    """
    if kind in ("mixed", "windowed"):
        import mixed_lm

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


def build_graph(m: dict, n: int):
    """The graph of one decode step with context n: n - 1 cached rows plus the new token.

    Inputs: x (1 x D) and, when n > 1, kc and vc (n - 1 x D). Outputs: logits (1 x V), tok (the
    argmax, computed on the chip), k_new and v_new (1 x D, the rows the host appends to its cache).
    Range groups tie the cached rows to the new rows ("k", "v"), so a row quantized as k_new in one
    program is read back unchanged as a kc row by the next.
    """
    from capra.graph import Graph

    if n < 1:
        raise ValueError(f"context n must be >= 1, got {n}")
    g = Graph(f"tiny_lm_step_n{n}")
    x = g.input("x", (1, D), range_group="x")
    q = g.matmul("q", x, g.const("Wq", m["Wq"]))
    k_new = g.matmul("k_new", x, g.const("Wk", m["Wk"]), range_group="k")
    v_new = g.matmul("v_new", x, g.const("Wv", m["Wv"]), range_group="v")
    if n > 1:
        keys = g.concat("K", g.input("kc", (n - 1, D), range_group="k"), k_new)
        values = g.concat("Vals", g.input("vc", (n - 1, D), range_group="v"), v_new)
    else:
        keys, values = k_new, v_new
    scores = g.matmul("scores", q, keys, transpose_b=True, scale=1.0 / math.sqrt(D))
    p = g.softmax("p", scores)
    attn = g.matmul("attn", p, values)
    h = g.add("h", x, g.matmul("o", attn, g.const("Wo", m["Wo"])))
    u = g.matmul("u", h, g.const("W1", m["W1"]), relu=True)
    y = g.add("y", h, g.matmul("f", u, g.const("W2", m["W2"])))
    logits = g.matmul("logits", y, g.const("Wout", m["Wout"]))
    g.argmax("tok", logits)
    g.set_outputs(["logits", "tok", "k_new", "v_new"])
    return g
