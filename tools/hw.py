"""The book's name for the simulators: ``ROOT``, ``sim_icarus`` and ``sim_verilator``.

``sim_icarus(files, top, defines=())`` and ``sim_verilator(...)`` build the named Verilog (cached:
rebuilt only when a source or a define changes) and run it from the repository root; each returns
``(exit status, everything it printed)``. They live in ``replay.simulators``; this module keeps
the names the chapter's listings import.
"""

from replay.simulators import ROOT as _ROOT
from replay.simulators import sim_icarus, sim_verilator

ROOT = str(_ROOT)

__all__ = ["ROOT", "sim_icarus", "sim_verilator"]
