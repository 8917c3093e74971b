"""Serving many requests on one chip: a scheduler with continuous batching over the paged pool.

A request is a prompt (its first token alone, or several tokens), a number of tokens to generate,
an attention window (or none) and the cycle it arrives in. ``Server`` runs them on GA2's machine
model, B_max at a time, one batched program per step (model/batched.py):

- Admission, at every step boundary, in arrival order (first come, first served: a request that
  does not fit blocks the ones behind it, so none is starved). A request joins when fewer than
  B_max run, the pool can hold every page it may ever need (its *reservation*: the most pages its
  block table can hold at once, from its length, window and page size), and the compiler says a
  batch of the running requests and this one, each at the longest context it will reach, fits the
  chip. A request that could not run even alone is refused when it is submitted.
- A step: every running request feeds one token (a prompt token while it prefills, else the token
  it chose last), its window's rows are gathered through its block table into the program's
  kc / vc inputs, and the program for the batch's contexts runs. Each request appends its new
  (k, v) row (copy-on-write if the page is shared), and pages that fell out of its window go back.
- A request leaves as soon as it has its tokens; its pages go back at once.
- Shared prompts. When a request finishes its prompt, and a request still waiting has the same
  prompt and window, the rows are kept under a *prefix* entry (a fork: no row is copied). A
  request that finds one forks it and starts generating at once; its first append into a shared
  page copies that page. A prefix is dropped when no waiting request needs it, or when admission
  needs its pages.

Because the reservations of all running requests and prefixes fit in the pool, no append ever
finds the pool empty: no request fails half-way. Every step's integers are those of each request
decoded alone (one set of scales; model/batched.py), so batching changes only the cycles.

``Server.run()`` returns a ``Report``: per request its tokens and int8 logits, per step the batch,
its program's code, memory image and counters (for the RTL replay), and the pages in use.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("GA2_EXT", "8192")

import batched  # noqa: E402
import tiny_lm as T  # noqa: E402
from capra import isa  # noqa: E402
from capra.checks import integer  # noqa: E402
from paged_lm import ArrayPageTable, context_size, window_rows  # noqa: E402


class ServingError(Exception):
    """Base of the scheduler's errors; the server is unchanged when one is raised."""


class RequestRefused(ServingError, ValueError):
    """A request that is malformed, or that could never run on this chip and pool."""


class DuplicateRequest(ServingError):
    """A request id that was already submitted."""


class UnknownWindow(RequestRefused):
    """A window the server was not set up (calibrated) for."""


@dataclass(frozen=True)
class Request:
    """One request: the prompt's tokens (at least one), the tokens to generate, the window (None:
    attend everything) and the cycle it arrives in."""

    rid: Hashable
    prompt: tuple[int, ...]
    n_new: int
    window: int | None = None
    arrival: int = 0

    @property
    def rows(self) -> int:
        """Rows this request appends over its life: one per token it feeds."""
        return len(self.prompt) + self.n_new - 1

    @property
    def max_context(self) -> int:
        return context_size(self.rows, self.window)


