#!/usr/bin/env python3
"""KV cache memory and decode cost of the mixed windowed/global design. The command is `capra kv-bench` (tools/capra_cli/kv_bench.py); this script keeps its name."""
import bootstrap

bootstrap.run("kv-bench")
