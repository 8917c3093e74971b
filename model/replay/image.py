"""The replay image: programs, their external memory, and what the Python machine model expects.

A ``Record`` is one program as the testbench replays it: the code, the initial external memory,
and the machine model's expectations (every external word the program changes, every scratchpad
word it writes, the seven counters). ``record(code, ext)`` runs the machine model to make one.

An image is a text file, one 32-bit word per line as eight lowercase hex digits and a line feed,
in one of two forms (docs/replay.md):

* the checked form the project's runners write (``write_image``): a header (magic, program count,
  word count, CRC-32 of those three), then every record, each ending in the CRC-32 of all the
  image's words before it, so an image altered anywhere is refused;
* the chapter's form (``write_image(..., form="chapter")``): the program count, then the records as
  ``Record.words()`` gives them (their CRC slot 0), checked by structure alone.

``read_image`` reads either form back, checking what the testbench checks.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from capra import isa
from capra.machine import Machine, run_program

from .runs import UserError, write_text

IMG_MAGIC = 0x47413204  # "GA2" and the format's number, 4
REC_MAGIC = 0x52454321  # "REC!"
MASK = 0xFFFFFFFF
IMG_HEADER = 4  # IMG_MAGIC, programs, words in the image, CRC-32 of those three
REC_HEADER = 7  # REC_MAGIC, n_code, n_init, n_xrun, n_xval, n_srun, n_sval
N_COUNTERS = 7  # c0..c4, h_unit, h_sync (machine.Counters.with_holds)
RUN_WORDS = 2  # a run is two words: its first address and its length (external addresses are 32 bits)
MAX_PROGRAMS = 0xFFFF
FORMS = ("header", "chapter")


class ImageError(UserError, ValueError):
    """An image file that is not a well-formed replay image; the message names the line and why."""


def runs(addresses: Iterable[int]) -> list[int]:
    """Run words for a set of addresses: the maximal runs of consecutive addresses, ascending, each
    as two words (its first address, its length), so the testbench reads each address once and in
    order."""
    out: list[int] = []
    first = prev = None
    for a in sorted(set(int(x) for x in addresses)):
        if not 0 <= a <= MASK:
            raise ValueError(f"address {a} does not fit the 32 bits of a run word")
        if first is not None and a == prev + 1:
            prev = a
            continue
        if first is not None:
            out += [first, prev - first + 1]
        first = prev = a
    if first is not None:
        out += [first, prev - first + 1]
    return out


def addresses(run_words: Sequence[int]) -> list[int]:
    """The addresses a list of run words covers, in order (the inverse of ``runs``); ValueError if
    the words are not pairs."""
    if len(run_words) % RUN_WORDS:
        raise ValueError(f"{len(run_words)} run words are not pairs of first address and length")
    pairs = zip(run_words[::RUN_WORDS], run_words[1::RUN_WORDS], strict=True)
    return [a for first, length in pairs for a in range(first, first + length)]


@dataclass
class Record:
    """One program of an image and the machine model's expectations of it."""

    code: list[int]
    init: list[int] = field(default_factory=list)  # the external memory at the start (then zeros)
    ext_changes: dict[int, int] = field(default_factory=dict)  # external word -> its final value
    sp_words: dict[int, int] = field(default_factory=dict)  # scratchpad word written -> its final value
    counters: list[int] = field(default_factory=lambda: [0] * N_COUNTERS)

    def __post_init__(self) -> None:
        if len(self.counters) != N_COUNTERS:
            raise ValueError(f"a record has {N_COUNTERS} counters, not {len(self.counters)}")

    def words(self) -> list[int]:
        """The record as the testbench reads it; its last word, the CRC slot, is 0 (``header_words``
        fills it in: a record's CRC covers the image before it, so it depends on its place)."""
        xruns, sruns = runs(self.ext_changes), runs(self.sp_words)
        words = [REC_MAGIC, len(self.code), len(self.init), len(xruns), len(self.ext_changes), len(sruns),
                 len(self.sp_words), *self.code, *self.init, *xruns,
                 *(self.ext_changes[a] for a in sorted(self.ext_changes)), *sruns,
                 *(self.sp_words[a] for a in sorted(self.sp_words)), *self.counters, 0]
        return [int(w) & MASK for w in words]

    @classmethod
    def from_words(cls, words: Sequence[int], where: str = "record") -> Record:
        """The record that ``words`` (one whole record, CRC slot included) hold; ImageError if they
        are not one."""
        if len(words) < REC_HEADER + N_COUNTERS + 1 or words[0] != REC_MAGIC:
            raise ImageError(f"{where} does not start with the record magic {REC_MAGIC:08x}")
        sizes = list(words[1:REC_HEADER])
        if REC_HEADER + sum(sizes) + N_COUNTERS + 1 != len(words):
            raise ImageError(f"{where}: its sizes {sizes} do not add up to its {len(words)} words")
        parts, at = [], REC_HEADER
        for n in sizes:
            parts.append(list(words[at : at + n]))
            at += n
        code, init, xruns, xvals, sruns, svals = parts
        try:
            xaddr, saddr = addresses(xruns), addresses(sruns)
        except ValueError as error:
            raise ImageError(f"{where}: {error}") from None
        if len(xaddr) != len(xvals) or len(saddr) != len(svals):
            raise ImageError(f"{where}: its runs cover {len(xaddr)} external and {len(saddr)} scratchpad words, "
                             f"it holds {len(xvals)} and {len(svals)} values")
        return cls(code, init, dict(zip(xaddr, xvals)), dict(zip(saddr, svals)), list(words[at : at + N_COUNTERS]))


