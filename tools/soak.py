#!/usr/bin/env python3
"""Soak: many random programs through the machine model and both simulators, bit for bit, resumable
(make soak N=...). Runs `capra soak` (tools/capra_cli/soak.py)."""
import bootstrap

bootstrap.run("soak")
