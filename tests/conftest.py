"""Shared pytest setup: the model/ and tools/ folders on the path, and simulator availability."""

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


def _need(tool: str):
    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not installed")


needs_icarus = _need("iverilog")
needs_verilator = _need("verilator")
