"""GA2's configuration: every parameter a design-space sweep may change, in one place.

``Config()`` is the default chip (``DEFAULT``): a 4 x 4 array, a scratchpad of 4,096 words, a DMA
queue of four transfers, a one-word external port, and an external memory of 8,192 words that
answers a read after 4 cycles. The *active* configuration is the one every other part reads: the
ISA's sizes and timing (``capra.isa`` derives its configured constants from it on each use), the
machine model, the compiler, the roofline and the replay testbench's defines. It is chosen

  * at import, from the environment: ``GA2_CONFIG`` (e.g. ``GA2_CONFIG="n=8,ext_words=2"``; unset
    or empty: the default) and ``GA2_EXT``, the external memory size in words, which the book's
    listings set (``GA2_EXT=8192``); both may be given, but must then agree on ``ext_memory``;
  * in code, with ``with capra.config.use(cfg): ...`` (the previous one is restored on exit) or
    ``set_active(cfg)`` for the rest of a worker process.

The RTL takes the chip's values as defines (``Config.rtl_defines()``: ``GA2_SRAM_WORDS_D``,
``GA2_DMA_QUEUE_D``, ``GA2_EXT_WORDS_D``, ``GA2_N_D``), so a simulator is built (and cached) per chip
configuration. Four fields belong to the memory, not the chip: ``ext_latency`` (the replay testbench
takes it at run time, ``+LATENCY``, so one build serves every latency), ``ext_stall`` and
``ext_seed`` (a memory whose AXI channels stall that percentage of cycles, on a seeded schedule:
``capra.dma.StallSchedule``, the testbench's ``+STALL`` and ``+SEED``; the compiler schedules for a
memory that never stalls, the machine model runs on the one described) and ``ext_memory`` (the
testbench's memory model is built with ``EXTW`` words).

``ext_words`` (1 or 2) is the width of the external port in words: with 2, the DMA moves two
consecutive words of a row per beat. ``n`` (2, 4 or 8) is the systolic array's size: the data layout
does not change with it (an int8 row is packed four to a 32-bit word whatever the array), only how
the matmul engine lays a matmul on the array, and so its cycles.

This module imports nothing else of the compiler: the ISA reads the configuration, never the
other way round.
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace

DMA_PENDING = 32  # requests the DMA keeps waiting for their answers (rtl/dma.v PENDING): latency bound
SRAM_MIN_WORDS = 2048  # the smallest scratchpad the units' address datapaths are built for (11 bits)
SRAM_MAX_WORDS = 16384  # the matmul engine counts column tiles in the address width: at most 14 bits
EXT_WORDS = (1, 2)  # external interface widths built: words per DMA beat
ARRAY_SIZES = (2, 4, 8)  # systolic array sizes built: a pass spans half a word, one word or two
DMA_QUEUE_MAX = 16  # descriptors the DMA queue may hold (each is a register of 65 + 2 * address bits)
# The largest external memory a configuration has: a LOAD or STORE addresses 32 bits, and the
# testbench's memory model (and its copy of the expected memory) holds every word, 16 MiB each here.
EXT_MEMORY_MAX = 1 << 22
STALL_MAX = 90  # percent of cycles a memory channel may stall (all of them would never answer)
SEED_MAX = 999_999_999  # the largest stall seed (the replay testbench's +SEED reads nine digits)
SEED_DEFAULT = 1  # the stall schedule's seed unless one is given
ENV = "GA2_CONFIG"
ENV_EXT = "GA2_EXT"
# The RTL's define for each field the chip is built with (rtl/ga2_cfg.vh); the memory's fields are not.
RTL_DEFINES = {"GA2_SRAM_WORDS_D": "sram_words", "GA2_DMA_QUEUE_D": "dma_queue", "GA2_EXT_WORDS_D": "ext_words",
               "GA2_N_D": "n"}


class ConfigError(ValueError):
    """A configuration GA2 cannot be built with; the message names the field and the allowed values."""


def _int(name: str, value) -> int:
    """value as a Python int: an int or a numpy integer (by __index__), never a bool or a float."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ConfigError(f"{name}={value!r}: it must be an integer")
    try:
        return operator.index(value)
    except TypeError:
        raise ConfigError(f"{name}={value!r}: it must be an integer") from None


