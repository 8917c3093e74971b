#!/usr/bin/env python3
"""Chapter 15, example A: the page table at work, event by event. The command is `capra example-a` (tools/capra_cli/example_a.py); this script keeps its name."""
import bootstrap

bootstrap.run("example-a")
