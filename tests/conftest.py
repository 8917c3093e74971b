"""Shared pytest setup: the test tiers, simulator availability, one BLAS thread.

Tiers (the Makefile's targets select them by marker):
    make test-fast   -m "not sim and not slow and not heavy"   no simulator, no program started, no
                                                               whole-model run (under a minute)
    make test        -m "not slow"          and the heavy ones, every RTL replay and cocotb bench (minutes)
    make test-full   everything             and the slow ones: long runs, every configuration

A test that runs a simulator is marked ``needs_icarus`` / ``needs_verilator`` (and so ``sim``); it
is skipped when the simulator is not installed, unless CAPRA_REQUIRE_SIMULATORS=1 (``make test``
sets it): then it fails, naming the missing tool, so a machine without a simulator can never
report the RTL replays as passed. Simulator builds are cached and locked (replay/simulators.py),
so test workers that need the same build wait for one of them to make it.

Every test compiles its programs and calibrates afresh: the program store (host/programs.py) is
off, for the tests and the tools they start, unless CAPRA_PROGRAM_CACHE names one (a mutation run
shares the working tree's, keyed by the sources it compiles with). A test that patches the
compiler in memory would otherwise be served, or leave behind, a program the code on disk does not
make.
"""

import os
import shutil

import pytest
from host import programs
from hypothesis import HealthCheck, settings
from replay.simulators import INSTALL_HINT
from threadpoolctl import threadpool_limits

# The tests multiply tiny matrices: one BLAS thread is faster, and two test workers on two cores
# must not each start a thread per core.
_ONE_THREAD = threadpool_limits(limits=1)

if not os.environ.get(programs.STORE_ENV):
    os.environ[programs.STORE_ENV] = "off"
    programs.STORE = programs.PROGRAMS.store = None

# Property tests draw the same examples on every run (CI must not be flaky); explore new ones with
#   pytest --hypothesis-profile=explore
settings.register_profile("default", derandomize=True, print_blob=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile("default")

REQUIRE_SIMULATORS = "CAPRA_REQUIRE_SIMULATORS"


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_tool(name): the test runs an external tool (a simulator)")
    config.addinivalue_line("markers", "sim: the test builds or runs a simulator (not in make test-fast)")
    config.addinivalue_line("markers", "slow: the test takes long; only make test-full runs it")
    config.addinivalue_line("markers", "heavy: the test starts programs (a Python per script, Yosys, a browser) "
                                       "or runs a whole model for seconds: make test runs it, make test-fast not")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(True for _ in item.iter_markers("needs_tool")):
            item.add_marker(pytest.mark.sim)


def _missing(item) -> list[str]:
    return [mark.args[0] for mark in item.iter_markers("needs_tool") if shutil.which(mark.args[0]) is None]


def _hint(tool: str) -> str:
    return INSTALL_HINT.get(tool, f"{tool} is not installed")


def pytest_runtest_setup(item):
    missing = _missing(item)
    if missing and os.environ.get(REQUIRE_SIMULATORS) != "1":
        pytest.skip(_hint(missing[0]))


def pytest_runtest_call(item):
    missing = _missing(item)
    if missing:  # only reached with CAPRA_REQUIRE_SIMULATORS=1: the setup skipped otherwise
        pytest.fail(f"{_hint(missing[0])} ({REQUIRE_SIMULATORS}=1: `make test` needs every simulator)",
                    pytrace=False)


needs_icarus = pytest.mark.needs_tool("iverilog")
needs_verilator = pytest.mark.needs_tool("verilator")


def needs_simulators(test):
    """Both simulators: for a test that replays in Icarus and Verilator."""
    return needs_icarus(needs_verilator(test))
