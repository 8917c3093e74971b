"""The mutants beyond the book: one-line breaks of the compiler, the machine model and the RTL.

They are data, in mutants.toml beside this file: each is an exact edit (``mutation.Mutant``:
replace OLD, which must occur exactly once in FILE, with NEW) and names the check that must notice
it. The book's eighteen are in tools/mut_ch15.py, where the chapter puts them and where its
exercise 5 adds one.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from .mutation import Mutant

TABLE = Path(__file__).with_name("mutants.toml")


def load(path: Path = TABLE) -> list[Mutant]:
    """Every mutant of the table, in its order."""
    return [Mutant(**entry) for entry in tomllib.loads(path.read_text())["mutant"]]


EXTENDED: list[Mutant] = load()
