"""The one program cache: a compiled decode program per everything that decides it.

A program is decided by the model's weights, what its scales come from (the ranges of the range
groups, which carry the calibration's steps, windows and start tokens, and the calibration input
sets for a group without a range), the chip configuration (its array, scratchpad and memory) and
the graph's shape (the contexts of the batch). ``ProgramCache`` keys every program by exactly
those, so a host that asks again, or another host with the same model and calibration, gets the
same program without compiling, and a program compiled for one chip is never handed to another.
A batch the chip cannot hold is remembered as refused, with the compiler's reason, so asking
whether it fits costs one compile.

``PROGRAMS`` is the process's cache, shared by every host unless one is given its own. It also
keeps what it compiles on disk (``ProgramStore``), so a second run of a tool with unchanged code
(``make sim`` warm, the test workers of ``make test``) loads its programs instead of compiling
them again: the file of a program is named by a digest of its key and of the code that compiles
it (every Python source under model/, the numpy and Python versions), so a change to the
compiler, the graph builder or the model code is a new name and a new compile, exactly as a
change of RTL is a new simulator build. The folder is ``out/programs/``, or the one named by
``CAPRA_PROGRAM_CACHE``; ``CAPRA_PROGRAM_CACHE=off`` compiles everything in every run.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import platform
import tempfile
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import suppress
from functools import cache
from pathlib import Path

import numpy as np
import tiny_lm as T
from capra import CompileError, Program, compile_graph, config

Key = tuple[str, tuple, str, str, tuple[int, ...]]


def model_fingerprint(m: Mapping) -> str:
    """A digest of the model: its weights (names, shapes and values) and its other entries (names
    and values, such as its kind)."""
    h = hashlib.sha256()
    for name in sorted(m, key=str):
        value = m[name]
        if isinstance(value, np.ndarray):
            w = np.ascontiguousarray(value, dtype=np.float64)
            h.update(f"{name}{w.shape}".encode())
            h.update(w.tobytes())
        else:
            h.update(f"{name}={value!r}".encode())
    return h.hexdigest()[:20]


MODEL_DIR = Path(__file__).resolve().parents[1]  # model/: every package a program's code comes from
STORE_ENV = "CAPRA_PROGRAM_CACHE"


@cache
def code_version() -> str:
    """A digest of everything besides its key that decides what compile_graph returns: the Python
    sources under model/ (the compiler, the graph builders, the ISA, the model code), by name and
    contents, and the numpy and Python versions."""
    h = hashlib.sha256(f"{np.__version__}|{platform.python_version()}".encode())
    for path in sorted(MODEL_DIR.rglob("*.py")):
        h.update(str(path.relative_to(MODEL_DIR)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


class ProgramStore:
    """Compiled programs (and refusals, and calibrations: ``host.calibrate``) kept on disk between
    runs, one file per key.

    A file is written under a temporary name and renamed, so runs that start together (test
    workers, two tools) never read half of one; a file that cannot be read back (damaged, or from
    another pickle protocol), or that holds anything but a (kind, key, value) entry of a known kind,
    is a miss: compiled again and replaced."""

    KINDS = ("program", "refused", "calibration")

    KEEP = 4096  # files kept: past it, a process's first save removes the least recently used

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._pruned = False

    def _path(self, key: tuple) -> Path:
        digest = hashlib.sha256(repr((code_version(), key)).encode()).hexdigest()[:32]
        return self.folder / f"{digest}.pkl"

    def load(self, key: tuple) -> tuple[str, object] | None:
        """The (kind, value) kept for `key` -- ("program", Program), ("refused", reason),
        ("calibration", Calibration) -- or None."""
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                entry = pickle.load(handle)
            if not (isinstance(entry, tuple) and len(entry) == 3 and entry[0] in self.KINDS):
                return None  # a pickle, but not one this store wrote: a miss, replaced by the next save
            kind, stored_key, value = entry
            if not (isinstance(stored_key, tuple) and stored_key == key):
                return None
            os.utime(path)  # used: the last to go when the store is pruned
        except Exception:
            # Unpickling damaged bytes can raise nearly anything (OverflowError, IndexError,
            # MemoryError, UnpicklingError, EOFError, ...): a file that cannot be read back is only
            # a miss, so the program is compiled again and the file rewritten, never a crash.
            return None
        return kind, value

    def save(self, key: tuple, kind: str, value: object) -> None:
        """Keep `value` for `key`; a store that cannot be written (a read-only checkout) is skipped."""
        handle = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=self.folder, suffix=".tmp", delete=False) as handle:
                pickle.dump((kind, key, value), handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(handle.name, self._path(key))
            if not self._pruned:
                self._pruned = True
                self.prune()
        except OSError:
            if handle is not None:  # a write that failed part way (a full disk) leaves no stray file
                with suppress(OSError):
                    os.unlink(handle.name)
            return

    def prune(self) -> None:
        """Remove the least recently used files past ``KEEP`` (each code version adds its own)."""
        files = list(self.folder.glob("*.pkl"))
        if len(files) <= self.KEEP:
            return
        ages = []
        for path in files:
            with suppress(OSError):
                ages.append((path.stat().st_mtime, path))
        for _mtime, path in sorted(ages)[: len(ages) - self.KEEP * 3 // 4]:
            with suppress(OSError):
                path.unlink()


def default_store() -> ProgramStore | None:
    """The store of the process's cache: out/programs/ in this checkout, the folder named by
    CAPRA_PROGRAM_CACHE, or none when it says ``off``."""
    where = os.environ.get(STORE_ENV, "")
    if where.strip().lower() == "off":
        return None
    return ProgramStore(Path(where) if where else MODEL_DIR.parent / "out" / "programs")


class ProgramCache:
    """Compiled decode programs, at most `capacity` of them in memory (the least recently used go
    first), and all of them in `store` when it is given (module docstring).

    ``compiled`` counts compilations, ``loaded`` programs read from the store; ``refused``
    remembers batches that do not fit, as bounded.
    """

    def __init__(self, capacity: int = 512, store: ProgramStore | None = None) -> None:
        self.capacity = capacity
        self.store = store
        self.programs: OrderedDict[Key, Program] = OrderedDict()
        self.refused: OrderedDict[Key, str] = OrderedDict()
        self.compiled = 0
        self.loaded = 0

    def key(self, m: Mapping, contexts: Sequence[int], ranges: Mapping[str, float],
            calib: Sequence[Mapping] | None = None) -> Key:
        return (model_fingerprint(m), tuple(sorted((g, float(r)) for g, r in ranges.items())),
                _digest(calib), config.active().compile_key(), tuple(int(n) for n in contexts))

    def get(self, m: Mapping, contexts: Sequence[int], ranges: Mapping[str, float],
            calib: Sequence[Mapping] | None = None) -> Program:
        """The program of the decode graph for `contexts` (in this order), compiled as
        ``compile_graph(decode_graph(m, contexts), calib, ranges=ranges)``: a group with a range takes
        its scale from it, any other from the calibration sets `calib` (without them, every group of
        tiny_lm.GROUPS needs a range). CompileError, with the compiler's reason, if it does not fit."""
        key = self.key(m, contexts, ranges, calib)
        if key in self.programs:
            self.programs.move_to_end(key)
            return self.programs[key]
        if key in self.refused:
            raise CompileError(self.refused[key])
        kept = self.store.load(key) if self.store is not None else None
        if kept is not None and _usable(kept):
            kind, value = kept
            self.loaded += 1
            if kind == "refused":
                _bounded_put(self.refused, key, value, self.capacity)
                raise CompileError(value)
            _bounded_put(self.programs, key, value, self.capacity)
            return value
        missing = [g for g in T.GROUPS if g not in ranges]
        if calib is None and missing:
            raise ValueError(f"ranges lack the groups {missing}: every tensor needs one fixed scale")
        graph = T.decode_graph(m, contexts)
        if calib is None:  # every scale is from the ranges: any input set of the right shapes will do
            calib = [{name: np.zeros(graph.shape(name)) for name in graph.inputs}]
        try:
            program = compile_graph(graph, calib, ranges=dict(ranges))
        except CompileError as error:
            _bounded_put(self.refused, key, str(error), self.capacity)
            if self.store is not None:
                self.store.save(key, "refused", str(error))
            raise
        self.compiled += 1
        _bounded_put(self.programs, key, program, self.capacity)
        if self.store is not None:
            self.store.save(key, "program", program)
        return program

    def fits(self, m: Mapping, contexts: Sequence[int], ranges: Mapping[str, float],
             calib: Sequence[Mapping] | None = None) -> str | None:
        """None if the batch compiles for the active configuration, else the compiler's reason."""
        try:
            self.get(m, contexts, ranges, calib)
        except CompileError as error:
            return str(error)
        return None


def _digest(calib: Sequence[Mapping] | None) -> str:
    """A digest of calibration input sets (their names, shapes and values), or "" for none."""
    if calib is None:
        return ""
    h = hashlib.sha256()
    for i, feeds in enumerate(calib):
        for name in sorted(feeds):
            value = np.asarray(feeds[name], dtype=np.float64)
            h.update(f"{i}{name}{value.shape}".encode())
            h.update(value.tobytes())
    return h.hexdigest()[:20]


def _usable(kept: tuple[str, object]) -> bool:
    """Whether a stored entry is a program or a refusal this cache can hand out: anything else
    under a program's key (a calibration, a damaged object) is compiled again, not returned."""
    kind, value = kept
    return (kind == "program" and isinstance(value, Program)) or (kind == "refused" and isinstance(value, str))


def _bounded_put(store: OrderedDict, key, value, capacity: int) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > capacity:
        store.popitem(last=False)


STORE = default_store()
PROGRAMS = ProgramCache(store=STORE)
