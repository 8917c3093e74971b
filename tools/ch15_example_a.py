#!/usr/bin/env python3
"""Chapter 15, example A: the page table at work, event by event, and a fork with copy-on-write; writes
out/ch15_example_a.json. Runs `capra example-a` (tools/capra_cli/example_a.py) under the book's name."""
import bootstrap

bootstrap.run("example-a")
