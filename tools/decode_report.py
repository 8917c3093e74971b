#!/usr/bin/env python3
"""Cycles of every decode step against its roofline bound, and the cost of one more token. The command is `capra report` (tools/capra_cli/report.py); this script keeps its name."""
import bootstrap

bootstrap.run("report")
