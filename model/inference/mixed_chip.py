"""The mixed windowed/global model (``mixed_lm.MixedLM``) compiled for GA2 in int8, one decode step at a time.

A decode step of the four-layer model does not fit GA2's scratchpad as one program (a layer's four
projections are 24,576 words of int8 weights, the scratchpad at most 16,384), so a step is a chain of
small programs, each compiled by ``capra.compile_graph`` from a ``capra.Graph``. Per layer L and KV
group g (two query heads share one KV head):

    proj{L}g{g}      q_h = x @ Wq_h for the group's two heads, stacked as the rows of Q (2 x 64);
                     k = x @ Wk_g, v = x @ Wv_g; Q and k rotated on the chip (below)
    attn{L}g{g}n{m}  S = Q @ K.T / 8 -- both query heads in one matmul against the group's one K
                     (m x 64), never a copy -- then the softmax of each row with its head's sink
                     logit, and A = P @ V (2 x 64); for m up to one tile of keys (``tile``, 192)
    tiled{L}g{g}n{m} the same attention for a longer context, K and V streamed from external memory
                     in tiles with the online softmax (``capra.tiled_attention``): each query row
                     starts from its head's sink as the running state, both rows read each K and V
                     tile; a context past the instruction memory runs as several programs (parts,
                     ``p{i}`` appended), the rows' states and int32 output handed on through
                     external memory
    out{L}           x + sum_h A_h @ Wo_h (the residual); the last layer adds the logits and argmax

With ``kv="paged"`` the K/V lies in pages of the chip's external memory (``chip_pages``) and every
attention, of any length, is instead

    gathered{L}g{g}n{m}  the tiled attention with each K and V tile gathered through the group's
                     block table (``capra.paged_attention``, tiles of 128 keys), ``p{i}`` appended
                     where it takes several programs (they hand the states and O on in the chip's
                     memory); the host writes the new rows and the changed descriptors, no copy

Rotary. The numpy model rotates q and k at their absolute positions and stores keys rotated; the
chip does the same. The host gives two rows per step, C (1 on the unrotated dims, cos on the rotated
ones) and S (0, sin); the pair swap (x1, x2) -> (-x2, x1) is a constant 64 x 64 matrix SWAP, so

    rot(q) = q * C + (q @ SWAP) * S          (two VEC.MULs, one MM, one VEC.ADD)

and likewise for the new key, which the host then appends, rotated, to its int8 cache. Windowed
layers keep (and the attention program reads) only the last ``window`` rows.

Sinks. Each head's sink is clamped to [SINK_MIN, SINK_MAX] once, when the programs are built (the
numpy model clamps once per ``generate`` call, before any softmax): the clamped value is the
softmax's sink logit, an int8 in the scores' scale. Heads of one group whose sinks agree share one
softmax over the two rows of S and one P @ V; heads whose sinks differ (layer 0's second group) get
a softmax each over their row of S and a P @ V each against the same V.

Calibration (``calibrate``). Every tensor is in a range group, and the ranges come from a float
trace of the very computation the programs do (``float_trace``), run over calibration prompts: the
largest magnitude each group takes, with one exception -- softmax inputs. A softmax only sees
values within 16 of its row's maximum (the exponent table's last entry is exp(-255/16), which rounds
to 0), and every head here has a sink >= 0, so a score more negative than -16 is as good as -inf.
The scores' range is therefore the largest *positive* score or sink (at least 16), not the largest
magnitude: layer 0's constructed scores reach -1,068, and a symmetric range would leave a step of 8.4
for a margin of 35 (and exceed the softmax's input limit). Scores below the range saturate.

The attention output A has the scale of V times 2^-k (k = ``a_shift``): the tiled program's last
step divides the int32 running output by the running sum and shifts by k, so calibration rounds A's
range up to V's range over a power of two (at most twice the calibrated range), and the one-shot
program writes A in the same scale.

Programs exchange int8 tensors through the host unchanged: a tensor one program writes and the next
reads has one range group, so one scale, in both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from capra import CompileError, Graph, compile_graph, config, ext_image, isa, run
from capra import paged_attention as pa
from capra import tiled_attention as ta
from capra.compiler import Program
from capra.machine import Machine
from capra.quant import SOFTMAX_IN_SCALE, multiplier

from .chip_pages import ChipPages
from .mixed_lm import LayerWeights, MixedLM, rotary_tables

# The chip these programs are built for: the largest scratchpad the RTL is built with, and an
# external memory that holds a program's weights (a projection program's are 9,216 words).
CHIP = config.Config(sram_words=16384, ext_memory=1 << 16)
SCORE_FLOOR = 16.0  # a softmax input this far below its row's maximum has exp(-16): table entry 0
KV_MODES = ("contiguous", "paged")  # MixedChip's K/V: copied contiguous for each program, or paged and gathered
PAGED_CONTEXT = 8192  # the context the paged K/V's pool is sized for unless told


class MixedChipError(ValueError):
    """A request the chip path cannot serve (names the argument and the limit)."""


def swap_matrix(head_dim: int, rotary_dims: int) -> np.ndarray:
    """SWAP with (q @ SWAP) = (0 on the unrotated dims, -x2, x1) for the rotated pairs (x1, x2).

    Pair m is (dim r0 + m, dim r0 + half + m), r0 = head_dim - rotary_dims, as in
    ``mixed_lm.apply_rotary``: rotated = x1 * cos - x2 * sin, x1 * sin + x2 * cos."""
    half = rotary_dims // 2
    r0 = head_dim - rotary_dims
    p = np.zeros((head_dim, head_dim))
    for m in range(half):
        p[r0 + half + m, r0 + m] = -1.0
        p[r0 + m, r0 + half + m] = 1.0
    return p


def rotation_rows(model: MixedLM, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The host's C and S rows (T x head_dim) for absolute positions, from the model's own tables."""
    cos, sin = rotary_tables(np.asarray(positions), model.rotary_dims, model.rope_base, model.dtype)
    r0 = model.head_dim - model.rotary_dims
    t = len(positions)
    c = np.concatenate([np.ones((t, r0)), cos, cos], axis=1).astype(np.float64)
    s = np.concatenate([np.zeros((t, r0)), sin, sin], axis=1).astype(np.float64)
    return c, s


