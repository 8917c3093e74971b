"""Your own small model on GA2 (docs/own_model.md): a graph built with capra.Graph, compiled to int8
GA2 code, run four ways and compared.

The model is a two-layer MLP block with a residual and a classifier, the shape of a decoder
layer's MLP half:

    h      = relu(x @ w1)              x: 1 x D, w1: D x H
    y      = h @ w2                    w2: H x D
    r      = x + y                     the residual
    logits = r @ w3                    w3: D x C (C = 8 classes)
    p      = softmax(logits);  cls = argmax(logits)

with random weights (--seed). It is compiled by capra.compile_graph with scales calibrated on 16
random inputs, then run on one more input: in float64 (Graph.evaluate), in the program's integer
semantics (capra.run), on the machine model (capra.run(..., machine=True): exact memory and cycle
counters) and, unless --no-rtl, replayed on Icarus and Verilator. It checks that the machine model
computes what the integer semantics say, that both simulators PASS with the machine model's
counters, and that the chip's class is the float model's (or, in a near tie, one whose float logit
is within two int8 steps of it); it prints the int8 error of p and the cycles against the roofline
bound.

Usage: own_model.py [--dim D] [--hidden H] [--seed S] [--no-rtl]     (also ``capra own-model``)

Exit status 0 when every check passes, 1 when one fails, 2 for a bad argument (a size outside its
range, a model too large for GA2: the compiler's reason)."""

from __future__ import annotations

import numpy as np
import replay
from capra import CompileError, Graph, compile_graph, ext_image, run
from capra.analysis import roofline
from replay import image

from .common import BadArgument, Parser, finish, int_range, replay_checks

CLASSES = 8
CALIBRATION_INPUTS = 16


def build(dim: int, hidden: int, seed: int) -> Graph:
    """The MLP block's graph, its weights drawn from `seed` (scaled so that activations stay near 1)."""
    rng = np.random.default_rng(seed)
    g = Graph("own_mlp")
    x = g.input("x", (1, dim))
    h = g.matmul("h", x, g.const("w1", rng.standard_normal((dim, hidden)) / np.sqrt(dim)), relu=True)
    y = g.matmul("y", h, g.const("w2", rng.standard_normal((hidden, dim)) / np.sqrt(hidden)))
    r = g.add("r", x, y)
    logits = g.matmul("logits", r, g.const("w3", rng.standard_normal((dim, CLASSES)) / np.sqrt(dim)))
    g.softmax("p", logits)
    g.argmax("cls", logits)
    g.set_outputs(["p", "cls"])
    return g


def arguments(ap: Parser) -> None:
    ap.add_argument("--dim", type=int_range(4, 64), default=16, metavar="D", help="width of x, 4..64 (default 16)")
    ap.add_argument("--hidden", type=int_range(4, 128), default=32, metavar="H",
                    help="width of the hidden layer, 4..128 (default 32)")
    ap.add_argument("--seed", type=int_range(0, 2**31 - 1), default=0, help="weights and inputs (default 0)")
    ap.add_argument("--no-rtl", action="store_true", help="skip the replay on the simulators")


def main(args) -> int:
    g = build(args.dim, args.hidden, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    calib = [{"x": rng.standard_normal((1, args.dim))} for _ in range(CALIBRATION_INPUTS)]
    x = {"x": rng.standard_normal((1, args.dim))}
    try:
        P = compile_graph(g, calib)
    except CompileError as error:
        raise BadArgument("--dim and --hidden", f"the model does not fit GA2: {error}") from None
    if not args.no_rtl:
        replay.require()
    print(f"graph {g.name}: {len(g.nodes)} nodes, compiled to {len(P.code) // 4} instructions, "
          f"{P.ext_words} words of external memory")
    print(P.listing())

    want = g.evaluate(x)  # float64
    ints = run(P, x)  # the program's integer semantics
    out, mach = run(P, x, machine=True)  # the machine model: memory and counters
    problems = []
    if out != ints:
        problems.append("the machine model's outputs differ from the program's integer semantics")
    p_err = float(np.max(np.abs(np.array(out["p"][1]) - want["p"])))
    logits = want["logits"][0]
    float_cls, chip_cls = int(np.argmax(logits)), out["cls"][0][0][0]
    step = P.tensors["logits"].scale  # one int8 step of the logits
    print(f"class: float model {float_cls}, chip {chip_cls}; p: largest int8 error {p_err:.4f} "
          f"(one step of the output is 1/128 = {1 / 128:.4f})")
    if logits[chip_cls] < logits[float_cls] - 2 * step:  # a near tie may go either way in int8
        problems.append(f"the chip's class {chip_cls} is not the float model's {float_cls} (float logits "
                        f"{logits[chip_cls]:.3f} and {logits[float_cls]:.3f}, more than two int8 steps apart)")

    rf = roofline(P.code)
    c = mach.counters
    print(f"cycles: {c.cycles} on the machine model; roofline bound {rf.bound:.0f} ({rf.dma_words} words moved, "
          f"{rf.macs} MACs), efficiency {rf.efficiency(c.cycles):.2f}; DMA busy {c.dma_busy}, MM busy {c.mm_busy}, "
          f"VEC+SMAX busy {c.vec_busy}")
    checks = 2
    if not args.no_rtl:
        record = image.record(P.code, ext_image(P, x))
        checks += replay_checks([record], problems, name="own_model", tool="own-model")
    return finish(problems, checks=checks,
                  passed="the machine model computes the program's integer semantics, the chip's class is the "
                         "float model's" + ("" if args.no_rtl else ", both simulators agree with the machine model on "
                                      "every word and counter"))
