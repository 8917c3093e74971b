"""The replay image: programs, their external memory, and what the Python machine model expects.

``record(code, ext)`` runs the machine model on one program and returns the words the testbench
reads for it (format in tb/ga2_tb.v). ``write_image(records, path)`` writes the whole hex file:
the number of programs first, then each record.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

import cli  # noqa: E402
from capra import isa  # noqa: E402
from capra.compiler import ext_limit  # noqa: E402
from capra.machine import run_program  # noqa: E402

REC_MAGIC = 0x52454321
MASK = 0xFFFFFFFF


def parse_counters(output: str) -> dict[int, list[int]]:
    """Program index -> its five counters (``cli.parse_counters``: tools/cli.py judges replays)."""
    return cli.parse_counters(output)


def ext_words() -> int:
    """EXTW for this run: the GA2_EXT environment variable (8192 when unset)."""
    return ext_limit()


def record(code: Sequence[int], ext: Sequence[int], extw: int | None = None,
           ext_latency: int = isa.EXT_LATENCY) -> list[int]:
    """One program's record: header, code, initial image, expected memory, counters, checksum.

    The counters are those of an external memory with read latency `ext_latency`: replay the image
    on a testbench built with the same EXT_LATENCY define."""
    extw = ext_words() if extw is None else extw
    code = [int(w) & MASK for w in code]
    init = [int(w) & MASK for w in ext]
    while init and init[-1] == 0:
        init.pop()
    machine = run_program(code, init, extw, ext_latency)
    final = [int(w) for w in machine.ext]
    n_exp = len(final)
    while n_exp and final[n_exp - 1] == 0:
        n_exp -= 1
    words = [REC_MAGIC, len(code), len(init), n_exp, *code, *init, *final[:n_exp], *machine.counters.as_list()]
    words.append(sum(words) & MASK)
    return words


def image(records: Iterable[Sequence[int]]) -> list[int]:
    """The whole image: the program count, then the records."""
    records = list(records)
    return [len(records), *(w for r in records for w in r)]


def write_words(words: Iterable[int], path: str | os.PathLike) -> None:
    """One 8-digit hex word per line, ending in a newline (Verilator needs the last one)."""
    cli.write_text(path, "".join(f"{w & MASK:08x}\n" for w in words))  # atomic: no half-written image


def write_image(records: Iterable[Sequence[int]], path: str | os.PathLike) -> list[int]:
    """Write the hex image and return its words."""
    words = image(records)
    write_words(words, path)
    return words
