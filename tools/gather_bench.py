#!/usr/bin/env python3
"""The host's cost of one decode step's gather, through the block table against a plain copy (make
bench). Runs `capra gather` (tools/capra_cli/gather.py) under the book's name."""
import bootstrap

bootstrap.run("gather")
