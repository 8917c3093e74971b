#!/usr/bin/env python3
"""Benchmarks of the chip and its simulators: simulated cycles per second, the machine model's time per
program and the kernels' efficiency (make bench). Runs `capra bench` (tools/capra_cli/bench.py)."""
import bootstrap

bootstrap.run("bench")
