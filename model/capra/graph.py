"""The graph IR: a small dataflow graph of 2-D tensors, and its float evaluation.

Every value is a matrix of rows (a batch of rows, or the cached rows of a context). The ops are
the ones a decoder layer needs and GA2 executes:

    input, const       tensors from the host, weights
    matmul             a @ b, or a @ b.T (transpose_b), with an optional constant scale and ReLU
    concat             the rows of a, then the rows of b (the cached rows plus the new one)
    rows               rows lo .. hi-1 of a tensor (a view: it has no memory of its own)
    softmax            along each row, optionally with one extra sink logit per row
    add, mul           element-wise between two tensors of the same shape
    relu               element-wise
    argmax             per row, an integer

Graphs are built with the methods below (each returns the new node's name) and evaluated in
float64 by ``evaluate``, which is what calibration runs.

Every value a method takes is checked as it comes in (``checks.py``): shapes are positive integers,
constants, matmul scales and softmax sinks are finite numbers, a feed has exactly its input's
shape and finite values; anything else is a GraphError naming the node. ``check`` runs the same
checks over a whole graph, so a node edited after it was built is caught before it is compiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import checks

OPS = ("input", "const", "matmul", "concat", "rows", "softmax", "add", "mul", "relu", "argmax")


class GraphError(ValueError):
    """A graph that is malformed: an unknown input, mismatched shapes, a duplicate name."""


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str]
    shape: tuple[int, int]
    attrs: dict = field(default_factory=dict)


class Graph:
    """An ordered set of nodes (topological by construction) with named outputs."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.nodes: dict[str, Node] = {}
        self.outputs: list[str] = []

    # ---- construction -------------------------------------------------------------------------
    def _add(self, name: str, op: str, inputs: list[str], shape: tuple[int, int], **attrs) -> str:
        if not isinstance(name, str) or not name:
            raise GraphError(f"a node's name must be a non-empty string, got {name!r}")
        if name in self.nodes:
            raise GraphError(f"node {name!r} is defined twice")
        for i in inputs:
            if i not in self.nodes:
                raise GraphError(f"node {name!r}: unknown input {i!r}")
        node = Node(name, op, list(inputs), checks.shape2(shape, f"node {name!r}", GraphError), attrs)
        node.attrs = _checked_attrs(node)
        self.nodes[name] = node
        return name

    def shape(self, name: str) -> tuple[int, int]:
        if name not in self.nodes:
            raise GraphError(f"graph {self.name!r} has no node {name!r}")
        return self.nodes[name].shape

    def input(self, name: str, shape: tuple[int, int], range_group: str | None = None) -> str:
        return self._add(name, "input", [], shape, range_group=range_group)

    def const(self, name: str, value) -> str:
        value = np.atleast_2d(checks.finite_array(value, f"const {name!r}", GraphError))
        if value.ndim != 2:
            raise GraphError(f"const {name!r} must be 2-D, got shape {value.shape}")
        return self._add(name, "const", [], value.shape, value=value)

    def matmul(self, name: str, a: str, b: str, transpose_b: bool = False, scale: float = 1.0,
               relu: bool = False, range_group: str | None = None) -> str:
        transpose_b = checks.flag(transpose_b, f"matmul {name!r}: transpose_b", GraphError)
        relu = checks.flag(relu, f"matmul {name!r}: relu", GraphError)
        shape = self._shape_from("matmul", name, [a, b], {"transpose_b": transpose_b})
        return self._add(name, "matmul", [a, b], shape, transpose_b=transpose_b, scale=scale,
                         relu=relu, range_group=range_group)

    def concat(self, name: str, a: str, b: str) -> str:
        shape = self._shape_from("concat", name, [a, b], {})
        group = self.nodes[a].attrs.get("range_group")
        return self._add(name, "concat", [a, b], shape, range_group=group)

    def rows(self, name: str, x: str, lo: int, hi: int) -> str:
        """Rows lo .. hi-1 of x. A batched program reads one request's row of a batch tensor this
        way: the compiler places the view inside x, so it costs no instruction and no memory."""
        n = self.shape(x)[0]
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo < hi <= n):
            raise GraphError(f"rows {name!r}: rows {lo!r}..{hi!r} of {x!r}, which has rows 0..{n - 1}")
        group = self.nodes[x].attrs.get("range_group")
        shape = self._shape_from("rows", name, [x], {"lo": lo, "hi": hi})
        return self._add(name, "rows", [x], shape, lo=lo, hi=hi, range_group=group)

    def softmax(self, name: str, x: str, sink: float | None = None) -> str:
        return self._add(name, "softmax", [x], self._shape_from("softmax", name, [x], {}), sink=sink)

    def _elementwise(self, name: str, op: str, a: str, b: str, range_group: str | None) -> str:
        return self._add(name, op, [a, b], self._shape_from(op, name, [a, b], {}), range_group=range_group)

    def add(self, name: str, a: str, b: str, range_group: str | None = None) -> str:
        return self._elementwise(name, "add", a, b, range_group)

    def mul(self, name: str, a: str, b: str, range_group: str | None = None) -> str:
        return self._elementwise(name, "mul", a, b, range_group)

    def relu(self, name: str, x: str) -> str:
        return self._add(name, "relu", [x], self._shape_from("relu", name, [x], {}))

    def argmax(self, name: str, x: str) -> str:
        return self._add(name, "argmax", [x], self._shape_from("argmax", name, [x], {}))

    def _shape_from(self, op: str, name: str, inputs: list[str], attrs: dict) -> tuple[int, int]:
        """The shape an op gives a node from its inputs' shapes, or GraphError where they do not fit
        together: the one rule the construction methods build by and ``check`` holds an edited
        graph to (inputs and consts have shapes of their own)."""
        shapes = [self.shape(i) for i in inputs]
        if op == "matmul":
            (ra, ka), (rb, cb) = shapes
            transposed = attrs.get("transpose_b", False)
            k, m = (cb, rb) if transposed else (rb, cb)
            if ka != k:
                raise GraphError(f"matmul {name!r}: {inputs[0]} is {ra}x{ka} but {inputs[1]}"
                                 f"{'.T' if transposed else ''} has {k} rows")
            return ra, m
        if op == "concat":
            (ra, ca), (rb, cb) = shapes
            if ca != cb:
                raise GraphError(f"concat {name!r}: {inputs[0]} has {ca} columns, {inputs[1]} has {cb}")
            return ra + rb, ca
        if op == "rows":
            return attrs["hi"] - attrs["lo"], shapes[0][1]
        if op in ("add", "mul"):
            if shapes[0] != shapes[1]:
                raise GraphError(f"{op} {name!r}: shapes {shapes[0]} and {shapes[1]} differ")
            return shapes[0]
        if op == "argmax":
            return shapes[0][0], 1
        return shapes[0]  # softmax, relu: the input's shape

    def set_outputs(self, names: list[str]) -> None:
        for n in names:
            if n not in self.nodes:
                raise GraphError(f"output {n!r} is not a node")
        self.outputs = list(names)

    # ---- queries -------------------------------------------------------------------------------
    def check(self) -> None:
        """Every node's shape and attributes as the construction methods check them, and every
        input of a node defined before it (for a graph whose nodes were edited after building)."""
        seen: set[str] = set()
        for key, node in self.nodes.items():
            if node.name != key:
                raise GraphError(f"node {key!r} is stored under the name {node.name!r}")
            for i in node.inputs:
                if i not in seen:
                    raise GraphError(f"node {key!r}: input {i!r} is not defined before it")
            checks.shape2(node.shape, f"node {key!r}", GraphError)
            _checked_attrs(node)
            if node.op == "rows":
                parent = self.nodes[node.inputs[0]].shape
                if node.attrs["hi"] > parent[0] or node.shape[1] != parent[1]:
                    raise GraphError(f"rows {key!r}: rows {node.attrs['lo']}..{node.attrs['hi'] - 1} of a "
                                     f"{parent[0]} x {parent[1]} tensor")
            if node.op not in ("input", "const"):  # their shapes are their own (a const's is its value's)
                derived = self._shape_from(node.op, key, node.inputs, node.attrs)
                if tuple(node.shape) != derived:
                    raise GraphError(f"node {key!r} ({node.op}) has shape {tuple(node.shape)}, its inputs give "
                                     f"{derived}")
            seen.add(key)
        for name in self.outputs:
            if name not in self.nodes:
                raise GraphError(f"output {name!r} is not a node")

    @property
    def inputs(self) -> list[str]:
        return [n.name for n in self.nodes.values() if n.op == "input"]

    def consumers(self, name: str) -> list[Node]:
        return [n for n in self.nodes.values() if name in n.inputs]

    # ---- float evaluation -------------------------------------------------------------------------
    def evaluate(self, feeds: dict) -> dict[str, np.ndarray]:
        """Every node's float64 value for the given inputs (lists of rows or arrays)."""
        vals: dict[str, np.ndarray] = {}
        for node in self.nodes.values():
            vals[node.name] = self._eval_node(node, vals, feeds)
        return vals

    def _eval_node(self, node: Node, vals: dict, feeds: dict) -> np.ndarray:
        args = [vals[i] for i in node.inputs]
        op = node.op
        if op == "input":
            if node.name not in feeds:
                raise GraphError(f"input {node.name!r} is missing")
            return checks.feed(feeds[node.name], node.shape, f"input {node.name!r}", GraphError)
        if op == "const":
            return node.attrs["value"]
        if op == "matmul":
            a, b = args
            y = a @ (b.T if node.attrs["transpose_b"] else b) * node.attrs["scale"]
            return np.maximum(y, 0.0) if node.attrs["relu"] else y
        if op == "concat":
            return np.vstack(args)
        if op == "rows":
            return args[0][node.attrs["lo"] : node.attrs["hi"]]
        if op == "softmax":
            x = args[0]
            sink = node.attrs["sink"]
            m = x.max(axis=1, keepdims=True) if sink is None else np.maximum(x.max(axis=1, keepdims=True), sink)
            e = np.exp(x - m)
            total = e.sum(axis=1, keepdims=True) + (0.0 if sink is None else np.exp(sink - m))
            return e / total
        if op == "add":
            return args[0] + args[1]
        if op == "mul":
            return args[0] * args[1]
        if op == "relu":
            return np.maximum(args[0], 0.0)
        if op == "argmax":
            return np.argmax(args[0], axis=1).astype(np.float64)[:, None]
        raise GraphError(f"node {node.name!r}: unsupported op {op!r}")


