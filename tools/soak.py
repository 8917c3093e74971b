#!/usr/bin/env python3
"""Soak: many random programs through the machine model and both simulators, bit for bit. The command is `capra soak` (tools/capra_cli/soak.py); this script keeps its name."""
import bootstrap

bootstrap.run("soak")
