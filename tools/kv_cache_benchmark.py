#!/usr/bin/env python3
"""KV cache memory and decode cost of the mixed windowed/global design, derived and measured. Runs
`capra kv-bench` (tools/capra_cli/kv_bench.py) under the book's name."""
import bootstrap

bootstrap.run("kv-bench")