def sink_groups(model: MixedLM, layer: int, group: int) -> list[tuple[list[int], float]]:
    """The group's query heads (indices within the group) by clamped sink: one softmax per entry."""
    rep = model.n_heads // model.n_kv_heads
    sinks = model.clamped_sink(layer, None)[group * rep:(group + 1) * rep].astype(np.float64)
    if np.all(sinks == sinks[0]):
        return [(list(range(rep)), float(sinks[0]))]
    return [([i], float(s)) for i, s in enumerate(sinks)]


def visible_rows(model: MixedLM, layer: int, context: int) -> int:
    """Rows of K/V a decode step at `context` tokens (the new one included) attends to in `layer`."""
    return min(context, model.window) if model.layers[layer].windowed else context


# ---- the graphs -------------------------------------------------------------------------------------


def _head_cols(model: MixedLM, h: int) -> slice:
    return slice(h * model.head_dim, (h + 1) * model.head_dim)


def _rotate(g: Graph, name: str, raw: str, swap: str, c: str, s: str, layer: int, part: str) -> str:
    """rot(raw) = raw * C + (raw @ SWAP) * S, each piece in its own range group."""
    sw = g.matmul(f"{name}_sw", raw, swap, range_group=f"{part}sw{layer}")
    rc = g.mul(f"{name}_c", raw, c, range_group=f"{part}c{layer}")
    rs = g.mul(f"{name}_s", sw, s, range_group=f"{part}s{layer}")
    return g.add(name, rc, rs, range_group=f"{part}{layer}")


def proj_graph(model: MixedLM, layer: int, group: int, rows: int = 1, name: str | None = None) -> Graph:
    """Q (rep * rows x head_dim, head-major, rotated), k (rotated) and v (rows x head_dim) of one KV
    group, from x (rows x d_model): one row for a decode step, several for a prefill chunk
    (``mixed_chunk``); the rotary rows come head-major too, and k takes the first head's."""
    lw = model.layers[layer]
    rep = model.n_heads // model.n_kv_heads
    hd = model.head_dim
    g = Graph(name or f"proj{layer}g{group}")
    x = g.input("x", (rows, model.d_model), range_group=f"x{layer}")
    c = g.input("rot_c", (rep * rows, hd), range_group="rot_c")
    s = g.input("rot_s", (rep * rows, hd), range_group="rot_s")
    swap = g.const("swap", swap_matrix(hd, model.rotary_dims))
    heads = [group * rep + i for i in range(rep)]
    qraw = None
    for i, h in enumerate(heads):
        qh = g.matmul(f"q_raw{i}", x, g.const(f"wq{i}", lw.wq[:, _head_cols(model, h)].astype(np.float64)),
                      range_group=f"qraw{layer}")
        qraw = qh if qraw is None else g.concat(f"q_raw_0_{i}", qraw, qh)
    q = _rotate(g, "q", qraw, swap, c, s, layer, "q")
    kv = _head_cols(model, group)
    kraw = g.matmul("k_raw", x, g.const("wk", lw.wk[:, kv].astype(np.float64)), range_group=f"kraw{layer}")
    k = _rotate(g, "k", kraw, swap, g.rows("rot_c0", c, 0, rows), g.rows("rot_s0", s, 0, rows), layer, "k")
    v = g.matmul("v", x, g.const("wv", lw.wv[:, kv].astype(np.float64)), range_group=f"v{layer}")
    g.set_outputs([q, k, v])
    return g


def attn_graph(model: MixedLM, layer: int, group: int, rows: int) -> Graph:
    """A (rep x head_dim): the group's query heads against its `rows` visible K/V rows."""
    rep = model.n_heads // model.n_kv_heads
    hd = model.head_dim
    g = Graph(f"attn{layer}g{group}n{rows}")
    q = g.input("q", (rep, hd), range_group=f"q{layer}")
    keys = g.input("K", (rows, hd), range_group=f"k{layer}")
    values = g.input("V", (rows, hd), range_group=f"v{layer}")
    scores = g.matmul("scores", q, keys, transpose_b=True, scale=1.0 / math.sqrt(hd), range_group=f"s{layer}")
    out = None
    for heads, sink in sink_groups(model, layer, group):
        if len(heads) == rep:
            src, tag = scores, ""
        else:
            src = g.rows(f"scores{heads[0]}", scores, heads[0], heads[0] + 1)
            tag = str(heads[0])
        p = g.softmax(f"p{tag}", src, sink=sink)
        a = g.matmul(f"a{tag}", p, values, range_group=f"a{layer}")
        out = a if out is None else g.concat(f"a_0_{tag}", out, a)
    g.set_outputs([out])
    return g


