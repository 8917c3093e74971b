#!/usr/bin/env python3
"""The design-space sweep: GA2 at every point of a grid of configurations (model/capra/config.py), The command is `capra dse` (tools/capra_cli/dse.py); this script keeps its name."""
import bootstrap

bootstrap.run("dse")
