# Capra. make sim: the Chapter 15 run on both simulators. make test: the test suite (CI runs it).
# Every target creates the virtual environment it needs (.venv) and installs the project into it
# (editable: the code in model/ and tools/ is what runs). It byte-compiles only what the commands
# and tests import (one import of each, 5 s), not every module of every package (--no-compile: 12 s
# less), and once, before two test workers or many scripts started together would each compile it.
# That import writes its bytecode even where PYTHONDONTWRITEBYTECODE is set: without it every
# Python the tests start (a script, a cocotb bench) compiles numpy and the project again, a tenth
# of make test's time.

PYTHON3 ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
JOBS    ?= 2
PYTEST  := $(PY) -m pytest -n $(JOBS)

.PHONY: sim test test-fast test-full lint mut mut-all mut-tiers examples figures selfcheck bench soak waves ch12 \
        report serve timeline dse tools synth synth-check fpga clean

$(STAMP): pyproject.toml
	@$(PYTHON3) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python 3.11 or newer is needed (found $$($(PYTHON3) --version))"; exit 1; }
	$(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -e '.[synth]'
	PYTHONDONTWRITEBYTECODE= $(PY) -c "import numpy, matplotlib.pyplot, hypothesis, pytest, xdist, cocotb, \
	  cocotb.triggers, cocotb_tools.runner, cocotbext.axi, capra, host, serving, replay, inference, answers, \
	  paged_tests, capra_cli.__main__ as cli, importlib; \
	  [importlib.import_module(f'capra_cli.{m}') for m, _ in cli.COMMANDS.values()]"
	@touch $@

# One line saying what to install when a simulator is missing.
tools:
	@command -v iverilog >/dev/null 2>&1 || { echo "Icarus Verilog is missing: apt-get install iverilog"; exit 1; }
	@command -v verilator >/dev/null 2>&1 || { echo "Verilator is missing: apt-get install verilator"; exit 1; }

# The synthesis tools need no system package: Yosys and nextpnr-ice40 built for WebAssembly come from
# PyPI with the rest (pyproject.toml's synth extra). SYNTH_ARGS="--system-tools" uses the yosys and
# nextpnr-ice40 on PATH instead (apt-get install yosys nextpnr-ice40).

# Options for the synthesis, e.g. make synth SYNTH_ARGS="--no-cache divu requant"
SYNTH_ARGS ?=

synth: $(STAMP)
	$(PY) tools/synth.py $(SYNTH_ARGS)

synth-check: $(STAMP)
	$(PY) tools/synth.py --check-memories $(SYNTH_ARGS)

# The whole chip placed and routed on a Lattice ECP5 (docs/synthesis.md): Yosys and nextpnr-ecp5 from
# PyPI (pyproject.toml's fpga extra, installed here once), minutes a seed; kept in out/fpga/.
# Options: make fpga FPGA_ARGS="--seeds 1 --config n=8"
FPGA_STAMP := $(VENV)/.fpga-installed
FPGA_ARGS ?=
$(FPGA_STAMP): $(STAMP)
	$(PY) -m pip install -q --no-compile -e '.[fpga]'
	@touch $@

fpga: $(FPGA_STAMP)
	$(PY) tools/fpga.py $(CLUSTER_ARGS) $(FPGA_ARGS)

# An existing Dask cluster for the runs of many independent jobs (make dse, soak, mut, mut-all, fpga):
# make soak N=100000 SCHEDULER=tcp://10.0.0.5:8786 (docs/design_space.md); without it, a local one.
SCHEDULER ?=
CLUSTER_ARGS = $(if $(SCHEDULER),--scheduler $(SCHEDULER))

# A memory that stalls: make sim STALL=25 (percent of cycles each AXI channel stalls; SEED=<n> picks
# the schedule, with STALL only), also make soak and make serve; the machine model runs on the same schedule.
STALL ?=
SEED ?=
MEMORY_ARGS = $(if $(STALL),--stall $(STALL)) $(if $(SEED),--stall-seed $(SEED))
sim: $(STAMP) tools
	$(PY) tools/ch15_run.py $(MEMORY_ARGS)

# The test tiers (tests/conftest.py): no simulator (under a minute on two idle cores); the suite CI
# runs (every replay and bench, a few minutes); everything, slow runs included. A missing simulator
# fails the simulator tests under make test and test-full; a plain pytest skips them.
test-fast: $(STAMP)
	$(PYTEST) -m "not sim and not slow and not heavy"

test: $(STAMP) tools
	CAPRA_REQUIRE_SIMULATORS=1 $(PYTEST) -m "not slow"

test-full: $(STAMP) tools
	CAPRA_REQUIRE_SIMULATORS=1 $(PYTEST)

lint: $(STAMP)
	verilator --lint-only -Wall --default-language 1364-2005 -Irtl rtl/lint.vlt rtl/*.v --top-module ga2
	verilator --lint-only -Wall --timing --default-language 1364-2005 -Irtl -y rtl rtl/lint.vlt \
	  tb/ga2_tb.v tb/ga2_sys.v tb/extmem_rw.v --top-module ga2_tb
	$(PY) -m ruff check model tools tests
	$(PY) tools/gen_exp_lut.py --check

mut: $(STAMP) tools
	$(PY) tools/mut_ch15.py $(CLUSTER_ARGS)

mut-all: $(STAMP) tools
	$(PY) tools/mut_ch15.py --all $(CLUSTER_ARGS)

# Which mutants each test tier catches (hours: every mutant against a whole tier).
mut-tiers: $(STAMP) tools
	$(PY) -m capra_cli mut --all --tier fast $(CLUSTER_ARGS)
	$(PY) -m capra_cli mut --all --tier test $(CLUSTER_ARGS)

examples: $(STAMP)
	$(PY) tools/ch15_example_a.py
	$(PY) tools/ch15_example_b.py

figures: $(STAMP)
	$(PY) tools/ch15_figures.py

selfcheck: $(STAMP)
	$(PY) tools/ch15_selfcheck.py

ch12: $(STAMP) tools
	$(PY) tools/ch12_run.py

# The roofline of the decode, printed; then out/report.html, every result this checkout has made on
# one page (docs/report.md).
report: $(STAMP)
	$(PY) tools/decode_report.py

# Continuous batching over the paged pool: B_max = 1, 2, 4, 8; one run replayed on both simulators.
# Options: make serve SERVE_ARGS="--pages 16"
SERVE_ARGS ?=
serve: $(STAMP) tools
	$(PY) tools/serve_run.py $(MEMORY_ARGS) $(SERVE_ARGS)

# The design-space sweep (docs/design_space.md): 48 configurations, each replayed exactly on both
# simulators, then the whole ga2 placed and routed on an ECP5 once per RTL configuration (make fpga's
# flow and its fpga extra; hours; kept in out/dse/ and out/fpga/, so a rerun resumes); jobs on a
# local Dask cluster of two workers, or SCHEDULER's. Options: make dse DSE_ARGS="--no-area"
DSE_ARGS ?=
dse: $(STAMP) $(FPGA_STAMP) tools
	$(PY) tools/dse.py $(CLUSTER_ARGS) $(DSE_ARGS)

bench: $(STAMP) tools
	$(PY) tools/bench.py
	$(PY) tools/gather_bench.py

# N random programs through the machine model and both simulators, on both cores (a local Dask
# cluster; SCHEDULER= an existing one); resumable: make soak N=10000
N ?= 1000
soak: $(STAMP) tools
	$(PY) tools/soak.py -n $(N) $(if $(STALL),--stall $(STALL)) $(CLUSTER_ARGS)

waves: $(STAMP) tools
	$(PY) tools/waves.py

# Where the cycles of a solo and a batch-8 decode step go: out/timeline/*.json (open in Perfetto)
# and out/timeline/timeline.png; both steps' RTL events checked against the model's.
timeline: $(STAMP) tools
	$(PY) -m capra_cli timeline

clean:
	rm -rf out/sim out/runs out/cocotb out/tests out/synth out/fpga out/soak out/dse out/*.hex out/*.json out/*.png \
	  out/*.vcd out/timeline out/report out/report.html out/mut .pytest_cache .ruff_cache .hypothesis
