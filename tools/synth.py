#!/usr/bin/env python3
"""Synthesis report for the GA2 blocks on the iCE40: area, post-route Fmax and a memory check. The command is `capra synth` (tools/capra_cli/synth.py); this script keeps its name."""
import bootstrap

bootstrap.run("synth")
