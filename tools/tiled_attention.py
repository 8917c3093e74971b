#!/usr/bin/env python3
"""Decode attention of one GQA group tiled over the context (online softmax) on the machine model: error
against float softmax attention, cycles against the K/V stream's word bound. Runs `capra tiled-attention`
(tools/capra_cli/tiled_attention.py)."""
import bootstrap

bootstrap.run("tiled-attention")
