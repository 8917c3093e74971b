"""ga2, the whole chip, with the external memory (tb/cocotb/ga2_wrap.v): whole programs against the machine model.

For each program the test writes the code and a HALT (four zero words, so the code never runs into what an
earlier program left in the instruction memory) through ga2's imem port while rst is high, as tb/ga2_tb.v
does, and sets the external memory image in tb/extmem_rw.v's `mem` array. The scratchpad is not cleared: a
program only reads scratchpad words it wrote (the machine model rejects any other). Then reset is released
and the test waits for `halted`. Every external memory word and the seven counters (c0..c4, h_unit,
h_sync) must equal what model/capra/machine.py:run_program says for the wrapper's read latency (the
expected values come from the model only). Programs: random valid ones from
capra.randprog.random_program and the hand-written ones of capra.randprog.handwritten_programs.

Built with STALL > 0 the memory stalls each AXI channel in that percentage of cycles, on the seeded
schedule of capra.dma.StallSchedule (SEED): the model runs on the same schedule, so the memory and all
five counters must still equal the model's exactly, and at least one program must actually have been
slowed down by the stalls (its c0 above the always-ready memory's).

A second test runs programs with an illegal instruction (an unknown opcode, a reserved bit set in word 0
bits 19:16 or, but for LOAD and STORE, word 3 bits 31:24, WAIT keeping isa.DMA_QUEUE transfers or more):
the model must reject each with ProgramError, and the chip must halt with `illegal` high and the
external memory exactly as loaded.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
from capra import HazardError, ProgramError, asm, isa
from capra.dma import StallSchedule
from capra.isa import Instr
from capra.machine import run_program
from capra.randprog import SPAN as EXTW
from capra.randprog import handwritten_programs, random_program

from benches import PROGRAMS_ENV
from benches.cocotb_util import Cycles, rng, show, start_clock, value

RANDOM_PROGRAMS = 40
COUNTERS = ("c0", "c1", "c2", "c3", "c4", "h_unit", "h_sync")
COUNTER_NAMES = ("cycles", "dma_busy", "mm_busy", "vec_busy", "dma_stall", "hold_unit", "hold_sync")
ST_ILLEGAL = 1  # rtl/ga2_defs.vh: why the chip halted
ILLEGAL_WATCHDOG = 400  # cycles; each illegal program halts within a LOAD and a WAIT
MISMATCHES_SHOWN = 8
RESET_CYCLES = 3  # rst stays high this long after the code is in (rtl/ga2.v reads three instructions ahead)


def ext_image(ext) -> list[int]:
    """The program's external memory as the model starts it: the image, zero-padded to EXTW."""
    assert len(ext) <= EXTW, f"external image of {len(ext)} words exceeds EXTW={EXTW}"
    return [int(w) & 0xFFFFFFFF for w in ext] + [0] * (EXTW - len(ext))


def random_seeds(r) -> list[int]:
    """The seeds of the random programs this case runs: all RANDOM_PROGRAMS are drawn from r (so program k,
    and whatever r draws next, are the same in every split), then CAPRA_RANDOM_PROGRAMS=<first>:<end>
    picks some of them."""
    seeds = [r.getrandbits(31) for _ in range(RANDOM_PROGRAMS)]
    first, _, end = os.environ.get(PROGRAMS_ENV, f"0:{RANDOM_PROGRAMS}").partition(":")
    return seeds[int(first):int(end)]


class Bench:
    """Loads a program into ga2_wrap, runs it to `halted`, reads the external memory and counters back."""

    def __init__(self, dut, cycles: Cycles) -> None:
        self.dut = dut
        self.cycles = cycles
        for name in ("imem_we", "imem_addr", "imem_wdata"):
            getattr(dut, name).value = 0
        dut.rst.value = 1
        self.latency = int(dut.LATENCY.value)
        stall = int(dut.STALL.value)
        self.stall = StallSchedule(stall, int(dut.SEED.value)) if stall else None
        assert int(dut.EXTW.value) == EXTW, f"ga2_wrap EXTW={int(dut.EXTW.value)}, capra.randprog.SPAN={EXTW}"

    async def load(self, code: list[int], image: list[int]) -> None:
        """With rst high: the code and a HALT through the imem port, one word per cycle; the external image
        straight into the memory array. Reset is released at the end."""
        dut = self.dut
        program = list(code) + asm.halt()
        assert len(program) <= isa.WORDS_PER_INSTR * isa.IMEM_INSTRS and len(image) == EXTW
        dut.rst.value = 1
        for addr, word in enumerate(program):
            dut.imem_we.value = 1
            dut.imem_addr.value = addr
            dut.imem_wdata.value = word & 0xFFFFFFFF
            await self.cycles.next()
        dut.imem_we.value = 0
        mem = dut.u_sys.u_ext.mem
        for addr, word in enumerate(image):
            mem[addr].value = word
        await self.cycles.next(RESET_CYCLES)
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

    def read_ext(self) -> list[int | str]:
        """Every external word, from the memory array (the chip is halted)."""
        mem = self.dut.u_sys.u_ext.mem
        return [value(mem[addr]) for addr in range(EXTW)]


