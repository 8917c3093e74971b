#!/usr/bin/env python3
"""Write rtl/exp_lut.v from the machine model's exponent table (or, with --check, compare it), so the RTL
and Python share one table. Runs `capra exp-lut` (tools/capra_cli/exp_lut.py)."""
import bootstrap

bootstrap.run("exp-lut")
