"""Helpers for the tests of the replay testbench: run a simulator on an image file as it is (which
may be broken on purpose), read its one verdict line, and find or reseal the parts of an image.

The section and CRC helpers are written here from docs/replay.md, not taken from replay.image, so
a test that edits an image does not lean on the code it is testing.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import replay
from replay import image
from replay.simulators import BY_NAME, GA2_FILES, GA2_TOP
from replay.verdict import one_verdict, parse_counters

TIMEOUT = 120  # seconds: a testbench that hangs on a bad image fails its test instead of hanging the suite
IMG_HEADER, REC_HEADER, N_COUNTERS = 4, 7, 7


def run_file(sim: str, path, extra_defines=(), timeout: float = TIMEOUT, latency: int | None = None,
             cwd=None, plusargs=()) -> tuple[int, str]:
    """Run the testbench of the active configuration on an image file; (exit status, output)."""
    defines = replay.testbench_defines(0, None, *extra_defines)
    plusargs = ((f"+PROG={path}",) if path is not None else ()) + \
        ((f"+LATENCY={latency}",) if latency is not None else ()) + tuple(plusargs)
    options = {"cwd": cwd} if cwd is not None else {}
    return BY_NAME[sim].run(GA2_FILES, GA2_TOP, defines=defines, plusargs=plusargs, timeout=timeout, **options)


def run_records(sim: str, records, folder: Path, name: str = "image", **options) -> tuple[int, str]:
    """Write records (or raw words) as an image under `folder` and run it."""
    path = folder / f"{name}.hex"
    if records and isinstance(records[0], image.Record | list):
        image.write_image(records, path)
    else:
        image.write_words(records, path)
    return run_file(sim, path, **options)


def verdict(output: str) -> str:
    return one_verdict(output)


def counters(output: str) -> dict[int, list[int]]:
    return parse_counters(output)


def crc32(words) -> int:
    """CRC-32 of words, four bytes each, least significant first: written out byte by byte here
    rather than with struct, a second spelling of what replay/image.py does."""
    return zlib.crc32(bytes(b for w in words for b in int(w).to_bytes(4, "little")))


def sections(rec: list[int]) -> dict[str, slice]:
    """Where each part of one record's words lies: code, init, xruns, xvals, sruns, svals, counters, crc."""
    sizes = dict(zip(("code", "init", "xruns", "xvals", "sruns", "svals"), rec[1:REC_HEADER]))
    out, at = {}, REC_HEADER
    for name, n in (*sizes.items(), ("counters", N_COUNTERS), ("crc", 1)):
        out[name] = slice(at, at + n)
        at += n
    return out


def run_addresses(run_words: list[int]) -> list[int]:
    """The addresses a record's run words cover: pairs of a first address and a length."""
    assert len(run_words) % 2 == 0, f"{len(run_words)} run words are not pairs"
    return [first + i for first, length in zip(run_words[0::2], run_words[1::2]) for i in range(length)]


def seal(words: list[int]) -> list[int]:
    """Recompute the CRC words of an edited image (header, then each record as far as the words go),
    as a writer with a bug would produce them: the image is consistent, only its content is wrong."""
    out = list(words)
    out[3] = crc32(out[:3])
    at = IMG_HEADER
    while at + REC_HEADER <= len(out):
        end = at + REC_HEADER + sum(out[at + 1 : at + REC_HEADER]) + N_COUNTERS
        if end >= len(out):
            break
        out[end] = crc32(out[:end])
        at = end + 1
    return out
