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


def _show(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def in_range(kind: Callable[[str], float], lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a number of `kind` (int or float) in lo .. hi."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{_show(value)} is outside {_show(lo)}..{_show(hi)}")
        return value

    parse.__name__ = "integer" if kind is int else "number"
    return parse


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in lo .. hi."""
    return in_range(int, lo, hi)  # type: ignore[return-value]
