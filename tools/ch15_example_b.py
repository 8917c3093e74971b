#!/usr/bin/env python3
"""Chapter 15, example B: what paging, sharing and windows buy; writes out/ch15_example_b.json. Runs
`capra example-b` (tools/capra_cli/example_b.py) under the book's name."""
import bootstrap

bootstrap.run("example-b")