def compare_ext(what: str, got: list[int | str], want, source: str = "model says") -> list[str]:
    bad = [(i, int(w), g) for i, (g, w) in enumerate(zip(got, want)) if g != int(w)]
    lines = [f"{what}: ext[{i}] = {show(g)}, {source} {w:#010x}" for i, w, g in bad[:MISMATCHES_SHOWN]]
    if len(bad) > MISMATCHES_SHOWN:
        lines.append(f"{what}: ... {len(bad)} external words differ in all")
    return lines


@cocotb.test()
async def test_ga2_programs_match_the_machine_model(dut):
    cycles = await start_clock(dut)
    bench = Bench(dut, cycles)
    r = rng()
    programs = [(f"random_program({seed})", *random_program(seed, ext_latency=bench.latency))
                for seed in random_seeds(r)]
    programs += [(f"handwritten '{name}'", code, ext) for name, code, ext in handwritten_programs()]
    failures: list[str] = []
    words = stored = slowed = 0
    for what, code, ext in programs:
        image = ext_image(ext)
        # the expected values: the model only, on the same memory
        mach = run_program(code, image, EXTW, ext_latency=bench.latency, stall=bench.stall)
        want_counters = mach.counters.with_holds()
        if bench.stall is not None:
            slowed += want_counters[0] > run_program(code, image, EXTW, ext_latency=bench.latency).counters.cycles
        await bench.load(code, image)
        halted = await bench.run(want_counters[0], watchdog=2 * want_counters[0] + 1000)
        if not halted:
            failures.append(f"{what}: not halted after {2 * want_counters[0] + 1000} cycles "
                            f"(model: {want_counters[0]})")
            continue
        if value(dut.illegal) != 0 or value(dut.status) != 0:
            failures.append(f"{what}: halted with illegal {value(dut.illegal)}, status {value(dut.status)} "
                            f"(pc {value(dut.status_pc)})")
        got_counters = bench.counters()
        await cycles.next(3)
        if bench.counters() != got_counters:
            failures.append(f"{what}: counters still move after halted: {got_counters} -> {bench.counters()}")
        for c, name, g, w in zip(COUNTERS, COUNTER_NAMES, got_counters, want_counters):
            if g != w:
                failures.append(f"{what}: {c} ({name}) = {g}, model says {w}")
        got = bench.read_ext()
        failures += compare_ext(what, got, mach.ext)
        words += len(got)
        stored += int(np.count_nonzero(np.asarray(image, dtype=np.uint32) != mach.ext))
        dut._log.info("%s: %d instructions, counters %s, %d ext words changed", what, len(code) // 4,
                      want_counters, int(np.count_nonzero(np.asarray(image, dtype=np.uint32) != mach.ext)))
    dut._log.info("ga2: %d programs, %d external words and %d counters compared (%d words written by the "
                  "programs)", len(programs), words, 5 * len(programs), stored)
    assert stored > 0, "no program changed the external memory"
    assert slowed > 0 or bench.stall is None, "the memory's stalls delayed no program: nothing was tested"
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures)


