"""Many independent jobs (sweep points, soak batches, mutants, placement seeds) on Dask.

One place says how a command runs its jobs: through dask.distributed's ``concurrent.futures``
executor (``Client.get_executor``), on

  * a local cluster (``LocalCluster``) of ``--workers`` processes on this machine, one thread each
    (the default: 2, this machine's cores; nothing to set up); ``--workers 1`` runs the jobs one
    after another in the command's own process, without Dask;
  * an existing Dask cluster, ``--scheduler ADDRESS`` (e.g. ``tcp://10.0.0.5:8786``), whose workers
    have the project installed (a checkout with ``make``'s .venv, started there with
    ``.venv/bin/dask worker ADDRESS``) and its simulators.

The same jobs give the same results either way:

  * a job is a function of the project (a worker imports it by name) and plain values, and those
    values carry everything it depends on: the chip configuration goes with the job, never read from
    a worker's environment;
  * each job first checks that its worker runs this checkout's sources (``SOURCES``, hashed): a
    worker of other code would give other verdicts, so it fails with one line (``OtherSources``);
  * a job writes only in run folders of its own (``replay.runs.run_folder``); the command writes the
    shared files (caches, states) itself from the results it gets back, so a resumed run and the
    cache see the same files whichever cluster ran the jobs.

Errors: an address that does not parse or does not answer (``CONNECT_TIMEOUT``) is a ToolError
(one line, exit 2) before any job starts; a cluster lost during the run (the scheduler gone, a job
whose workers kept dying) is ``ClusterLost``, one line, exit 2. Interrupted (Ctrl-C, SIGTERM), a
run cancels its jobs not yet started and kills what a local cluster's running jobs started
(``stop_jobs``); on an existing cluster the running jobs finish. Progress: one line on stderr at
most every 10 s for the whole run (``common.Progress``).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import logging
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from typing import TypeVar

from replay import runs

from .common import BadArgument, Progress, ToolError, int_range, note

Job = TypeVar("Job")

DEFAULT_WORKERS = 2  # this machine's cores
CONNECT_TIMEOUT = 10  # seconds to reach a scheduler before the address counts as wrong
# What a worker's code must share with this checkout for its results to be this checkout's: every
# source a job runs or copies (a mutant copies the tests and docs too).
SOURCES = ("rtl/*.v", "rtl/*.vh", "tb/*.v", "tb/*.cpp", "model/**/*.py", "tools/**/*.py", "tools/capra_cli/*.toml",
           "tests/**/*.py", "docs/*.md", "README.md", "Makefile", "pyproject.toml")


class ClusterLost(ToolError):
    """The Dask cluster stopped answering during the run, or kept losing the workers of a job."""


class OtherSources(RuntimeError):
    """A worker's checkout is not at this checkout's sources."""


def arguments(ap: argparse.ArgumentParser, what: str, default: int = DEFAULT_WORKERS, each: str = "",
              needs: str = "this checkout's sources installed (make) and the simulators") -> None:
    """--workers N (also -j/--jobs, the older name) and --scheduler ADDRESS; `what` names the jobs,
    `each` says what one costs, `needs` what a cluster's workers must have. ``check`` resolves them
    after parsing."""
    ap.add_argument("-j", "--jobs", "--workers", dest="workers", type=int_range(1, 64), default=None, metavar="N",
                    help=f"{what} at once: N worker processes of a local Dask cluster, one thread each, or with 1 one "
                         f"after another in this process without Dask; 1..64 (default {default}){each}")
    ap.add_argument("--scheduler", metavar="ADDRESS", default=None,
                    help=f"run the {what} on the existing Dask cluster at ADDRESS instead (e.g. tcp://10.0.0.5:8786), "
                         f"whose workers have {needs}; the results are the same as here")
    ap.set_defaults(default_workers=default)


def check(args: argparse.Namespace) -> None:
    """Before any work: refuse a --scheduler that is not an address (BadArgument) or that no
    scheduler answers at (ToolError), and --workers with --scheduler (the cluster has its own size);
    without --workers, the command's default."""
    if args.scheduler is not None and args.workers is not None:
        raise BadArgument("--workers", "a local cluster's size; with --scheduler the cluster is the one at ADDRESS")
    if args.workers is None:
        args.workers = args.default_workers
    if args.scheduler is not None:
        args.scheduler = address(args.scheduler)
        with connected(args.scheduler):
            pass


