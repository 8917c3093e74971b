"""The int8 graph compiler: calibrate, quantize, place in memory, schedule, emit GA2 code.

``compile_graph(graph, calib, ranges=...)`` returns a ``Program``: the code words, where every
tensor lives in external memory and in the scratchpad, and the integer parameters of every node.
The program's own integer semantics are also executable directly in numpy (``reference.py``), so
a compiled program can be checked against the machine model exactly.

Placement. The scratchpad's banks have one read and one write port each, and a DMA transfer may
not use a port of a bank while a compute instruction uses it (docs/isa.md). So the tensors the DMA
writes and the tensors compute writes live apart: loaded constants and inputs from word 0 up,
computed tensors from the top down, and each region that both write (a concat of cached rows and
a new row) in a bank group of its own when one is free. The softmax engine runs beside the matmul
engine only where they share no bank port, so a second placement gives the softmax's tensors the
top bank group to themselves; the compiler emits both and keeps the one whose schedule ends first.

Families. In a batch, the key (and value) projections of consecutive rows of x by one weight are
one MM with an output row stride: each request's cache region is laid out `stride` words after
the one before, so row j lands at the end of request j's region (``_Family``). A run of rows is
two families (the first half's attentions start while the second half's caches arrive) or one
(fewer, longer MMs); a third placement puts the regions of one kind side by side (the key halves
in one bank group, the value halves in another). The compiler emits these variants too and keeps
the one whose schedule ends first.

Schedule. Weights and inputs are loaded by the DMA in the order they are first needed (a load into
a concat region counts as needed by the node that writes the region's computed part); compute
nodes are list-scheduled on a rough clock (the next is the ready node that could start first,
the longest chain of work after it among equals). A weight of more than CHUNK_WORDS words is
loaded in column chunks, and its matmul runs chunk by chunk (MM column windows) while the next
chunk arrives. The emitter keeps time with the machine model's own DMA timeline
(``dma.DmaTimeline``) and issues the next transfer whenever the DMA queue has room, so a LOAD
never stalls the sequencer and DMA time hides behind compute time. That clock decides only
performance, never correctness: a WAIT keep precedes every instruction that conflicts with a
transfer (its words or a bank port, ``dma.conflict``) unless an earlier WAIT, or DMA_QUEUE later
transfers, have made that transfer's end certain, so the program gives the same results on a
memory of any latency (docs/isa.md). An output is stored as soon as no later instruction reads its
banks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from . import asm, checks, isa
from .dma import DmaTimeline, Transfer, conflict
from .graph import Graph, GraphError, Node
from .quant import (
    SOFTMAX_IN_SCALE,
    SOFTMAX_OUT_SCALE,
    CompileError,
    multiplier,
    pair_multiplier,
    quantize,
    scale_for,
)


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


def _check_ranges(graph: Graph, ranges) -> dict[str, float]:
    """The caller's ranges as {group: finite float > 0}: a range is the largest magnitude a group
    holds, so 0, a negative number, NaN, infinity or a non-number cannot be one."""
    if ranges is None:
        return {}
    if not isinstance(ranges, Mapping):
        raise CompileError(f"graph {graph.name!r}: ranges must map range groups to numbers, got {ranges!r}")
    return {g: checks.number(r, f"graph {graph.name!r}: range of group {g!r}", CompileError, positive=True)
            for g, r in ranges.items()}


def _calibration_feeds(graph: Graph, calib) -> list[dict[str, np.ndarray]]:
    """Every calibration set as {input: finite array of the input's exact shape}."""
    if isinstance(calib, Mapping | str | bytes):
        raise CompileError(f"graph {graph.name!r}: calib must be a list of input sets (dicts), "
                           f"got a {type(calib).__name__}")
    try:
        calib = list(calib) if calib is not None else []
    except TypeError:
        raise CompileError(f"graph {graph.name!r}: calib must be a list of input sets (dicts), "
                           f"got {calib!r}") from None
    if not calib:
        raise CompileError(f"graph {graph.name!r}: missing calibration data (give at least one input set)")
    sets = []
    for i, feeds in enumerate(calib):
        if not isinstance(feeds, Mapping):
            raise CompileError(f"graph {graph.name!r}: calibration set {i} must map input names to rows, "
                               f"got {type(feeds).__name__}")
        missing = [n for n in graph.inputs if n not in feeds]
        if missing:
            raise CompileError(f"graph {graph.name!r}: calibration set {i} lacks input {missing[0]!r}")
        sets.append({n: checks.feed(feeds[n], graph.shape(n), f"graph {graph.name!r}: calibration set {i}: "
                                    f"input {n!r}", CompileError) for n in graph.inputs})
    return sets


def _calibrate(graph: Graph, calib, ranges: dict | None) -> dict[str, float]:
    """Scale of every non-integer tensor: from the range groups, else from the calibration runs."""
    sets = _calibration_feeds(graph, calib)
    ranges = _check_ranges(graph, ranges)
    max_abs: dict[str, float] = {n: 0.0 for n in graph.nodes}
    for i, feeds in enumerate(sets):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, by node
            values = graph.evaluate(feeds)
        for name, value in values.items():
            if not np.isfinite(value).all():
                raise CompileError(f"graph {graph.name!r}: calibration set {i}: node {name!r} evaluates to "
                                   f"non-finite values (float64 overflow); its inputs are finite")
            if value.size:
                max_abs[name] = max(max_abs[name], float(np.abs(value).max()))
    for node in graph.nodes.values():
        if node.op == "softmax" and node.attrs["sink"] is not None:
            # the sink logit is an int8 in its input's scale: that scale must reach it (a relu
            # keeps its input's scale, so widen the tensor the relus start from)
            src = node.inputs[0]
            while graph.nodes[src].op == "relu":
                src = graph.nodes[src].inputs[0]
            max_abs[src] = max(max_abs[src], abs(float(node.attrs["sink"])))
            group = graph.nodes[src].attrs.get("range_group")
            if group in ranges and abs(node.attrs["sink"]) > ranges[group]:
                raise CompileError(f"softmax {node.name!r}: sink {node.attrs['sink']} lies outside the range "
                                   f"{ranges[group]} given for its input's group {group!r}")
    group_max: dict[str, float] = {}
    for node in graph.nodes.values():
        g = node.attrs.get("range_group")
        if g is not None:
            group_max[g] = max(group_max.get(g, 0.0), max_abs[node.name])
    scales = {}
    for node in graph.nodes.values():
        g = node.attrs.get("range_group")
        if g is not None and g in ranges:
            scales[node.name] = scale_for(ranges[g], f"range group {g!r}")
        elif g is not None:
            scales[node.name] = scale_for(group_max[g], f"range group {g!r}")
        else:
            scales[node.name] = scale_for(max_abs[node.name], f"node {node.name!r}")
        if node.op == "softmax":
            scales[node.name] = SOFTMAX_OUT_SCALE
        if node.op in ("relu", "rows"):
            scales[node.name] = scales[node.inputs[0]]  # relu keeps its input's scale, a view is its input
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
    """Builds the instruction stream and keeps time as the machine model does (the DMA timeline,
    the two compute engines).

    The clock lets the scheduler issue a LOAD only when the DMA queue has room (so it costs one
    cycle and never stalls the sequencer). Whether a WAIT is needed, or OVERLAP allowed, it decides without
    the clock (``known_done``, ``running``), so that the program is right on any memory.
    """

    def __init__(self, chain: bool = True) -> None:
        self.chain = chain  # set CHAIN on the MMs that gain by it (else on none)
        self.code: list[int] = []
        self.notes: list[str] = []
        self.t = 0  # cycle in which the next instruction is decoded
        self.dma = DmaTimeline()
        self.transfers: list[Transfer] = []
        self.known_done = 0  # transfers 0 .. known_done - 1 have ended on any memory (WAITs, a full queue)
        self.free = dict.fromkeys(isa.ENGINES, 0)  # first cycle each engine takes an instruction
        self.running: dict[str, isa.Effects | None] = dict.fromkeys(isa.ENGINES)  # last instruction, if it may run
        # the matmul engine's last instruction if an MM (its effects, the cycles of its last read and
        # its last write), the last write of the MM before it, and that MM if it may still drain
        # beside the last one: what a CHAIN MM waits for, as in the machine model
        self.mm_last: tuple[isa.Effects, int, int] | None = None
        self.mm_before_done = -1
        self.draining: isa.Effects | None = None
        self.qbias = 0  # the bias address of the last QCFG (an MM with BIAS reads there)

    def emit(self, words: list[int], note: str) -> None:
        """An instruction of the sequencer's own (QCFG, HALT): one decode cycle."""
        ins = isa.Instr.decode(words)
        if ins.op == isa.OP_QCFG:
            self.qbias = ins.d
        self.code += words
        self.notes.append(note)
        self.t += 1

    def _engines(self, words: list[int], eff: isa.Effects, engine: str | None) -> list[int]:
        """`words` with OVERLAP unless the instruction conflicts with the last instruction of
        another engine that may still be running (``isa.engine_conflict``); without it, the clock
        moves to where the other engines are idle."""
        others = [e for e in isa.ENGINES if e != engine]
        mays = [self.running[e] for e in others if self.running[e] is not None]
        if "mmvec" in others and self.draining is not None:
            mays.append(self.draining)
        if not any(isa.engine_conflict(eff, may) for may in mays):
            return asm.overlap(words)
        self.t = max([self.t] + [self.free[e] for e in others])
        for e in others:
            self.running[e] = None
            if e == "mmvec":
                self.draining = None
        return words

    def transfer(self, words: list[int], note: str, sram: np.ndarray | None = None) -> int:
        """A LOAD or STORE; returns its index among the transfers. A gather's timing depends on its
        descriptors: `sram` gives the scratchpad's words as they will be when it runs (its block table)."""
        ins = isa.decoded(tuple(words))
        eff = isa.kept_effects(ins, sram=sram)
        is_load = ins.op == isa.OP_LOAD
        self.t = self.dma.room_at(self.t)
        self.code += self._engines(words, eff, None)
        self.notes.append(note)
        gather = eff.page_starts is not None
        self.transfers.append(self.dma.issue(self.t, is_load, eff.writes if is_load else eff.reads, eff.cols,
                                             len(self.notes) - 1, eff.ext_reads if is_load else eff.ext_writes,
                                             eff.page_starts, eff.reads if gather else None))
        self.t += 1
        # the chip issues a transfer only when fewer than DMA_QUEUE are in flight, so every transfer
        # DMA_QUEUE or more places before this one has ended, whatever the memory's timing
        self.known_done = max(self.known_done, len(self.transfers) - isa.DMA_QUEUE)
        return len(self.transfers) - 1

    def wait_for(self, index: int, note: str) -> None:
        """WAIT until transfer `index` has finished, letting later transfers run on."""
        self._wait(self.transfers[index], note)

    def _wait(self, x: Transfer, note: str) -> None:
        """WAIT until x has ended, unless that is already certain on any memory: never because the
        timeline predicts it has (that holds only for the memory the timeline models)."""
        index = self.transfers.index(x)
        if index < self.known_done:
            return
        keep = len(self.transfers) - index - 1
        self.code += asm.wait(keep)
        self.notes.append(note)
        self.t = self.dma.drained_at(self.t, keep) + 1
        self.known_done = index + 1

    def compute(self, words: list[int], note: str) -> None:
        """A compute instruction, after a WAIT for the youngest transfer it conflicts with (words or
        bank ports, ``dma.conflict``) that may still be in flight on some memory: what it reads,
        writes and how long it runs are ``isa.effects``'s, as for the machine model."""
        eff = isa.kept_effects(isa.decoded(tuple(words)), qbias=self.qbias)
        reads, writes = eff.read_set, eff.write_set
        clashing = [i for i in range(self.known_done, len(self.transfers))
                    if conflict(self.transfers[i], reads, writes)]
        if clashing:
            self._wait(self.transfers[clashing[-1]], f"wait: {note} conflicts with transfer {clashing[-1]}")
        engine = isa.ENGINE_OF[eff.unit]
        before = self.mm_last if engine == "mmvec" else None
        chained = (self.chain and eff.mm is not None and before is not None
                   and isa.chain_conflict(eff, before[0]) is None)
        if chained:
            # CHAIN only where, by the clock, the engine takes this MM while the one before still
            # drains: elsewhere it gains nothing here, and an MM that chains makes the one before it
            # count as draining for every OVERLAP after it, on any memory
            chained = self.free[engine] > max(self.t, before[1] + 1, self.mm_before_done + 1)
        if chained:  # CHAIN: the engine takes it once the MM before it has made its last read
            words = asm.chain(words)
            self.t = max(self.t, before[1] + 1, self.mm_before_done + 1)
        else:
            self.t = max(self.t, self.free[engine])
        self.code += self._engines(words, eff, engine)
        self.notes.append(note)
        cycles = eff.cycles
        if eff.mm is not None and before is not None:
            cycles += isa.mm_chain_pad(eff.mm, self.t, before[1], before[0].mm)
        if engine == "mmvec":
            # the MM before may still drain beside this one on some memory whenever this one chains
            # on it (nothing since has waited for the engine): what may take OVERLAP after it must
            # not depend on the clock, which says only when the engine takes the next MM
            self.draining = self.running[engine] if chained else None
            self.mm_before_done = self.free[engine] - 1 if chained and self.free[engine] > self.t + 1 else -1
            self.mm_last = (eff, self.t + cycles - eff.cycles + eff.mm.front, self.t + cycles) \
                if eff.mm is not None else None
        self.free[engine] = self.t + cycles + 1
        self.running[engine] = eff
        self.t += 1

    def has_room(self) -> bool:
        return len(self.dma.in_flight(self.t)) < isa.DMA_QUEUE


def compile_graph(graph: Graph, calib, ranges: dict | None = None) -> Program:
    """Compile a graph for GA2 (see the module docstring). Raises CompileError naming node and limit.

    Everything is checked before it is used (``checks.py``, docs/quantization.md): the graph's
    shapes and attributes again, every calibration feed (its input's exact shape, finite values)
    and every range (a finite number > 0). A NaN or a float shape is an error, never a scale of 1.0
    or a truncated dimension."""
    if not isinstance(graph, Graph):
        raise CompileError(f"compile_graph needs a Graph, got {type(graph).__name__}")
    try:
        graph.check()  # the construction checks again, for nodes edited after they were built
    except GraphError as e:
        raise CompileError(f"graph {graph.name!r}: {e}") from None
    if not graph.outputs:
        raise CompileError(f"graph {graph.name!r} has no outputs")
    for node in graph.nodes.values():
        if node.op not in ("input", "const", "matmul", "concat", "rows", "softmax", "add", "mul", "relu", "argmax"):
            raise CompileError(f"node {node.name!r}: op {node.op!r} is not supported by GA2")
        if node.op == "rows" and node.name in graph.outputs:
            raise CompileError(f"node {node.name!r}: a view of rows cannot be an output (store the tensor it views)")
        if node.op != "argmax" and any(graph.nodes[i].op == "argmax" for i in node.inputs):
            raise CompileError(f"node {node.name!r}: an argmax result can only be an output")
    scales = _calibrate(graph, calib, ranges)
    params = _integer_params(graph, scales)
    consts = {n.name: quantize(n.attrs["value"], scales[n.name], f"const {n.name!r}")
              for n in graph.nodes.values() if n.op == "const"}

    def tensors() -> dict[str, Tensor]:
        return {n.name: Tensor(n.name, n.shape[0], n.shape[1], "int32" if n.op == "argmax" else "int8",
                               scales[n.name]) for n in graph.nodes.values()}

    # Variants, each emitted on the emitter's clock; the one whose schedule ends first is kept
    # (performance only: all are right on any memory). Two orders (matmuls that may chain one
    # after another, or not), CHAIN wherever it may be set or nowhere (a chained matmul may hold
    # back the other engine's next instruction, which waits for both matmuls), and two placements
    # (the softmax's tensors in a bank group of their own, or with the other computed tensors).
    # With families, also: each run of rows as one family instead of two halves, and the regions
    # of one kind side by side (``_place_regions``). Those extra variants are only alternatives:
    # whether a graph fits is decided by the others, so it does not depend on them.
    best = None
    split = _row_families(graph, tensors(), params)
    whole = _row_families(graph, tensors(), params, split=False) if split else split
    for families, extra in ((split, False), (whole, True)):
        if extra and families == split:
            continue
        orders: list[list[str]] = []
        for chained_order, chain in ((False, False), (False, True), (True, True)):
            if extra and not chain:
                continue
            order = _load_order(graph, families, chained_order)
            names = [n.name for n in order[0]]
            if chained_order and names in orders:
                continue
            orders.append(names)
            for apart, kinds in ((False, False), (True, False), (False, True), (True, True)):
                if kinds and not (families and chain):
                    continue
                compute, loads = order
                placed = tensors()
                try:
                    _place_sram(graph, placed, loads, families, apart, kinds)
                    const_words, ext_words = _place_ext(graph, placed, consts, loads)
                except CompileError:
                    if extra or kinds:
                        continue
                    raise
                code, notes, cycles = _emit(graph, placed, params, compute, loads, families, chain)
                if (extra or kinds) and len(code) // isa.WORDS_PER_INSTR >= isa.IMEM_INSTRS:
                    continue
                if best is None or cycles < best[0]:
                    best = (cycles, placed, code, notes, const_words, ext_words, (compute, loads, chain, families))
    # the best of them again, each STORE as early as the work after it allows (kept if it ends sooner)
    compute, loads, chain, families = best[6]
    code, notes, cycles = _emit(graph, best[1], params, compute, loads, families, chain, early_stores=True)
    if cycles < best[0]:
        best = (cycles, best[1], code, notes, best[4], best[5], best[6])
    _cycles, placed, code, notes, const_words, ext_words, _how = best
    if len(code) // isa.WORDS_PER_INSTR >= isa.IMEM_INSTRS:
        raise CompileError(f"graph {graph.name!r}: {len(code) // 4} instructions exceed the instruction "
                           f"memory ({isa.IMEM_INSTRS - 1} and a HALT)")
    return Program(graph.name, code, graph, placed, params, consts, const_words, ext_words,
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


@dataclass
class _Family:
    """Matmuls of one row each, of consecutive rows of one tensor by one weight, that one MM computes
    with an output row stride: the batch's key (or value) projections, whose rows each land in
    their own request's cache region. The regions (a member's `home`: its concat region, or the
    member itself) are laid out `stride` words apart, each member `offset` words into its home."""

    members: list[str]
    homes: list[str]
    offsets: list[int]
    stride: int
    lead: int  # words of the block before the first member: the largest offset

    @property
    def words(self) -> int:
        return self.stride * len(self.members)


def _row_families(graph: Graph, tensors: dict[str, Tensor], params: dict[str, dict],
                  split: bool = True) -> dict[str, _Family]:
    """The families of the graph, by their first member's name (see ``_Family``).

    A member is a matmul whose A is a one-row view of a tensor; members share that tensor, the
    weight, the ReLU and form, and the integer parameters, and view consecutive rows in order. Each
    member's home is the top-level concat it lives in, or the member itself when it lives in none
    (context 1). Homes take the stride that fits the largest of them; a family whose stride would
    not fit the MM's field is left as single matmuls. A run of consecutive rows splits into two
    families (each of two rows at least): one MM needs every one of its rows' cache regions
    loaded, so the first half's attentions can start while the second half's caches arrive."""
    inside = _concat_parents(graph)
    groups: dict[tuple, list[tuple[int, str]]] = {}
    for node in graph.nodes.values():
        if node.op != "matmul" or graph.nodes[node.inputs[0]].op != "rows":
            continue
        view = graph.nodes[node.inputs[0]]
        if view.attrs["hi"] - view.attrs["lo"] != 1 or graph.nodes[view.inputs[0]].op == "rows":
            continue
        home = node.name
        if home in inside:
            home, _offset = inside[home]
            if home in inside:  # nested concats: left alone
                continue
        p = params[node.name]
        key = (view.inputs[0], node.inputs[1], node.attrs["relu"], node.attrs["transpose_b"], p["qa"], p["qs"])
        groups.setdefault(key, []).append((view.attrs["lo"], node.name))
    families: dict[str, _Family] = {}
    for rows in groups.values():
        rows.sort()
        runs: list[list[str]] = []
        for i, (lo, name) in enumerate(rows):
            if not runs or lo != rows[i - 1][0] + 1:
                runs.append([])
            runs[-1].append(name)
        for run in runs:
            half = max(2, -(-len(run) // 2)) if split else len(run)
            for i in range(0, len(run), half):
                _add_family(families, run[i : i + half], inside, tensors)
    return families


def _add_family(families: dict[str, _Family], members: list[str], inside: dict[str, tuple[str, int]],
                tensors: dict[str, Tensor]) -> None:
    if len(members) < 2:
        return
    homes = [inside[m][0] if m in inside else m for m in members]
    if len(set(homes)) != len(homes):  # two rows of one region: they cannot lie a stride apart
        return
    offsets = [inside[m][1] if m in inside else 0 for m in members]
    tail = max(tensors[h].words - off for h, off in zip(homes, offsets, strict=True))
    stride = tail + max(offsets)  # home j + 1 starts after home j ends, whatever their sizes
    if stride <= isa.MM_STRIDE_MAX:
        families[members[0]] = _Family(members, homes, offsets, stride, max(offsets))


def _members(families: dict[str, _Family], name: str) -> list[str]:
    """The nodes a compute node stands for: a family's members, or itself."""
    family = families.get(name)
    return family.members if family else [name]


def _concat_parents(graph: Graph) -> dict[str, tuple[str, int]]:
    """part -> (the concat it lives in, its word offset there). A concat's inputs live inside it."""
    inside: dict[str, tuple[str, int]] = {}
    for node in graph.nodes.values():
        if node.op == "concat":
            a, _b = node.inputs
            for part, offset in ((a, 0), (_b, _words_of(graph, a))):
                if part in inside:
                    raise CompileError(f"node {part!r} feeds two concats; GA2 keeps one copy of a tensor")
                if graph.nodes[part].op in ("const", "rows"):
                    raise CompileError(f"concat {node.name!r}: {graph.nodes[part].op} {part!r} cannot be a concat "
                                       f"input (a concat's inputs live inside it)")
                inside[part] = (node.name, offset)
    return inside


def _words_of(graph: Graph, name: str) -> int:
    rows, cols = graph.shape(name)
    return rows if graph.nodes[name].op == "argmax" else rows * isa.words_for(cols)


def _region_of(inside: dict[str, tuple[str, int]], name: str) -> str | None:
    """The outermost concat that holds `name`, if any."""
    region = None
    while name in inside:
        name = inside[name][0]
        region = name
    return region


def _load_order(graph: Graph, families: dict[str, _Family], chained: bool = True) -> tuple[list[Node], list[str]]:
    """The compute nodes in order (a family as its first member; `chained`: the scheduler counts
    on a matmul following an independent one as soon as it has made its last read), and the
    constants and inputs in the order they are first needed.

    A load into a concat region counts as needed by the first node that writes into that region
    too: the DMA may not write a bank while compute writes it, so the cached rows must be in before
    the new row is computed next to them. Among loads first needed by the same node, those into
    such regions come first."""
    later = {m for f in families.values() for m in f.members[1:]}
    compute = [n for n in graph.nodes.values()
               if n.op in ("matmul", "softmax", "add", "mul", "relu", "argmax") and n.name not in later]
    loads = _loads_by_first_use(graph, compute, families)
    compute = _ready_order(graph, compute, loads, families, chained)
    return compute, _loads_by_first_use(graph, compute, families)


def _needs(graph: Graph, node: Node, inside: dict[str, tuple[str, int]],
           families: dict[str, _Family]) -> list[str]:
    """The loads that must be in before a node (or all of its family) runs: its operands' and,
    for a node that writes into a concat region, the region's loaded parts (the DMA may not write
    the banks it writes)."""
    needed = []
    for name in _members(families, node.name):
        needed += [s for inp in graph.nodes[name].inputs for s in _sources(graph, inp)]
        region = _region_of(inside, name)
        needed += _sources(graph, region) if region is not None else []
    return needed


def _loads_by_first_use(graph: Graph, compute: list[Node], families: dict[str, _Family]) -> list[str]:
    """Constants and inputs in the order the compute nodes first need them; among those first
    needed by the same node, loads into a concat region first."""
    inside = _concat_parents(graph)
    order = {name: i for i, name in enumerate(graph.nodes)}
    first_use: dict[str, int] = {}
    for i, node in enumerate(compute):
        for src in _needs(graph, node, inside, families):
            first_use.setdefault(src, i)
    loads = sorted(first_use, key=lambda n: (first_use[n], _region_of(inside, n) is None, order[n]))
    for node in graph.nodes.values():
        if node.op in ("input", "const") and node.name not in first_use:
            loads.append(node.name)  # not read by any compute node (an input copied straight out)
    return loads


# the engine each compute node runs on (isa.ENGINES): softmax has its own, the rest share the matmul engine's
_ENGINE_OF_OP = {"matmul": "mmvec", "add": "mmvec", "mul": "mmvec", "relu": "mmvec", "argmax": "mmvec",
                 "softmax": "smax"}


def _node_cycles(graph: Graph, name: str, rows: int, front: bool = False) -> int:
    """A compute node's execute cycles (the engines' formulas), for `rows` rows of its output (a
    family's members together); the scheduler's estimate, before placement (no bank clashes).
    With `front`: a matmul's cycles up to its last read, after which the engine takes a CHAIN MM
    (other nodes: all their cycles)."""
    node = graph.nodes[name]
    cols = graph.shape(node.inputs[0])[1]
    if node.op == "matmul":
        flags = isa.MM_OUT8 | (0 if node.attrs["transpose_b"] else isa.MM_BROWS)
        timing = isa.mm_timing(rows, cols, node.shape[1], flags)
        return timing.front if front else timing.cycles
    if node.op == "softmax":
        return rows * (isa.smax_cycles(cols) + 1)
    if node.op == "argmax":
        return isa.vec_cycles(cols, isa.VEC_ARGMAX, rows=rows)
    return isa.vec_cycles(cols, rows=rows)


def _ready_order(graph: Graph, compute: list[Node], loads: list[str], families: dict[str, _Family],
                 chained: bool = True) -> list[Node]:
    """The compute nodes in dependency order by list scheduling on a rough clock: each time, the
    ready node that could start first, given when its loads arrive (the DMA brings `loads` in
    order, a beat a cycle), when the nodes it reads finish and when its engine is free; among
    equals, the one with the longest chain of work after it (the critical path), then graph order.
    A node that reads the softmax just placed so waits for it, and the next attention's scores go
    first, beside it. The clock only orders the nodes: the emitter keeps the exact one."""
    inside = _concat_parents(graph)
    head = {m: n.name for n in compute for m in _members(families, n.name)}  # computed by which node

    def producers(name: str) -> set[str]:
        node = graph.nodes[name]
        if node.op in ("concat", "rows"):
            return {p for i in node.inputs for p in producers(i)}
        return {head[name]} if name in head else set()

    deps = {n.name: {p for m in _members(families, n.name) for i in graph.nodes[m].inputs for p in producers(i)}
            for n in compute}
    cfg_latency = isa.EXT_LATENCY + 2
    arrives, words = {}, 0
    for name in loads:
        words += _words_of(graph, name)
        arrives[name] = -(-words // isa.EXT_WORDS) + cfg_latency
    ready_at = {n.name: max([arrives[s] for s in _needs(graph, n, inside, families)], default=0) for n in compute}
    rows = {n.name: sum(graph.shape(m)[0] for m in _members(families, n.name)) for n in compute}
    cycles = {n.name: _node_cycles(graph, n.name, rows[n.name]) for n in compute}
    fronts = {n.name: _node_cycles(graph, n.name, rows[n.name], front=True) for n in compute}
    engine = {n.name: _ENGINE_OF_OP[n.op] for n in compute}
    users: dict[str, list[str]] = {n.name: [] for n in compute}
    for n in compute:
        for d in deps[n.name]:
            users[d].append(n.name)
    chain: dict[str, int] = {}

    def after(name: str) -> int:  # the cycles of the longest chain of work from this node on
        if name not in chain:
            chain[name] = cycles[name] + max([after(u) for u in users[name]], default=0)
        return chain[name]

    for n in compute:  # (a family stands where its first row's node is: not always first in graph order)
        after(n.name)
    order = {n.name: i for i, n in enumerate(compute)}
    free = dict.fromkeys(isa.ENGINES, 0)
    finish: dict[str, int] = {}
    issue = 0  # the sequencer issues in order
    ordered: list[Node] = []
    waiting = list(compute)
    # the matmul engine's last node if a matmul, and when it has made its last read: a matmul
    # that does not read it may follow it then (CHAIN), so independent matmuls go one after another
    mm_last: tuple[str, int] | None = None

    def start(n: Node, issue: int) -> int:
        takes = free[engine[n.name]]
        if chained and n.op == "matmul" and mm_last is not None and mm_last[0] not in deps[n.name]:
            takes = mm_last[1]
        return max([issue, takes, ready_at[n.name]] + [finish[d] for d in deps[n.name]])

    while waiting:
        ready = [n for n in waiting if deps[n.name] <= finish.keys()]
        pick = min(ready, key=lambda n: (start(n, issue), -chain[n.name], order[n.name]))
        begins = start(pick, issue)
        issue = begins + 1
        free[engine[pick.name]] = finish[pick.name] = issue + cycles[pick.name]
        if engine[pick.name] == "mmvec":
            mm_last = (pick.name, begins + fronts[pick.name] + 1) if pick.op == "matmul" else None
        ordered.append(pick)
        waiting.remove(pick)
    return ordered


def _sources(graph: Graph, name: str) -> list[str]:
    """The loaded tensors (constants, inputs) that make up a node's value without computing."""
    node = graph.nodes[name]
    if node.op in ("concat", "rows"):
        return [s for i in node.inputs for s in _sources(graph, i)]
    return [name] if node.op in ("const", "input") else []


def _place_sram(graph: Graph, tensors: dict[str, Tensor], loads: list[str], families: dict[str, _Family],
                apart: bool, kinds: bool = False) -> None:
    """Give every tensor scratchpad words (see the module docstring): what the DMA writes apart
    from what compute writes, so that loads overlap compute without sharing a bank port.

    Loaded tensors outside concats: from word 0 up, in load order (neighbours in the load order
    are neighbours in memory, so one transfer can bring several). Computed tensors: from the top
    down; with `apart` and where there is room, those a softmax reads or writes have the top bank
    group to themselves and the others end below it, so a softmax runs beside the matmuls and
    shares no bank port with them. Concat regions: each at the start of a bank group nothing else uses, else
    after another region, else after the loaded tensors; if that leaves one without room, all of
    them one after another after the loaded tensors. A family's homes (``_Family``) are one
    region, its members `stride` words apart. A concat's inputs live inside the concat's region, a
    view of rows inside the tensor it views."""
    inside = _concat_parents(graph)
    homes = {h: f for f in families.values() for h in f.homes}
    size = isa.SRAM_WORDS
    group = size // isa.SRAM_GROUPS
    low = 0
    for name in loads:
        if name not in inside:
            tensors[name].sram = low
            low += tensors[name].words
    computed = [name for name, node in graph.nodes.items()
                if name not in inside and name not in homes and node.op not in ("input", "const", "concat", "rows")]
    soft = {name for node in graph.nodes.values() if node.op == "softmax"
            for name in (node.name, *node.inputs) if name in computed}
    # the regions, a family's homes as one, in graph order
    regions: list[str | _Family] = []
    for name, node in graph.nodes.items():
        if name in homes:
            if homes[name] not in regions:
                regions.append(homes[name])
        elif node.op == "concat" and name not in inside:
            regions.append(name)
    sizes = [r.words if isinstance(r, _Family) else tensors[r].words for r in regions]
    kind = [graph.nodes[r.members[0]].inputs[1] if isinstance(r, _Family) else None
            for r in regions] if kinds else None
    spots = None
    soft_words = _block_words(graph, tensors, [name for name in computed if name in soft])
    if apart and soft and soft_words <= group:  # the softmax's tensors alone in the top group, the rest below it
        rest = [name for name in computed if name not in soft]
        high = size - group - _block_words(graph, tensors, rest)
        if high >= low:
            spots = _place_regions(sizes, low, high, size, group, kind)
        if spots is not None:
            _place_up(graph, tensors, rest, high)
            _place_up(graph, tensors, [name for name in computed if name in soft], size - soft_words)
    if spots is None:
        high = size - _block_words(graph, tensors, computed)
        _place_up(graph, tensors, computed, high)
    if low > high:
        # name the first tensor that does not fit, counting loaded tensors first
        used = low
        for name in computed:
            used += tensors[name].words
            if used > size:
                raise CompileError(f"node {name!r}: needs scratchpad words {used - tensors[name].words}.."
                                   f"{used - 1}, beyond the SRAM of {size} words (the graph's tensors need "
                                   f"{low + size - high} words)")
        raise CompileError(f"graph {graph.name!r}: its loaded tensors need {low} words, beyond the SRAM "
                           f"of {size} words")
    if spots is None:
        spots = _place_regions(sizes, low, high, size, group, kind)
    if spots is None:
        # packed one after another after the loaded tensors: whether a graph fits then depends only
        # on its total size, so a graph that fits stays fitting when any tensor shrinks
        spots = [low + sum(sizes[:i]) for i in range(len(regions))]
        if low + sum(sizes) > high:
            raise CompileError(f"graph {graph.name!r}: no room for its {len(regions)} concat regions "
                               f"({sum(sizes)} words) in the scratchpad ({size} words, {low} loaded and "
                               f"{size - high} computed)")
    for region, spot in zip(regions, spots, strict=True):
        if isinstance(region, _Family):
            for j, (home, offset) in enumerate(zip(region.homes, region.offsets, strict=True)):
                tensors[home].sram = spot + region.lead + j * region.stride - offset
        else:
            tensors[region].sram = spot

    def resolve(name: str) -> int:
        parent, offset = inside[name]
        if tensors[parent].sram < 0:
            tensors[parent].sram = resolve(parent)
        return tensors[parent].sram + offset

    for name in inside:
        tensors[name].sram = resolve(name)

    def view(name: str) -> int:  # a view of rows lives inside the tensor it views
        node = graph.nodes[name]
        parent = node.inputs[0]
        base = view(parent) if graph.nodes[parent].op == "rows" else tensors[parent].sram
        return base + node.attrs["lo"] * tensors[parent].row_words

    for name, node in graph.nodes.items():
        if node.op == "rows":
            tensors[name].sram = view(name)


def _place_up(graph: Graph, tensors: dict[str, Tensor], names: list[str], cursor: int) -> None:
    """Tensors one after another from `cursor` up, in graph order (neighbouring outputs can share a
    STORE); a word is skipped before a tensor whose words would lie in the same lanes as those of
    the other operand of an element-wise node (placed before it): a VEC reads its two operands'
    words together, and two in one bank take a cycle each (``isa.vec_clashes``)."""
    placed: dict[str, int] = {}
    for name in names:
        others = [placed[other] for other in _paired(graph, name) if other in placed]
        # the first of LANES starts whose lanes no partner shares; none (partners in every lane): no skip
        cursor += next((skip for skip in range(isa.LANES) if all((cursor + skip - o) % isa.LANES for o in others)), 0)
        tensors[name].sram = placed[name] = cursor
        cursor += tensors[name].words


def _block_words(graph: Graph, tensors: dict[str, Tensor], names: list[str]) -> int:
    """The words ``_place_up`` takes for `names`, skipped words included."""
    probe = {name: Tensor(name, t.rows, t.cols, t.kind) for name, t in tensors.items() if name in names}
    _place_up(graph, probe, names, 0)
    return max((t.sram + t.words for t in probe.values()), default=0)


def _paired(graph: Graph, name: str) -> list[str]:
    """The other operands of the element-wise nodes (add, mul) that read `name`."""
    return [other for node in graph.consumers(name) if node.op in ("add", "mul")
            for other in node.inputs if other != name]


def _place_regions(sizes: list[int], low: int, high: int, size: int, group: int,
                   kinds: list | None = None) -> list[int] | None:
    """Concat regions apart from the loaded tensors, whose banks the DMA keeps busy: each at the
    start of a bank group nothing else uses, else right after another region, else after the
    loaded tensors (first fit). None when first fit finds no room for one of them.

    With `kinds` (per region, None or what its computed rows come from: a family's weight), a
    region goes first right after a region of its own kind: the two halves of a batch's key caches
    share a bank group, and its value caches another, so a load into one kind's caches never
    holds back the matmul that writes the other kind's new rows (one write port per bank)."""
    taken = [(0, low), (high, size)]
    spots = []
    for i, words in enumerate(sizes):
        heads = [g * group for g in range(isa.SRAM_GROUPS)]
        after = sorted(b for _a, b in taken[2:])
        same = [] if kinds is None or kinds[i] is None else \
            [spots[j] + sizes[j] for j in range(i) if kinds[j] == kinds[i]]
        starts = same + heads + after + [low]
        spot = next((a for a in starts if a + words <= size and all(a + words <= x or a >= y for x, y in taken)),
                    None)
        if spot is None:
            return None
        spots.append(spot)
        taken.append((spot, spot + words))
        if spot == low:
            low += words
    return spots


def _place_ext(graph: Graph, tensors: dict[str, Tensor], consts: dict[str, np.ndarray],
               loads: list[str]) -> tuple[list[int], int]:
    """External memory map: constants and inputs in load order from word 0, then the outputs.
    Returns the image of the constants (zeros where inputs go) and the words used in all."""
    limit = isa.EXT_MEMORY
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
                               f"more than the external memory of {limit} (GA2_EXT, ext_memory)")
        if name in loads:
            words += isa.pack_int8_rows(consts[name]).tolist() if name in consts else [0] * t.words
    return words, top


def _banks(t: Tensor) -> set[int]:
    """The scratchpad banks a tensor's words lie in."""
    return isa.banks_of(range(t.sram, t.sram + t.words))


def _span(t: Tensor, first: int = 0, words: int | None = None) -> set[int]:
    """Scratchpad words of a tensor (or of `words` of it from word `first`)."""
    n = t.words - first if words is None else words
    return set(range(t.sram + first, t.sram + first + n))


CHUNK_WORDS = 256  # a weight bigger than this loads in column chunks of about this size


@dataclass(frozen=True)
class _Unit:
    """One LOAD's worth of a tensor: all of it, or a window of its column tiles (a chunk)."""

    name: str
    first_tile: int = 0
    tiles: int = 0  # 0: the whole tensor


def _chunks(graph: Graph, node: Node, tensors: dict[str, Tensor]) -> list[tuple[int, int]]:
    """Column windows (first tile, tiles) for a matmul whose weight is a big constant it alone reads.

    The weight then arrives chunk by chunk and the matmul runs each chunk as soon as it is in,
    while the next one loads: a large weight's load and its matmul overlap. A window is a whole
    number of passes (the column tiles one pass computes: ``isa.mm_geometry``) of about CHUNK_WORDS
    words."""
    if node.op != "matmul" or node.attrs["transpose_b"]:
        return []
    a, b = (tensors[i] for i in node.inputs)
    users = [n for n in graph.nodes.values() if b.name in n.inputs]
    if graph.nodes[b.name].op != "const" or len(users) != 1 or b.words <= CHUNK_WORDS:
        return []
    tiles = isa.words_for(b.cols)
    groups = max(1, isa.mm_geometry(a.rows, isa.MM_BROWS)[-1].cols // isa.LANES)  # tiles a pass computes
    per = max(groups, CHUNK_WORDS // b.rows // groups * groups)
    per = min(per, 15 // groups * groups)  # the window's tile count is a 4-bit field
    if per >= tiles or tiles > 255 + per:
        return []
    return [(t, min(per, tiles - t)) for t in range(0, tiles, per)]


def _emit(graph: Graph, tensors: dict[str, Tensor], params: dict[str, dict],
          compute: list[Node], loads: list[str], families: dict[str, _Family],
          chain: bool = True, early_stores: bool = False) -> tuple[list[int], list[str], int]:
    """The instruction stream (see the module docstring), then the remaining stores and HALT; and
    the cycle the emitter's clock (the machine model's timing on the configured memory) says it ends."""
    inside = _concat_parents(graph)
    chunked = {n.inputs[1]: w for n in compute if (w := _chunks(graph, n, tensors))}
    units = [_Unit(name, t0, nt) for name in loads for t0, nt in chunked.get(name, [(0, 0)])]
    first_unit = {}
    for i, unit in enumerate(units):
        first_unit.setdefault(unit.name, i)
    # per node: the loads that must be in before it starts (of a chunked weight, its first chunk)
    needs = [_needs(graph, node, inside, families) for node in compute]
    first_use = {name: len(compute) for name in loads}
    for i, needed in enumerate(needs):
        for src in needed:
            first_use[src] = min(first_use[src], i)
    out = _Emitter(chain)
    issued = 0
    carrier: dict[int, int] = {}  # unit index -> the transfer that brings it
    stores = _store_groups(graph, tensors, compute, families)

    def issue() -> None:
        """One LOAD of units[issued] and of its memory neighbours first needed by the same node
        (one setup cycle for all; none of them is needed before the last arrives). A chunk loads
        alone: its words are a column window of every row, one row of the transfer each."""
        nonlocal issued
        first_index = issued
        unit = units[issued]
        first = tensors[unit.name]
        issued += 1
        if unit.tiles:
            mw = first.row_words
            index = out.transfer(
                asm.load(first.sram + unit.first_tile, first.ext + unit.first_tile, first.rows, unit.tiles,
                         ext_stride=mw, sram_stride=mw),
                f"load {unit.name} column tiles {unit.first_tile}..{unit.first_tile + unit.tiles - 1}")
            carrier[first_index] = index
            return
        words = first.words
        while issued < len(units) and not units[issued].tiles:
            nxt, prev = tensors[units[issued].name], tensors[units[issued - 1].name]
            adjacent = nxt.ext == prev.ext + prev.words and nxt.sram == prev.sram + prev.words
            if not adjacent or first_use[nxt.name] != first_use[first.name]:
                break
            words += nxt.words
            issued += 1
        names = ", ".join(u.name for u in units[first_index:issued])
        index = out.transfer(asm.load(first.sram, first.ext, 1, words), f"load {names} ({words} words)")
        for i in range(first_index, issued):
            carrier[i] = index

    hold: set[int] = set()  # the banks the node being emitted writes

    unit_bank_sets: dict[_Unit, set[int]] = {}

    def unit_banks(unit: _Unit) -> set[int]:
        """The banks a unit's LOAD writes (asked again while it waits in the queue: kept)."""
        banks = unit_bank_sets.get(unit)
        if banks is None:
            t = tensors[unit.name]
            if not unit.tiles:
                banks = _banks(t)
            else:
                rows = t.sram + t.row_words * np.arange(t.rows, dtype=np.int64)
                cols = np.arange(unit.first_tile, unit.first_tile + unit.tiles, dtype=np.int64)
                banks = isa.banks_of((rows[:, None] + cols[None, :]).ravel())
            unit_bank_sets[unit] = banks
        return banks

    def prefetch() -> None:
        """Queue the next transfers while the DMA queue has room: a LOAD then costs one cycle. A
        LOAD into a bank the node being emitted writes would have to end before the node starts
        (one write port per bank), so while the DMA has other work it waits until after the node."""
        while issued < len(units) and out.has_room():
            if hold & unit_banks(units[issued]) and out.dma.in_flight(out.t):
                break
            issue()

    def arrive(unit: int, why: str) -> None:
        """Issue loads up to `unit`, keep the queue full, and WAIT until `unit` is in."""
        while issued <= unit:
            issue()
        prefetch()  # fill the queue before waiting, so the DMA never idles behind a WAIT
        out.wait_for(carrier[unit], why)

    def store(after: int) -> None:
        """STORE the outputs whose last reader has run (all of them when after = len(compute)), once
        every LOAD is issued: a LOAD issued after a STORE would wait for the STORE's last write
        to be answered (the DMA orders them, docs/isa.md), and the DMA is the long pole of a step."""
        if issued < len(units) and after < len(compute):
            return
        if early_stores and after < len(compute):
            for entry in [e for e in stores if e[4] <= after < e[0]]:
                if out.has_room() and _store_fits(out, entry):
                    stores.remove(entry)
                    _after, first, names, words, _ready, _readers = entry
                    out.transfer(asm.store(first.sram, first.ext, 1, words), f"store {', '.join(names)} (early)")
        while stores and stores[0][0] <= after and (out.has_room() or after == len(compute)):
            _after, first, names, words, _ready, _readers = stores.pop(0)
            out.transfer(asm.store(first.sram, first.ext, 1, words), f"store {', '.join(names)}")

    for i, node in enumerate(compute):
        hold = set().union(*(_banks(tensors[m]) for m in _members(families, node.name)))
        need = [first_unit[s] for s in needs[i]]
        if need:
            arrive(max(need), f"wait for the operands of {node.name}")
        else:
            prefetch()
        window = chunked.get(node.inputs[1]) if node.op == "matmul" else None
        if window:
            base, weight = first_unit[node.inputs[1]], node.inputs[1]
            _emit_chunked_matmul(out, node, tensors, params, window,
                                 lambda c, b=base, w=weight: arrive(b + c, f"wait for chunk {c} of {w}"))
        elif node.name in families:
            _emit_family(out, graph, families[node.name], tensors, params)
        else:
            _emit_node(out, graph, node, tensors, params, prefetch)
        store(i)
    while issued < len(units):
        issue()
    store(len(compute))
    out.emit(asm.halt(), "halt (waits for the last store)")
    return out.code, out.notes, max(out.dma.drained_at(out.t, 0), *out.free.values())


def _emit_chunked_matmul(out: _Emitter, node: Node, tensors: dict[str, Tensor], params: dict[str, dict],
                         window: list[tuple[int, int]], arrive) -> None:
    """A matmul as one MM per column window, each after its chunk of the weight has arrived."""
    a, b = (tensors[i] for i in node.inputs)
    t = tensors[node.name]
    p = params[node.name]
    out.emit(asm.qcfg(qa=p["qa"], shift=p["qs"]), f"qcfg for {node.name}")
    for c, (first, tiles) in enumerate(window):
        arrive(c)
        out.compute(asm.mm(a.sram, b.sram, t.sram, a.rows, a.cols, t.cols, out8=True, relu=node.attrs["relu"],
                           brows=True, first_tile=first, tiles=tiles),
                    f"mm {node.name} column tiles {first}..{first + tiles - 1}")


def _emit_family(out: _Emitter, graph: Graph, family: _Family, tensors: dict[str, Tensor],
                 params: dict[str, dict]) -> None:
    """A family's matmuls as one MM: A the viewed rows, one after another; output row j at member
    j, `stride` words after row j - 1."""
    first = graph.nodes[family.members[0]]
    a, b = (tensors[i] for i in first.inputs)
    t = tensors[first.name]
    p = params[first.name]
    stride = 0 if family.stride == t.row_words else family.stride
    out.emit(asm.qcfg(qa=p["qa"], shift=p["qs"]), f"qcfg for {first.name}")
    out.compute(asm.mm(a.sram, b.sram, t.sram, len(family.members), a.cols, t.cols, out8=True,
                       relu=first.attrs["relu"], brows=not first.attrs["transpose_b"], stride=stride),
                f"mm {', '.join(family.members)} (rows {family.stride} words apart)")


def _store_groups(graph: Graph, tensors: dict[str, Tensor], compute: list[Node], families: dict[str, _Family]
                  ) -> list[tuple[int, Tensor, list[str], int, int, list[int]]]:
    """The outputs' STOREs: neighbours in both memories share one; each may go once the last
    compute node that writes it or reads any of its banks has run (a STORE reading a bank while
    compute reads it would share a read port). (after which node, first tensor, names, words,
    the last node that writes its words, the nodes that read its banks)"""
    reads: list[set[int]] = []
    writes: list[list[Tensor]] = []
    for node in compute:
        banks = set()
        for name in _members(families, node.name):
            for inp in graph.nodes[name].inputs:
                banks |= _banks(tensors[inp])
        reads.append(banks)
        writes.append([tensors[m] for m in _members(families, node.name)])
    groups: list[list[str]] = []
    for name in graph.outputs:
        prev = tensors[groups[-1][-1]] if groups else None
        t = tensors[name]
        if prev is not None and t.ext == prev.ext + prev.words and t.sram == prev.sram + prev.words:
            groups[-1].append(name)
        else:
            groups.append([name])
    plan = []
    for names in groups:
        first = tensors[names[0]]
        words = sum(tensors[n].words for n in names)
        banks = isa.banks_of(range(first.sram, first.sram + words))
        # the last compute node that writes any stored word: the output's own producer, the parts
        # of a concat, the other parts of the region a tensor lives in
        end = first.sram + words
        ready = max([i for i, ts in enumerate(writes)
                     if any(t.sram < end and first.sram < t.sram + t.words for t in ts)], default=-1)
        readers = [i for i, b in enumerate(reads) if b & banks]
        plan.append((max([ready, *readers]), first, names, words, ready, readers))
    plan.sort(key=lambda p: p[0])
    return plan


def _store_fits(out: _Emitter, entry: tuple) -> bool:
    """Whether a STORE whose words are written may go now, before the last node that reads its
    banks: no instruction that may still run reads them, and by the emitter's clock it ends before
    the compute engines have finished the work already given to them (so before any node after
    it can start). Performance only: a node that reads its banks waits for it in any case."""
    _after, first, _names, words, _ready, _readers = entry
    span = np.arange(first.sram, first.sram + words)
    banks = isa.banks_of(span)
    running = [out.running[e] for e in isa.ENGINES if out.running[e] is not None and out.free[e] > out.t]
    if out.draining is not None:
        running.append(out.draining)
    if any(isa.banks_of(eff.reads) & banks for eff in running):
        return False
    twin = out.dma.copy()
    ext = np.arange(first.ext, first.ext + words)
    return twin.issue(twin.room_at(out.t), False, span, words, ext_words=ext).end <= max(out.free.values())


def _emit_node(out: _Emitter, graph: Graph, node: Node, tensors: dict[str, Tensor], params: dict[str, dict],
               prefetch) -> None:
    """The instructions of one node; `prefetch` is called between them to keep the DMA busy."""
    t = tensors[node.name]
    src = [tensors[i] for i in node.inputs]
    p = params.get(node.name, {})
    if node.op == "matmul":
        a, b = src
        out.emit(asm.qcfg(qa=p["qa"], shift=p["qs"]), f"qcfg for {node.name}")
        out.compute(asm.mm(a.sram, b.sram, t.sram, a.rows, a.cols, t.cols, out8=True, relu=node.attrs["relu"],
                           brows=not node.attrs["transpose_b"]), f"mm {node.name}")
        return
    if node.op == "softmax":
        x = src[0]
        for r in range(x.rows):
            prefetch()
            out.compute(asm.smax(x.sram + r * x.row_words, t.sram + r * t.row_words, x.cols, sink=p["sink"],
                                 smul=p["smul"]), f"smax {node.name} row {r}")
        return
    if node.op == "argmax":
        x = src[0]
        out.compute(asm.vec(isa.VEC_ARGMAX, x.sram, t.sram, x.cols, rows=x.rows), f"argmax {node.name}")
        return
    if node.op == "add":
        out.emit(asm.qcfg(qa=p["qa"], qb=p["qb"], shift=p["qs"]), f"qcfg for {node.name}")
        _rowwise(out, isa.VEC_ADD, src[0], src[1], t, f"add {node.name}")
    elif node.op == "mul":
        out.emit(asm.qcfg(qa=p["qa"], shift=p["qs"]), f"qcfg for {node.name}")
        _rowwise(out, isa.VEC_MUL, src[0], src[1], t, f"mul {node.name}")
    elif node.op == "relu":
        _rowwise(out, isa.VEC_RELU, src[0], src[0], t, f"relu {node.name}")


def _rowwise(out: _Emitter, sub: int, a: Tensor, b: Tensor, dst: Tensor, note: str) -> None:
    """One VEC over the tensor's packed rows."""
    out.compute(asm.vec(sub, a.sram, dst.sram, a.cols, b=b.sram, rows=a.rows), note)
