#!/usr/bin/env python3
"""Write (or, with --check, compare) what is generated from the model: rtl/exp_lut.v and the VEC
table of docs/isa.md. The command is `capra gen` (tools/capra_cli/gen.py)."""
import bootstrap

bootstrap.run("gen")
