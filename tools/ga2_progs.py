"""The replay image: programs, their external memory, and what the Python machine model expects.

``record(code, ext)`` runs the machine model on one program and returns the words the testbench
reads for it (format in docs/replay.md and tb/ga2_tb.v). ``write_image(records, path)`` writes the
whole file: a header, then each record, every record ending in the CRC-32 of all the image's words
before it, so the testbench refuses an image that was altered anywhere (headers and counts included).

One form only: every line is eight lowercase hex digits and a line feed. The testbench reads the
file byte by byte and fails, naming the line and the byte, on anything else, so both simulators
treat every stray byte (a NUL, a space, a capital letter, a carriage return) the same way.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

import cli  # noqa: E402
from capra.compiler import ext_limit  # noqa: E402
from capra.machine import Machine, run_program  # noqa: E402

IMG_MAGIC = 0x47413202  # "GA2" and the format's number, 2
REC_MAGIC = 0x52454321  # "REC!"
MASK = 0xFFFFFFFF
IMG_HEADER = 4  # IMG_MAGIC, programs, words in the image, CRC-32 of those three
REC_HEADER = 7  # REC_MAGIC, n_code, n_init, n_xrun, n_xval, n_srun, n_sval
N_COUNTERS = 5
RUN_MAX = 0xFFFF  # a run word holds its first address in bits 15:0 and its length in bits 31:16


def parse_counters(output: str) -> dict[int, list[int]]:
    """Program index -> its five counters (``cli.parse_counters``: tools/cli.py judges replays)."""
    return cli.parse_counters(output)


def ext_words() -> int:
    """EXTW for this run: the GA2_EXT environment variable (8192 when unset)."""
    return ext_limit()


def runs(addresses: Iterable[int]) -> list[int]:
    """Run words for a set of addresses: ascending, each one word holding its first address in
    bits 15:0 and its length (1..RUN_MAX) in bits 31:16. Maximal runs, split only where one would
    be longer than RUN_MAX, so the testbench reads each address once and in order."""
    out: list[int] = []
    first = prev = None
    for a in sorted(set(int(x) for x in addresses)):
        if not 0 <= a <= 0xFFFF:
            raise ValueError(f"address {a} does not fit the 16 bits of a run word")
        if first is not None and a == prev + 1 and a - first < RUN_MAX:
            prev = a
            continue
        if first is not None:
            out.append(first | (prev - first + 1) << 16)
        first = prev = a
    if first is not None:
        out.append(first | (prev - first + 1) << 16)
    return out


def make_record(code: Sequence[int], init: Sequence[int] = (), ext_changes: dict[int, int] | None = None,
                sp_words: dict[int, int] | None = None, counters: Sequence[int] = (0,) * N_COUNTERS) -> list[int]:
    """One record from its parts: the code, the initial external image, the external words whose
    final value differs from the initial one (address -> value), the scratchpad words the program
    wrote (address -> final value) and the five counters. The last word is the CRC slot, which
    ``image`` fills in (a record's CRC covers the image before it, so it depends on its place)."""
    ext_changes, sp_words = ext_changes or {}, sp_words or {}
    if len(counters) != N_COUNTERS:
        raise ValueError(f"a record has {N_COUNTERS} counters, not {len(counters)}")
    xruns, sruns = runs(ext_changes), runs(sp_words)
    xvals = [ext_changes[a] for a in sorted(ext_changes)]
    svals = [sp_words[a] for a in sorted(sp_words)]
    words = [REC_MAGIC, len(code), len(init), len(xruns), len(xvals), len(sruns), len(svals),
             *code, *init, *xruns, *xvals, *sruns, *svals, *counters, 0]
    return [int(w) & MASK for w in words]


def sections(rec: Sequence[int]) -> dict[str, slice]:
    """Where each part of a record lies: code, init, xruns, xvals, sruns, svals, counters, crc."""
    sizes = dict(zip(("code", "init", "xruns", "xvals", "sruns", "svals"), rec[1:REC_HEADER]))
    out, at = {}, REC_HEADER
    for name, n in (*sizes.items(), ("counters", N_COUNTERS), ("crc", 1)):
        out[name] = slice(at, at + n)
        at += n
    return out


def record(code: Sequence[int], ext: Sequence[int], extw: int | None = None,
           ext_latency: int | None = None) -> list[int]:
    """One program's record, its expectations from the machine model: every external word that
    changed, every scratchpad word the program wrote (the scratchpad is never cleared, so words it
    did not write hold whatever came before and are not compared) and the five counters.

    The counters are those of an external memory with read latency `ext_latency`: replay the image
    on a testbench built with the same EXT_LATENCY define."""
    extw = ext_words() if extw is None else extw
    code = [int(w) & MASK for w in code]
    init = [int(w) & MASK for w in ext]
    while init and init[-1] == 0:
        init.pop()
    machine = run_program(code, init, extw, ext_latency)
    return record_of(code, init, machine)


def record_of(code: Sequence[int], init: Sequence[int], machine: Machine) -> list[int]:
    """The record of a machine model that has run `code` from external image `init` to its HALT."""
    start = np.zeros(len(machine.ext), dtype=np.uint32)
    start[: len(init)] = np.asarray(init, dtype=np.int64) & MASK
    changed = np.flatnonzero(machine.ext != start)
    written = np.flatnonzero(machine.written)
    return make_record(code, init, dict(zip(changed.tolist(), machine.ext[changed].tolist())),
                       dict(zip(written.tolist(), machine.sram[written].tolist())), machine.counters.as_list())


def crc32_words(words: Iterable[int], crc: int = 0) -> int:
    """CRC-32 (zlib's: IEEE 802.3, reflected) of the words, each as four bytes, least significant
    first, continuing from `crc` (the CRC of whatever came before)."""
    words = list(words)
    return zlib.crc32(struct.pack(f"<{len(words)}I", *words), crc)


def image(records: Iterable[Sequence[int]]) -> list[int]:
    """The whole image: the header (magic, programs, words, its CRC-32), then the records, each
    one's last word replaced by the CRC-32 of every word of the image before it."""
    records = [list(r) for r in records]
    head = [IMG_MAGIC, len(records), IMG_HEADER + sum(len(r) for r in records)]
    words = [*head, crc32_words(head)]
    crc = crc32_words(words)
    for rec in records:
        body = rec[:-1]
        crc = crc32_words(body, crc)
        words += [*body, crc]
        crc = crc32_words([crc], crc)
    return words


def write_words(words: Iterable[int], path: str | os.PathLike) -> None:
    """One word per line, as eight lowercase hex digits and a line feed (the only form the
    testbench accepts); a value that is not a 32-bit word is an error, never wrapped. Written
    atomically: no half-written image."""
    words = list(words)
    bad = next((w for w in words if not 0 <= w <= MASK), None)
    if bad is not None:
        raise ValueError(f"image word {bad} is not a 32-bit unsigned value")
    cli.write_text(path, "".join(f"{w:08x}\n" for w in words))


def write_image(records: Iterable[Sequence[int]], path: str | os.PathLike) -> list[int]:
    """Write the image and return its words."""
    words = image(records)
    write_words(words, path)
    return words