def _checked_attrs(node: Node) -> dict:
    """The node's attributes, checked, as a new dict (numbers as floats); the node is not changed.

    What an op needs: a const's finite value of the node's shape, a matmul's finite scale > 0
    (GA2's multipliers are unsigned), a finite sink, a range group that is a name."""
    attrs = dict(node.attrs)
    what = f"{node.op} {node.name!r}"
    if node.op == "const":
        value = checks.finite_array(attrs.get("value"), what, GraphError)
        if value.shape != node.shape:
            raise GraphError(f"{what}: value of shape {value.shape} for a node of shape {node.shape}")
    elif node.op == "matmul":
        attrs["scale"] = checks.number(attrs.get("scale"), f"{what}: scale", GraphError, positive=True)
        for name in ("transpose_b", "relu"):
            attrs[name] = checks.flag(attrs.get(name, False), f"{what}: {name}", GraphError)
    elif node.op == "softmax" and attrs.get("sink") is not None:
        attrs["sink"] = checks.number(attrs["sink"], f"{what}: sink", GraphError)
    elif node.op == "rows":
        lo, hi = attrs.get("lo"), attrs.get("hi")
        if not (isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool)
                and not isinstance(hi, bool) and 0 <= lo < hi and hi - lo == node.shape[0]):
            raise GraphError(f"{what}: rows {lo!r}..{hi!r} do not give its {node.shape[0]} rows")
    group = attrs.get("range_group")
    if group is not None and not isinstance(group, str):
        raise GraphError(f"{what}: range_group must be a string or None, got {group!r}")
    return attrs
