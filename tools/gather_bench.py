#!/usr/bin/env python3
"""The host's cost of one decode step's gather, through the block table against a plain copy. The command is `capra gather` (tools/capra_cli/gather.py); this script keeps its name."""
import bootstrap

bootstrap.run("gather")
