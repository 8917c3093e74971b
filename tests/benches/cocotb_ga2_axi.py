"""ga2, the whole chip, on its AXI4 master port with a memory nobody here wrote: cocotbext-axi's AxiRam.

The toplevel is ga2 itself (no wrapper). Its m_axi_* port drives an AxiRam of EXTW words
(capra.randprog.SPAN; 32-bit words, little-endian, byte address = 4 * word address), and ext_limit says
EXTW. Every AXI channel pauses at random: the RAM's AR, AW and W sinks hold their ready low and its R and
B sources hold back their valid, each channel from its own seeded generator (COCOTB_RANDOM_SEED replays a
run exactly). A monitor checks the rules GA2 must keep as a master, in every cycle out of reset: a valid
never X, never dropped before its ready, its payload unchanged while it waits; one-beat INCR requests of
ID 0 and full size, word-aligned and below ext_limit; WLAST high, a strobe of whole words and no X in a
lane it enables; no request presented after `halted`.

Programs: the random programs and the hand-written ones tests/benches/cocotb_ga2.py runs (the same seeds
for the same COCOTB_RANDOM_SEED), as they are: a program's results do not depend on the memory's timing
(docs/isa.md: no compute instruction may conflict with a transfer that may be in flight). For each: the
external image goes into the AxiRam, the code and a HALT into the instruction memory while rst is
high, then the chip runs to `halted` (a watchdog fails a chip that does not halt), status must be 0
and every word of the AxiRam must equal the machine model's final external memory. The counters are
not compared: the memory's timing is random (tests/benches/cocotb_ga2.py compares them exactly on a
memory that stalls on the schedule the model knows).

A second test runs programs whose LOAD (or STORE) reaches a word at or past ext_limit: the model rejects
each at that instruction, and the chip must halt with status ST_EXT_ADDR naming it, the memory as the
instructions before it leave it (the model's run of them) plus, for a STORE, its beats before the first
one past the memory (rtl/dma.v stops there and sends what it has read), and nothing after it run; the
chip halts only once the bus is quiet, so the memory is final at `halted`. Legal transfers ending on
the last word run there too.
"""

from __future__ import annotations

import logging
import random

import cocotb
import numpy as np
from capra import HazardError, ProgramError, asm, isa
from capra.isa import Instr
from capra.machine import run_program
from capra.randprog import SPAN as EXTW
from capra.randprog import handwritten_programs, random_program
from cocotb.triggers import ClockCycles, Event, FallingEdge, First, RisingEdge
from cocotb.types import LogicArray
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiBus, AxiRam

from benches.cocotb_ga2 import ext_image, random_seeds
from benches.cocotb_util import CLOCK_NS, Cycles, rng, show, start_clock, value

ST_OK, ST_EXT_ADDR = 0, 2  # rtl/ga2_defs.vh: why the chip halted
RESET_CYCLES = 3  # rst stays high this long after the code is in (rtl/ga2.v reads three instructions ahead)
AFTER_HALT = 8  # cycles in a row the bus must be quiet after `halted`
DRAIN_LIMIT = 1000  # cycles it may take to get quiet (after a fault, writes taken and not yet answered)
ERRORS_SHOWN = 8
# The chance that a channel pauses in a cycle, and the chance that a pause is a long one (up to LONG_PAUSE
# cycles in a row): about one cycle in four to one in three of each channel refused or held back.
PAUSE = {"ar": 0.3, "r": 0.25, "aw": 0.3, "w": 0.35, "b": 0.3}
LONG_PAUSE_CHANCE = 0.02
LONG_PAUSE = 24


def pauses(r: random.Random, p: float):
    """A channel's pause generator (one value a cycle, True = pause): independent pauses with chance p,
    now and then a run of up to LONG_PAUSE cycles."""
    while True:
        if r.random() < LONG_PAUSE_CHANCE:
            yield from [True] * r.randint(2, LONG_PAUSE)
        yield r.random() < p


