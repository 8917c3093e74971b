#!/usr/bin/env python3
"""Chapter 15's eight self-check questions, each answered by this project's own code and checked
against the chapter's arithmetic (make selfcheck). Runs `capra selfcheck` (tools/capra_cli/selfcheck.py)."""
import bootstrap

bootstrap.run("selfcheck")
