"""The cocotb benches of the RTL blocks: one test module per block, run by tests/test_blocks.py."""

# Which of the whole-chip benches' random programs (cocotb_ga2.RANDOM_PROGRAMS of them, each seed drawn
# from the bench's generator) a case runs: "<first>:<end>", every one when unset. tests/test_blocks.py
# splits them between make test and make test-full.
PROGRAMS_ENV = "CAPRA_RANDOM_PROGRAMS"
