#!/usr/bin/env python3
"""Chapter 12: how closely the int8 chip follows the float model, decoding random models from every start
token. Runs `capra accuracy` (tools/capra_cli/accuracy.py) under the book's name."""
import bootstrap

bootstrap.run("accuracy")