def out_graph(model: MixedLM, layer: int, rows: int = 1, name: str | None = None) -> Graph:
    """x + sum_h A_h @ Wo_h for `rows` rows (A of group g head-major: head i's rows at i * rows);
    after the last layer also the logits and each row's argmax. A decode step has one row; a
    prefill chunk (``mixed_chunk``) several."""
    lw = model.layers[layer]
    rep = model.n_heads // model.n_kv_heads
    hd = model.head_dim
    g = Graph(name or f"out{layer}")
    x = g.input("x", (rows, model.d_model), range_group=f"x{layer}")
    acc = None
    for grp in range(model.n_kv_heads):
        a = g.input(f"a{grp}", (rep * rows, hd), range_group=f"a{layer}")
        for i in range(rep):
            h = grp * rep + i
            o = g.matmul(f"o{h}", g.rows(f"a{grp}_{i}", a, i * rows, (i + 1) * rows),
                         g.const(f"wo{h}", lw.wo[_head_cols(model, h), :].astype(np.float64)),
                         range_group=f"o{layer}")
            acc = o if acc is None else g.add(f"osum{h}", acc, o, range_group=f"osum{layer}_{h}")
    y = g.add("y", x, acc, range_group=f"x{layer + 1}")
    outputs = [y]
    if layer == model.n_layers - 1:
        logits = g.matmul("logits", y, g.const("unembed", model.unembed.astype(np.float64)), range_group="logits")
        g.argmax("tok", logits)
        outputs += [logits, "tok"]
    g.set_outputs(outputs)
    return g


# ---- the float trace (what the programs compute, in float64, for a whole sequence) -------------------


def float_trace(model: MixedLM, ids: Sequence[int], start: int = 0) -> dict:
    """Every range group's values when the tokens `ids` (at positions start, start + 1, ...) are
    decoded one step each from an empty cache, in float64, with the programs' own formulas.

    Returns {"groups": {group: largest magnitude (scores: largest value or sink)}, "x": [x_0 ..
    x_L] (T x d_model each, the residual before each layer and after the last), "logits": T x V}.
    The numpy model computes the same residuals (in float32, rotating with apply_rotary), so
    ``x`` and ``logits`` are the float model's up to rounding (the tests hold them to it)."""
    ids = np.asarray(ids, dtype=np.int64)
    t = len(ids)
    hd, rep = model.head_dim, model.n_heads // model.n_kv_heads
    pos = np.arange(start, start + t)
    c, s = rotation_rows(model, pos)
    swap = swap_matrix(hd, model.rotary_dims)
    groups: dict[str, float] = {"rot_c": 1.0, "rot_s": 1.0}

    def see(name: str, value: np.ndarray) -> np.ndarray:
        groups[name] = max(groups.get(name, 0.0), float(np.abs(value).max()) if value.size else 0.0)
        return value

    def rotate(raw: np.ndarray, layer: int, part: str) -> np.ndarray:
        sw = see(f"{part}sw{layer}", raw @ swap)
        return see(f"{part}{layer}", see(f"{part}c{layer}", raw * c) + see(f"{part}s{layer}", sw * s))

    x = model.embed[ids].astype(np.float64)
    xs = [see("x0", x)]
    qi = pos[:, None]
    kj = pos[None, :]
    for layer, lw in enumerate(model.layers):
        visible = kj <= qi
        if lw.windowed:
            visible &= (qi - kj) < model.window
        sinks = model.clamped_sink(layer, None).astype(np.float64)
        acc = None
        for grp in range(model.n_kv_heads):
            kv = _head_cols(model, grp)
            k = rotate(see(f"kraw{layer}", x @ lw.wk[:, kv].astype(np.float64)), layer, "k")
            v = see(f"v{layer}", x @ lw.wv[:, kv].astype(np.float64))
            for i in range(rep):
                h = grp * rep + i
                q = rotate(see(f"qraw{layer}", x @ lw.wq[:, _head_cols(model, h)].astype(np.float64)), layer, "q")
                sc = np.where(visible, q @ k.T * (1.0 / math.sqrt(hd)), -np.inf)
                m = np.maximum(sc.max(axis=1, keepdims=True), sinks[h])
                # the scores' range: the largest score or sink, and room below every row's maximum
                # for SCORE_FLOOR (what lies further down has exp() = 0 in the table anyway)
                top = max(float(m.max()), abs(float(sinks[h])), SCORE_FLOOR - float(m.min()))
                groups[f"s{layer}"] = max(groups.get(f"s{layer}", 0.0), top)
                e = np.exp(sc - m)
                p = e / (e.sum(axis=1, keepdims=True) + np.exp(sinks[h] - m))
                a = see(f"a{layer}", p @ v)
                o = see(f"o{layer}", a @ lw.wo[_head_cols(model, h), :].astype(np.float64))
                acc = o if acc is None else see(f"osum{layer}_{h}", acc + o)
        x = see(f"x{layer + 1}", x + acc)
        xs.append(x)
    logits = see("logits", x @ model.unembed.astype(np.float64))
    return {"groups": groups, "x": xs, "logits": logits}


