"""Start a tool under the project's own Python when the one that started it lacks the project.

``make sim`` (like every make target) creates ``.venv`` and installs the project into it. A reader
who types ``python tools/ch15_run.py`` with a Python that cannot import the project (or is older
than 3.11) gets the same run: ``need`` starts the script again under ``.venv/bin/python`` with the
same arguments. Without a usable ``.venv`` it prints one line saying what to do and exits with
status 2. ``run(command)`` is what the book's scripts call: make sure of the Python, then run the
command of ``capra_cli`` the script stands for, under the script's own name.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
RESTARTED = "CAPRA_RESTARTED_UNDER_VENV"  # set in the restarted process, so a broken .venv cannot loop


def need(*modules: str) -> None:
    """Return when this Python is 3.11+ and can import every module; otherwise restart the running
    script under .venv/bin/python, or exit 2 with one line if that cannot help."""
    problems = []
    if sys.version_info < (3, 11):  # noqa: UP036 (this file runs under whatever Python a reader types)
        problems.append(f"is Python {sys.version_info[0]}.{sys.version_info[1]}, not 3.11+")
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        problems.append(f"lacks {', '.join(missing)}")
    if not problems:
        os.environ.pop(RESTARTED, None)  # the tool's own subprocesses start clean
        return
    what = f"{sys.executable} {' and '.join(problems)}"
    script = getattr(sys.modules["__main__"], "__file__", None)
    python = str(VENV / "bin" / "python")
    if not VENV.exists():
        _stop(f"{what}: run `make sim` first (it creates .venv with everything the tools need)")
    if os.environ.get(RESTARTED):
        _stop(f"{what}: the .venv is incomplete; delete .venv, then run `make sim`")
    if script is None:
        _stop(f"{what}: use {python}")
    os.environ[RESTARTED] = "1"
    try:
        os.execv(python, [python, script, *sys.argv[1:]])
    except OSError as error:
        _stop(f"{what}, and {python} cannot start ({error.strerror}): delete .venv, then run `make sim`")


def run(command: str) -> None:
    """Run `command` of the project's command line with this script's arguments and name; exits.

    Nothing runs in a worker process that multiprocessing started by "spawn" (Dask's local
    workers): it runs this script again to import it, and must not run the command a second time."""
    import multiprocessing

    if multiprocessing.current_process().name != "MainProcess":
        return
    need("numpy", "capra_cli", "replay", "host")
    from capra_cli.__main__ import run_command

    raise SystemExit(run_command(command, sys.argv[1:], prog=Path(sys.argv[0]).name))


def _stop(message: str) -> None:
    print(f"{Path(sys.argv[0]).name}: {message}", file=sys.stderr)
    raise SystemExit(2)
