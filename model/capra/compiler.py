"""The int8 graph compiler: calibrate, quantize, place in memory, schedule, emit GA2 code.

``compile_graph(graph, calib, ranges=...)`` returns a ``Program``: the code words, where every
tensor lives in external memory and in the scratchpad, and the integer parameters of every node.
The program's own integer semantics are also executable directly in numpy (``reference.py``), so
a compiled program can be checked against the machine model exactly.

Schedule. Compute instructions run in graph order. Weights and inputs are loaded by the DMA in
the order they are first needed. The emitter keeps time with the ISA's cycle formulas and starts
the next transfer whenever the DMA engine is idle, so a LOAD never stalls the sequencer and DMA
time hides behind compute time. A WAIT precedes a node whose operands are still in flight.
Outputs are stored at the end.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from . import asm, isa
from .graph import Graph, Node
from .quant import (
    SOFTMAX_IN_SCALE,
    SOFTMAX_OUT_SCALE,
    CompileError,
    multiplier,
    pair_multiplier,
    quantize,
    scale_for,
)


def ext_limit() -> int:
    """GA2_EXT, the external memory size in words (default 8192)."""
    return int(os.environ.get("GA2_EXT", "8192"))


@dataclass
class Tensor:
    """Where one tensor lives and how it is encoded."""

    name: str
    rows: int
    cols: int
    kind: str  # "int8" (packed rows) or "int32" (one word per row: argmax results)
    scale: float = 1.0
    sram: int = -1
    ext: int = -1

    @property
    def row_words(self) -> int:
        return isa.words_for(self.cols) if self.kind == "int8" else 1

    @property
    def words(self) -> int:
        return self.rows * self.row_words


@dataclass
class Program:
    """A compiled graph: GA2 code plus everything needed to build its memory image and read it back."""

    name: str
    code: list[int]
    graph: Graph
    tensors: dict[str, Tensor]
    params: dict[str, dict]  # per node: the integer parameters of its computation
    consts: dict[str, np.ndarray]  # quantized weights
    const_words: list[int]  # external memory from word 0: the constants, zeros where inputs go
    ext_words: int  # external memory the program uses (constants, inputs, outputs)
    inputs: list[str]
    outputs: list[str]
    schedule: list[str] = field(default_factory=list)  # one line per emitted instruction group

    def listing(self) -> str:
        return asm.listing(self.code)


# ---- calibration ---------------------------------------------------------------------------------


def _calibrate(graph: Graph, calib, ranges: dict | None) -> dict[str, float]:
    """Scale of every non-integer tensor: from the range groups, else from the calibration runs."""
    if calib is None or len(calib) == 0:
        raise CompileError(f"graph {graph.name!r}: missing calibration data (give at least one input set)")
    max_abs: dict[str, float] = {n: 0.0 for n in graph.nodes}
    for i, feeds in enumerate(calib):
        missing = [n for n in graph.inputs if n not in feeds]
        if missing:
            raise CompileError(f"graph {graph.name!r}: calibration set {i} lacks input {missing[0]!r}")
        for name, value in graph.evaluate(feeds).items():
            if value.size:
                max_abs[name] = max(max_abs[name], float(np.max(np.abs(value))))
    for node in graph.nodes.values():
        if node.op == "softmax" and node.attrs["sink"] is not None:
            # the sink logit is an int8 in its input's scale: that scale must reach it (a relu
            # keeps its input's scale, so widen the tensor the relus start from)
            src = node.inputs[0]
            while graph.nodes[src].op == "relu":
                src = graph.nodes[src].inputs[0]
            max_abs[src] = max(max_abs[src], abs(float(node.attrs["sink"])))
            group = graph.nodes[src].attrs.get("range_group")
            if ranges and group in ranges and abs(node.attrs["sink"]) > float(ranges[group]):
                raise CompileError(f"softmax {node.name!r}: sink {node.attrs['sink']} lies outside the range "
                                   f"{ranges[group]} given for its input's group {group!r}")
    ranges = dict(ranges or {})
    group_max: dict[str, float] = {}
    for node in graph.nodes.values():
        g = node.attrs.get("range_group")
        if g is not None:
            group_max[g] = max(group_max.get(g, 0.0), max_abs[node.name])
    scales = {}
    for node in graph.nodes.values():
        g = node.attrs.get("range_group")
        if g is not None and g in ranges:
            scales[node.name] = scale_for(float(ranges[g]))
        elif g is not None:
            scales[node.name] = scale_for(group_max[g])
        else:
            scales[node.name] = scale_for(max_abs[node.name])
        if node.op == "softmax":
            scales[node.name] = SOFTMAX_OUT_SCALE
        if node.op == "relu":
            scales[node.name] = scales[node.inputs[0]]  # relu keeps its input's scale
        if node.op == "argmax":
            scales[node.name] = 1.0
    for node in graph.nodes.values():
        if node.op == "concat":
            a, b = node.inputs
            if not np.isclose(scales[a], scales[b], rtol=1e-12) or not np.isclose(scales[a], scales[node.name]):
                raise CompileError(f"concat {node.name!r}: inputs {a!r} and {b!r} have different scales; "
                                   f"put them in one range group")
    return scales


# ---- the compiler ----------------------------------------------------------------------------------


class _Emitter:
    """Builds the instruction stream and keeps time with the ISA's cycle formulas.

    The clock lets the scheduler issue a LOAD only when the DMA queue has room (so it costs one
    cycle and never stalls the sequencer) and know whether, and how long, a WAIT must hold.
    """

    def __init__(self) -> None:
        self.code: list[int] = []
        self.notes: list[str] = []
        self.t = 0  # cycle at which the next instruction is fetched
        self.ends: list[int] = []  # end cycles of the transfers issued so far, in order

    def emit(self, words: list[int], note: str, cycles: int = 0) -> None:
        """A non-DMA instruction: one fetch cycle plus `cycles` of execution."""
        self.code += words
        self.notes.append(note)
        self.t += 1 + cycles

    def in_flight(self) -> list[int]:
        return [e for e in self.ends if e > self.t]

    def transfer(self, words: list[int], n_words: int, note: str) -> int:
        """A LOAD or STORE; returns its index among the transfers."""
        self.code += words
        self.notes.append(note)
        pending = self.in_flight()
        if len(pending) >= isa.DMA_QUEUE:
            self.t = pending[0]
            pending = self.in_flight()
        begin = max([self.t + 1] + pending)
        self.ends.append(begin + isa.dma_cycles(1, n_words))
        self.t += 1
        return len(self.ends) - 1

    def wait_for(self, index: int, note: str) -> None:
        """WAIT until transfer `index` has finished, letting later transfers run on."""
        if self.ends[index] <= self.t:
            return
        keep = sum(1 for e in self.ends[index + 1 :] if e > self.t)
        self.code += asm.wait(keep)
        self.notes.append(note)
        self.t = max(self.t, self.ends[index]) + 1

    def has_room(self) -> bool:
        return len(self.in_flight()) < isa.DMA_QUEUE

    def next_begin(self) -> int:
        return max([self.t + 1] + self.in_flight())


def compile_graph(graph: Graph, calib, ranges: dict | None = None) -> Program:
    """Compile a graph for GA2 (see the module docstring). Raises CompileError naming node and limit."""
    if not graph.outputs:
        raise CompileError(f"graph {graph.name!r} has no outputs")
    for node in graph.nodes.values():
        if node.op not in ("input", "const", "matmul", "concat", "softmax", "add", "mul", "relu", "argmax"):
            raise CompileError(f"node {node.name!r}: op {node.op!r} is not supported by GA2")
        if node.op != "argmax" and any(graph.nodes[i].op == "argmax" for i in node.inputs):
            raise CompileError(f"node {node.name!r}: an argmax result can only be an output")
    scales = _calibrate(graph, calib, ranges)
    tensors = {n.name: Tensor(n.name, n.shape[0], n.shape[1], "int32" if n.op == "argmax" else "int8",
                              scales[n.name]) for n in graph.nodes.values()}
    params = _integer_params(graph, scales)
    consts = {n.name: quantize(n.attrs["value"], scales[n.name]) for n in graph.nodes.values() if n.op == "const"}
    compute, loads = _load_order(graph)
    _place_sram(graph, tensors, loads)
    const_words, ext_words = _place_ext(graph, tensors, consts, loads)
    code, notes = _emit(graph, tensors, params, compute, loads)
    if len(code) // isa.WORDS_PER_INSTR >= isa.IMEM_INSTRS:
        raise CompileError(f"graph {graph.name!r}: {len(code) // 4} instructions exceed the instruction "
                           f"memory ({isa.IMEM_INSTRS - 1} and a HALT)")
    return Program(graph.name, code, graph, tensors, params, consts, const_words, ext_words,
                   graph.inputs, list(graph.outputs), notes)


def _integer_params(graph: Graph, scales: dict[str, float]) -> dict[str, dict]:
    """The integer multipliers and shifts of every computing node."""
    params: dict[str, dict] = {}
    for node in graph.nodes.values():
        s = scales[node.name]
        ins = [scales[i] for i in node.inputs]
        if node.op == "matmul":
            k = graph.shape(node.inputs[0])[1]
            if k > isa.MM_MAX_K:
                raise CompileError(f"matmul {node.name!r}: reduction length {k} exceeds GA2's limit {isa.MM_MAX_K}")
            qa, qs = multiplier(ins[0] * ins[1] * node.attrs["scale"] / s, node.name)
            params[node.name] = {"qa": qa, "qs": qs}
        elif node.op == "add":
            qa, qb, qs = pair_multiplier(ins[0] / s, ins[1] / s, node.name)
            params[node.name] = {"qa": qa, "qb": qb, "qs": qs}
        elif node.op == "mul":
            qa, qs = multiplier(ins[0] * ins[1] / s, node.name)
            params[node.name] = {"qa": qa, "qs": qs}
        elif node.op == "softmax":
            # the table steps by 1/16: smul = 2**14 * input scale converts input units to steps
            smul = int(np.floor(ins[0] * (1 << isa.SM_SCALE_SHIFT) / SOFTMAX_IN_SCALE + 0.5))
            if not 1 <= smul < (1 << 16):
                raise CompileError(f"softmax {node.name!r}: input scale {ins[0]:.3g} gives smul={smul}, "
                                   f"outside 1..65535 (inputs must span less than about +-500)")
            p: dict = {"sink": None, "smul": smul}
            if node.attrs["sink"] is not None:
                q = int(np.floor(node.attrs["sink"] / ins[0] + 0.5))
                if not -128 <= q <= 127:
                    raise CompileError(f"softmax {node.name!r}: sink {node.attrs['sink']:.3g} is outside the int8 "
                                       f"range of its input's scale {ins[0]:.3g}")
                p["sink"] = q
            params[node.name] = p
    return params


def _load_order(graph: Graph) -> tuple[list[Node], list[str]]:
    """The compute nodes in order, and the constants and inputs in the order they are first needed."""
    compute = [n for n in graph.nodes.values() if n.op in ("matmul", "softmax", "add", "mul", "relu", "argmax")]
    loads: list[str] = []
    for node in compute:
        for inp in node.inputs:
            for src in _sources(graph, inp):
                if src not in loads:
                    loads.append(src)
    for node in graph.nodes.values():
        if node.op in ("input", "const") and node.name not in loads:
            loads.append(node.name)  # not read by any compute node (an input copied straight out)
    return compute, loads


def _sources(graph: Graph, name: str) -> list[str]:
    """The loaded tensors (constants, inputs) that make up a node's value without computing."""
    node = graph.nodes[name]
    if node.op == "concat":
        return [s for i in node.inputs for s in _sources(graph, i)]
    return [name] if node.op in ("const", "input") else []