def decimal(text: str) -> int:
    """A decimal integer written in ASCII digits with an optional minus sign, or ValueError: int()
    alone also takes " 8", "8_192", "+8" and other scripts' digits, which no setting here means."""
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{text!r} is not a decimal integer")
    return int(text, 10)


def _shown(text: str) -> str:
    """A value as an error message quotes it: a long one is cut, not echoed whole."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


@dataclass(frozen=True)
class Config:
    """One GA2 configuration (validated on construction)."""

    ext_latency: int = 4  # the external memory's latency: it answers a request 1 + ext_latency cycles after taking it
    sram_words: int = 4096  # the scratchpad, 32-bit words (16 banks: 4 address-range groups x 4 lanes)
    dma_queue: int = 4  # DMA transfers issued and not yet finished
    n: int = 4  # the systolic array is n x n int8 MACs (2, 4 or 8)
    ext_words: int = 1  # external words moved per cycle: the DMA's beat (1 or 2)
    ext_memory: int = 8192  # the external memory, 32-bit words (1 .. EXT_MEMORY_MAX)
    ext_stall: int = 0  # percent of cycles each AXI channel of the memory stalls (0: always ready)
    ext_seed: int = SEED_DEFAULT  # the stall schedule's seed

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _int(f.name, getattr(self, f.name)))  # numpy ints become ints
        if self.n not in ARRAY_SIZES:
            raise ConfigError(f"n={self.n}: the systolic array is built as 2 x 2, 4 x 4 or 8 x 8 (a pass of the "
                              "matmul engine spans half a 32-bit word of int8 outputs, one or two)")
        if self.ext_words not in EXT_WORDS:
            raise ConfigError(f"ext_words={self.ext_words}: it must be 1 or 2 (the external interface moves one "
                              "or two consecutive words of a row per cycle)")
        if not 0 <= self.ext_latency <= DMA_PENDING - 2:
            raise ConfigError(f"ext_latency={self.ext_latency}: it must be in 0..{DMA_PENDING - 2} (the DMA keeps "
                              f"at most {DMA_PENDING} requests waiting for their answers)")
        w = self.sram_words
        if w < 1 or w & (w - 1):
            raise ConfigError(f"sram_words={w}: it must be a power of two (the bank of a word is its two "
                              "high and two low address bits)")
        if not SRAM_MIN_WORDS <= w <= SRAM_MAX_WORDS:
            raise ConfigError(f"sram_words={w}: it must be in {SRAM_MIN_WORDS}..{SRAM_MAX_WORDS} (the 16 banks and "
                              "the units' address datapaths are built for 11 to 14 address bits)")
        if not 1 <= self.dma_queue <= DMA_QUEUE_MAX:
            raise ConfigError(f"dma_queue={self.dma_queue}: it must be in 1..{DMA_QUEUE_MAX}")
        if not 0 <= self.ext_stall <= STALL_MAX:
            raise ConfigError(f"ext_stall={self.ext_stall}: it must be in 0..{STALL_MAX} (percent of cycles each "
                              "channel of the memory stalls)")
        if not 0 <= self.ext_seed <= SEED_MAX:
            raise ConfigError(f"ext_seed={self.ext_seed}: it must be in 0..{SEED_MAX}")
        if self.ext_stall == 0:  # a memory that never stalls has no schedule: its seed is the default's,
            object.__setattr__(self, "ext_seed", SEED_DEFAULT)  # so two such configurations are one chip, one key
        if not 1 <= self.ext_memory <= EXT_MEMORY_MAX:
            raise ConfigError(f"ext_memory={self.ext_memory}: it must be in 1..{EXT_MEMORY_MAX} words (the "
                              "testbench's memory model holds every word)")

    @property
    def sram_aw(self) -> int:
        """Scratchpad address bits."""
        return self.sram_words.bit_length() - 1

    def changes(self) -> dict[str, int]:
        """The fields that differ from the default, in field order."""
        return {k: v for k, v in asdict(self).items() if v != getattr(DEFAULT, k)}

    def key(self) -> str:
        """All fields as ``name=value,...``: parse(key()) == self; names a cache entry."""
        return ",".join(f"{k}={v}" for k, v in asdict(self).items())

    def compile_key(self) -> str:
        """The fields that decide a compiled program: all but the stall schedule (the compiler plans
        for a memory that never stalls)."""
        return replace(self, ext_stall=DEFAULT.ext_stall, ext_seed=DEFAULT.ext_seed).key()

    def label(self) -> str:
        """The sweep's short name: ``L4 S4096 Q4`` (`` E2`` appended for a two-word interface, `` N8``
        for an array other than 4 x 4, `` X16384`` for another external memory size)."""
        wide = f" E{self.ext_words}" if self.ext_words != DEFAULT.ext_words else ""
        array = f" N{self.n}" if self.n != DEFAULT.n else ""
        memory = f" X{self.ext_memory}" if self.ext_memory != DEFAULT.ext_memory else ""
        stall = f" stall {self.ext_stall}% seed {self.ext_seed}" if self.ext_stall else ""
        return f"L{self.ext_latency} S{self.sram_words} Q{self.dma_queue}{wide}{array}{memory}{stall}"

    def rtl_defines(self) -> tuple[str, ...]:
        """The chip's defines (rtl/ga2_cfg.vh); none at the default, so today's builds stay cached."""
        return tuple(f"{name}={getattr(self, field)}" for name, field in RTL_DEFINES.items()
                     if getattr(self, field) != getattr(DEFAULT, field))

    def testbench_defines(self) -> tuple[str, ...]:
        """The replay testbench's defines for this configuration: its memory (EXTW), then the chip's."""
        return (f"EXTW={self.ext_memory}", *self.rtl_defines())

    @classmethod
    def from_defines(cls, defines: Iterable[str]) -> Config:
        """The configuration a set of ``NAME=VALUE`` RTL defines builds, the inverse of rtl_defines.
        A name that is not one of the chip's defines, a name given twice or a value the configuration
        refuses is a ConfigError, so a synthesis is never started for a chip that cannot exist."""
        if isinstance(defines, str | bytes):
            raise ConfigError(f"defines={defines!r}: give a list of NAME=VALUE defines, not one string")
        values: dict[str, int] = {}
        for text in defines:
            if not isinstance(text, str):
                raise ConfigError(f"define {text!r}: each is a NAME=VALUE string")
            name, _eq, value = text.partition("=")
            if name not in RTL_DEFINES:
                raise ConfigError(f"{text!r}: GA2's defines are {', '.join(RTL_DEFINES)}")
            field = RTL_DEFINES[name]
            if field in values:
                raise ConfigError(f"{name} given twice")
            try:
                values[field] = decimal(value)
                cls(**{field: values[field]})  # each define checked alone, so its error can name it
            except ValueError as error:
                why = error if isinstance(error, ConfigError) else "the value must be a decimal integer"
                raise ConfigError(f"{_shown(text)}: {why}") from None
        return cls(**values)

    @staticmethod
    def parse(text: str) -> Config:
        """``"ext_latency=8,sram_words=2048"`` (any subset of the fields; empty: the default)."""
        return Config(**_parse_fields(text))


def _parse_fields(text: str) -> dict[str, int]:
    """The ``name=value`` pairs of a configuration text, each a known field given once."""
    if not isinstance(text, str):
        raise ConfigError(f"a configuration is text such as 'n=8,ext_words=2', got {text!r}")
    known = {f.name for f in fields(Config)}
    values: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or name not in known:
            raise ConfigError(f"{part!r}: expected name=value with a name among {', '.join(sorted(known))}")
        if name in values:
            raise ConfigError(f"{name} given twice in {text!r}")
        try:
            values[name] = decimal(value.strip())
        except ValueError:
            raise ConfigError(f"{name}={_shown(value.strip())}: it must be a decimal integer") from None
    if values.get("ext_seed", SEED_DEFAULT) != SEED_DEFAULT and not values.get("ext_stall"):
        raise ConfigError(f"ext_seed={values['ext_seed']} without ext_stall: a memory that never stalls has no "
                          "stall schedule to seed (give ext_stall too)")
    return values


DEFAULT = Config()


def from_environment(environ: dict[str, str] | None = None) -> Config:
    """The configuration ``GA2_CONFIG`` and ``GA2_EXT`` describe (both optional). A bad value, or the
    two disagreeing on the external memory, is a ConfigError naming the variable."""
    environ = os.environ if environ is None else environ
    text = environ.get(ENV, "")
    try:
        values = _parse_fields(text)
    except ConfigError as error:
        raise ConfigError(f"{ENV}={_shown(text)}: {error}") from None
    ext = environ.get(ENV_EXT)
    if ext is not None:
        try:
            words = decimal(ext)
        except ValueError:
            raise ConfigError(f"{ENV_EXT}={_shown(ext)} is not an integer: the external memory size in words, "
                              f"1..{EXT_MEMORY_MAX}") from None
        if "ext_memory" in values and values["ext_memory"] != words:
            raise ConfigError(f"{ENV_EXT}={words} and {ENV}'s ext_memory={values['ext_memory']} disagree: give "
                              "the external memory size once")
        values["ext_memory"] = words
    try:
        return Config(**values)
    except ConfigError as error:
        if ext is not None and str(error).startswith("ext_memory="):
            raise ConfigError(f"{ENV_EXT}={_shown(ext)}: {error}") from None
        raise ConfigError(f"{ENV}={_shown(text)}: {error}") from None


def _from_env() -> Config:
    try:
        return from_environment()
    except ConfigError:
        _one_line_on_exit()
        raise


def _one_line_on_exit() -> None:
    """Make a bad ``GA2_CONFIG`` or ``GA2_EXT`` end a program with one line and exit status 2, like any
    other bad argument, rather than with a traceback through the imports that read it.

    It fails at import, before a tool's own error handling runs, so the only place to catch it is
    the interpreter's last resort, ``sys.excepthook``. The hook handles this module's error alone
    and hands anything else to the hook it replaced; it is installed only when a variable is bad,
    and not in an interactive session, where exiting would end the session."""
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return
    previous = sys.excepthook

    def hook(kind, value, traceback) -> None:
        if not isinstance(value, ConfigError):
            previous(kind, value, traceback)
            return
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        print(f"{program}: error: {value}", file=sys.stderr)
        raise SystemExit(2)

    sys.excepthook = hook


_active = _from_env()


def active() -> Config:
    """The configuration in force now: the environment's, or the one ``use`` / ``set_active`` chose."""
    return _active


def set_active(cfg: Config) -> None:
    """Make `cfg` the active configuration for the rest of the process (a sweep's worker)."""
    global _active
    if not isinstance(cfg, Config):
        raise ConfigError(f"{cfg!r} is not a capra.config.Config")
    _active = cfg


@contextmanager
def use(cfg: Config) -> Iterator[Config]:
    """``with use(cfg):`` the machine model, the compiler and the ISA's timing follow `cfg`; the previous
    configuration is restored on exit. Not for threads: the active configuration is per process."""
    before = _active
    set_active(cfg)
    try:
        yield cfg
    finally:
        set_active(before)
