"""What every run needs so that runs never share a file and never leave a process behind.

Child processes (``run_command``): each child starts in a process group of its own and is killed
as a group when the wait ends in any way but its own exit (a timeout, Ctrl-C, SIGTERM, an error),
so no Verilator ``make`` or ``g++`` outlives the run that started it.

Files (``atomic_path``, ``write_text``, ``write_json``): written under a temporary name in the
target's folder and renamed, so a reader sees the old file or the new one, never half of one.

Run folders (``run_folder``): every run writes its images and intermediate files in a folder of
its own under ``out/runs/``, named by the tool, the process and a random suffix, so two tools, two
configurations or two test workers can run at once in one checkout. The folder is removed when
the run ends, unless the run asked to keep it (a failed replay keeps its image for a look).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from capra import config

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "out"
RUNS = OUT / "runs"


class UserError(Exception):
    """A problem the user fixes outside the program's arguments (a simulator that is not installed,
    an input file that is missing or incomplete): a tool prints it as one line and exits 2."""


def program_name() -> str:
    """The running program's name, for the start of a message."""
    return Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "capra"


def note(message: str) -> None:
    """One progress line on stderr (stdout stays the result)."""
    print(f"{program_name()}: {message}", file=sys.stderr, flush=True)


# ---- children ------------------------------------------------------------------------------------

_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()
_stopping = threading.Event()  # set by kill_children: no new child starts (other threads' loops)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (verilator -> make -> g++), then reap the child."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(Exception):
        proc.wait()


def kill_children() -> None:
    """Kill every child ``run_command`` started and has not yet reaped (any thread's), and refuse
    new ones (KeyboardInterrupt) until ``allow_children`` is called."""
    _stopping.set()
    with _children_lock:
        running = list(_children)
    for proc in running:
        _kill_group(proc)


def allow_children() -> None:
    """Let children start again (a tool's start: an earlier tool in this process may have stopped)."""
    _stopping.clear()


@contextmanager
def _signals_held() -> Iterator[list[int]]:
    """In the main thread, SIGINT and SIGTERM wait while the block runs (their numbers are collected
    in the list yielded): a Ctrl-C inside ``Popen`` would leave a started child that nobody kills."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {s: signal.signal(s, lambda signum, _frame: held.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield held
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_command(cmd: Sequence[str], *, cwd: str | os.PathLike | None = None, timeout: float | None = None,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run cmd in a process group of its own and capture its output (text).

    When the wait ends in any way but the child's own exit, the whole group is killed before the
    exception goes on, and so are any processes the child left behind in its group when it exits.
    A timeout raises subprocess.TimeoutExpired. The child is registered (``kill_children``) before
    an interrupt can arrive, so a Ctrl-C at any moment leaves no process behind.
    """
    if _stopping.is_set():
        raise KeyboardInterrupt("the tool is stopping")
    with _signals_held() as held:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
        with _children_lock:
            _children.add(proc)
    try:
        for signum in held:
            signal.raise_signal(signum)  # an interrupt that came while the child started: handled now
        if _stopping.is_set():  # another thread stopped the tool while this child started
            raise KeyboardInterrupt("the tool is stopping")
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # grandchildren that outlived the child
        with _children_lock:
            _children.discard(proc)
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


# ---- files ---------------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_folder(path: str | os.PathLike) -> Path:
    """``mkdir -p``, or a UserError naming the file that stands where a folder is to be (a tool
    checks its output folder with this before its work, so such a file costs a line, not the run)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path)
        raise UserError(f"{blocker} is a file, where a folder is to be: move it away") from None
    return path


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path in `path`'s folder to write to; renamed over `path` when the block ends
    normally, removed when it raises (Ctrl-C included). The temporary name keeps the suffix
    (matplotlib reads the format from it)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder, where a file is to be written: move it away")
    make_folder(path.parent)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # as an ordinary new file, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write a text file atomically (``atomic_path``)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | os.PathLike, data: object) -> Path:
    """Write JSON atomically, indented one space, ending in a newline."""
    return write_text(path, json.dumps(data, indent=1) + "\n")


def read_json(path: str | os.PathLike, what: str) -> object:
    """A JSON file another run wrote; UserError (one line) when it is missing, unreadable or not
    JSON (a truncated file)."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path} does not exist ({what})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{path} cannot be read ({what}): {error}") from None
    except json.JSONDecodeError as error:
        raise UserError(f"{path} is not complete JSON ({what}): {error.msg} "
                        f"(line {error.lineno}, column {error.colno})") from None


