#!/usr/bin/env python3
"""Cycles of every decode step against its roofline bound, and the cost of one more token of context,
checked against the goals (make report). Runs `capra report` (tools/capra_cli/report.py)."""
import bootstrap

bootstrap.run("report")