@functools.lru_cache(maxsize=4096)
def pages_needed(rows: int, W: int | None, page: int) -> int:
    """The most pages a block table holds at once while `rows` rows are appended with window W
    (after each append, pages wholly before row L + 1 - W are released).

    With a window, the pages held after the append of row L are ceil(L / page) minus the pages
    released, floor((L - W) / page): from L = W on that repeats every `page` rows, so the rows up
    to W + 2 * page show the most (a request of a billion tokens is checked as fast as a short one).
    """
    if W is None:
        return -(-rows // page)
    most = 0
    dropped = 0
    for L in range(1, min(rows, W + 2 * page) + 1):
        most = max(most, -(-L // page) - dropped)  # after the append, before the trim
        keep = 0 if W is None else max(0, L + 1 - W)
        dropped = max(dropped, keep // page)
    return most


@dataclass(frozen=True)
class _Prefix:
    """The pool's id for a shared prompt's pages. A type of its own, so that no request id, which
    is whatever hashable value the caller chose, can ever be equal to it."""

    key: tuple


MAX_POOL_ROWS = 1 << 20  # n_pages * page: far past any batch the chip can hold (8 x 1024 rows)


@dataclass
class _Running:
    req: Request
    fed: int = 0  # tokens fed so far (= rows appended)
    tokens: list[int] = field(default_factory=list)  # generated
    logits: list[list[int]] = field(default_factory=list)  # int8 logits behind each generated token
    next_token: int = 0
    reserved: int = 0


@dataclass
class StepLog:
    """One batched step: who ran, its program's key, code and image (with keep_images), counters,
    roofline bound and the pages in use after it."""

    clock: int
    rids: list
    key: tuple[int, ...]
    code: list[int]
    ext: list[int]
    counters: list[int]
    bound: float
    pages: int


@dataclass
class Report:
    tokens: dict
    logits: dict
    steps: list[StepLog]
    admitted: dict  # rid -> clock it joined
    finished: dict  # rid -> clock it left
    finish_order: list  # rids in the order they left (each once)
    forked: set  # requests that started from a shared prompt's rows
    peak_pages: int
    distinct_programs: int

    @property
    def cycles(self) -> int:
        return sum(s.counters[0] for s in self.steps)

    @property
    def generated(self) -> int:
        return sum(len(t) for t in self.tokens.values())

    def tokens_per_kilocycle(self) -> float:
        return 1000.0 * self.generated / self.cycles if self.cycles else 0.0


class Server:
    """Continuous batching of requests over one paged K/V pool (module docstring).

    m        the tiny model (tiny_lm.make_model)
    b_max    the most requests in one batch (>= 1)
    n_pages  pages in the pool, `page` rows each
    windows  the windows requests may ask for (None: no window); their calibration is shared
    programs a BatchPrograms to share compiled programs between servers (else one is built,
             calibrated for `steps` tokens with every window)
    check    also compute every step's integer semantics in numpy and compare with the machine
    keep_images  keep every step's code and memory image in its StepLog (for an RTL replay)
    """

    def __init__(self, m: dict, b_max: int, n_pages: int = 64, page: int = 4,
                 windows: Iterable[int | None] = (None,), steps: int = 32,
                 programs: batched.BatchPrograms | None = None, check: bool = False,
                 keep_images: bool = False) -> None:
        b_max = integer(b_max, "b_max", 1)
        n_pages = integer(n_pages, "n_pages", 1)
        page = integer(page, "page", 1)
        if n_pages * page > MAX_POOL_ROWS:
            raise ValueError(f"n_pages={n_pages} x page={page} is a pool of {n_pages * page} rows, more than "
                             f"{MAX_POOL_ROWS}")
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
        if programs is not None and not isinstance(programs, batched.BatchPrograms):
            raise ValueError(f"programs={programs!r}: give a batched.BatchPrograms or None")
        self.m = m
        self.keep_images = keep_images
        self.check = check
        self.b_max = b_max
        self.page = page
        self.programs = programs or batched.BatchPrograms(m, batched.calibrate_ranges(m, steps, self.windows))
        self.pool = ArrayPageTable(n_pages, page, row_shape=(2, T.D))
        self.queue: list[Request] = []  # submitted, not admitted; in arrival order
        self.running: list[_Running] = []
        # (prompt, window) -> (the first generated token, its int8 logits, pages reserved)
        self.prefixes: dict[tuple, tuple[int, list[int], int]] = {}
        self.submitted: set = set()
        self.clock = 0
        self.log: list[StepLog] = []
        self.done: dict = {}
        self.admitted: dict = {}
        self.finished: dict = {}
        self.finish_order: list = []  # every request that left, in order: each exactly once
        self.forked: set = set()
        self.peak = 0

    # -- submission ------------------------------------------------------------------------------

    def submit(self, req: Request) -> None:
        """Queue a request, or refuse it (nothing changes) if it is malformed or could never run.

        Integers may be numpy integers (they are stored as ints); a bool or a float is refused."""
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
        req = Request(req.rid, prompt, n_new, window, arrival)
        if req.window not in self.windows:
            raise UnknownWindow(f"request {req.rid!r}: window {req.window!r} is not one of this server's "
                                f"{list(self.windows)}")
        need = pages_needed(req.rows, req.window, self.page)
        if need > len(self.pool.ref):
            raise RequestRefused(f"request {req.rid!r}: needs {need} pages at once, the pool has "
                                 f"{len(self.pool.ref)}")
        why = self.programs.fits([req.max_context])
        if why is not None:
            raise RequestRefused(f"request {req.rid!r}: context {req.max_context} does not fit the chip even "
                                 f"alone: {why}")
        self.submitted.add(req.rid)
        at = len(self.queue)
        while at > 0 and self.queue[at - 1].arrival > req.arrival:
            at -= 1
        self.queue.insert(at, req)

    # -- admission -------------------------------------------------------------------------------

    def _reserved(self) -> int:
        return sum(r.reserved for r in self.running) + sum(p for _t, _l, p in self.prefixes.values())

    def _admit(self) -> None:
        while self.queue and self.queue[0].arrival <= self.clock and len(self.running) < self.b_max:
            req = self.queue[0]
            need = pages_needed(req.rows, req.window, self.page)
            contexts = [r.req.max_context for r in self.running] + [req.max_context]
            if self.programs.fits(contexts) is not None:
                return  # the batch would not fit the scratchpad: wait for a request to leave
            key = (req.prompt, req.window)
            while not self._room(req, need) and self._drop_prefix(keep=key):
                pass
            if not self._room(req, need) and key in self.prefixes:
                self._release_prefix(key)  # its own prefix, last: it will feed its prompt itself
            if not self._room(req, need):
                return  # wait for pages
            self.queue.pop(0)
            self._start(req, need)

    def _room(self, req: Request, need: int) -> bool:
        """Whether the pool covers req's reservation. A prefix that only req still wants hands its
        pages to req (req forks it and it is released at once), so they are not counted twice."""
        key = (req.prompt, req.window)
        handed = 0
        if key in self.prefixes and not any((r.prompt, r.window) == key for r in self.queue[1:]):
            handed = self.prefixes[key][2]
        return self._reserved() - handed + need <= len(self.pool.ref)

    def _release_prefix(self, key: tuple) -> None:
        self.pool.release(_Prefix(key))
        del self.prefixes[key]

    def _start(self, req: Request, need: int) -> None:
        run = _Running(req, reserved=need)
        key = (req.prompt, req.window)
        if key in self.prefixes:
            self.pool.fork(_Prefix(key), req.rid)
            run.fed = len(req.prompt)
            run.next_token, first_logits, _pages = self.prefixes[key]
            run.tokens.append(run.next_token)
            run.logits.append(first_logits)
            self.forked.add(req.rid)
        else:
            self.pool.new(req.rid)
            run.next_token = req.prompt[0]
        self.admitted[req.rid] = self.clock
        self.running.append(run)
        self._drop_unneeded_prefixes()
        if len(run.tokens) == req.n_new:  # its one token came with the prefix
            self._finish(run)

    def _drop_prefix(self, keep: tuple) -> bool:
        """Release the oldest prefix other than `keep`; False if there is none."""
        for key in self.prefixes:
            if key != keep:
                self._release_prefix(key)
                return True
        return False

    def _drop_unneeded_prefixes(self) -> None:
        wanted = {(r.prompt, r.window) for r in self.queue}
        for key in [k for k in self.prefixes if k not in wanted]:
            self._release_prefix(key)

    def _keep_prefix(self, run: _Running) -> None:
        """After `run` fed its whole prompt: keep its rows for a waiting request with that prompt."""
        key = (run.req.prompt, run.req.window)
        if len(run.req.prompt) < 2 or key in self.prefixes:
            return
        if not any((r.prompt, r.window) == key for r in self.queue):
            return
        held = len(self.pool.table[run.req.rid])
        if self._reserved() + held > len(self.pool.ref):
            return
        self.pool.fork(run.req.rid, _Prefix(key))
        self.prefixes[key] = (run.tokens[0], run.logits[0], held)

    def _finish(self, run: _Running) -> None:
        self.running.remove(run)
        self.pool.release(run.req.rid)
        self.done[run.req.rid] = run
        self.finished[run.req.rid] = self.clock
        self.finish_order.append(run.req.rid)

    # -- steps -----------------------------------------------------------------------------------

    def step(self) -> StepLog | None:
        """Admit what can join, then run one batched step; None when nothing can run (idle)."""
        self._admit()
        if not self.running:
            return None
        caches = []
        for run in self.running:
            L = run.fed + 1
            lo = L - context_size(L, run.req.window)
            rows = self.pool.gather(run.req.rid, lo, run.fed)
            caches.append((rows[:, 0], rows[:, 1]))
        result = self.programs.run([r.next_token for r in self.running], caches, check=self.check)
        batch = list(self.running)
        for i, run in enumerate(batch):
            run.fed += 1
            self.pool.append(run.req.rid, np.array([result.k[i], result.v[i]]))
            if run.req.window is not None:
                self.pool.trim(run.req.rid, max(0, run.fed + 1 - run.req.window))
            if run.fed < len(run.req.prompt):
                run.next_token = run.req.prompt[run.fed]
                continue
            run.tokens.append(result.toks[i])
            run.logits.append(result.logits[i])
            run.next_token = result.toks[i]
            if run.fed == len(run.req.prompt):
                self._keep_prefix(run)
        self.peak = max(self.peak, self.pool.used())
        self.clock += result.counters[0]
        keep = self.keep_images
        entry = StepLog(self.clock, [r.req.rid for r in batch], result.key, result.code if keep else [],
                        result.ext if keep else [], result.counters, result.bound, self.pool.used())
        for run in batch:
            if len(run.tokens) == run.req.n_new:
                self._finish(run)
        entry.pages = self.pool.used()
        self.log.append(entry)
        return entry

    def run(self, on_step=None) -> Report:
        """Step until every submitted request is done; `on_step(server, log)` after each step."""
        while self.queue or self.running:
            entry = self.step()
            if entry is None:
                if not self.queue:
                    break
                if self.queue[0].arrival <= self.clock:
                    raise ServingError(f"request {self.queue[0].rid!r} cannot be admitted with nothing "
                                       f"running (a bug: submit checks that it fits alone)")
                self.clock = self.queue[0].arrival  # idle until the next arrival
                continue
            if on_step is not None:
                on_step(self, entry)
        self._drop_unneeded_prefixes()
        return Report(tokens={rid: r.tokens for rid, r in self.done.items()},
                      logits={rid: r.logits for rid, r in self.done.items()},
                      steps=self.log, admitted=dict(self.admitted), finished=dict(self.finished),
                      finish_order=list(self.finish_order),
                      forked=set(self.forked), peak_pages=self.peak,
                      distinct_programs=len({s.key for s in self.log}))


def decode_alone(req: Request, programs: batched.BatchPrograms) -> tuple[list[int], list[list[int]]]:
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
        step = programs.run([feed[L - 1]], [window])
        kc.append(step.k[0])
        vc.append(step.v[0])
        if L >= len(req.prompt):
            tokens.append(step.toks[0])
            logits.append(step.logits[0])
            feed.append(step.toks[0])
    return tokens, logits


def requests_from(specs: Sequence[tuple]) -> list[Request]:
    """Requests from (rid, prompt, n_new, window, arrival) tuples."""
    return [Request(rid, tuple(prompt), n, W, at) for rid, prompt, n, W, at in specs]
