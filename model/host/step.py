"""One decode step on GA2's machine model, and the one type every host reports it in.

``run_step(program, feeds)`` quantizes the feeds into the program's external memory image, runs
the machine model to HALT and reads back what the step produced for each request of the batch:
its token (the chip's argmax), its int8 logits and their float values, and its new key and value
rows, with the program's code, memory image and the seven cycle counters (what an RTL replay needs)
and its roofline bound.

A ``Step`` is what the Chapter 15 host (``paged_lm.PagedChip``), the batched runner and the
serving engine all return. The book reads a step of one request as a dict (``r["tok"]``,
``r["ints"]``, ``r["code"]``, ...): ``Step`` answers those keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import tiny_lm as T
from capra import Program, ext_image, isa, outputs_of, run
from capra.analysis import roofline
from capra.machine import run_program

# The book's names for a step of one request, and where each is kept.
_ONE_REQUEST = {"tok": "tokens", "ints": "ints", "logits": "logits", "ctx": "contexts"}
BOOK_KEYS = ("L", "ctx", "code", "ext", "logits", "ints", "tok", "pages", "counters")


@dataclass
class Step(Mapping):
    """One program run on the machine model, per request of its batch in the host's order.

    For the book, a step of one request is also a read-only dict of BOOK_KEYS (``r["tok"]``,
    ``set(r)``, ``dict(r)``)."""

    contexts: list[int]  # each request's context (cached rows + 1)
    tokens: list[int]  # the chip's argmax
    ints: list[list[int]]  # int8 logits
    logits: list[list[float]]  # the same, dequantized
    k: list[np.ndarray]  # new key row (floats, as the host caches it)
    v: list[np.ndarray]  # new value row
    code: list[int]
    ext: list[int]  # the external memory image at the start
    counters: list[int]  # c0..c4 (cycles, DMA busy, MM busy, vector busy, DMA stall), h_unit, h_sync
    bound: float  # the roofline bound of the program (capra.analysis)
    L: int | None = None  # the decode step, from 1 (PagedChip)
    pages: int | None = None  # pages in use (PagedChip: when the step starts; serving: after it)
    clock: int | None = None  # the cycle the step ended at (serving)
    rids: list = field(default_factory=list)  # the requests of the batch (serving)
    # the (k, v) rows the step was given, oldest first (PagedChip)
    read: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> tuple[int, ...]:
        """The batch's contexts, longest first: the shape of its program."""
        return tuple(sorted(self.contexts, reverse=True))

    @property
    def cycles(self) -> int:
        return self.counters[0]

    def __getitem__(self, name: str):
        """The book's dict access to a step of one request: r["tok"], r["ints"], r["L"], ..."""
        if name in _ONE_REQUEST:
            return getattr(self, _ONE_REQUEST[name])[0]
        if name not in BOOK_KEYS:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):
        return iter(BOOK_KEYS)

    def __len__(self) -> int:
        return len(BOOK_KEYS)

    def select(self, order: Sequence[int]) -> Step:
        """The same step with its requests in `order` (indices into this step's requests)."""
        per_request = ("contexts", "tokens", "ints", "logits", "k", "v")
        return replace(self, **{name: [getattr(self, name)[i] for i in order] for name in per_request})


class MachineMismatch(RuntimeError):
    """The machine model and the program's numpy integer semantics disagree (a bug in one of them)."""


def run_step(program: Program, feeds: Mapping[str, object], contexts: Sequence[int], check: bool = False) -> Step:
    """Run the decode program of a batch with `contexts` on `feeds`; one Step, requests in the
    program's order. With `check`, the program's integer semantics are computed in numpy too
    (``capra.run`` without the machine) and every output must equal the machine model's."""
    ext = ext_image(program, feeds)
    machine = run_program(program.code, ext, isa.EXT_MEMORY)
    out = outputs_of(program, machine.ext)
    if check:
        reference = run(program, feeds)
        bad = [name for name in program.outputs if reference[name][0] != out[name][0]]
        if bad:
            raise MachineMismatch(f"program {program.name}: the machine model's {bad} differ from the "
                                  "program's integer semantics")
    names = [T.slot_names(len(contexts), i) for i in range(len(contexts))]
    ints, floats = out["logits"]
    return Step(contexts=list(contexts), tokens=[row[0] for row in out["tok"][0]], ints=ints, logits=floats,
                k=[np.asarray(out[n.k][1][0]) for n in names], v=[np.asarray(out[n.v][1][0]) for n in names],
                code=program.code, ext=ext, counters=machine.counters.with_holds(),
                bound=roofline(program.code).bound)
