"""Argument parsing for the tools: a mistake is one line naming the bad argument, exit status 2."""

from __future__ import annotations

import argparse
from collections.abc import Callable


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error is one line (no usage block), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parser(doc: str) -> Parser:
    """A parser whose --help prints the tool's docstring as it is written."""
    return Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in lo .. hi."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo}..{hi}")
        return value

    parse.__name__ = "integer"
    return parse
