#!/usr/bin/env python3
"""How much of what the random programs compute would a replay see if the chip got it wrong: each computed
word corrupted in turn. Runs `capra visibility` (tools/capra_cli/visibility.py)."""
import bootstrap

bootstrap.run("visibility")
