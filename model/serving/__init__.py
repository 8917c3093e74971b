"""Serving many requests on one chip: continuous batching over the paged pool.

The engine reads like a small serving system, one concept a file:

    sequence.py        ``Request`` (what a client submits) and ``Sequence`` (a request while it runs)
    block_manager.py   the pool of pages: reservations, prefixes shared by fork, copy-on-write
    page_groups.py     the mixed windowed/global model's pages: one pool, a block table per group of
                       layers (not used by the engine, which runs the tiny LM)
    scheduler.py       admission (first come, first served) and what a step's results do
    runner.py          a batch of sequences in, one program run on the machine model, a Step out

and ``Server`` here joins them: ``submit`` checks a request and queues it; ``step`` is three
calls, schedule, run, postprocess; ``run`` steps until every request has left and returns a
``Report``. Because the reservations of all running requests and prefixes fit in the pool, no
append ever finds the pool empty: no request fails half-way. Every step's integers are those of
each request decoded alone (one set of scales for every batch program), so batching changes only
the cycles.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import host
import numpy as np
import tiny_lm as T
from capra import isa
from capra.checks import integer
from host.programs import model_fingerprint as fingerprint
from paged_lm import window_rows

from .block_manager import BlockManager, pages_needed
from .runner import run_batch
from .scheduler import Scheduler
from .sequence import Request, Sequence

__all__ = ["BlockManager", "DuplicateRequest", "Report", "Request", "RequestRefused", "Scheduler", "Sequence",
           "Server", "ServingError", "UnknownWindow", "decode_alone", "make_runner", "pages_needed",
           "requests_from"]


class ServingError(Exception):
    """Base of the server's errors; the server is unchanged when one is raised."""


class RequestRefused(ServingError, ValueError):
    """A request that is malformed, or that could never run on this chip and pool."""


class DuplicateRequest(ServingError):
    """A request id that was already submitted."""


class UnknownWindow(RequestRefused):
    """A window the server was not set up (calibrated) for."""


@dataclass
class Report:
    """What a server's run did: per request its tokens and int8 logits, per step the batch (a
    ``host.Step`` with its clock, requests, program and counters, and the pages in use after it)."""

    tokens: dict
    logits: dict
    steps: list[host.Step]
    admitted: dict  # rid -> clock it joined
    finished: dict  # rid -> clock it left
    finish_order: list  # rids in the order they left (each once)
    forked: set  # requests that started from a shared prompt's rows
    peak_pages: int
    distinct_programs: int

    @property
    def cycles(self) -> int:
        return sum(s.cycles for s in self.steps)

    @property
    def generated(self) -> int:
        return sum(len(t) for t in self.tokens.values())

    def tokens_per_kilocycle(self) -> float:
        return 1000.0 * self.generated / self.cycles if self.cycles else 0.0


def make_runner(m: dict, steps: int = 32, windows: Iterable[int | None] = (None,)) -> host.ModelRunner:
    """A model runner whose scales come from the float decode of `steps` tokens with every window
    (``host.calibrate``): one set of scales for every batch, so a request's integers never depend
    on what it is batched with."""
    return host.ModelRunner(m, host.calibrate(m, steps, windows).ranges)