def _place_sram(graph: Graph, tensors: dict[str, Tensor], loads: list[str]) -> None:
    """Give every tensor scratchpad words. Loaded tensors come first, in load order, so that
    neighbours in the load order are neighbours in memory (one DMA transfer can bring several).
    A concat's inputs live inside the concat's region."""
    inside: dict[str, tuple[str, int]] = {}
    for node in graph.nodes.values():
        if node.op == "concat":
            a, b = node.inputs
            for part, offset in ((a, 0), (b, tensors[a].words)):
                if part in inside:
                    raise CompileError(f"node {part!r} feeds two concats; GA2 keeps one copy of a tensor")
                if graph.nodes[part].op == "const":
                    raise CompileError(f"concat {node.name!r}: constant {part!r} cannot be a concat input")
                inside[part] = (node.name, offset)
    top = 0

    def alloc(name: str) -> None:
        nonlocal top
        t = tensors[name]
        if name in inside or t.sram >= 0:
            return
        t.sram = top
        top += t.words
        if top > isa.SRAM_WORDS:
            raise CompileError(f"node {name!r}: needs scratchpad words {t.sram}..{top - 1}, "
                               f"beyond the SRAM of {isa.SRAM_WORDS} words")

    for name in loads:
        alloc(name)
    for name in reversed(list(graph.nodes)):  # a concat is placed before its inputs
        if graph.nodes[name].op == "concat":
            alloc(name)
    for name in graph.nodes:
        alloc(name)

    def resolve(name: str) -> int:
        parent, offset = inside[name]
        if tensors[parent].sram < 0:
            tensors[parent].sram = resolve(parent)
        return tensors[parent].sram + offset

    for name in inside:
        tensors[name].sram = resolve(name)