def lanes(bits: str) -> list[str]:
    """A bus value's bits (MSB first, as str(LogicArray) gives them) cut into byte lanes, lane 0 first."""
    return [bits[len(bits) - 8 * (i + 1) : len(bits) - 8 * i] for i in range(len(bits) // 8)]


def unknown_strobed(bits: str, strb: int) -> bool:
    """Whether a byte lane that strb enables has an X or Z bit."""
    return any(strb >> i & 1 and set(lane) - {"0", "1"} for i, lane in enumerate(lanes(bits)))


def resolve_unstrobed_lanes(w_channel) -> dict[str, int]:
    """Workaround: the AxiRam turns every W beat's WDATA into an int (cocotbext-axi's axi_slave.py:
    `data = int(w.wdata)`), which cocotb 2 refuses when a bit is X or Z, so the RAM's write task dies with
    ValueError. GA2 drives the lanes a strobe leaves off with whatever its scratchpad read port holds
    there, X in simulation when that scratchpad word was never written (with ext_words=2, a one-word beat;
    AXI lets a master put anything there). So the W sink samples WDATA with those lanes as zeros; an X
    or Z bit in an enabled lane is the monitor's error (zeros here, so that the test goes on to report it).
    Returns a count of the beats so sampled."""
    sample = w_channel.bus.sample
    count = {"resolved": 0}

    def sample_resolved(obj, strict: bool = False) -> None:
        sample(obj, strict)
        data, strb = obj.wdata, obj.wstrb
        if not data.is_resolvable and strb.is_resolvable:
            keep = int(strb)
            fixed = [lane if keep >> i & 1 and not set(lane) - {"0", "1"} else "0" * 8
                     for i, lane in enumerate(lanes(str(data)))]
            obj.wdata = LogicArray("".join(reversed(fixed)))
            count["resolved"] += 1

    w_channel.bus.sample = sample_resolved
    return count


class AxiMonitor:
    """Checks what GA2 drives on AR, AW and W in the middle of every cycle out of reset (inputs and outputs
    are steady then; a handshake happens at the next rising edge when valid and ready are both high).
    It counts the requests GA2 presents after `halted` (a new payload on a channel: valid rising, or valid
    still high after a handshake) for Bench.run to judge."""

    PAYLOAD = {
        "ar": ("araddr", "arlen", "arsize", "arburst", "arid", "arlock", "arcache", "arprot"),
        "aw": ("awaddr", "awlen", "awsize", "awburst", "awid", "awlock", "awcache", "awprot"),
        "w": ("wdata", "wstrb", "wlast"),
    }
    IDLE, WAIT, FIRE = 0, 1, 2  # a channel in a cycle: valid low; valid high, ready low; handshake

    def __init__(self, dut, ew: int, limit: int) -> None:
        self.dut = dut
        self.ew = ew
        self.limit = limit  # words of the memory: no request may reach past it
        self.what = ""  # the program running, for the messages
        self.live = Event()  # set while rst is low (Bench.load clears it before raising rst)
        self.errors: list[str] = []
        self.handshakes = dict.fromkeys(self.PAYLOAD, 0)
        self.waits = dict.fromkeys(self.PAYLOAD, 0)  # cycles a valid waited for its ready
        self.after_halt = dict.fromkeys(self.PAYLOAD, 0)  # new requests presented while halted
        self.valid = {ch: getattr(dut, f"m_axi_{ch}valid") for ch in self.PAYLOAD}
        self.ready = {ch: getattr(dut, f"m_axi_{ch}ready") for ch in self.PAYLOAD}
        self.payload = {ch: [getattr(dut, f"m_axi_{name}") for name in names] for ch, names in self.PAYLOAD.items()}
        self.size = 2 if ew == 1 else 3  # log2 of the bytes of a beat
        self.strobes = {0xF} if ew == 1 else {0x0F, 0xF0, 0xFF}

    def error(self, text: str) -> None:
        ns = get_sim_time("ns")
        self.errors.append(f"{self.what}: cycle {int(ns // CLOCK_NS)} ({ns:g} ns): {text}")

    def quiet(self) -> bool:
        return all(str(h.value) == "0" for h in self.valid.values())

    def fields(self, ch: str) -> tuple[str, ...]:
        return tuple(str(h.value) for h in self.payload[ch])

    def check_request(self, ch: str) -> None:
        """A request GA2 hands over (valid and ready high): the fields rtl/dma.v promises."""
        names = self.PAYLOAD[ch]
        got = {name: value(h) for name, h in zip(names, self.payload[ch])}
        if ch == "w":
            want = {"wlast": 1}
            if got["wstrb"] not in self.strobes:
                self.error(f"wstrb = {show(got['wstrb'])}, not a strobe of whole words of a {32 * self.ew}-bit beat")
            elif isinstance(got["wdata"], str) and unknown_strobed(got["wdata"], got["wstrb"]):
                self.error(f"wdata has X or Z bits in a byte lane wstrb enables: {got['wdata']}, "
                           f"wstrb {got['wstrb']:#x}")
        else:
            want = {f"{ch}len": 0, f"{ch}size": self.size, f"{ch}burst": 1, f"{ch}id": 0, f"{ch}lock": 0}
            addr = got[f"{ch}addr"]
            if isinstance(addr, str) or addr % 4:
                self.error(f"{ch}addr = {show(addr)} is not a word's byte address")
            elif addr // 4 >= self.limit:
                self.error(f"{ch}addr = {addr:#x}: word {addr // 4} is at or past ext_limit ({self.limit})")
        for name, w in want.items():
            if got[name] != w:
                self.error(f"{name} = {got[name]}, expected {w}")

    async def run(self) -> None:
        dut = self.dut
        edge = FallingEdge(dut.clk)
        state = dict.fromkeys(self.PAYLOAD, self.IDLE)
        held: dict[str, tuple[str, ...] | None] = dict.fromkeys(self.PAYLOAD)  # the payload of a valid waiting
        while True:
            if not self.live.is_set():
                await self.live.wait()
                state = dict.fromkeys(self.PAYLOAD, self.IDLE)
            await edge
            if not self.live.is_set():
                continue
            for ch in self.PAYLOAD:
                v = self.valid[ch].value
                if not v.is_resolvable:
                    self.error(f"m_axi_{ch}valid = {v}")
                    continue
                if not int(v):
                    if state[ch] == self.WAIT:
                        self.error(f"m_axi_{ch}valid dropped before {ch}ready (payload {held[ch]})")
                    state[ch] = self.IDLE
                    continue
                if state[ch] == self.WAIT:
                    pay = self.fields(ch)
                    if pay != held[ch]:
                        changed = [f"{name} {a} -> {b}"
                                   for name, a, b in zip(self.PAYLOAD[ch], held[ch], pay) if a != b]
                        self.error(f"{ch} payload changed while {ch}valid waited for {ch}ready: " + ", ".join(changed))
                elif str(dut.halted.value) == "1":  # a new request
                    self.after_halt[ch] += 1
                if int(self.ready[ch].value):
                    self.handshakes[ch] += 1
                    self.check_request(ch)
                    state[ch] = self.FIRE
                else:
                    if state[ch] != self.WAIT:
                        held[ch] = self.fields(ch)
                    self.waits[ch] += 1
                    state[ch] = self.WAIT

    def taken(self) -> int:
        return sum(self.handshakes.values())


class Bench:
    """ga2 with an AxiRam of EXTW words; loads a program, runs it to `halted`, reads the RAM back."""

    def __init__(self, dut, cycles: Cycles, r: random.Random) -> None:
        self.dut = dut
        self.cycles = cycles
        self.ew = len(dut.m_axi_wdata) // 32
        assert self.ew == isa.EXT_WORDS, f"ga2 has a {32 * self.ew}-bit bus, the model {isa.EXT_WORDS} words"
        self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=4 * EXTW)
        # The RAM logs every burst and every reset at INFO: thousands of lines a test, and slower
        for part in (self.ram.read_if, self.ram.write_if):
            part.log.setLevel(logging.WARNING)
        self.channels = {"ar": self.ram.read_if.ar_channel, "r": self.ram.read_if.r_channel,
                         "aw": self.ram.write_if.aw_channel, "w": self.ram.write_if.w_channel,
                         "b": self.ram.write_if.b_channel}
        for name, channel in self.channels.items():
            channel.log.setLevel(logging.WARNING)
            channel.set_pause_generator(pauses(random.Random(r.getrandbits(32)), PAUSE[name]))
        self.resolved = resolve_unstrobed_lanes(self.channels["w"])
        dut.ext_limit.value = EXTW  # sampled in reset
        self.monitor = AxiMonitor(dut, self.ew, EXTW)
        cocotb.start_soon(self.monitor.run())

    async def load(self, what: str, code: list[int], image: list[int]) -> None:
        """With rst high: the code and a HALT through the imem port, one word per cycle; the external image
        into the AxiRam. Reset is released at the end."""
        dut = self.dut
        self.monitor.what = what
        self.monitor.live.clear()
        self.monitor.after_halt = dict.fromkeys(self.monitor.PAYLOAD, 0)
        program = list(code) + asm.halt()
        assert len(program) <= isa.WORDS_PER_INSTR * isa.IMEM_INSTRS and len(image) == EXTW
        dut.rst.value = 1
        for addr, word in enumerate(program):
            dut.imem_we.value = 1
            dut.imem_addr.value = addr
            dut.imem_wdata.value = word & 0xFFFFFFFF
            await self.cycles.next()
        dut.imem_we.value = 0
        self.ram.write(0, np.asarray(image, dtype="<u4").tobytes())
        await self.cycles.next(RESET_CYCLES)
        assert value(dut.halted) == 0 and value(dut.illegal) == 0, "halted/illegal high during reset"
        dut.rst.value = 0
        self.monitor.live.set()

    async def run(self, watchdog: int) -> tuple[bool, np.ndarray]:
        """Wait for `halted` at most `watchdog` cycles; then the AxiRam's words as they are at `halted`.

        No request may be presented after `halted`, and no write may land after it: a HALT waits until
        every write is answered, and after a fault the chip halts only once nothing is on its way
        (rtl/ga2.v). The test watches the bus for AFTER_HALT quiet cycles in a row to see that."""
        dut, mon = self.dut, self.monitor
        if value(dut.halted) != 1:
            await First(RisingEdge(dut.halted), ClockCycles(dut.clk, watchdog))
        await self.cycles.next()
        if value(dut.halted) != 1:
            return False, self.read_ram()
        at_halt = self.read_ram()
        status = value(dut.status)
        self.check_readies()
        quiet = 0
        for _ in range(DRAIN_LIMIT):
            quiet = quiet + 1 if mon.quiet() and self.writes_done() else 0
            if quiet == AFTER_HALT:
                break
            await self.cycles.next()
        else:
            mon.error(f"the AXI bus still busy {DRAIN_LIMIT} cycles after halted")
        if any(mon.after_halt.values()):
            mon.error(f"requests presented after halted (status {status}): {mon.after_halt}")
        landed = int(np.count_nonzero(at_halt != self.read_ram()))
        if landed:
            mon.error(f"{landed} words written after halted (status {status}): a halted chip is quiet")
        if value(dut.halted) != 1:
            mon.error("halted fell without a reset")
        return True, at_halt

    def writes_done(self) -> bool:
        """The AxiRam holds no write request and no answer (it writes its memory when it takes a W beat,
        answers on B after that)."""
        w = self.ram.write_if
        return w.aw_channel.empty() and w.w_channel.empty() and w.b_channel.idle()

    def check_readies(self) -> None:
        for h in (self.dut.m_axi_rready, self.dut.m_axi_bready):
            if str(h.value) != "1":
                self.monitor.error(f"{h._name} = {h.value} (rtl/dma.v holds it high)")

    def read_ram(self) -> np.ndarray:
        return np.frombuffer(bytes(self.ram.read(0, 4 * EXTW)), dtype="<u4").astype(np.uint32)

    def state(self) -> str:
        d = self.dut
        return (f"halted {value(d.halted)}, illegal {value(d.illegal)}, status {value(d.status)}, "
                f"status_pc {value(d.status_pc)}, c0 {value(d.c0)}")


def compare_ram(what: str, got: np.ndarray, want, image, source: str = "model says") -> str | None:
    """None when every word matches; else the first differing word (its word and byte address, both values,
    what it was loaded as) and how many differ."""
    want = np.asarray(want, dtype=np.uint32)
    bad = np.flatnonzero(got != want)
    if not len(bad):
        return None
    i = int(bad[0])
    return (f"{what}: {len(bad)} AxiRam words differ; the first, word {i} (byte address {4 * i:#x}): "
            f"AxiRam {int(got[i]):#010x}, {source} {int(want[i]):#010x} (loaded as {int(image[i]) & 0xFFFFFFFF:#010x})")


def check_monitor(bench: Bench, failures: list[str]) -> None:
    mon = bench.monitor
    if mon.errors:
        failures += mon.errors[:ERRORS_SHOWN]
        if len(mon.errors) > ERRORS_SHOWN:
            failures.append(f"... {len(mon.errors)} AXI protocol errors in all")


@cocotb.test()
async def test_ga2_axi_programs_match_the_machine_model(dut):
    dut.rst.value = 1
    for name in ("imem_we", "imem_addr", "imem_wdata"):
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    r = rng()
    # the programs cocotb_ga2.py runs (the same seeds drawn first from the same generator)
    programs = [(f"random_program({seed})", *random_program(seed, ext_latency=isa.EXT_LATENCY))
                for seed in random_seeds(r)]
    programs += [(f"handwritten '{name}'", code, ext) for name, code, ext in handwritten_programs()]
    bench = Bench(dut, cycles, r)
    failures: list[str] = []
    stored = slowed = 0
    for what, code, ext in programs:
        image = ext_image(ext)
        mach = run_program(code, image, EXTW, ext_latency=isa.EXT_LATENCY)  # the expected memory: the model only
        model_cycles = mach.counters.as_list()[0]
        watchdog = 10 * model_cycles + 2000
        await bench.load(what, code, image)
        halted, at_halt = await bench.run(watchdog)
        if not halted:
            failures.append(f"{what}: not halted after {watchdog} cycles (the model takes {model_cycles} with an "
                            f"always-ready memory); {bench.state()}, AXI requests taken so far "
                            f"{bench.monitor.handshakes}")
            continue
        if value(dut.status) != ST_OK or value(dut.illegal) != 0:
            failures.append(f"{what}: halted with {bench.state()}; expected status {ST_OK}")
        # HALT waits for every write's answer: the memory is final at `halted`
        problem = compare_ram(what, at_halt, mach.ext, image)
        if problem:
            failures.append(problem)
        changed = int(np.count_nonzero(np.asarray(image, dtype=np.uint32) != mach.ext))
        stored += changed
        c0 = value(dut.c0)
        slowed += isinstance(c0, int) and c0 > model_cycles
        dut._log.info("%s: %d instructions, %s cycles (model, always-ready memory: %d), %d words changed",
                      what, len(code) // 4, c0, model_cycles, changed)
    check_monitor(bench, failures)
    mon = bench.monitor
    dut._log.info("ga2 on AxiRam: %d programs, %d words compared each, %d changed by the programs; AXI requests "
                  "%s, cycles waiting for ready %s; %d programs slower than the model's always-ready memory; "
                  "%d W beats with X or Z in lanes their strobe leaves off", len(programs), EXTW, stored,
                  mon.handshakes, mon.waits, slowed, bench.resolved["resolved"])
    assert stored > 0, "no program changed the external memory"
    assert all(mon.waits.values()), f"some channel was never refused: {mon.waits}; the pauses tested nothing"
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


def ext_limit_programs(r: random.Random) -> list[tuple[str, list[int], int | None]]:
    """(name, code, index of the transfer reaching past ext_limit, or None for a legal program).

    Each faulting program first LOADs 16 random words (but in the first-instruction cases), and after the
    faulting transfer STOREs them over words 300..315: a chip that ran on past the fault would change
    the memory."""
    lim = EXTW
    fill = asm.load(0, r.randrange(0, 200), 1, 16)
    after = asm.wait() + asm.store(0, 300, 1, 16)
    bad = {
        "LOAD of the one word at ext_limit": asm.load(100, lim, 1, 1),
        "LOAD of a row crossing ext_limit": asm.load(100, lim - 5, 1, 16),
        "LOAD whose last word is at ext_limit (odd start)": asm.load(100, lim - 3, 1, 4),
        "LOAD whose last word is at ext_limit (even start)": asm.load(100, lim - 4, 1, 5),
        "LOAD whose last row crosses ext_limit (row stride)": asm.load(100, 0, 4, 8, ext_stride=340),
        "LOAD of a row repeated past ext_limit (stride 0)": asm.load(100, lim + 7, 3, 2, ext_stride=0),
        "LOAD at word 2^20": asm.load(100, 1 << 20, 1, 4),
        "LOAD at word 2^30 (byte address past 2^32)": asm.load(100, 1 << 30, 1, 2),
        "LOAD of a row wrapping past word 2^32": asm.load(100, (1 << 32) - 8, 1, 16),
        "STORE of the one word at ext_limit": asm.store(0, lim, 1, 1),
        "STORE of a row starting past ext_limit": asm.store(0, lim + 100, 2, 8),
    }
    out: list[tuple[str, list[int], int | None]] = []
    for name, words in bad.items():
        if words[0] >> 28 == isa.OP_LOAD:
            out.append((f"{name}, first instruction", words + fill + after, 0))
        out.append((f"{name}, while a LOAD is in flight", fill + words + after, 1))
        out.append((f"{name}, after a LOAD and WAIT", fill + asm.wait() + words + after, 2))
        out.append((f"{name}, after a STORE in flight", fill + asm.wait() + asm.store(0, 600, 1, 16) + words + after,
                    3))
    # legal transfers ending on the last word (or pair of words) of the memory
    out.append(("LOAD and STORE of the last 16 words", asm.load(0, lim - 16, 1, 16) + asm.wait()
                + asm.store(0, 300, 1, 16) + asm.store(0, lim - 21, 1, 16), None))
    out.append(("LOAD of the last 3 words (odd start)", asm.load(0, lim - 3, 1, 3) + asm.wait()
                + asm.store(0, 300, 1, 3) + asm.store(0, lim - 1, 1, 1) + asm.store(0, lim - 3, 1, 2), None))
    out.append(("rows ending on the last word", asm.load(0, lim - 1 - 2 * 341, 3, 1, ext_stride=341) + asm.wait()
                + asm.store(0, 300, 1, 3) + asm.store(0, lim - 2, 1, 2), None))
    return [(name, code + asm.halt(), index) for name, code, index in out]


@cocotb.test()
async def test_ga2_axi_transfer_past_ext_limit_halts(dut):
    dut.rst.value = 1
    for name in ("imem_we", "imem_addr", "imem_wdata"):
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    r = rng()
    cases = ext_limit_programs(r)
    bench = Bench(dut, cycles, r)
    failures: list[str] = []
    for what, code, index in cases:
        image = ext_image([r.getrandbits(32) for _ in range(EXTW)])
        if index is None:
            want = run_program(code, image, EXTW, ext_latency=isa.EXT_LATENCY).ext
            want_status, want_pc = ST_OK, None
        else:
            try:
                run_program(code, image, EXTW, ext_latency=isa.EXT_LATENCY)
            except HazardError as err:
                raise AssertionError(f"{what}: the model found a hazard, not a transfer past the memory: "
                                     f"{err}") from err
            except ProgramError as err:
                assert str(err).startswith(f"instruction {index}:"), (
                    f"{what}: the model rejects the program for another reason than instruction {index}: {err}")
            else:
                raise AssertionError(f"{what}: the machine model accepted the program (ProgramError expected)")
            # the memory as the instructions before the faulting one leave it, and a faulting STORE's
            # beats before its first beat past the memory (rtl/dma.v: the engine stops at that beat)
            before = run_program(code[: 4 * index] + asm.halt(), image, EXTW, ext_latency=isa.EXT_LATENCY)
            want = before.ext.copy()
            ins = Instr.decode(code[4 * index : 4 * index + 4])
            if ins.op == isa.OP_STORE:
                f = isa.dma_fields(ins)
                ext_words = [f.ext + r * f.ext_stride + c for r in range(f.rows) for c in range(f.cols)]
                sram_words = [f.sram + r * f.sram_stride + c for r in range(f.rows) for c in range(f.cols)]
                beat = isa.dma_beat_index(np.array(ext_words, dtype=np.int64), f.cols)
                bad = [b for e, b in zip(ext_words, beat, strict=True) if e >= EXTW]
                for e, sp, b in zip(ext_words, sram_words, beat, strict=True):
                    if bad and b >= bad[0]:
                        break
                    want[e] = before.sram[sp]
            want_status, want_pc = ST_EXT_ADDR, index
        await bench.load(what, code, image)
        halted, at_halt = await bench.run(2000)
        if not halted:
            failures.append(f"{what}: not halted after 2000 cycles; {bench.state()}")
            continue
        if (value(dut.status) != want_status or value(dut.illegal) != 0
                or (want_pc is not None and value(dut.status_pc) != want_pc)):
            failures.append(f"{what}: halted with {bench.state()}; expected status {want_status}"
                            + (f" (ST_EXT_ADDR) at instruction {want_pc}, illegal 0" if want_pc is not None else ""))
        source = ("model says" if index is None else "loaded as" if index == 0
                  else f"the model's run of instructions 0..{index - 1} says")
        # a halted chip is quiet (rtl/ga2.v): the memory is final at `halted`, and nothing lands after it
        problem = compare_ram(f"{what} (at halted)", at_halt, want, image, source)
        if not problem:
            problem = compare_ram(what, bench.read_ram(), want, image, source)
        if problem:
            failures.append(problem)
    check_monitor(bench, failures)
    dut._log.info("ga2 on AxiRam: %d programs reaching ext_limit, AXI requests %s", len(cases),
                  bench.monitor.handshakes)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)
