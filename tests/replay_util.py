"""Helpers for the RTL replay tests: write an image, run a simulator, parse its verdict and counters."""

from __future__ import annotations

import zlib
from pathlib import Path

import ga2_progs
import hw

SIMULATORS = {"icarus": hw.sim_icarus, "verilator": hw.sim_verilator}
TIMEOUT = 120  # seconds: a testbench that hangs on a bad image fails its test instead of hanging the suite


def verdict(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith(("PASS", "FAIL", "MISMATCH"))]
    assert len(lines) == 1, f"expected exactly one verdict line, got {lines!r} in:\n{output[-2000:]}"
    return lines[0]


def counters(output: str) -> dict[int, list[int]]:
    return ga2_progs.parse_counters(output)


def run_file(sim: str, path, extw: int, extra_defines=(), timeout: float = TIMEOUT,
             latency: int | None = None) -> tuple[int, str]:
    """Run the testbench on an image file as it is (which may be broken on purpose); the external
    memory answers after `latency` cycles (default: the testbench's own default, 4)."""
    defines = (f"EXTW={extw}", "DUMP", *extra_defines)
    plusargs = (f"+PROG={path}",) + ((f"+LATENCY={latency}",) if latency is not None else ())
    return SIMULATORS[sim](hw.GA2_FILES, "ga2_tb", defines=defines, plusargs=plusargs, timeout=timeout)


def replay(sim: str, words_or_records, name: str, extw: int, extra_defines=(),
           latency: int | None = None) -> tuple[int, str]:
    """Write the image under out/tests/ and run it; words_or_records is a list of records or raw words."""
    path = Path(hw.ROOT) / "out" / "tests" / f"{name}.hex"
    path.parent.mkdir(parents=True, exist_ok=True)
    if words_or_records and isinstance(words_or_records[0], list):
        ga2_progs.write_image(words_or_records, path)
    else:
        ga2_progs.write_words(words_or_records, path)
    return run_file(sim, path, extw, extra_defines, latency=latency)


def crc32(words) -> int:
    """CRC-32 of words, four bytes each, least significant first: written out byte by byte here
    rather than with struct, a second spelling of what tools/ga2_progs.py does."""
    return zlib.crc32(bytes(b for w in words for b in int(w).to_bytes(4, "little")))


def seal(words: list[int]) -> list[int]:
    """Recompute the CRC words of an edited image (header, then each record as far as the words go),
    as a writer with a bug would produce them: the image is consistent, only its content is wrong."""
    out = list(words)
    out[3] = crc32(out[:3])
    at = ga2_progs.IMG_HEADER
    while at + ga2_progs.REC_HEADER <= len(out):
        end = at + ga2_progs.REC_HEADER + sum(out[at + 1 : at + ga2_progs.REC_HEADER]) + ga2_progs.N_COUNTERS
        if end >= len(out):
            break
        out[end] = crc32(out[:end])
        at = end + 1
    return out
