# Capra: make sim (the Chapter 15 run on both simulators), make test (the whole suite),
# make synth (iCE40 area, Fmax and memory check of every RTL block; make synth-check: the memory check only).
# Every target creates the virtual environment it needs from pyproject.toml.

PYTHON3 ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed

.PHONY: sim test lint mut mut-all examples figures selfcheck bench soak waves ch12 report serve dse tools synth-tools synth synth-check clean

$(STAMP): pyproject.toml
	@$(PYTHON3) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python 3.11 or newer is needed (found $$($(PYTHON3) --version))"; exit 1; }
	$(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
	  > $(VENV)/requirements.txt
	$(PY) -m pip install -q -r $(VENV)/requirements.txt
	@touch $@

# One line saying what to install when a simulator is missing.
tools:
	@command -v iverilog >/dev/null 2>&1 || { echo "Icarus Verilog is missing: apt-get install iverilog"; exit 1; }
	@command -v verilator >/dev/null 2>&1 || { echo "Verilator is missing: apt-get install verilator"; exit 1; }

# The same for the synthesis tools (tools/synth.py needs only the Python standard library).
SYNTH_INSTALL := apt-get install yosys nextpnr-ice40 fpga-icestorm
synth-tools:
	@command -v yosys >/dev/null 2>&1 || { echo "Yosys is missing: $(SYNTH_INSTALL)"; exit 1; }
	@command -v nextpnr-ice40 >/dev/null 2>&1 || { echo "nextpnr-ice40 is missing: $(SYNTH_INSTALL)"; exit 1; }

# Options for tools/synth.py, e.g. make synth SYNTH_ARGS="--no-cache divu requant"
SYNTH_ARGS ?=

synth: synth-tools
	$(PYTHON3) tools/synth.py $(SYNTH_ARGS)

synth-check:
	@command -v yosys >/dev/null 2>&1 || { echo "Yosys is missing: $(SYNTH_INSTALL)"; exit 1; }
	$(PYTHON3) tools/synth.py --check-memories $(SYNTH_ARGS)

sim: $(STAMP) tools
	$(PY) tools/ch15_run.py

# A missing simulator fails the simulator tests here (tests/conftest.py); a plain pytest skips them.
test: $(STAMP) tools
	CAPRA_REQUIRE_SIMULATORS=1 $(PY) -m pytest

lint: $(STAMP)
	verilator --lint-only -Wall --default-language 1364-2005 -Irtl rtl/lint.vlt rtl/*.v --top-module ga2
	verilator --lint-only -Wall --timing --default-language 1364-2005 -Irtl -y rtl rtl/lint.vlt \
	  tb/ga2_tb.v tb/extmem_rw.v --top-module ga2_tb
	$(PY) -m ruff check model tools tests
	$(PY) tools/gen_exp_lut.py --check

mut: $(STAMP) tools
	$(PY) tools/mut_ch15.py

mut-all: $(STAMP) tools
	$(PY) tools/mut_ch15.py --all

examples: $(STAMP)
	$(PY) tools/ch15_example_a.py
	$(PY) tools/ch15_example_b.py

figures: $(STAMP)
	$(PY) tools/ch15_figures.py

selfcheck: $(STAMP)
	$(PY) tools/ch15_selfcheck.py

ch12: $(STAMP) tools
	$(PY) tools/ch12_run.py

report: $(STAMP)
	$(PY) tools/decode_report.py

# Continuous batching over the paged pool: B_max = 1, 2, 4, 8; one run replayed on both simulators.
serve: $(STAMP) tools
	$(PY) tools/serve_run.py

# The design-space sweep (tools/dse.py, docs/design_space.md): 48 configurations, each replayed
# exactly on both simulators, in parallel on both cores; cached in out/dse/. Then the whole ga2 is
# synthesized by Yosys once per RTL configuration (16, minutes each, one at a time; cached in
# out/synth/cache/); without Yosys the area column is the analytic block-RAM count (said so).
dse: $(STAMP) tools
	$(PY) tools/dse.py

bench: $(STAMP) tools
	$(PY) tools/bench.py
	$(PY) tools/gather_bench.py

# N random programs through the machine model and both simulators, on both cores; resumable
# (out/soak/state.json): make soak N=10000
N ?= 1000
soak: $(STAMP) tools
	$(PY) tools/soak.py -n $(N)

waves: $(STAMP) tools
	$(PY) tools/waves.py

clean:
	rm -rf out/sim out/cocotb out/tests out/synth out/soak out/*.hex out/*.json out/*.png out/*.vcd .pytest_cache .ruff_cache .hypothesis
