#!/usr/bin/env python3
"""How closely the chip follows the float model on random models (Chapter 12). The command is `capra accuracy` (tools/capra_cli/accuracy.py); this script keeps its name."""
import bootstrap

bootstrap.run("accuracy")
