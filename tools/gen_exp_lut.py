#!/usr/bin/env python3
"""Write rtl/exp_lut.v from the machine model's exponent table, so the RTL and Python share one table. The command is `capra exp-lut` (tools/capra_cli/exp_lut.py); this script keeps its name."""
import bootstrap

bootstrap.run("exp-lut")
