#!/usr/bin/env python3
"""The mixed windowed/global model on GA2 in int8: per-layer error against the float model, greedy decode on
the machine model, one decode step replayed on both simulators. Runs `capra mixed-chip`
(tools/capra_cli/mixed_chip.py)."""
import bootstrap

bootstrap.run("mixed-chip")
