#!/usr/bin/env python3
"""Passkey retrieval on the tiny mixed (or windowed-only) model: an accuracy table and a verdict. Runs
`capra passkey` (tools/capra_cli/passkey.py) under the book's name."""
import bootstrap

bootstrap.run("passkey")
