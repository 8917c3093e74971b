#!/usr/bin/env python3
"""Passkey retrieval on the tiny mixed (or windowed-only) model: accuracy table and verdict. The command is `capra passkey` (tools/capra_cli/passkey.py); this script keeps its name."""
import bootstrap

bootstrap.run("passkey")
