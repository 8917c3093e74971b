#!/usr/bin/env python3
"""Chapter 15's figures 15.1-15.7 as PNG files in out/. The command is `capra figures` (tools/capra_cli/figures.py); this script keeps its name."""
import bootstrap

bootstrap.run("figures")