def _place_ext(graph: Graph, tensors: dict[str, Tensor], consts: dict[str, np.ndarray],
               loads: list[str]) -> tuple[list[int], int]:
    """External memory map: constants and inputs in load order from word 0, then the outputs.
    Returns the image of the constants (zeros where inputs go) and the words used in all."""
    limit = ext_limit()
    if limit > isa.MAX_EXTW:
        raise CompileError(f"GA2_EXT={limit} exceeds the 16-bit external address space ({isa.MAX_EXTW} words)")
    words: list[int] = []
    top = 0
    for name in loads + list(graph.outputs):
        t = tensors[name]
        if t.ext >= 0:
            raise CompileError(f"node {name!r} is both an input and an output")
        t.ext = top
        top += t.words
        if top > limit:
            raise CompileError(f"node {name!r}: the program's data needs {top} words of external memory, "
                               f"more than GA2_EXT={limit}")
        if name in loads:
            words += pack_int8_rows(consts[name]) if name in consts else [0] * t.words
    return words, top


def pack_int8_rows(values: np.ndarray) -> list[int]:
    """int8 matrix -> packed words (lane 0 in the low byte, lanes past the row end zero)."""
    values = np.asarray(values, dtype=np.int64)
    rows, cols = values.shape
    w = isa.words_for(cols)
    lanes = np.zeros((rows, w * isa.LANES), dtype=np.int8)
    lanes[:, :cols] = values
    return [int(x) for x in lanes.reshape(-1).view(np.uint32)]


