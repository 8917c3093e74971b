"""The host: what turns requests into decode programs and runs them on GA2's machine model.

    calibration.py  the one float decode every program's scales come from (``calibrate``)
    programs.py     the one program cache, keyed by everything that decides a program
    step.py         one decode step on the machine model and the one result type (``Step``)
    runner.py       a batch of requests in, one program run, each request's results out

The Chapter 15 host (``paged_lm.PagedChip``: a page table, the window rule, the gather) and the
serving engine (the ``serving`` package) are built on these.
"""

from .calibration import Calibration, calibrate
from .programs import PROGRAMS, ProgramCache, model_fingerprint
from .runner import ModelRunner, batch_key, check_ranges
from .step import MachineMismatch, Step, run_step

__all__ = ["PROGRAMS", "Calibration", "MachineMismatch", "ModelRunner", "ProgramCache", "Step", "batch_key",
           "calibrate", "check_ranges", "model_fingerprint", "run_step"]