def calibrate(model: MixedLM, prompts: Sequence[Sequence[int]], margin: float = 1.0) -> dict[str, float]:
    """The range of every group: the largest over the calibration prompts (``float_trace``) times
    `margin` (>= 1: room for values the prompts did not reach; the rotary rows keep exactly 1)."""
    if not prompts:
        raise MixedChipError("calibrate needs at least one prompt")
    if not margin >= 1.0:
        raise MixedChipError(f"margin must be >= 1, got {margin!r}")
    ranges: dict[str, float] = {}
    for ids in prompts:
        for name, value in float_trace(model, ids)["groups"].items():
            ranges[name] = max(ranges.get(name, 0.0), value)
    # Floors. A head whose sink takes all the mass (the parked layers) gives A ~ 1e-6: its range
    # is kept at least 1/256 of V's (what A would be with one key at 1/256 of the mass), and what
    # is added into the residual at least 1/256 of the residual's range (less rounds away in the
    # add, and the add's two multipliers must share one 16-bit shift).
    for layer in range(model.n_layers):
        ranges[f"a{layer}"] = max(ranges[f"a{layer}"], ranges[f"v{layer}"] / 256)
        for name in [f"o{layer}"] + [f"osum{layer}_{h}" for h in range(1, model.n_heads)]:
            ranges[name] = max(ranges[name], ranges[f"x{layer}"] / 256)
    out = {name: (value if name.startswith("rot_") else value * margin) or 1.0 for name, value in ranges.items()}
    for layer in range(model.n_layers):  # A: V's scale over a power of two (the tiled program's output)
        out[f"a{layer}"] = out[f"v{layer}"] / 2 ** a_shift(out[f"v{layer}"], out[f"a{layer}"])
    return out


def a_shift(v_range: float, a_range: float) -> int:
    """k with v_range / 2^k >= a_range > v_range / 2^(k+1), in 0..15 (NORM's shift field)."""
    k = int(math.floor(math.log2(v_range / a_range))) if a_range < v_range else 0
    return max(0, min(15, k))


# ---- the host loop --------------------------------------------------------------------------------


@dataclass
class ChipRun:
    """One program as it ran: its name, its code and its external memory at start (``ext()``; both
    made on demand, for a replay), and the external memory it needs (``ext_words``)."""

    name: str
    make_code: Callable[[], list[int]]
    make_ext: Callable[[], list[int]]
    ext_words: int

    @property
    def code(self) -> list[int]:
        return self.make_code()

    def ext(self) -> list[int]:
        return self.make_ext()


def _not_kept(name: str) -> Callable[[], list[int]]:
    def fail() -> list[int]:
        raise MixedChipError(f"{name}: a paged attention program run by the reference executor keeps neither "
                             "its code nor its image (the pool moves on); run the step on the machine model")
    return fail


@dataclass
class StepTrace:
    """One decode step on the chip: each layer's residual out (float), the logits, the token, the
    programs run (``ChipRun``, for a replay) and the cycles of each (machine model only)."""

    position: int
    token: int
    residuals: list[np.ndarray]
    logits: np.ndarray
    next_token: int
    runs: list[ChipRun] = field(default_factory=list)
    cycles: list[int] = field(default_factory=list)
    host_words: int = 0  # words the host wrote into the chip's external memory for the step (not weights)


@dataclass(frozen=True)
class TiledParams:
    """The integers of a layer's tiled attention: the logits' requantization (qa, qs), the softmax's
    smul, each query row's sink (an int8 in the logits' scale) and the output shift."""

    qa: int
    qs: int
    smul: int
    sinks: tuple[int, ...]
    out_shift: int


