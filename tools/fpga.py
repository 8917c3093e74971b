#!/usr/bin/env python3
"""The whole GA2 chip placed and routed on a Lattice ECP5: utilization, Fmax over placement seeds and
the worst paths by block (make fpga). Runs `capra fpga` (tools/capra_cli/fpga.py)."""
import bootstrap

bootstrap.run("fpga")