def record(code: Sequence[int], ext: Sequence[int], ext_memory: int | None = None,
           ext_latency: int | None = None) -> Record:
    """One program's record, its expectations from the machine model: every external word that
    changed, every scratchpad word the program wrote (the scratchpad is never cleared, so words it
    did not write hold whatever came before and are not compared) and the seven counters.

    The external memory has `ext_memory` words (default: the active configuration's) and answers
    reads after `ext_latency` cycles (default: the configuration's); replay the image with the
    same (``replay.replay`` passes both)."""
    ext_memory = isa.EXT_MEMORY if ext_memory is None else ext_memory
    code = [int(w) & MASK for w in code]
    init = [int(w) & MASK for w in ext]
    while init and init[-1] == 0:
        init.pop()
    machine = run_program(code, init, ext_memory, ext_latency)
    return record_of(code, init, machine)


def record_of(code: Sequence[int], init: Sequence[int], machine: Machine) -> Record:
    """The record of a machine model that has run `code` from external image `init` to its HALT."""
    start = np.zeros(len(machine.ext), dtype=np.uint32)
    start[: len(init)] = np.asarray(init, dtype=np.int64) & MASK
    changed = np.flatnonzero(machine.ext != start)
    written = np.flatnonzero(machine.written)
    return Record(list(code), list(init), dict(zip(changed.tolist(), machine.ext[changed].tolist())),
                  dict(zip(written.tolist(), machine.sram[written].tolist())), machine.counters.with_holds())


def crc32_words(words: Iterable[int], crc: int = 0) -> int:
    """CRC-32 (zlib's: IEEE 802.3, reflected) of the words, each as four bytes, least significant
    first, continuing from `crc` (the CRC of whatever came before)."""
    words = list(words)
    return zlib.crc32(struct.pack(f"<{len(words)}I", *words), crc)


def header_words(records: Iterable[Record | Sequence[int]]) -> list[int]:
    """The checked image: the header (magic, programs, words, its CRC-32), then the records, each
    one's last word replaced by the CRC-32 of every word of the image before it."""
    bodies = [_words(r)[:-1] for r in records]
    head = [IMG_MAGIC, len(bodies), IMG_HEADER + sum(len(b) + 1 for b in bodies)]
    words = [*head, crc32_words(head)]
    crc = crc32_words(words)
    for body in bodies:
        crc = crc32_words(body, crc)
        words += [*body, crc]
        crc = crc32_words([crc], crc)
    return words