# ---- run folders ---------------------------------------------------------------------------------


class RunFolder:
    """A folder only this run writes in (``run_folder``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kept = False

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def keep(self) -> Path:
        """Leave the folder in place when the run ends (its files are worth a look); its path."""
        self.kept = True
        return self.path


@contextmanager
def run_folder(tool: str, parent: Path | None = None) -> Iterator[RunFolder]:
    """``with run_folder("sim") as run:`` a new folder ``out/runs/sim-<pid>-<random>`` (or under
    `parent`), removed at the end unless ``run.keep()`` was called."""
    base = make_folder(RUNS if parent is None else Path(parent))
    path = base / f"{tool}-{os.getpid()}-{secrets.token_hex(4)}"
    path.mkdir()
    folder = RunFolder(path)
    try:
        yield folder
    finally:
        if not folder.kept:
            shutil.rmtree(path, ignore_errors=True)


def source_commit() -> str:
    """The commit the sources are at, for a result to record what produced it ("... with
    uncommitted changes" when tracked files differ from it; "unknown" outside a git checkout)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + (" with uncommitted changes" if dirty else "")


# what a result depends on: the chip's RTL, the testbenches, the machine model, compiler and hosts
CHIP_SOURCES = ("rtl/*.v", "rtl/*.vh", "tb/*.v", "tb/*.cpp", "model/*.py", "model/capra/*.py", "model/host/*.py",
                "model/serving/*.py", "model/replay/*.py")


def sources_hash(patterns: Sequence[str] = CHIP_SOURCES, root: Path = ROOT) -> str:
    """A digest of the files the patterns name under root (relative names and contents): a result
    saved under other sources was produced by other code."""
    h = hashlib.sha256()
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def simulator_versions() -> dict[str, str]:
    """The simulators' own version lines ("not found" where one is missing)."""
    found = {}
    for tool, flag in (("iverilog", "-V"), ("verilator", "--version")):
        line = "not found"
        with suppress(OSError, subprocess.SubprocessError):
            proc = subprocess.run([tool, flag], capture_output=True, text=True, timeout=30)
            lines = (proc.stdout or proc.stderr).strip().splitlines()
            line = lines[0] if lines else line
        found[tool] = line
    return found


def provenance(cfg: config.Config | None = None) -> dict:
    """What produced a result, for the file that keeps it: the chip configuration, the hash of the
    sources, the commit and the simulators."""
    cfg = cfg or config.active()
    return {"config": cfg.key(), "chip": cfg.label(), "sources": sources_hash(), "commit": source_commit(),
            "simulators": simulator_versions()}


def footer(prov: dict) -> str:
    """One line for a figure: the chip, the sources and the commit that made it."""
    commit = prov["commit"][:12] + (" (uncommitted changes)" if "uncommitted" in prov["commit"] else "")
    return f"{prov['chip']} · sources {prov['sources']} · commit {commit}"


# the PNG text field that keeps a figure's footer line, for a page that shows the figure (make report)
FIGURE_FOOTER = "Capra footer"


def figure_metadata(footer_line: str) -> dict[str, str]:
    """``fig.savefig(..., metadata=figure_metadata(line))``: the footer drawn on a figure, kept in
    its PNG file as well, where a page can read it."""
    return {FIGURE_FOOTER: footer_line}


def figure_footer(path: Path) -> str | None:
    """The footer line a figure's PNG keeps (figure_metadata), or None: the file keeps none (drawn
    before figures kept it) or is not a PNG that can be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return getattr(image, "text", {}).get(FIGURE_FOOTER)
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError):
        return None