def address(text: str) -> str:
    """`text` as a Dask address (tcp:// when it names no protocol); BadArgument naming --scheduler
    when it cannot be one."""
    from distributed.comm import registry
    from distributed.comm.addressing import normalize_address, parse_address, parse_host_port

    if not text.strip():
        raise BadArgument("--scheduler", "an empty address")
    try:
        normal = normalize_address(text.strip())
        scheme, location = parse_address(normal)
        registry.get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            host, port = parse_host_port(location)
            if not host or not 0 < port < 65536:
                raise ValueError("a host and a port in 1..65535 are needed")
    except (ValueError, TypeError) as error:
        raise BadArgument("--scheduler", f"{text!r} is not a Dask scheduler's address ({error}); "
                                         "e.g. tcp://10.0.0.5:8786") from None
    return normal


def where(workers: int, scheduler: str | None) -> str:
    """Where the jobs run, for a command's first lines."""
    if scheduler is not None:
        return f"on the Dask cluster at {scheduler.strip()}"
    if workers == 1:
        return "in this process, one after another"
    return f"on a local Dask cluster of {workers} worker processes"


def sources_hash() -> str:
    return runs.sources_hash(SOURCES)


def _on_these_sources(expected: str, fn: Callable, *args: object) -> object:
    """Run on a worker: fn(*args), once the worker's sources are known to be the submitter's."""
    here = sources_hash()
    if here != expected:
        raise OtherSources(f"a Dask worker's checkout ({runs.ROOT}) has sources {here}, this one {expected}: "
                           "install this checkout's sources on every worker")
    runs.allow_children()  # a worker process runs many jobs; an earlier one may have been stopped
    try:
        return fn(*args)
    except KeyboardInterrupt as stopped:
        # stop_jobs stopped this job (the run was interrupted): an ordinary error of the job for Dask,
        # which logs a KeyboardInterrupt in a task as an unhandled exception with its traceback
        raise JobStopped(str(stopped) or "stopped") from None


class JobStopped(RuntimeError):
    """A job on a worker that stop_jobs stopped: the run it belonged to was interrupted."""


_stoppers: list[Callable[[], None]] = []  # what stops the jobs running in this process (a worker's)


