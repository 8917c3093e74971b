#!/usr/bin/env python3
"""Chapter 12: decode 32 tokens from token 0 with the structured model, one program per context The command is `capra ch12` (tools/capra_cli/ch12.py); this script keeps its name."""
import bootstrap

bootstrap.run("ch12")
