"""ga2, the whole chip, with the external memory (tb/cocotb/ga2_wrap.v): whole programs against the machine model.

For each program the test loads the code through ga2's imem port and the external memory image through
the wrapper's host port while rst is high, clears the scratchpad (every program starts from a zero
scratchpad in the model), releases reset and waits for `halted`. Then every external memory word and the
five counters c0..c4 must equal what model/capra/machine.py:run_program says (the expected values come from
the model only). Programs: random valid ones from capra.randprog.random_program and the hand-written ones of
capra.randprog.handwritten_programs.

A second test runs programs with an illegal instruction (an unknown opcode, a reserved bit set in word 0
bits 19:16 or word 3 bits 31:24, WAIT keeping more than one transfer): the model must reject each with
ProgramError, and the chip must halt with `illegal` high and the external memory exactly as loaded.
"""

from __future__ import annotations

import cocotb
import numpy as np
from capra import HazardError, ProgramError, asm, isa
from capra.isa import Instr
from capra.machine import run_program
from capra.randprog import EXTW, handwritten_programs, random_program
from cocotb_util import Cycles, rng, start_clock

RANDOM_PROGRAMS = 30
COUNTERS = ("c0", "c1", "c2", "c3", "c4")
COUNTER_NAMES = ("cycles", "dma_busy", "mm_busy", "vec_busy", "dma_stall")
ILLEGAL_WATCHDOG = 400  # cycles; each illegal program halts within a LOAD and a WAIT
MISMATCHES_SHOWN = 8


def value(handle) -> int | str:
    """A signal's value as an int, or its bits as a string when some are X or Z (which then never match)."""
    v = handle.value
    return int(v) if v.is_resolvable else str(v)


def ext_image(ext) -> list[int]:
    """The program's external memory as the model starts it: the image, zero-padded to EXTW."""
    assert len(ext) <= EXTW, f"external image of {len(ext)} words exceeds EXTW={EXTW}"
    return [int(w) & 0xFFFFFFFF for w in ext] + [0] * (EXTW - len(ext))


class Bench:
    """Loads a program into ga2_wrap, runs it to `halted`, reads the external memory and counters back."""

    def __init__(self, dut, cycles: Cycles) -> None:
        self.dut = dut
        self.cycles = cycles
        for name in ("imem_we", "imem_addr", "imem_wdata", "host_we", "host_addr", "host_wdata", "sram_clear"):
            getattr(dut, name).value = 0
        dut.host_sel.value = 1
        dut.rst.value = 1

    async def load(self, code: list[int], image: list[int]) -> None:
        """With rst high: one code word (imem port) and one external word (host port) per cycle; the
        scratchpad is cleared at the last edge of the load. Reset is released at the end."""
        dut = self.dut
        assert len(code) <= 4 * isa.IMEM_INSTRS and len(image) == EXTW
        dut.rst.value = 1
        dut.host_sel.value = 1
        n = max(len(code), EXTW, 2)
        for i in range(n):
            in_code = i < len(code)
            dut.imem_we.value = int(in_code)
            dut.imem_addr.value = i if in_code else 0
            dut.imem_wdata.value = code[i] & 0xFFFFFFFF if in_code else 0
            in_ext = i < EXTW
            dut.host_we.value = int(in_ext)
            dut.host_addr.value = i if in_ext else 0
            dut.host_wdata.value = image[i] if in_ext else 0
            dut.sram_clear.value = int(i == n - 1)
            await self.cycles.next()
        dut.imem_we.value = 0
        dut.host_we.value = 0
        dut.sram_clear.value = 0
        dut.host_sel.value = 0
        assert int(dut.halted.value) == 0 and int(dut.illegal.value) == 0, "halted/illegal high during reset"
        dut.rst.value = 0

    async def run(self, first_look: int, watchdog: int) -> bool:
        """Wait `first_look` cycles, then poll `halted` every cycle until `watchdog` cycles have passed."""
        waited = max(1, first_look)
        await self.cycles.next(waited)
        while value(self.dut.halted) != 1 and waited < watchdog:
            await self.cycles.next()
            waited += 1
        return value(self.dut.halted) == 1

    def counters(self) -> list[int]:
        return [value(getattr(self.dut, c)) for c in COUNTERS]

    async def read_ext(self) -> list[int]:
        """Every external word, through the host port's asynchronous read (the chip is halted)."""
        dut = self.dut
        dut.host_sel.value = 1
        dut.host_we.value = 0
        out = []
        for addr in range(EXTW):
            if self.cycles.settles_left == 0:
                await self.cycles.next()
            dut.host_addr.value = addr
            await self.cycles.settle()
            out.append(value(dut.host_rdata))
        return out


def show(x: int | str) -> str:
    return f"{x:#010x}" if isinstance(x, int) else x


def compare_ext(what: str, got: list[int | str], want, source: str = "model says") -> list[str]:
    bad = [(i, int(w), g) for i, (g, w) in enumerate(zip(got, want)) if g != int(w)]
    lines = [f"{what}: ext[{i}] = {show(g)}, {source} {w:#010x}" for i, w, g in bad[:MISMATCHES_SHOWN]]
    if len(bad) > MISMATCHES_SHOWN:
        lines.append(f"{what}: ... {len(bad)} external words differ in all")
    return lines


