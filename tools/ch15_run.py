#!/usr/bin/env python3
"""Chapter 15: the checks, then 32 decode steps with no window, a window of 8 and a window of 4,
every step replayed on Icarus and Verilator (make sim). The command is `capra sim`
(tools/capra_cli/sim.py); this script keeps the book's name."""
import bootstrap

bootstrap.run("sim")
