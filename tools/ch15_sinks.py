#!/usr/bin/env python3
"""Chapter 15, exercise 3's worked answer: attention sinks on the paged host, checked (the gather,
the release, the float reference, the calibration). Runs `capra sinks` (tools/capra_cli/sinks.py)."""
import bootstrap

bootstrap.run("sinks")
