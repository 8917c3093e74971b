#!/usr/bin/env python3
"""Chapter 12: decode 32 tokens with the structured model and replay every step's program on Icarus and
Verilator (make ch12). Runs `capra ch12` (tools/capra_cli/ch12.py) under the book's name."""
import bootstrap

bootstrap.run("ch12")