def illegal_programs(r) -> list[tuple[str, list[int], list[int], int]]:
    """(name, code, the legal program: the same without the illegal instruction, the illegal instruction's index).

    Every program LOADs scratchpad words 0..15 (a STORE may only read words the program wrote) and STOREs
    them over random external words: a chip that runs past the illegal instruction changes the external
    memory, and so would an illegal STORE-shaped instruction that ran."""
    load = asm.load(0, r.randrange(0, 200), 1, 16)
    store = asm.store(0, 300, 1, 16)

    def with_bits(words: list[int], index: int, bits: int) -> list[int]:
        words = list(words)
        words[index] |= bits
        return words

    bad = {
        "opcode 8": Instr(8, cnt=1, a=0, b=300, c=16, d=16, e=16).encode(),
        "opcode 9": Instr(9, cnt=1, a=0, b=300, c=16, d=16, e=16).encode(),
        "opcode 15": Instr(15, cnt=1, a=0, b=300, c=16, d=16, e=16).encode(),
        "reserved w0 bit 17 (STORE)": with_bits(store, 0, 1 << 17),
        "reserved w0 bit 19 (STORE)": with_bits(store, 0, 1 << 19),
        "OVERLAP (w0 bit 16) on WAIT": with_bits(asm.wait(), 0, isa.OVERLAP_BIT),
        "OVERLAP (w0 bit 16) on QCFG": with_bits(asm.qcfg(qa=5, shift=3), 0, isa.OVERLAP_BIT),
        "reserved w0 bits 19:16 (QCFG)": with_bits(asm.qcfg(qa=5, shift=3), 0, 0xF << 16),
        "reserved w3 bit 24 (QCFG)": with_bits(asm.qcfg(qa=5, shift=3), 3, 1 << 24),
        "reserved w3 bit 31 (SMAX)": with_bits(asm.smax(0, 20, 8), 3, 1 << 31),
        "reserved w3 bit 28 (VEC copy)": with_bits(asm.vec(isa.VEC_COPY, 0, 20, 8), 3, 1 << 28),
        f"WAIT keep={isa.DMA_QUEUE}": asm.wait(isa.DMA_QUEUE),
        "WAIT keep=0xFFFF": Instr(isa.OP_WAIT, cnt=0xFFFF).encode(),
    }
    out = []
    for name, words in bad.items():
        out.append((f"{name}, first instruction", words + load + asm.wait() + store, load + asm.wait() + store, 0))
        out.append((f"{name}, after a LOAD and WAIT", load + asm.wait() + words + store, load + asm.wait() + store, 2))
        out.append((f"{name}, while a LOAD is in flight", load + words + asm.wait() + store, load + asm.wait() + store,
                    1))
    return [(name, code + asm.halt(), legal + asm.halt(), index) for name, code, legal, index in out]


@cocotb.test()
async def test_ga2_illegal_instructions_halt_with_memory_unchanged(dut):
    cycles = await start_clock(dut)
    bench = Bench(dut, cycles)
    r = rng()
    failures: list[str] = []
    cases = illegal_programs(r)
    for what, code, legal, index in cases:
        image = ext_image([r.getrandbits(32) for _ in range(512)])
        # the model: the program without the illegal instruction is valid and changes memory; with it, rejected
        assert np.any(run_program(legal, image, EXTW, ext_latency=bench.latency).ext
                      != np.asarray(image, dtype=np.uint32)), (
            f"{what}: the STORE after the illegal instruction would not change the external memory")
        try:
            run_program(code, image, EXTW, ext_latency=bench.latency)
        except HazardError as err:
            raise AssertionError(f"{what}: the model found a hazard, not an illegal instruction: {err}") from err
        except ProgramError as err:
            assert str(err).startswith(f"instruction {index}:"), (
                f"{what}: the model rejects the program for another reason than instruction {index}: {err}")
        else:
            raise AssertionError(f"{what}: the machine model accepted the program (ProgramError expected)")
        await bench.load(code, image)
        if not await bench.run(1, ILLEGAL_WATCHDOG):
            failures.append(f"{what}: not halted after {ILLEGAL_WATCHDOG} cycles")
            continue
        if value(dut.illegal) != 1 or value(dut.status) != ST_ILLEGAL or value(dut.status_pc) != index:
            failures.append(f"{what}: halted with illegal {value(dut.illegal)}, status {value(dut.status)} at "
                            f"instruction {value(dut.status_pc)}; expected illegal 1, status {ST_ILLEGAL} "
                            f"(ILLEGAL) at instruction {index}")
        await cycles.next(3)
        failures += compare_ext(what, bench.read_ext(), image, "loaded as")
    dut._log.info("ga2: %d illegal programs, %d external words compared", len(cases), len(cases) * EXTW)
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures)
