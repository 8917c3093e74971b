#!/usr/bin/env python3
"""KV rows the paged host's per-layer page groups hold for the mixed model, against MixedKVCache and
an all-global cache. Runs `capra page-groups` (tools/capra_cli/page_groups.py)."""
import bootstrap

bootstrap.run("page-groups")
