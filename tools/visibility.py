#!/usr/bin/env python3
"""How much of what the random programs compute would a replay see if the chip got it wrong? The command is `capra visibility` (tools/capra_cli/visibility.py); this script keeps its name."""
import bootstrap

bootstrap.run("visibility")