@cocotb.test()
async def test_ga2_programs_against_machine_model(dut):
    assert int(dut.EXTW.value) == EXTW, f"ga2_wrap EXTW={int(dut.EXTW.value)}, capra.randprog.EXTW={EXTW}"
    cycles = await start_clock(dut)
    bench = Bench(dut, cycles)
    r = rng()
    programs = [(f"random_program({seed})", *random_program(seed))
                for seed in (r.getrandbits(31) for _ in range(RANDOM_PROGRAMS))]
    programs += [(f"handwritten '{name}'", code, ext) for name, code, ext in handwritten_programs()]
    failures: list[str] = []
    words = stored = 0
    for what, code, ext in programs:
        image = ext_image(ext)
        mach = run_program(code, image, EXTW)  # the expected values: the model, never the RTL
        want_counters = mach.counters.as_list()
        await bench.load(code, image)
        halted = await bench.run(want_counters[0], watchdog=2 * want_counters[0] + 1000)
        if not halted:
            failures.append(f"{what}: not halted after {2 * want_counters[0] + 1000} cycles "
                            f"(model: {want_counters[0]})")
            continue
        if value(dut.illegal) != 0:
            failures.append(f"{what}: halted with illegal high")
        got_counters = bench.counters()
        await cycles.next(3)
        if bench.counters() != got_counters:
            failures.append(f"{what}: counters still move after halted: {got_counters} -> {bench.counters()}")
        for c, name, g, w in zip(COUNTERS, COUNTER_NAMES, got_counters, want_counters):
            if g != w:
                failures.append(f"{what}: {c} ({name}) = {g}, model says {w}")
        got = await bench.read_ext()
        failures += compare_ext(what, got, mach.ext)
        words += len(got)
        stored += int(np.count_nonzero(np.asarray(image, dtype=np.uint32) != mach.ext))
        dut._log.info("%s: %d instructions, counters %s, %d ext words changed", what, len(code) // 4,
                      want_counters, int(np.count_nonzero(np.asarray(image, dtype=np.uint32) != mach.ext)))
    dut._log.info("ga2: %d programs, %d external words and %d counters compared (%d words written by the "
                  "programs)", len(programs), words, 5 * len(programs), stored)
    assert stored > 0, "no program changed the external memory"
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures)


def illegal_programs(r) -> list[tuple[str, list[int], list[int]]]:
    """(name, code, the legal program without the illegal instruction). The STORE after the illegal
    instruction would overwrite random data, so a chip that runs past it changes the external memory;
    an illegal STORE-shaped instruction would do the same."""
    store = asm.store(0, 300, 1, 16)

    def with_bits(words: list[int], index: int, bits: int) -> list[int]:
        words = list(words)
        words[index] |= bits
        return words

    bad = {
        "opcode 9": Instr(9, cnt=1, a=0, b=300, c=16, d=16, e=16).encode(),
        "opcode 15": Instr(15, cnt=1, a=0, b=300, c=16, d=16, e=16).encode(),
        "reserved w0 bit 16 (STORE)": with_bits(store, 0, 1 << 16),
        "reserved w0 bit 19 (STORE)": with_bits(store, 0, 1 << 19),
        "reserved w0 bits 19:16 (QCFG)": with_bits(asm.qcfg(qa=5, shift=3), 0, 0xF << 16),
        "reserved w3 bit 24 (STORE)": with_bits(store, 3, 1 << 24),
        "reserved w3 bit 31 (STORE)": with_bits(store, 3, 1 << 31),
        "reserved w3 bit 28 (VEC copy)": with_bits(asm.vec(isa.VEC_COPY, 0, 0, 8), 3, 1 << 28),
        "WAIT cnt=2": Instr(isa.OP_WAIT, cnt=2).encode(),
        "WAIT cnt=0xFFFF": Instr(isa.OP_WAIT, cnt=0xFFFF).encode(),
    }
    prefix = asm.load(0, r.randrange(0, 200), 1, 16) + asm.wait()
    out = []
    for name, words in bad.items():
        out.append((f"{name}, first instruction", words + store + asm.halt(), store + asm.halt()))
        out.append((f"{name}, after a LOAD and WAIT", prefix + words + store + asm.halt(),
                    prefix + store + asm.halt()))
    return out


@cocotb.test()
async def test_ga2_illegal_instructions(dut):
    cycles = await start_clock(dut)
    bench = Bench(dut, cycles)
    r = rng()
    failures: list[str] = []
    cases = illegal_programs(r)
    for what, code, legal in cases:
        image = ext_image([r.getrandbits(32) for _ in range(512)])
        # the model: the program without the illegal instruction is valid and changes memory; with it, rejected
        assert np.any(run_program(legal, image, EXTW).ext != np.asarray(image, dtype=np.uint32)), (
            f"{what}: the STORE after the illegal instruction would not change the external memory")
        try:
            run_program(code, image, EXTW)
        except HazardError as err:
            raise AssertionError(f"{what}: the model found a hazard, not an illegal instruction: {err}") from err
        except ProgramError:
            pass
        else:
            raise AssertionError(f"{what}: the machine model accepted the program (ProgramError expected)")
        await bench.load(code, image)
        if not await bench.run(1, ILLEGAL_WATCHDOG):
            failures.append(f"{what}: not halted after {ILLEGAL_WATCHDOG} cycles")
            continue
        if value(dut.illegal) != 1:
            failures.append(f"{what}: halted with illegal low")
        await cycles.next(3)
        got = await bench.read_ext()
        failures += compare_ext(what, got, image, "loaded as")
    dut._log.info("ga2: %d illegal programs, %d external words compared", len(cases), len(cases) * EXTW)
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures)
