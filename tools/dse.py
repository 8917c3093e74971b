#!/usr/bin/env python3
"""The design-space sweep: GA2 at every point of a grid of configurations, each exact on both simulators,
with its area from Yosys (make dse). Runs `capra dse` (tools/capra_cli/dse.py)."""
import bootstrap

bootstrap.run("dse")
