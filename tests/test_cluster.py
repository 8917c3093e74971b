"""Sweeps and soaks on Dask (tools/capra_cli/executor.py): the same results on a real cluster, on
a local one and in one process.

A real cluster here is a `dask scheduler` and two `dask worker` processes on 127.0.0.1, started as
the commands a cluster's owner types, whose address comes from the scheduler's file (no port is
guessed), and stopped with everything they started when the module's tests end. The workers run
with another GA2_CONFIG than the tests: a job must carry its configuration, not read the worker's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import replay
from capra_cli import dse, executor, soak
from capra_cli.__main__ import run_command
from conftest import needs_simulators
from replay import runs

DASK = Path(sys.executable).parent / "dask"
START_TIMEOUT = 90.0  # seconds for the scheduler and both workers to be up, on a busy machine
WORKER_CONFIG = "ext_latency=8"  # not the tests' chip: what a worker's environment must not change


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process group, the workers before the scheduler they would wait for, then
    SIGKILL what is left after a few seconds."""
    for proc in reversed(procs):
        with_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for proc in reversed(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        with_group(proc, signal.SIGKILL)
        proc.wait()


def with_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    """The address of a scheduler with two single-thread workers on 127.0.0.1."""
    from dask.distributed import Client

    folder = tmp_path_factory.mktemp("dask")
    scheduler_file = folder / "scheduler.json"
    env = {**os.environ, "GA2_CONFIG": WORKER_CONFIG}
    procs: list[subprocess.Popen] = []

    def start(*argv: str, log: str) -> None:
        with open(folder / log, "wb") as out:
            procs.append(subprocess.Popen([str(DASK), *argv], cwd=runs.ROOT, env=env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))

    try:
        start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
              str(scheduler_file), log="scheduler.log")
        for name in ("w1", "w2"):  # started at once: a worker waits for the scheduler's file
            start("worker", "--scheduler-file", str(scheduler_file), "--host", "127.0.0.1", "--nthreads", "1",
                  "--no-nanny", "--no-dashboard", "--name", name, "--local-directory", str(folder / name),
                  log=f"{name}.log")
        deadline = time.monotonic() + START_TIMEOUT
        address = None
        while address is None:
            assert procs[0].poll() is None, (folder / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler did not write its file"
            try:
                address = json.loads(scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):  # not there yet, or not yet whole
                time.sleep(0.2)
        with Client(address, timeout=f"{START_TIMEOUT:.0f}s", set_as_default=False) as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
        yield address
    finally:
        _stop(procs)


def call(capsys, command: str, *argv: str) -> tuple[int, str, str]:
    try:
        code = run_command(command, list(argv), prog=f"{command}.py")
    except SystemExit as done:
        code = done.code
    out, err = capsys.readouterr()
    return code, out, err


# ---- soak ------------------------------------------------------------------------------------------


def soak_run(capsys, monkeypatch, tmp_path: Path, *where: str) -> tuple[list[str], dict]:
    """A small soak in its own state folder: its batch lines in batch order (without the running
    rate) and its finished batches as the state file records them."""
    monkeypatch.setattr(soak, "SOAK_DIR", tmp_path / "soak")
    code, out, err = call(capsys, "soak", "-n", "8", "--batch", "2", "--seed", "3", *where)
    assert code == 0, (out, err)
    batches = sorted(line.split(";")[0] for line in out.splitlines() if line.strip().startswith("batch"))
    assert len(batches) == 4 and out.strip().splitlines()[-1].startswith("soak: 8 programs, 0 mismatches, "), out
    state = json.loads(soak.state_path(3, 2).read_text())
    return batches, state["done"]


@needs_simulators
def test_a_soak_on_a_dask_cluster_gives_the_local_runs_verdicts(cluster, capsys, monkeypatch, tmp_path):
    """The same programs, latencies and verdicts in one process, on a local Dask cluster of two
    workers and on the cluster at --scheduler (whose workers have another GA2_CONFIG)."""
    alone = soak_run(capsys, monkeypatch, tmp_path / "alone", "-j", "1")
    assert soak_run(capsys, monkeypatch, tmp_path / "local") == alone
    assert soak_run(capsys, monkeypatch, tmp_path / "cluster", "--scheduler", cluster) == alone


# ---- the sweep ---------------------------------------------------------------------------------------

SWEEP = ("--no-area", "--random", "1", "--only", "ext_latency=0", "ext_latency=8,dma_queue=8")


def sweep_rows(capsys, monkeypatch, tmp_path: Path, *where: str) -> tuple[list[str], list[dict]]:
    """A two-point sweep without synthesis, cached in its own folder: its table and its rows (less
    the time each took)."""
    monkeypatch.setattr(dse, "CACHE", tmp_path / "dse")
    monkeypatch.setattr(dse, "draw", lambda *args, **kwargs: None)  # the figure is not compared
    code, out, err = call(capsys, "dse", *SWEEP, *where)
    assert code == 0, (out, err)
    table = [line for line in out.splitlines() if line.startswith(("point", "L0 ", "L8 "))]
    rows = [json.loads(f.read_text()) for f in sorted((tmp_path / "dse").glob("*.json"))]
    assert len(table) == 3 and len(rows) == 2, out
    return table, sorted(({k: v for k, v in r.items() if k != "seconds"} for r in rows), key=lambda r: r["config"])


@pytest.mark.slow
@needs_simulators
def test_a_sweep_on_a_dask_cluster_gives_the_local_runs_table(cluster, capsys, monkeypatch, tmp_path):
    local = sweep_rows(capsys, monkeypatch, tmp_path / "local")
    assert sweep_rows(capsys, monkeypatch, tmp_path / "cluster", "--scheduler", cluster) == local


# ---- addresses and workers -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["soak", "dse", "mut", "fpga"])
def test_a_bad_scheduler_address_is_one_line_and_exit_2(capsys, monkeypatch, command):
    monkeypatch.setattr(replay, "require", lambda *tools: pytest.fail("work started"))
    code, out, err = call(capsys, command, "--scheduler", "no-port-here")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "--scheduler" in err, err


def test_a_scheduler_that_does_not_answer_is_one_line_and_exit_2(capsys, monkeypatch):
    """Nothing listens on the port of a socket this test holds bound and unlistened."""
    import socket

    monkeypatch.setattr(executor, "CONNECT_TIMEOUT", 1)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        code, out, err = call(capsys, "soak", "-n", "2", "--scheduler", f"127.0.0.1:{held.getsockname()[1]}")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "no Dask scheduler answers" in err, err


def test_workers_with_a_scheduler_is_refused(capsys):
    code, out, err = call(capsys, "soak", "--workers", "3", "--scheduler", "tcp://127.0.0.1:8786")
    assert (code, out) == (2, "") and "--workers" in err and err.count("\n") == 1, err


def test_a_worker_of_other_sources_refuses_its_job(monkeypatch):
    with pytest.raises(executor.OtherSources, match="sources"):
        executor._on_these_sources("0" * 16, len, [1])
    assert executor._on_these_sources(executor.sources_hash(), len, [1, 2]) == 2


@pytest.mark.parametrize("changed_here, says", [(True, "changed while the run went on"),
                                                 (False, "install this checkout's sources on every worker")])
def test_a_checkout_edited_during_a_run_is_told_apart_from_a_worker_of_other_code(monkeypatch, changed_here, says):
    """A job refused for its sources stops the run with one line; when the submitter's own checkout
    no longer has the sources it started with (a file edited mid-run), the line says that."""
    import concurrent.futures as cf
    from contextlib import contextmanager

    from capra_cli.common import ToolError

    @contextmanager
    def threads(workers, scheduler):
        with cf.ThreadPoolExecutor(1) as pool:
            yield pool

    seen = iter(["a" * 16, "b" * 16, "b" * 16 if changed_here else "a" * 16])  # start, the worker, the check after
    monkeypatch.setattr(executor, "executor", threads)
    monkeypatch.setattr(executor, "sources_hash", lambda: next(seen))
    with pytest.raises(ToolError, match=says):
        list(executor.run(len, [[1]], workers=2))


def test_results_in_order_come_in_the_jobs_order_whatever_finishes_first(monkeypatch):
    def backwards(fn, jobs, **options):
        for job in reversed(jobs):
            yield job, fn(job)

    monkeypatch.setattr(executor, "run", backwards)
    assert list(executor.run_in_order(str, [3, 1, 2])) == [(3, "3"), (1, "1"), (2, "2")]
    assert [job for job, _ in executor.run_in_order(str, [1, 2, 1])] == [1, 2, 1]  # one object twice


def _sigint_disposition() -> str:
    return repr(signal.getsignal(signal.SIGINT))


def _stopped_job() -> None:
    raise KeyboardInterrupt("the tool is stopping")


def test_local_workers_leave_ctrl_c_to_the_command_and_a_stopped_job_is_an_error():
    """A Ctrl-C reaches the whole process group: workers that took it printed a traceback each
    before the command's one line. They start with SIGINT ignored (the command stops them), and a
    job that stop_jobs interrupts ends as an ordinary error of the job (Dask logged a
    KeyboardInterrupt with its traceback)."""
    before = signal.getsignal(signal.SIGINT)
    with executor.executor(1, None) as pool:
        assert signal.getsignal(signal.SIGINT) is before, "the command keeps its own Ctrl-C"
        got = pool.submit(_sigint_disposition).result(timeout=60)
        assert got == repr(signal.SIG_IGN), got
        stopped = pool.submit(executor._on_these_sources, executor.sources_hash(), _stopped_job)
        with pytest.raises(executor.JobStopped, match="the tool is stopping"):
            stopped.result(timeout=60)
