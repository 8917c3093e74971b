#!/usr/bin/env python3
"""Write a waveform (out/ga2.vcd) of one decode step of the structured model, replayed on Icarus (make
waves). Runs `capra waves` (tools/capra_cli/waves.py) under the book's name."""
import bootstrap

bootstrap.run("waves")