@contextmanager
def stopped_by(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, stopping this process's jobs (the run interrupted) calls `stop` too: for
    a job whose children runs.run_command did not start (and so kill_children does not reach)."""
    _stoppers.append(stop)
    try:
        yield
    finally:
        _stoppers.remove(stop)


def stop_jobs() -> None:
    """Kill every child process this process's jobs started (run on each worker of a local cluster
    when the run is interrupted)."""
    runs.kill_children()
    for stop in list(_stoppers):
        stop()


def _quiet() -> None:
    """No log lines from Dask itself (a busy port, a slow close, a lost scheduler's tracebacks): the
    command says in its own one line what went wrong."""
    import distributed  # noqa: F401 (it sets its loggers' levels when imported: set them after)

    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in ("distributed", "tornado", "dask"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


@contextmanager
def connected(scheduler: str) -> Iterator[object]:
    """A Dask Client of the scheduler at `scheduler`; ToolError (one line) when none answers there
    within CONNECT_TIMEOUT seconds."""
    from dask.distributed import Client

    _quiet()
    try:
        client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT}s", set_as_default=False)
    except (OSError, ValueError, TypeError) as error:
        raise ToolError(f"--scheduler {scheduler}: no Dask scheduler answers there ({error})") from None
    try:
        yield client
    finally:
        client.close()


@contextmanager
def executor(workers: int, scheduler: str | None) -> Iterator[cf.Executor]:
    """A concurrent.futures Executor on a local Dask cluster of `workers` processes, or on the
    cluster at `scheduler`; closed (a local cluster stopped) when the block ends."""
    if scheduler is not None:
        with connected(scheduler) as client:
            yield client.get_executor(pure=False)
        return
    from dask.distributed import Client, LocalCluster

    _quiet()
    # The workers start with Ctrl-C ignored (a started process keeps an ignored signal, and Python
    # then installs no KeyboardInterrupt for it): a Ctrl-C at the terminal reaches the whole process
    # group, and each worker printed a traceback before this command's one line; the command stops
    # them itself (the jobs' simulators, then the cluster). Two gaps, both rare: a Ctrl-C in the
    # second or two the cluster takes to start is lost (press it again), and a worker Dask starts
    # again after one died takes Ctrl-C as usual. (Blocking SIGINT instead would keep the first, but
    # Dask starts its processes from a thread of its own, which keeps its own signal mask.)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    except (OSError, RuntimeError) as error:
        raise ToolError(f"a local Dask cluster of {workers} workers did not start: {error}") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    client = Client(cluster, set_as_default=False)
    try:
        yield client.get_executor(pure=False)
    except BaseException:
        with suppress(Exception):  # our own workers: stop the simulators their jobs started
            client.run(stop_jobs, wait=True, on_error="ignore")
        raise
    finally:
        client.close()
        cluster.close()


def _lost(error: BaseException, scheduler: str | None) -> ClusterLost:
    cluster = f"the Dask cluster at {scheduler}" if scheduler else "the local Dask cluster"
    detail = f": {type(error).__name__}: {error}" if str(error) else ""
    return ClusterLost(f"lost {cluster} during the run{detail}")


def _infrastructure(error: BaseException) -> bool:
    """An error of the cluster, not of the job: a cancelled future (the scheduler gone), workers that
    kept dying under a job (KilledWorker), a connection that closed."""
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return isinstance(error, (cf.CancelledError, KilledWorker, CommClosedError))


def run(fn: Callable[[Job], object], jobs: Sequence[Job], *, workers: int = DEFAULT_WORKERS,
        scheduler: str | None = None, what: str = "jobs") -> Iterator[tuple[Job, cf.Future]]:
    """fn(job) for every job; yields (job, its finished future) as each finishes: ``future.result()``
    is fn's value or raises what fn raised. One after another in this process when `workers` is 1
    and there is no `scheduler` (each job runs when the caller asks for the next one); otherwise on
    Dask. A lost cluster raises ClusterLost; Ctrl-C cancels every job not yet finished."""
    if not jobs:
        return
    progress = Progress(what, len(jobs), every=10.0)
    if scheduler is None and workers == 1:
        for job in jobs:
            future: cf.Future = cf.Future()
            try:
                future.set_result(fn(job))
            except Exception as error:  # the job's own failure, for the caller to judge
                future.set_exception(error)
            progress.step()
            yield job, future
        return
    expected = sources_hash()
    with executor(workers, scheduler) as pool:
        futures = {pool.submit(_on_these_sources, expected, fn, job): job for job in jobs}
        try:
            for future in cf.as_completed(futures):
                error = cf.CancelledError() if future.cancelled() else future.exception()
                if isinstance(error, OtherSources):
                    if sources_hash() != expected:  # this checkout itself changed since the run started
                        raise ToolError("the sources of this checkout changed while the run went on (a file of "
                                        "rtl/, tb/, model/, tools/, tests/ or docs/ was edited, committed or checked "
                                        "out): the workers would run other code; run the command again") from None
                    raise ToolError(str(error))
                if error is not None and _infrastructure(error):
                    raise _lost(error, scheduler)
                progress.step()
                yield futures[future], future
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def run_in_order(fn: Callable[[Job], object], jobs: Sequence[Job], **options) -> Iterator[tuple[Job, cf.Future]]:
    """As ``run``, but in the order of `jobs`: each as soon as it and every job before it has finished
    (a report that streams in a stable order)."""
    places: dict[int, deque[int]] = {}  # a job's places in `jobs` (the same object may be there twice)
    for i, job in enumerate(jobs):
        places.setdefault(id(job), deque()).append(i)
    waiting: dict[int, tuple[Job, cf.Future]] = {}
    following = 0
    with closing(run(fn, jobs, **options)) as finished:  # a caller that stops early stops the jobs
        for job, future in finished:
            waiting[places[id(job)].popleft()] = (job, future)
            while following in waiting:
                yield waiting.pop(following)
                following += 1


def announce(count: int, what: str, workers: int, scheduler: str | None) -> None:
    """One line on stderr: how many jobs run where."""
    if count:
        note(f"{count} {what} {where(workers, scheduler)}")