class Server:
    """Continuous batching of requests over one paged K/V pool (module docstring).

    m        the tiny model (tiny_lm.make_model)
    b_max    the most requests in one batch (>= 1)
    n_pages  pages in the pool, `page` rows each
    windows  the windows requests may ask for (None: no window); their calibration is shared
    runner   a host.ModelRunner to share between servers (else one is made: ``make_runner`` for
             `steps` tokens with every window)
    check    also compute every step's integer semantics in numpy and compare with the machine
    keep_images  keep every step's code and memory image in its Step (for an RTL replay)
    """

    def __init__(self, m: dict, b_max: int, n_pages: int = 64, page: int = 4,
                 windows: Iterable[int | None] = (None,), steps: int = 32,
                 runner: host.ModelRunner | None = None, check: bool = False, keep_images: bool = False) -> None:
        b_max = integer(b_max, "b_max", 1)
        n_pages = integer(n_pages, "n_pages", 1)
        page = integer(page, "page", 1)
        # No context past the array's longest reduction can run, so a longer calibration or window
        # is a mistake (and a window that long would only act as None).
        steps = integer(steps, "steps", 1)
        if steps > isa.MM_MAX_K:
            raise ValueError(f"steps={steps}: no decode context past {isa.MM_MAX_K} can run on GA2")
        if isinstance(windows, str | bytes) or not isinstance(windows, Iterable):
            raise ValueError(f"windows={windows!r}: give a list of windows (None or integers >= 1)")
        self.windows = tuple(None if W is None else integer(W, "window", 1) for W in windows)
        for W in self.windows:
            if W is not None and W > isa.MM_MAX_K:
                raise ValueError(f"window {W}: longer than any context GA2 can run ({isa.MM_MAX_K}); use None")
        if not self.windows:
            raise ValueError("windows=(): a server needs at least one window a request may ask for (None: no window)")
        if runner is not None and not isinstance(runner, host.ModelRunner):
            raise ValueError(f"runner={runner!r}: give a host.ModelRunner or None")
        if runner is not None and runner.m is not m and (
                not isinstance(m, dict) or fingerprint(runner.m) != fingerprint(m)):
            raise ValueError("runner: it runs another model than m (a shared runner must be made for the same model)")
        self.blocks = BlockManager(n_pages, page)
        self.m = m
        self.keep_images = keep_images
        self.check = check
        self.runner = runner or make_runner(m, steps, self.windows)
        self.scheduler = Scheduler(b_max, self.blocks, self.runner.fits)
        self.submitted: set = set()
        self.clock = 0
        self.log: list[host.Step] = []
        self.peak = 0

    @property
    def pool(self):
        return self.blocks.pool

    # -- submission ------------------------------------------------------------------------------

    def submit(self, req: Request) -> None:
        """Queue a request, or refuse it (nothing changes) if it is malformed or could never run.

        Integers may be numpy integers (they are stored as ints); a bool or a float is refused."""
        req = self._checked(req)
        need = self.blocks.needed(req)
        if need > self.blocks.n_pages:
            raise RequestRefused(f"request {req.rid!r}: needs {need} pages at once, the pool has "
                                 f"{self.blocks.n_pages}")
        why = self.runner.fits([req.max_context])
        if why is not None:
            raise RequestRefused(f"request {req.rid!r}: context {req.max_context} does not fit the chip even "
                                 f"alone: {why}")
        self.submitted.add(req.rid)
        self.scheduler.add(req)

    def _checked(self, req: Request) -> Request:
        """The request with its numbers as ints, or the error that names what is wrong with it."""
        if not isinstance(req, Request):
            raise RequestRefused(f"submit takes a Request, got {type(req).__name__}")
        try:
            hash(req.rid)
        except TypeError:
            raise RequestRefused(f"request id {req.rid!r} cannot be a key (it is not hashable)") from None
        if req.rid != req.rid:  # NaN: no lookup would ever find it again
            raise RequestRefused(f"request id {req.rid!r} is not equal to itself, so it cannot be a key")
        if req.rid in self.submitted:
            raise DuplicateRequest(f"request {req.rid!r} was already submitted")
        what = f"request {req.rid!r}"
        if not isinstance(req.prompt, tuple) or not req.prompt:
            raise RequestRefused(f"{what}: the prompt must be a non-empty tuple of tokens, got {req.prompt!r}")
        prompt = tuple(integer(t, f"{what}: prompt token", 0, RequestRefused) for t in req.prompt)
        if max(prompt) >= T.V:
            raise RequestRefused(f"{what}: prompt token {max(prompt)} is not a token 0..{T.V - 1}")
        n_new = integer(req.n_new, f"{what}: n_new", 1, RequestRefused)
        arrival = integer(req.arrival, f"{what}: arrival", 0, RequestRefused)
        window = None if req.window is None else integer(req.window, f"{what}: window", 1, UnknownWindow)
        if window not in self.windows:
            raise UnknownWindow(f"request {req.rid!r}: window {window!r} is not one of this server's "
                                f"{list(self.windows)}")
        return Request(req.rid, prompt, n_new, window, arrival)

    # -- steps -----------------------------------------------------------------------------------

    def step(self) -> host.Step | None:
        """Admit what can join, then run one batched step; None when nothing can run (idle)."""
        batch = self.scheduler.schedule(self.clock)
        if not batch:
            return None
        result = run_batch(self.runner, self.blocks, batch, check=self.check)
        self.scheduler.postprocess(batch, result.tokens, result.ints, result.k, result.v)
        self.peak = max(self.peak, self.pool.used())
        self.clock += result.cycles
        result.clock, result.rids = self.clock, [seq.rid for seq in batch]
        if not self.keep_images:
            result.code, result.ext = [], []
        self.scheduler.retire(batch, self.clock)
        result.pages = self.pool.used()
        self.log.append(result)
        return result

    def run(self, on_step=None) -> Report:
        """Step until every submitted request is done; `on_step(server, step)` after each step."""
        waiting = self.scheduler.waiting
        while waiting or self.scheduler.running:
            entry = self.step()
            if entry is None:
                if not waiting:
                    break
                if waiting[0].arrival <= self.clock:
                    raise ServingError(f"request {waiting[0].rid!r} cannot be admitted with nothing "
                                       f"running (a bug: submit checks that it fits alone)")
                self.clock = waiting[0].arrival  # idle until the next arrival
                continue
            if on_step is not None:
                on_step(self, entry)
        self.scheduler.drop_unneeded_prefixes()
        done = self.scheduler.done
        return Report(tokens={rid: s.tokens for rid, s in done.items()},
                      logits={rid: s.logits for rid, s in done.items()},
                      steps=self.log, admitted=dict(self.scheduler.admitted),
                      finished=dict(self.scheduler.finished), finish_order=list(self.scheduler.finish_order),
                      forked=set(self.scheduler.forked), peak_pages=self.peak,
                      distinct_programs=len({s.key for s in self.log}))


def decode_alone(req: Request, runner: host.ModelRunner) -> tuple[list[int], list[list[int]]]:
    """A request decoded by itself, the plainest way: batches of one, its cache a plain list sliced
    to the window (no pages, no scheduler, no prefix). Its tokens and the int8 logits behind each;
    what the server must reproduce for every request, whatever it was batched with."""
    kc: list[np.ndarray] = []
    vc: list[np.ndarray] = []
    feed = list(req.prompt)
    tokens: list[int] = []
    logits: list[list[int]] = []
    while len(tokens) < req.n_new:
        L = len(kc) + 1
        window = (np.asarray(window_rows(kc, req.window)).reshape(-1, T.D),
                  np.asarray(window_rows(vc, req.window)).reshape(-1, T.D))
        step = runner.run([feed[L - 1]], [window])
        kc.append(step.k[0])
        vc.append(step.v[0])
        if L >= len(req.prompt):
            tokens.append(step.tokens[0])
            logits.append(step.ints[0])
            feed.append(step.tokens[0])
    return tokens, logits


def requests_from(specs: Seq[tuple]) -> list[Request]:
    """Requests from (rid, prompt, n_new, window, arrival) tuples."""
    return [Request(rid, tuple(prompt), n, W, at) for rid, prompt, n, W, at in specs]

