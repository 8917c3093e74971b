#!/usr/bin/env python3
"""Your own small model on GA2: an MLP block built with capra.Graph, compiled, run on the machine model and
replayed on both simulators (docs/own_model.md). Runs `capra own-model` (tools/capra_cli/own_model.py)."""
import bootstrap

bootstrap.run("own-model")