def unpack_int8_rows(words, rows: int, cols: int) -> np.ndarray:
    w = isa.words_for(cols)
    arr = np.asarray(words, dtype=np.int64).astype(np.uint32)
    return arr.view(np.int8).reshape(rows, w * isa.LANES)[:, :cols].astype(np.int64)


def _node_cycles(graph: Graph, node: Node) -> int:
    """Predicted cycles of a node's instructions (fetches included), from the ISA's formulas."""
    rows, cols = graph.shape(node.inputs[0])
    if node.op == "matmul":
        flags = isa.MM_OUT8 | (0 if node.attrs["transpose_b"] else isa.MM_BROWS)
        return 2 + isa.mm_cycles(rows, cols, node.shape[1], flags)
    if node.op == "softmax":
        return rows * (1 + isa.smax_cycles(cols))
    if node.op == "argmax":
        return rows * (1 + isa.vec_cycles(cols))
    return 2 + rows * (1 + isa.vec_cycles(cols))


def _emit(graph: Graph, tensors: dict[str, Tensor], params: dict[str, dict],
          compute: list[Node], loads: list[str]) -> tuple[list[int], list[str]]:
    """The instruction stream (see the module docstring), then the stores and HALT."""
    load_index = {name: i for i, name in enumerate(loads)}
    first_use = {name: len(compute) for name in loads}
    for i, node in enumerate(compute):
        for inp in node.inputs:
            for src in _sources(graph, inp):
                first_use[src] = min(first_use[src], i)
    durations = [_node_cycles(graph, n) for n in compute]
    out = _Emitter()
    issued = 0
    current = 0  # index of the compute node being emitted
    carrier: dict[int, int] = {}  # load index -> the transfer that brings it

    def start_of(j: int) -> int:
        """Predicted cycle at which compute node j starts if nothing stalls from now on."""
        return out.t + 1 + sum(durations[current:j])

    def issue() -> None:
        """One LOAD of loads[issued] and of as many memory neighbours as can arrive before the
        first of them is needed: the DMA stays busy and never delays an operand."""
        nonlocal issued
        first_index = issued
        first = tensors[loads[issued]]
        deadline = start_of(first_use[first.name])
        begin = out.next_begin() + isa.DMA_SETUP
        words = first.words
        issued += 1
        while issued < len(loads):
            nxt, prev = tensors[loads[issued]], tensors[loads[issued - 1]]
            adjacent = nxt.ext == prev.ext + prev.words and nxt.sram == prev.sram + prev.words
            if not adjacent or begin + words + nxt.words > deadline:
                break
            words += nxt.words
            issued += 1
        names = ", ".join(loads[first_index:issued])
        index = out.transfer(asm.load(first.sram, first.ext, 1, words), words, f"load {names} ({words} words)")
        for i in range(first_index, issued):
            carrier[i] = index

    def prefetch(_budget: int = 0) -> None:
        """Queue the next transfers while the DMA queue has room: a LOAD then costs one cycle."""
        while issued < len(loads) and out.has_room():
            issue()

    for i, node in enumerate(compute):
        current = i
        need = 1 + max([load_index[s] for inp in node.inputs for s in _sources(graph, inp)], default=-1)
        while issued < need:
            issue()
        if need:
            out.wait_for(carrier[need - 1], f"wait for the operands of {node.name}")
        prefetch()
        _emit_node(out, graph, node, tensors, params, prefetch)
    while issued < len(loads):
        issue()
    for name in graph.outputs:
        t = tensors[name]
        out.transfer(asm.store(t.sram, t.ext, 1, t.words), t.words, f"store {name}")
    out.emit(asm.halt(), "halt (waits for the last store)")
    return out.code, out.notes


