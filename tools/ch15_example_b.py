#!/usr/bin/env python3
"""Chapter 15, example B: what paging, sharing and windows buy. The command is `capra example-b` (tools/capra_cli/example_b.py); this script keeps its name."""
import bootstrap

bootstrap.run("example-b")
