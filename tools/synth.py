#!/usr/bin/env python3
"""Synthesis report of the GA2 blocks on the iCE40: area, post-route Fmax and the block-RAM check of
every memory (make synth, make synth-check). Runs `capra synth` (tools/capra_cli/synth.py)."""
import bootstrap

bootstrap.run("synth")
