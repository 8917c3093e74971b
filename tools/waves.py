#!/usr/bin/env python3
"""Write a waveform (out/ga2.vcd) of one decode step of the structured model on Icarus. The command is `capra waves` (tools/capra_cli/waves.py); this script keeps its name."""
import bootstrap

bootstrap.run("waves")