class MixedChip:
    """The mixed model on GA2: its programs (compiled once; an attention program per visible-row
    count, on first use), the host's int8 KV cache per layer and group, and a decode step.

    Attention over at most ``tile`` rows runs the one-shot program ``attn{L}g{g}n{m}`` (it is the
    faster up to a tile); over more, the tiled program of ``capra.tiled_attention``, split into
    parts where one program would not fit the instruction memory.

    ``kv`` is where the K/V cache lives. ``"contiguous"``: in the host's arrays (``keys``,
    ``values``), and every attention program's image gets a contiguous copy of the rows it reads,
    every step. ``"paged"``: also in pages of the chip's external memory (``chip_pages.ChipPages``,
    sized for ``max_context`` tokens), where the host writes only each step's new rows and the
    descriptors that changed; every attention program, short or long, is the tiled one with its K
    and V tiles gathered through the block table (``capra.paged_attention``, tiles of
    ``paged_tile`` = 128 keys: two bank groups hold the four tile buffers, the third the table).
    ``StepTrace.host_words`` counts what the host writes either way.

    ``executor`` runs a program: ``"reference"`` (the program's integer semantics in numpy,
    ``capra.run`` and ``tiled_attention.reference``), ``"machine"`` (the machine model, cycle-exact
    with the RTL) or ``"both"`` (both, and a mismatch of any output word is an error)."""

    def __init__(self, model: MixedLM, ranges: dict[str, float], cfg: config.Config = CHIP, kv: str = "contiguous",
                 max_context: int = PAGED_CONTEXT) -> None:
        if kv not in KV_MODES:
            raise MixedChipError(f"kv must be one of {', '.join(KV_MODES)}, got {kv!r}")
        if isinstance(max_context, bool) or not isinstance(max_context, int) or max_context < 1:
            raise MixedChipError(f"max_context must be an integer >= 1, got {max_context!r}")
        self.model = model
        self.ranges = dict(ranges)
        self.cfg = cfg
        self.kv = kv
        self.max_context = max_context
        with config.use(cfg):
            self.tile = ta.choose_tile(model.head_dim)
            self.paged_tile = pa.choose_tile(model.head_dim)
        self.one_shot_rows = self.tile  # attention over at most this many rows runs one-shot (the faster there)
        self._programs: dict[tuple, Program] = {}
        self._codes: dict[tuple, list[int]] = {}
        self.reset()

    def reset(self) -> None:
        """An empty cache: the next step is at position 0."""
        m = self.model
        self.position = 0
        self.keys = [[np.zeros((0, m.head_dim), np.int64) for _ in range(m.n_kv_heads)] for _ in range(m.n_layers)]
        self.values = [[np.zeros((0, m.head_dim), np.int64) for _ in range(m.n_kv_heads)] for _ in range(m.n_layers)]
        self.cache = ChipPages(m, self.max_context) if self.kv == "paged" else None

    def program(self, kind: str, layer: int, group: int = 0, rows: int = 0) -> Program:
        key = (kind, layer, group, rows)
        if key not in self._programs:
            if kind == "proj":
                g = proj_graph(self.model, layer, group)
            elif kind == "attn":
                g = attn_graph(self.model, layer, group, rows)
            else:
                g = out_graph(self.model, layer)
            feed = {n: np.zeros(g.shape(n)) for n in g.inputs}  # every scale comes from `ranges`
            missing = {g.nodes[n].attrs.get("range_group") for n in g.nodes} - set(self.ranges) - {None}
            if missing:
                raise MixedChipError(f"graph {g.name!r}: no calibrated range for groups {sorted(missing)}")
            with config.use(self.cfg):
                self._programs[key] = compile_graph(g, [feed], ranges=self.ranges)
        return self._programs[key]

    def _scale(self, group: str) -> float:
        return self.ranges[group] / 127.0

    def tiled_params(self, layer: int, group: int) -> TiledParams:
        """The integers of the layer's tiled attention, from the calibrated ranges as the compiler
        derives the one-shot program's (``capra.compiler``: the matmul's multiplier, smul, the sink)."""
        m = self.model
        rep = m.n_heads // m.n_kv_heads
        s_scale = self._scale(f"s{layer}")
        qa, qs = multiplier(self._scale(f"q{layer}") * self._scale(f"k{layer}") / math.sqrt(m.head_dim) / s_scale,
                            f"tiled{layer}g{group}")
        smul = int(np.floor(s_scale * (1 << isa.SM_SCALE_SHIFT) / SOFTMAX_IN_SCALE + 0.5))
        sinks = m.clamped_sink(layer, None)[group * rep:(group + 1) * rep].astype(np.float64)
        sink_ints = tuple(int(np.floor(s / s_scale + 0.5)) for s in sinks)
        if not all(-128 <= x <= 127 for x in sink_ints):
            raise MixedChipError(f"layer {layer}: sinks {sinks.tolist()} are outside the int8 range of the scores' "
                                 f"scale {s_scale:.3g}")
        shift = math.log2(self.ranges[f"v{layer}"] / self.ranges[f"a{layer}"])
        if shift != int(shift) or not 0 <= shift <= 15:
            raise MixedChipError(f"range a{layer} must be range v{layer} over 2^k, k in 0..15 (as calibrate makes "
                                 f"it): got 2^{shift:.3g}")
        return TiledParams(qa, qs, smul, sink_ints, int(shift))

    def tiled_parts(self, rows: int) -> list[tuple[int, int]]:
        """The parts of a tiled attention over `rows` keys: (first row, end row) each (every layer's
        program has as many instructions: only immediates differ)."""
        return ta.plan(rows, self.tile, lambda n, first, last: len(self.tiled_code(0, 0, n, first, last)) // 4)

    def tiled_code(self, layer: int, group: int, rows: int, first: bool, last: bool) -> list[int]:
        """The code of one part of a tiled attention over `rows` keys (cached: it depends on the
        shape and the layer's scales, not on the data)."""
        p = self.tiled_params(layer, group)
        key = (rows, first, last, p.qa, p.qs, p.smul, p.out_shift)
        if key not in self._codes:
            rep = self.model.n_heads // self.model.n_kv_heads
            with config.use(self.ext_config(ta.layout(rep, self.model.head_dim, rows).words)):
                self._codes[key] = ta.part_code(rep, self.model.head_dim, rows, p.qa, p.qs, p.smul, self.tile,
                                                first, last, p.out_shift)
        return self._codes[key]

    def ext_config(self, words: int) -> config.Config:
        """The chip's configuration with an external memory of at least `words` (at most the
        configuration's limit, ``config.EXT_MEMORY_MAX``)."""
        if words > config.EXT_MEMORY_MAX:
            raise MixedChipError(f"an attention program needs {words} words of external memory, more than the "
                                 f"chip's largest, {config.EXT_MEMORY_MAX}")
        return replace(self.cfg, ext_memory=max(self.cfg.ext_memory, words))

    def _run(self, P: Program, feeds: dict, executor: str, trace: StepTrace) -> dict[str, np.ndarray]:
        with config.use(self.cfg):
            if executor in ("reference", "both"):
                out = run(P, feeds)
            if executor in ("machine", "both"):
                mach_out, mach = run(P, feeds, machine=True)
                trace.cycles.append(mach.counters.cycles)
                if executor == "both" and mach_out != out:
                    raise AssertionError(f"program {P.name}: the machine model's outputs differ from the "
                                         f"program's integer semantics")
                out = mach_out

        def image(P: Program = P, feeds: dict = feeds) -> list[int]:
            with config.use(self.cfg):
                return ext_image(P, feeds)

        trace.runs.append(ChipRun(P.name, lambda: P.code, image, P.ext_words))
        trace.host_words += sum(P.tensors[n].words for n in P.inputs)
        return {name: np.asarray(ints, dtype=np.int64) for name, (ints, _floats) in out.items()}

    def _tiled(self, layer: int, group: int, q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, executor: str,
               trace: StepTrace) -> np.ndarray:
        """The tiled attention of one group (int8 A, rep x head_dim) over every row of k8, v8: its
        parts in order, each part's states and running output handed to the next."""
        p = self.tiled_params(layer, group)
        rows = k8.shape[0]
        parts = self.tiled_parts(rows)
        ref_carry = mach_carry = ([ta.state_init(s) for s in p.sinks], None)
        for i, (lo, hi) in enumerate(parts):
            first, last = i == 0, i == len(parts) - 1
            code = self.tiled_code(layer, group, hi - lo, first, last)
            name = f"tiled{layer}g{group}n{rows}" + (f"p{i}" if len(parts) > 1 else "")
            words = ta.layout(len(p.sinks), self.model.head_dim, hi - lo).words
            start = mach_carry if executor != "reference" else ref_carry
            ext = ta.part_image(q8, k8[lo:hi], v8[lo:hi], *start)
            trace.runs.append(ChipRun(name, lambda code=code: code, lambda ext=ext: ext, words))
            # the host writes K, V, q and the states, and O after the first part (the rest is output)
            trace.host_words += ta.layout(len(p.sinks), self.model.head_dim, hi - lo).out \
                + (0 if first else len(p.sinks) * self.model.head_dim)
            if executor in ("reference", "both"):
                ref_carry = ta.reference_part(q8, k8[lo:hi], v8[lo:hi], p.qa, p.qs, p.smul, self.tile, *ref_carry)
            if executor in ("machine", "both"):
                prog = ta.build_part(q8, k8[lo:hi], v8[lo:hi], p.qa, p.qs, p.smul, self.tile, *mach_carry,
                                     last=last, out_shift=p.out_shift, code=code)
                with config.use(self.ext_config(words)):
                    got, mach = ta.run(prog)
                trace.cycles.append(mach.counters.cycles)
                if not last:
                    mach_carry = ta.carry(prog, mach)
                if executor == "both" and not last and not (
                        mach_carry[0] == ref_carry[0] and np.array_equal(mach_carry[1], ref_carry[1])):
                    raise AssertionError(f"{name}: the machine model's carried state differs from the reference's")
        if executor == "machine":
            return got
        states, o = ref_carry
        out = np.stack([isa.softmax_norm(o[r], states[r][1], p.out_shift) for r in range(len(p.sinks))])
        if executor == "both" and not np.array_equal(got, out):
            raise AssertionError(f"tiled attention of layer {layer} group {group} over {rows} rows: the machine "
                                 "model's output differs from the integer reference")
        return out

    def _gathered(self, layer: int, group: int, q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, executor: str,
                  trace: StepTrace) -> np.ndarray:
        """The tiled attention of one group over its rows in the paged K/V (``chip_pages``), each
        K and V tile gathered through the group's block table (``capra.paged_attention``, tiles of
        ``paged_tile`` keys); k8, v8 are the same rows, which only the reference executor reads.
        The host writes q and the rows' starting states; a context past the instruction memory
        runs as several programs that hand the states and O on in the chip's external memory."""
        p = self.tiled_params(layer, group)
        where, lo, hi = self.cache.source(layer, group)
        if hi - lo != k8.shape[0]:
            raise AssertionError(f"layer {layer}: the pages hold {hi - lo} attended rows, the host's cache "
                                 f"{k8.shape[0]}")
        g, d, tile = len(p.sinks), self.model.head_dim, self.paged_tile
        name = f"gathered{layer}g{group}n{hi - lo}"
        trace.host_words += g * isa.words_for(d) + ta.STATE_WORDS * g
        states, o = [ta.state_init(s) for s in p.sinks], None
        if executor == "reference":  # the integer function, tile by tile as the programs split it
            base = len(self.cache.image())
            words = base + 2 * g * isa.words_for(d) + ta.STATE_WORDS * g + g * d
            trace.runs.append(ChipRun(name, _not_kept(name), _not_kept(name), words))
            states, o = ta.reference_part(q8, k8, v8, p.qa, p.qs, p.smul, tile, states, o)
            return np.stack([isa.softmax_norm(o[r], states[r][1], p.out_shift) for r in range(g)])
        with config.use(self.cfg):
            prog = pa.build(q8, self.cache.image(), where, lo, hi, p.qa, p.qs, p.smul, sink=list(p.sinks),
                            out_shift=p.out_shift, tile=tile)
        ext = prog.ext
        with config.use(self.ext_config(len(ext))):
            for i, seg in enumerate(prog.segments):
                seg_name = name + (f"p{i}" if len(prog.segments) > 1 else "")
                trace.runs.append(ChipRun(seg_name, lambda code=seg.code: code, lambda ext=ext: [int(w) for w in ext],
                                          len(ext)))
                m = Machine(ext=ext.copy())
                m.run(seg.code)
                trace.cycles.append(m.counters.cycles)
                ext = m.ext
        got = isa.unpack_int8_rows(ext[prog.out_ext : prog.out_ext + g * isa.words_for(d)], g, d)
        if executor == "both":
            states, o = ta.reference_part(q8, k8, v8, p.qa, p.qs, p.smul, tile, states, o)
            want = np.stack([isa.softmax_norm(o[r], states[r][1], p.out_shift) for r in range(g)])
            if not np.array_equal(got, want):
                raise AssertionError(f"{name}: the machine model's output differs from the integer reference")
        return got

    def attention(self, layer: int, group: int, q8: np.ndarray, k8: np.ndarray, v8: np.ndarray, executor: str,
                  trace: StepTrace) -> np.ndarray:
        """A (int8, scale of a{layer}) of one KV group over its visible rows k8, v8: with a paged
        K/V the gathered program (``_gathered``) over any number of rows; else one-shot up to
        ``one_shot_rows`` (a tile unless changed, e.g. to compare the two), tiled beyond."""
        rows = k8.shape[0]
        if self.kv == "paged":
            return self._gathered(layer, group, q8, k8, v8, executor, trace)
        if rows > self.one_shot_rows:
            return self._tiled(layer, group, q8, k8, v8, executor, trace)
        feeds = {"q": q8 * self._scale(f"q{layer}"), "K": k8 * self._scale(f"k{layer}"),
                 "V": v8 * self._scale(f"v{layer}")}
        P = self.program("attn", layer, group, rows)
        return self._run(P, feeds, executor, trace)[P.outputs[0]]

    def step(self, token: int, executor: str = "reference") -> StepTrace:
        """Decode `token` at the next position: every program in order, the cache appended."""
        m = self.model
        if executor not in ("reference", "machine", "both"):
            raise MixedChipError(f"executor must be 'reference', 'machine' or 'both', got {executor!r}")
        if not 0 <= int(token) < m.vocab_size:
            raise MixedChipError(f"token must lie in [0, {m.vocab_size}), got {token}")
        rep = m.n_heads // m.n_kv_heads
        pos = self.position
        trace = StepTrace(pos, int(token), [], np.zeros(0), -1)
        c, s = rotation_rows(m, np.array([pos]))
        rot = {"rot_c": np.repeat(c, rep, axis=0), "rot_s": np.repeat(s, rep, axis=0)}
        x = m.embed[int(token)][None, :].astype(np.float64)  # the embedding: a host lookup
        if self.cache is not None:
            if pos >= self.max_context:
                raise MixedChipError(f"position {pos}: the paged K/V holds max_context={self.max_context} tokens")
            written = self.cache.written
            self.cache.begin_step()
        new_keys, new_values = [], []
        for layer in range(m.n_layers):
            a_out = {}
            for grp in range(m.n_kv_heads):
                out = self._run(self.program("proj", layer, grp), {"x": x, **rot}, executor, trace)
                q_int, k_int, v_int = out["q"], out["k"], out["v"]
                keys = np.vstack([self.keys[layer][grp], k_int])
                values = np.vstack([self.values[layer][grp], v_int])
                n = visible_rows(m, layer, pos + 1)
                keys, values = keys[-n:], values[-n:]
                new_keys.append(keys)
                new_values.append(values)
                if self.cache is not None:
                    self.cache.write_row(layer, grp, k_int, v_int)
                a_int = self.attention(layer, grp, q_int, keys, values, executor, trace)
                a_out[f"a{grp}"] = a_int * self._scale(f"a{layer}")
            out = self._run(self.program("out", layer), {"x": x, **a_out}, executor, trace)
            x = out["y"] * self._scale(f"x{layer + 1}")
            trace.residuals.append(x[0].copy())
            if layer == m.n_layers - 1:
                trace.logits = out["logits"][0] * self._scale("logits")
                trace.next_token = int(out["tok"][0, 0])
        # the step went through: keep its keys (a windowed layer only its window)
        if self.cache is not None:
            self.cache.end_step()
            trace.host_words += self.cache.written - written
        i = 0
        for layer in range(m.n_layers):
            for grp in range(m.n_kv_heads):
                self.keys[layer][grp], self.values[layer][grp] = new_keys[i], new_values[i]
                i += 1
        self.position += 1
        return trace

    def prefill(self, ids: Sequence[int], executor: str = "reference",
                progress: Callable[[int], None] | None = None) -> list[StepTrace]:
        """Every token of `ids` as a decode step (``mixed_chunk.ChunkedPrefill`` runs C tokens a program)."""
        traces = []
        for i, tok in enumerate(ids):
            traces.append(self.step(int(tok), executor))
            if progress is not None:
                progress(i + 1)
        return traces

    def generate(self, ids: Sequence[int], new_tokens: int, executor: str = "reference",
                 prefill_executor: str = "reference") -> tuple[list[int], list[StepTrace]]:
        """Greedy: prefill `ids`, then decode `new_tokens` tokens, each step fed the one before."""
        self.reset()
        traces = self.prefill(ids[:-1], prefill_executor)
        tok = int(ids[-1])
        out = []
        for _ in range(new_tokens):
            tr = self.step(tok, executor)
            traces.append(tr)
            tok = tr.next_token
            out.append(tok)
        return out, traces


def largest_one_shot(model: MixedLM, ranges: dict[str, float], cfg: config.Config = CHIP,
                     hi: int = 1024) -> int:
    """The most K/V rows a one-shot attention program of `model` compiles with on `cfg` (bisection
    over 1 .. hi, every layer and group; MM_MAX_K = 1,024 bounds P @ V's reduction): the context
    the chip would be limited to without the tiled attention."""
    def fits(rows: int) -> bool:
        try:
            with config.use(cfg):
                for layer in range(model.n_layers):
                    for grp in range(model.n_kv_heads):
                        g = attn_graph(model, layer, grp, rows)
                        compile_graph(g, [{n: np.zeros(g.shape(n)) for n in g.inputs}], ranges=ranges)
        except CompileError:
            return False
        return True

    lo, top = 1, hi
    if fits(top):
        return top
    while top - lo > 1:
        mid = (lo + top) // 2
        if fits(mid):
            lo = mid
        else:
            top = mid
    return lo


# ---- against the float model ------------------------------------------------------------------------


def float_residuals(model: MixedLM, ids: Sequence[int]) -> tuple[list[np.ndarray], np.ndarray]:
    """The numpy model's own residual after each layer (T x d_model each) and its logits (T x V),
    for `ids` at positions 0 .. T-1 (its ``_layer``, the computation ``forward`` runs)."""
    ids_2d = np.asarray(ids, dtype=np.int64)[None, :]
    cos, sin = rotary_tables(np.arange(ids_2d.shape[1]), model.rotary_dims, model.rope_base, model.dtype)
    x = model.embed[ids_2d]
    out = []
    for layer in range(model.n_layers):
        x = model._layer(layer, x, cos, sin, None, {})
        out.append(x[0].astype(np.float64))
    return out, (x @ model.unembed)[0].astype(np.float64)


@dataclass
class LayerError:
    """Int8 chip against the float model over a set of positions, per layer and for the logits."""

    rel: list[list[float]]      # per layer: ||x_chip - x_float|| / ||x_float|| at each position
    top1: list[bool]            # chip argmax == float argmax, each position
    decisive: list[bool]        # the float model's top-1 leads its runner-up by more than 2 int8 steps

    def add(self, other: LayerError) -> None:
        for mine, theirs in zip(self.rel, other.rel, strict=True):
            mine.extend(theirs)
        self.top1 += other.top1
        self.decisive += other.decisive


def layer_errors(chip: MixedChip, ids: Sequence[int], reference: MixedLM | None = None,
                 executor: str = "reference") -> LayerError:
    """Teacher-forced: `ids` decoded step by step on the chip (its own int8 cache) and by the float
    model `reference` (default the chip's own, e.g. the model before ``equalize``); the relative
    error of every layer's output residual and the top-1 agreement of the logits."""
    model = chip.model if reference is None else reference
    chip.reset()
    traces = chip.prefill(ids, executor)
    want, logits = float_residuals(model, ids)
    step = chip.ranges["logits"] / 127.0
    rel = [[float(np.linalg.norm(tr.residuals[layer] - want[layer][i]) / max(np.linalg.norm(want[layer][i]), 1e-30))
            for i, tr in enumerate(traces)] for layer in range(model.n_layers)]
    top1 = [tr.next_token == int(np.argmax(logits[i])) for i, tr in enumerate(traces)]
    decisive = []
    for i in range(len(traces)):
        two = np.sort(logits[i])[-2:]
        decisive.append(bool(two[1] - two[0] > 2 * step))
    return LayerError(rel, top1, decisive)


# ---- equalization: moving range between q and k ------------------------------------------------------


def equalize(model: MixedLM, prompts: Sequence[Sequence[int]]) -> tuple[MixedLM, list[np.ndarray]]:
    """The same model with each KV group's query and key columns rescaled against each other.

    A score is q . k, so dividing query dim d by f_d and multiplying key dim d by f_d changes no
    score (on a rotated pair both dims take one factor: the rotation commutes with it). With f_d =
    sqrt(max|q_d| / max|k_d|) over the calibration prompts (max over the group's query heads) the
    two int8 tensors get the same range in every dim. Layer 0 of the constructed model needs it:
    its queries carry a constant -4,192 in dim 0 against keys of 1 (a score offset that puts the
    peak at 20), and a per-tensor int8 step of 33 for q loses the rotary dims (about 544) it
    matches on. Returns the new model and each layer's factors (n_kv_heads x head_dim)."""
    hd, rep = model.head_dim, model.n_heads // model.n_kv_heads
    half, r0 = model.rotary_dims // 2, model.head_dim - model.rotary_dims
    xs: list[list[np.ndarray]] = [[] for _ in range(model.n_layers)]
    for ids in prompts:
        for layer, x in enumerate(float_trace(model, ids)["x"][:-1]):
            xs[layer].append(x)
    layers, factors = [], []
    for layer, lw in enumerate(model.layers):
        x = np.vstack(xs[layer])
        wq, wk = lw.wq.astype(np.float64).copy(), lw.wk.astype(np.float64).copy()
        f_layer = np.ones((model.n_kv_heads, hd))
        for grp in range(model.n_kv_heads):
            kmax = np.abs(x @ wk[:, _head_cols(model, grp)]).max(axis=0)
            qmax = np.max([np.abs(x @ wq[:, _head_cols(model, grp * rep + i)]).max(axis=0) for i in range(rep)], axis=0)
            for m in range(half):  # a rotated pair shares its factor
                for arr in (qmax, kmax):
                    arr[[r0 + m, r0 + half + m]] = arr[[r0 + m, r0 + half + m]].max()
            f = np.where((qmax > 0) & (kmax > 0), np.sqrt(qmax / np.where(kmax > 0, kmax, 1.0)), 1.0)
            f_layer[grp] = f
            wk[:, _head_cols(model, grp)] *= f
            for i in range(rep):
                wq[:, _head_cols(model, grp * rep + i)] /= f
        factors.append(f_layer)
        layers.append(LayerWeights(wq=wq.astype(model.dtype), wk=wk.astype(model.dtype), wv=lw.wv, wo=lw.wo,
                                   sink_raw=lw.sink_raw, windowed=lw.windowed))
    return replace(model, layers=layers, notes=dict(model.notes)), factors
