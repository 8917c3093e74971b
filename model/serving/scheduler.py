"""The scheduler: which requests run in the next step, and what a step's results do to them.

Admission, at every step boundary, in arrival order (first come, first served: a request that does
not fit blocks the ones behind it, so none is starved). A request joins when

* it has arrived and fewer than ``b_max`` sequences run;
* the compiler says a batch of the running requests and this one, each at the longest context it
  will reach, fits the chip (``fits``: the model runner's);
* the pool can hold its reservation (``BlockManager``), once kept prefixes that no request still
  waiting needs are released to make room (the oldest first, its own last).

A request whose prompt was kept as a prefix forks it and starts generating at once.
``postprocess`` applies a step's results: every sequence appends its row and moves on (the next
prompt token, or the token it chose); a sequence that has just fed its whole prompt keeps its
rows as a prefix when a waiting request has the same prompt and window; a sequence with all its
tokens leaves at once and its pages go back.

Invariants: ``running`` never holds more than ``b_max`` sequences; ``waiting`` stays in arrival
order; every request leaves exactly once (``finish_order``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from collections.abc import Sequence as Seq

from .block_manager import BlockManager
from .sequence import Request, Sequence


class Scheduler:
    """Admission and bookkeeping of the sequences of one server (module docstring)."""

    def __init__(self, b_max: int, blocks: BlockManager, fits: Callable[[list[int]], str | None]) -> None:
        self.b_max = b_max
        self.blocks = blocks
        self.fits = fits
        self.waiting: list[Request] = []  # submitted, not admitted; in arrival order
        self.running: list[Sequence] = []
        self.done: dict[Hashable, Sequence] = {}
        self.admitted: dict[Hashable, int] = {}  # rid -> the clock it joined at
        self.finished: dict[Hashable, int] = {}  # rid -> the clock it left at
        self.finish_order: list[Hashable] = []
        self.forked: set[Hashable] = set()  # requests that started from a kept prefix

    def add(self, req: Request) -> None:
        """Queue a request behind every one that arrived no later."""
        at = len(self.waiting)
        while at > 0 and self.waiting[at - 1].arrival > req.arrival:
            at -= 1
        self.waiting.insert(at, req)

    # -- admission ----------------------------------------------------------------------------------

    def schedule(self, clock: int) -> list[Sequence]:
        """Admit what can join at `clock`; the batch of the next step (every running sequence)."""
        while self.waiting and self.waiting[0].arrival <= clock and len(self.running) < self.b_max:
            req = self.waiting[0]
            need = self.blocks.needed(req)
            if self.fits([s.req.max_context for s in self.running] + [req.max_context]) is not None:
                break  # the batch would not fit the scratchpad: wait for a request to leave
            if not self._make_room(req, need):
                break  # wait for pages
            self.waiting.pop(0)
            self._start(req, need, clock)
        return list(self.running)

    def _make_room(self, req: Request, need: int) -> bool:
        """Release prefixes no waiting request needs (its own last) until `req`'s reservation fits."""
        key = req.prefix_key
        while not self._room(req, need) and self._drop_prefix(keep=key):
            pass
        if not self._room(req, need) and key in self.blocks.prefixes:
            self.blocks.release_prefix(key)  # its own prefix, last: it will feed its prompt itself
        return self._room(req, need)

    def _room(self, req: Request, need: int) -> bool:
        """Whether the pool covers req's reservation. A prefix that only req still wants hands its
        pages to req (req forks it and it is released at once), so they are not counted twice."""
        key = req.prefix_key
        handed = 0
        if key in self.blocks.prefixes and not any(r.prefix_key == key for r in self.waiting[1:]):
            handed = self.blocks.prefixes[key].pages
        return self.blocks.has_room(need, handed)

    def _drop_prefix(self, keep: tuple) -> bool:
        """Release the oldest prefix other than `keep`; False if there is none."""
        for key in self.blocks.prefixes:
            if key != keep:
                self.blocks.release_prefix(key)
                return True
        return False

    def drop_unneeded_prefixes(self) -> None:
        """Release every prefix that no waiting request shares."""
        wanted = {r.prefix_key for r in self.waiting}
        for key in [k for k in self.blocks.prefixes if k not in wanted]:
            self.blocks.release_prefix(key)

    def _start(self, req: Request, need: int, clock: int) -> None:
        seq = Sequence(req)
        if req.prefix_key in self.blocks.prefixes:
            prefix = self.blocks.fork(seq, req.prefix_key, need)
            seq.fed = len(req.prompt)
            seq.next_token = prefix.token
            seq.tokens.append(prefix.token)
            seq.logits.append(prefix.logits)
            self.forked.add(req.rid)
        else:
            self.blocks.allocate(seq, need)
            seq.next_token = req.prompt[0]
        self.admitted[req.rid] = clock
        self.running.append(seq)
        self.drop_unneeded_prefixes()
        if seq.done:  # its one token came with the prefix
            self.finish(seq, clock)

    # -- after a step ----------------------------------------------------------------------------------

    def postprocess(self, batch: Seq[Sequence], tokens: Seq[int], logits: Seq[list[int]], k, v) -> None:
        """Apply one step's results, sequence by sequence in batch order (module docstring)."""
        for i, seq in enumerate(batch):
            seq.fed += 1
            self.blocks.append(seq, k[i], v[i])
            if seq.prefilling:
                seq.next_token = seq.req.prompt[seq.fed]
                continue
            seq.tokens.append(tokens[i])
            seq.logits.append(logits[i])
            seq.next_token = tokens[i]
            if seq.fed == len(seq.req.prompt):
                self._keep_prefix(seq)

    def _keep_prefix(self, seq: Sequence) -> None:
        """After `seq` fed its whole prompt: keep its rows for a waiting request with that prompt."""
        key = seq.req.prefix_key
        if len(seq.req.prompt) < 2 or key in self.blocks.prefixes:
            return
        if any(r.prefix_key == key for r in self.waiting):
            self.blocks.keep_prefix(seq, key)

    def retire(self, batch: Seq[Sequence], clock: int) -> None:
        """Every sequence of the batch that has all its tokens leaves, in batch order."""
        for seq in batch:
            if seq.done:
                self.finish(seq, clock)

    def finish(self, seq: Sequence, clock: int) -> None:
        self.running.remove(seq)
        self.blocks.free(seq)
        self.done[seq.rid] = seq
        self.finished[seq.rid] = clock
        self.finish_order.append(seq.rid)
