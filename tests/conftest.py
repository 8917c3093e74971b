"""Shared pytest setup: the model/ and tools/ folders on the path, and simulator availability.

A test marked ``needs_icarus`` / ``needs_verilator`` is skipped when the simulator is not installed,
unless CAPRA_REQUIRE_SIMULATORS=1 (``make test`` sets it): then it fails, naming the missing tool,
so a machine without a simulator can never report the RTL replays as passed.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests draw the same examples on every run (CI must not be flaky); explore new ones with
#   pytest --hypothesis-profile=explore
settings.register_profile("default", derandomize=True, print_blob=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile("default")

ROOT = Path(__file__).resolve().parents[1]
for sub in ("model", "tools"):
    if str(ROOT / sub) not in sys.path:
        sys.path.insert(0, str(ROOT / sub))


REQUIRE_SIMULATORS = "CAPRA_REQUIRE_SIMULATORS"


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_tool(name): the test runs an external tool (a simulator)")


def _missing(item) -> list[str]:
    return [mark.args[0] for mark in item.iter_markers("needs_tool") if shutil.which(mark.args[0]) is None]


def _hint(tool: str) -> str:
    import hw

    return hw.INSTALL_HINT.get(tool, f"{tool} is not installed")


def pytest_runtest_setup(item):
    missing = _missing(item)
    if missing and os.environ.get(REQUIRE_SIMULATORS) != "1":
        pytest.skip(_hint(missing[0]))


def pytest_runtest_call(item):
    missing = _missing(item)
    if missing:  # only reached with CAPRA_REQUIRE_SIMULATORS=1: the setup skipped otherwise
        pytest.fail(f"{_hint(missing[0])} ({REQUIRE_SIMULATORS}=1: `make test` needs every simulator)",
                    pytrace=False)


def _need(tool: str):
    return pytest.mark.needs_tool(tool)


needs_icarus = _need("iverilog")
needs_verilator = _need("verilator")