def chapter_words(records: Iterable[Record | Sequence[int]]) -> list[int]:
    """The chapter's image: the number of programs, then each record's words."""
    bodies = [_words(r) for r in records]
    return [len(bodies), *(w for body in bodies for w in body)]


def _words(rec: Record | Sequence[int]) -> list[int]:
    return rec.words() if isinstance(rec, Record) else [int(w) & MASK for w in rec]


def format_words(words: Iterable[int]) -> str:
    """The text of an image: each word as eight lowercase hex digits and a line feed; a value that
    is not a 32-bit word is an error, never wrapped."""
    words = list(words)
    bad = next((w for w in words if not 0 <= w <= MASK), None)
    if bad is not None:
        raise ValueError(f"image word {bad} is not a 32-bit unsigned value")
    return "".join(f"{w:08x}\n" for w in words)


def write_words(words: Iterable[int], path: str | os.PathLike) -> None:
    """Write raw image words (one per line), atomically: never a half-written image."""
    write_text(path, format_words(words))


def write_image(records: Iterable[Record | Sequence[int]], path: str | os.PathLike, form: str = "header") -> list[int]:
    """Write an image of `records` in `form` ("header": checked, the default; "chapter": the
    book's count-then-records) and return its words."""
    if form not in FORMS:
        raise ValueError(f"form {form!r}: an image is written as {' or '.join(FORMS)}")
    words = header_words(records) if form == "header" else chapter_words(records)
    write_words(words, path)
    return words


def read_words(path: str | os.PathLike) -> list[int]:
    """The words of an image file; ImageError naming the first line that is not eight lowercase hex
    digits and a line feed."""
    data = Path(path).read_bytes()
    if len(data) % 9:
        raise ImageError(f"{path}: {len(data)} bytes, not whole lines of eight hex digits and a line feed")
    words = []
    for i in range(0, len(data), 9):
        line = data[i : i + 9]
        text = line[:8].decode("ascii", errors="replace")
        if line[8:] != b"\n" or any(c not in "0123456789abcdef" for c in text):
            raise ImageError(f"{path}: line {i // 9 + 1} is not eight lowercase hex digits and a line feed")
        words.append(int(text, 16))
    return words


def read_image(path: str | os.PathLike) -> tuple[list[Record], str]:
    """The records of an image file and its form ("header" or "chapter"), with everything the
    testbench checks before it runs a program checked here too (ImageError names what is wrong)."""
    return parse_image(read_words(path), str(path))


def parse_image(words: Sequence[int], where: str = "image") -> tuple[list[Record], str]:
    """The records of an image's words and its form (``read_image``)."""
    if not words:
        raise ImageError(f"{where} is empty")
    if words[0] == IMG_MAGIC:
        if len(words) < IMG_HEADER or crc32_words(words[:3]) != words[3]:
            raise ImageError(f"{where}: the header's CRC-32 does not match")
        if words[2] != len(words):
            raise ImageError(f"{where}: the header counts {words[2]} words, the image has {len(words)}")
        count, at, form = words[1], IMG_HEADER, "header"
    else:
        count, at, form = words[0], 1, "chapter"
    if not 1 <= count <= MAX_PROGRAMS:
        raise ImageError(f"{where}: the program count {count} is not within 1..{MAX_PROGRAMS}")
    records = []
    for p in range(count):
        if at + REC_HEADER > len(words):
            raise ImageError(f"{where}: program {p} of {count} starts past the end of the image")
        end = at + REC_HEADER + sum(words[at + 1 : at + REC_HEADER]) + N_COUNTERS + 1
        if end > len(words):
            raise ImageError(f"{where}: program {p} ends past the end of the image")
        records.append(Record.from_words(words[at:end], f"{where}: program {p}"))
        if form == "header" and crc32_words(words[: end - 1]) != words[end - 1]:
            raise ImageError(f"{where}: program {p}: CRC-32 mismatch (the image was altered)")
        at = end
    if at != len(words):
        raise ImageError(f"{where}: {len(words) - at} words follow the last of the {count} programs")
    return records, form
