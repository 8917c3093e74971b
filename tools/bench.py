#!/usr/bin/env python3
"""Benchmarks of the chip and its simulators (figures, never pass/fail). The command is `capra bench` (tools/capra_cli/bench.py); this script keeps its name."""
import bootstrap

bootstrap.run("bench")
