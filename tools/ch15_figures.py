#!/usr/bin/env python3
"""Chapter 15's figures 15.1-15.7 as PNG files in out/ (make figures). Runs `capra figures`
(tools/capra_cli/figures.py) under the book's name."""
import bootstrap

bootstrap.run("figures")
