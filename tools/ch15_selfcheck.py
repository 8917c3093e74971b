#!/usr/bin/env python3
"""Chapter 15's eight self-check questions, answered by this project's own code. The command is `capra selfcheck` (tools/capra_cli/selfcheck.py); this script keeps its name."""
import bootstrap

bootstrap.run("selfcheck")
