#!/usr/bin/env python3
"""The chip reads the KV pages where they lie (GATHER through the block table): the host's per-step
gather it removes and its cycle cost. Runs `capra paged-attention` (tools/capra_cli/paged_attention.py)."""
import bootstrap

bootstrap.run("paged-attention")