def _emit_node(out: _Emitter, graph: Graph, node: Node, tensors: dict[str, Tensor], params: dict[str, dict],
               prefetch) -> None:
    """The instructions of one node; `prefetch` is called between them to keep the DMA busy."""
    t = tensors[node.name]
    src = [tensors[i] for i in node.inputs]
    p = params.get(node.name, {})
    if node.op == "matmul":
        a, b = src
        k = a.cols
        flags = isa.MM_OUT8 | (isa.MM_RELU if node.attrs["relu"] else 0)
        flags |= 0 if node.attrs["transpose_b"] else isa.MM_BROWS
        out.emit(asm.qcfg(qa=p["qa"], shift=p["qs"]), f"qcfg for {node.name}")
        out.emit(asm.mm(a.sram, b.sram, t.sram, a.rows, k, t.cols, out8=True, relu=node.attrs["relu"],
                        brows=not node.attrs["transpose_b"]), f"mm {node.name}",
                 isa.mm_cycles(a.rows, k, t.cols, flags))
        return
    if node.op == "softmax":
        x = src[0]
        for r in range(x.rows):
            prefetch(isa.smax_cycles(x.cols))
            out.emit(asm.smax(x.sram + r * x.row_words, t.sram + r * t.row_words, x.cols, sink=p["sink"],
                              smul=p["smul"]), f"smax {node.name} row {r}", isa.smax_cycles(x.cols))
        return
    if node.op == "argmax":
        x = src[0]
        for r in range(x.rows):
            prefetch(isa.vec_cycles(x.cols))
            out.emit(asm.vec(isa.VEC_ARGMAX, x.sram + r * x.row_words, t.sram + r, x.cols), f"argmax {node.name}",
                     isa.vec_cycles(x.cols))
        return
    if node.op == "add":
        out.emit(asm.qcfg(qa=p["qa"], qb=p["qb"], shift=p["qs"]), f"qcfg for {node.name}")
        _rowwise(out, isa.VEC_ADD, src[0], src[1], t.sram, f"add {node.name}")
    elif node.op == "mul":
        out.emit(asm.qcfg(qa=p["qa"], shift=p["qs"]), f"qcfg for {node.name}")
        _rowwise(out, isa.VEC_MUL, src[0], src[1], t.sram, f"mul {node.name}")
    elif node.op == "relu":
        _rowwise(out, isa.VEC_RELU, src[0], src[0], t.sram, f"relu {node.name}")


def _rowwise(out: _Emitter, sub: int, a: Tensor, b: Tensor, dst: int, note: str) -> None:
    """One VEC over the whole tensor when its rows pack without gaps, else one per row."""
    if a.cols % isa.LANES == 0:
        out.emit(asm.vec(sub, a.sram, dst, a.rows * a.cols, b=b.sram), note, isa.vec_cycles(a.rows * a.cols))
        return
    for r in range(a.rows):
        off = r * a.row_words
        out.emit(asm.vec(sub, a.sram + off, dst + off, a.cols, b=b.sram + off), f"{note} row {r}",
                 isa.vec_cycles(a.cols))
