"""The cocotb benches of the RTL blocks: one test module per block, run by tests/test_blocks.py."""
