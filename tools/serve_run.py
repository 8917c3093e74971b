#!/usr/bin/env python3
"""Many requests on one chip: continuous batching over the paged pool, checked on the RTL
(make serve). The command is `capra serve` (tools/capra_cli/serve.py); this script keeps its name."""
import bootstrap

bootstrap.run("serve")
