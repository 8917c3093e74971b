"""The GA2 machine model: for any valid program, the exact final memory and its cycle counters.

The model is instruction-level, not cycle-by-cycle: each instruction's effect is computed with
numpy integers and its cost with the formulas of ``isa``. Three rules make that exact:

* Timing is deterministic by construction. The sequencer decodes one instruction per cycle and
  issues it as soon as the unit it goes to takes it. The two compute engines (``isa.ENGINES``: the
  matmul engine with the vector unit, which share the requant bank, and the softmax unit) each run
  one instruction at a time for the cycles its formula gives, side by side (but the matmul engine
  takes an MM with CHAIN once the MM before it has made its last read, ``isa.mm_chain_pad``): a
  LOAD, STORE or compute instruction waits until the other engine is idle unless it has OVERLAP.
  DMA transfers run in the background
  (``dma.DmaTimeline``: closed formulas for a memory that is always ready, the engine beat by beat
  on a memory that stalls on a ``dma.StallSchedule``, the configuration's ``ext_stall``): LOAD /
  STORE wait only while DMA_QUEUE transfers are in flight, WAIT keep and HALT until few enough
  are, and HALT until both engines are idle.
* Data results do not depend on timing, the model's or any memory's, because no two things that
  may run at once may touch the same scratchpad words or bank ports. A compute instruction may not
  conflict with a transfer that may still be in flight (``dma.conflict``); an instruction with
  OVERLAP may not conflict with the last instruction of the other engine if that one may still be
  running (``isa.engine_conflict``); an MM with CHAIN may not read what the MM before it writes
  (``isa.chain_conflict``). Each is a ``HazardError``. "May be in flight" and "may be
  running" are decided without a clock: only a WAIT keep, DMA_QUEUE later transfers, an
  instruction without OVERLAP or a later instruction of the same engine make an end certain.
* Nothing depends on what a scratchpad held before the program: every word read (by a compute
  instruction or a STORE) must have been written by the program first (``ProgramError``). The
  chip never clears its scratchpad, and needs not.

The counters: c0..c4, total cycles, DMA busy cycles, MM busy cycles, vector busy cycles (VEC and
SMAX, added: both units may run in one cycle), and cycles the sequencer stalled waiting for the DMA;
then two hold counts, cycles an instruction waited for its own engine (h_unit) and for the other
engine (h_sync: an instruction without OVERLAP, and HALT).
"""


from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import config as _config
from . import isa
from .dma import DmaTimeline, StallSchedule, Transfer, conflict
from .isa import (
    EXP_TABLE,
    INT8_MAX,
    INT8_MIN,
    Effects,
    Instr,
    ProgramError,
    exp_table,
    requantize,
    softmax_int8,
    table_index,
    wrap32,
)

# The chip's arithmetic is defined with its instructions, in capra.isa; these names stay importable here.
__all__ = ["EXP_TABLE", "INT8_MAX", "INT8_MIN", "Counters", "Event", "HazardError", "Machine", "ProgramError",
           "disassemble", "exp_table", "requantize", "run_program", "softmax_int8", "table_index", "wrap32"]


class HazardError(ProgramError):
    """Two things that may run at once touch the same scratchpad words or bank ports: a compute
    instruction and a transfer that may still be in flight, or two instructions of the two
    engines that may run side by side (OVERLAP)."""


@dataclass
class Counters:
    """The cycle counters c0..c4 and the two hold counts, as the chip counts them (docs/isa.md)."""

    cycles: int = 0  # c0: from reset to the cycle HALT completes
    dma_busy: int = 0  # c1: cycles some DMA transfer is between its setup and its end
    mm_busy: int = 0  # c2: cycles the matmul engine executes
    vec_busy: int = 0  # c3: cycles the vector unit or the softmax unit executes
    dma_stall: int = 0  # c4: cycles the sequencer waits for the DMA (a full queue, WAIT, HALT)
    hold_unit: int = 0  # h_unit: cycles an instruction waits for its own engine to finish the last one
    hold_sync: int = 0  # h_sync: cycles an instruction waits for the other engine (SYNC, HALT)

    def as_list(self) -> list[int]:
        """The five counters c0..c4 (the testbench's COUNTERS line)."""
        return [self.cycles, self.dma_busy, self.mm_busy, self.vec_busy, self.dma_stall]

    def with_holds(self) -> list[int]:
        """The five counters, then h_unit and h_sync (the HOLDS line): all a replay compares."""
        return [*self.as_list(), self.hold_unit, self.hold_sync]


class Event(NamedTuple):
    """One moment of the timeline (``Machine(events=[])``), in the cycles counter c0 counts:

    go     the sequencer takes the instruction at `pc` (after any stall on the DMA queue)
    done   the last execute cycle of the compute instruction at `pc` (its engine takes the next after it)
    setup  the transfer issued by `pc` takes its descriptor (its setup cycle)
    end    the last cycle the transfer counts as in flight

    The replay testbench run with +TIMELINE prints the same events from the RTL's own signals
    (``replay.timeline``), and tests/test_timeline.py checks the two lists are equal."""

    cycle: int
    kind: str
    pc: int
    unit: str  # isa.UNITS: which unit the instruction runs on


@dataclass
class Machine:
    """GA2 state: scratchpad, external memory, quantization registers, clock, DMA engine, counters."""

    ext: np.ndarray
    ext_latency: int | None = None  # None: the active configuration's (capra/config.py)
    sram: np.ndarray = field(default_factory=lambda: np.zeros(isa.SRAM_WORDS, dtype=np.uint32))
    written: np.ndarray = field(default_factory=lambda: np.zeros(isa.SRAM_WORDS, dtype=bool))
    qa: int = 0
    qb: int = 0
    qs: int = 0
    qbias: int = 0
    t: int = 0  # the cycle in which the next instruction is decoded
    counters: Counters = field(default_factory=Counters)
    trace: list[tuple[int, int, str]] | None = None
    events: list[Event] | None = None  # the timeline (``Event``), when asked for
    last_writes: set[int] = field(default_factory=set)  # the scratchpad words the last compute instruction wrote
    dma: DmaTimeline = field(init=False)
    issued: list[Transfer] = field(default_factory=list)  # every transfer, in issue order
    known_done: int = 0  # transfers 0 .. known_done - 1 have ended on any memory (WAITs, a full queue)
    stall: StallSchedule | None = None  # a memory that is not always ready (None: the configuration's)
    # per engine: the first cycle it takes an instruction, and (pc, effects) of its last one if
    # that may still be running on some memory (None once an instruction waited for it to end)
    free: dict[str, int] = field(default_factory=lambda: dict.fromkeys(isa.ENGINES, 0))
    running: dict[str, tuple[int, Effects] | None] = field(default_factory=lambda: dict.fromkeys(isa.ENGINES))
    # the matmul engine's last MM while it is the engine's last instruction: (pc, effects, the cycle
    # of its last read, the cycle of its last write), what a CHAIN MM after it waits for; and the
    # cycle of the last write of the MM before it (the engine holds at most two MMs)
    mm_last: tuple[int, Effects, int, int] | None = None
    mm_before_done: int = -1
    # an MM that may still be running beside the engine's last instruction (a CHAIN MM's
    # predecessor), checked like it against an OVERLAP instruction of the other engine
    draining: tuple[int, Effects] | None = None

    def __post_init__(self) -> None:
        if self.ext_latency is None:
            self.ext_latency = isa.EXT_LATENCY
        if self.stall is None:
            cfg = _config.active()
            if cfg.ext_stall:
                self.stall = StallSchedule(cfg.ext_stall, cfg.ext_seed)
        self.dma = DmaTimeline(self.ext_latency, stall=self.stall)

    def copy(self) -> Machine:
        """An independent copy of the whole state, for a search that tries an instruction and may go
        back (tools that corrupt a word and run on, the random-program generator). Much cheaper than
        copy.deepcopy: the arrays and lists are copied once, the transfers and events they hold are
        never changed once made and are shared."""
        twin = dataclasses.replace(self, ext=self.ext.copy(), sram=self.sram.copy(), written=self.written.copy(),
                                   counters=dataclasses.replace(self.counters),
                                   trace=None if self.trace is None else list(self.trace),
                                   events=None if self.events is None else list(self.events),
                                   last_writes=set(self.last_writes), issued=list(self.issued),
                                   free=dict(self.free), running=dict(self.running))
        twin.dma = self.dma.copy()
        return twin

    @classmethod
    def with_ext(cls, ext: list[int] | np.ndarray, extw: int | None = None, trace: bool = False,
                 ext_latency: int | None = None, events: bool = False,
                 stall: StallSchedule | None = None) -> Machine:
        words = np.zeros(extw if extw is not None else len(ext), dtype=np.uint32)
        image = np.asarray(ext, dtype=np.int64) & 0xFFFFFFFF
        if len(image) > len(words):
            raise ProgramError(f"external image of {len(image)} words exceeds EXTW={len(words)}")
        words[: len(image)] = image
        return cls(ext=words, trace=[] if trace else None, ext_latency=ext_latency, events=[] if events else None,
                   stall=stall)

    def _event(self, kind: str, pc: int, unit: str, cycle: int | None = None) -> None:
        if self.events is not None:
            self.events.append(Event(self.t if cycle is None else cycle, kind, pc, unit))

    # ---- scratchpad helpers -------------------------------------------------------------------
    def _check_written(self, pc: int, what: str, words) -> None:
        """Every word read must have been written by the program: the scratchpad is never cleared."""
        idx = np.fromiter(words, dtype=np.int64) if not isinstance(words, np.ndarray) else words
        unwritten = idx[~self.written[idx]]
        if len(unwritten):
            raise ProgramError(f"instruction {pc}: {what} reads scratchpad word {int(unwritten.min())} before "
                               f"the program wrote it (the scratchpad is not cleared between programs)")

    def _int8_rows(self, addr: int, rows: int, n: int) -> np.ndarray:
        """rows packed int8 rows of n elements starting at word addr, as an int64 matrix."""
        return isa.unpack_int8_rows(self.sram[addr : addr + rows * isa.words_for(n)], rows, n)

    def _store_int8_rows(self, addr: int, values: np.ndarray) -> None:
        packed = isa.pack_int8_rows(values)
        self.sram[addr : addr + len(packed)] = packed

    # ---- the DMA engine ------------------------------------------------------------------------
    def _stall_until(self, cycle: int) -> None:
        if cycle > self.t:
            self.counters.dma_stall += cycle - self.t
            self.t = cycle

    def _dma_transfer(self, pc: int, ins: Instr, eff: Effects, load: bool) -> None:
        gather = eff.page_starts is not None
        if not load:
            self._check_written(pc, "STORE", eff.reads)
        if gather:  # its descriptors: written by the program, and not by a LOAD that may still be writing them
            self._check_written(pc, "GATHER (its block table)", eff.reads)
            for i in range(self.known_done, len(self.issued)):
                x = self.issued[i]
                clash = eff.read_set & x.words if x.is_load else frozenset()
                if clash:
                    raise HazardError(
                        f"instruction {pc} GATHER reads descriptor word {min(clash)} that the {x.kind} of instruction "
                        f"{x.pc} writes, and that transfer may still be in flight: a WAIT keep="
                        f"{len(self.issued) - i - 1} before it")
        self._check_engines(pc, ins, eff, None)
        self._stall_until(self.dma.room_at(self.t))  # a full queue only empties while nothing issues
        self._await_others(ins, None)
        self._event("go", pc, "dma")
        if load:
            self.sram[eff.writes] = self.ext[eff.ext_reads]
            self.written[eff.writes] = True
            x = self.dma.issue(self.t, True, eff.writes, eff.cols, pc, eff.ext_reads, eff.page_starts,
                               eff.reads if gather else None)
        else:
            self.ext[eff.ext_writes] = self.sram[eff.reads]
            x = self.dma.issue(self.t, False, eff.reads, eff.cols, pc, eff.ext_writes)
        if self.events is not None:
            self.events += [Event(x.setup, "setup", pc, "dma"), Event(x.end - 1, "end", pc, "dma")]
        # issued only with fewer than DMA_QUEUE in flight: those DMA_QUEUE or more places back have ended
        self.issued.append(x)
        self.known_done = max(self.known_done, len(self.issued) - isa.DMA_QUEUE)
        self.counters.dma_busy = self.dma.busy_cycles
        self.t += 1

    # ---- the engines ----------------------------------------------------------------------------
    def _check_engines(self, pc: int, ins: Instr, eff: Effects, engine: str | None) -> None:
        """Raise if this instruction, with OVERLAP, conflicts with the last instruction of another
        engine that may still be running (``isa.engine_conflict``); on any memory, not by the model's
        clock: it may be running unless an instruction without OVERLAP or a later instruction of its
        engine came between."""
        if not ins.overlap:
            return
        for other, last in self.running.items():
            if other == engine or last is None:
                continue
            mays = [last] + ([self.draining] if other == "mmvec" and self.draining is not None else [])
            for may in mays:
                why = isa.engine_conflict(eff, may[1])
                if why:
                    why = why.replace("which it", f"which instruction {may[0]} ({other})", 1)
                    raise HazardError(f"instruction {pc} {why}, and that may still be running: no OVERLAP on "
                                      f"instruction {pc}")

    def _await_others(self, ins: Instr, engine: str | None) -> None:
        """Without OVERLAP, hold the sequencer until every other engine is idle (h_sync): after
        that none of their instructions can still be running."""
        if ins.overlap:
            return
        others = [e for e in isa.ENGINES if e != engine]
        idle = max(self.free[e] for e in others)
        if idle > self.t:
            self.counters.hold_sync += idle - self.t
            self.t = idle
        for e in others:
            self.running[e] = None
            if e == "mmvec":
                self.draining = None

    # ---- compute instructions --------------------------------------------------------------------
    def _check_conflicts(self, pc: int, eff: Effects) -> None:
        """Raise if this compute instruction conflicts with a transfer that may still be in flight
        on some memory (``dma.conflict``): whether it has ended by the model's clock does not count."""
        for i in range(self.known_done, len(self.issued)):
            why = conflict(self.issued[i], eff.read_set, eff.write_set)
            if why:
                keep = len(self.issued) - i - 1
                raise HazardError(f"instruction {pc} {why}, and that transfer may still be in flight (on some "
                                  f"memory, if not this one): a WAIT keep={keep} before it, or the data elsewhere")

    def _run_compute(self, pc: int, ins: Instr, eff: Effects, effect) -> int:
        """Run a compute instruction decoded in cycle self.t: once its engine takes it (and, without
        OVERLAP, the other engine is idle) it starts, and executes in the next cycles while the
        sequencer goes on. Returns the cycles it adds to its engine's busy count.

        The engine takes an instruction once it has finished its last one, except a CHAIN MM after
        an MM: that one is taken once the MM before it has made its last read (and the MM before
        that one has finished: the engine holds two MMs at most), and waits after its A load, if
        need be, until ``isa.mm_chain_pad`` says its first B read may come."""
        name = isa.OP_NAMES[ins.op].upper()
        engine = isa.ENGINE_OF[eff.unit]
        self._check_written(pc, name, eff.reads)
        self._check_conflicts(pc, eff)
        self._check_engines(pc, ins, eff, engine)
        before = self.mm_last if engine == "mmvec" else None  # the engine's last instruction, an MM
        chained = bool(ins.chain) and before is not None
        if chained:
            why = isa.chain_conflict(eff, before[1])
            if why:
                why = why.replace("which it", f"which instruction {before[0]} (the MM before it)", 1)
                raise HazardError(f"instruction {pc} {why}, and that may still be draining: no CHAIN on "
                                  f"instruction {pc}")
            takes = max(before[2] + 1, self.mm_before_done + 1)
        else:
            takes = self.free[engine]
        if takes > self.t:  # the engine cannot take it yet
            self.counters.hold_unit += takes - self.t
            self.t = takes
        self._await_others(ins, engine)
        cycles = eff.cycles
        if eff.mm is not None and before is not None:
            cycles += isa.mm_chain_pad(eff.mm, self.t, before[2], before[1].mm)
        self._event("go", pc, eff.unit)
        self._event("done", pc, eff.unit, self.t + cycles)
        effect()
        self.written[eff.writes] = True
        self.last_writes = eff.write_set
        busy = cycles
        if engine == "mmvec":
            # whether the MM before it may still drain (what an OVERLAP instruction is checked
            # against) is the program's, not the clock's: on another memory it may, whenever this
            # one chains on it; the clock says only how long the two share the engine
            self.draining = self.running[engine] if chained else None
            if chained and self.free[engine] > self.t + 1:  # the MM before it still drains
                busy = self.t + cycles + 1 - self.free[engine]
                self.mm_before_done = self.free[engine] - 1
            else:
                self.mm_before_done = -1
            self.mm_last = (pc, eff, self.t + cycles - eff.cycles + eff.mm.front, self.t + cycles) \
                if eff.mm is not None else None
        self.free[engine] = self.t + cycles + 1
        self.running[engine] = (pc, eff)
        self.t += 1
        return busy

    def _mm(self, pc: int, ins: Instr, eff: Effects) -> None:
        r, a, b, k, flags = ins.cnt, ins.a, ins.b, ins.d, ins.flags
        m, first, _stride = isa.mm_fields(ins)
        start, end = isa.mm_window(m, first, ins.sub)
        cols = np.arange(4 * start, min(4 * end, m))

        def effect() -> None:
            am = self._int8_rows(a, r, k)
            if flags & isa.MM_BROWS:
                bm = self._int8_rows(b, k, m)
            else:
                bm = self._int8_rows(b, m, k).T
            acc = isa.wrap32(am @ bm[:, cols])
            if flags & isa.MM_BIAS:
                bias = self.sram[self.qbias : self.qbias + m].view(np.int32).astype(np.int64)
                acc = isa.wrap32(acc + bias[None, cols])
            if flags & isa.MM_RELU:
                acc = np.maximum(acc, 0)
            if flags & isa.MM_OUT8:
                # the window's columns, packed from the window's first lane: its words, row by row
                self.sram[eff.writes] = isa.pack_int8_rows(isa.requantize(acc, self.qa, self.qs))
            else:
                self.sram[eff.writes] = acc.reshape(-1).astype(np.int64).astype(np.uint32)

        self.counters.mm_busy += self._run_compute(pc, ins, eff, effect)

    def _vec(self, pc: int, ins: Instr, eff: Effects) -> None:
        n, sa, sb, dst, rows = ins.cnt, ins.a, ins.b, ins.c, isa.vec_rows(ins)
        op = isa.VEC_OPS[ins.sub]

        def effect() -> None:
            x = self._int8_rows(sa, rows, n)
            y = self._int8_rows(sb, rows, n) if op.reads_b else [None] * rows
            z = [op.compute(x[r], y[r], self) for r in range(rows)]
            if op.writes_index:
                self.sram[dst : dst + rows] = np.asarray(z, dtype=np.uint32)
            else:
                self._store_int8_rows(dst, np.asarray(z))

        self.counters.vec_busy += self._run_compute(pc, ins, eff, effect)

    def _smax(self, pc: int, ins: Instr, eff: Effects) -> None:
        n, src, dst = ins.cnt, ins.a, ins.c
        sink = ((ins.e & 0xFF) ^ 0x80) - 0x80 if ins.flags & isa.SM_SINK else None
        smul = (ins.e >> 8) & 0xFFFF

        st, mode = ins.b, ins.sub

        def effect() -> None:
            if mode == isa.SM_STEP:
                p, m, l_new, alpha = isa.softmax_step(self._int8_rows(src, 1, n)[0], int(self.sram[st]),
                                                      int(self.sram[st + 1]), smul)
                self._store_int8_rows(dst, p[None, :])
                self.sram[st : st + isa.SM_STATE_WORDS] = np.array([m, l_new, alpha], dtype=np.uint32)
            elif mode == isa.SM_ACC:
                o = self.sram[dst : dst + n].view(np.int32).astype(np.int64)
                t = self.sram[src : src + n].view(np.int32).astype(np.int64)
                acc = isa.softmax_acc(o, t, int(self.sram[st + 2]))
                self.sram[dst : dst + n] = acc.astype(np.int64).astype(np.uint32)
            elif mode == isa.SM_NORM:
                o = self.sram[src : src + n].view(np.int32).astype(np.int64)
                self._store_int8_rows(dst, isa.softmax_norm(o, int(self.sram[st + 1]), ins.e & 0xF)[None, :])
            else:
                p = isa.softmax_int8(self._int8_rows(src, 1, n)[0], sink, smul)
                self._store_int8_rows(dst, p[None, :])

        self.counters.vec_busy += self._run_compute(pc, ins, eff, effect)

    # ---- the sequencer -----------------------------------------------------------------------------
    def step(self, pc: int, ins: Instr) -> bool:
        """Execute one instruction; return False when it was HALT."""
        if self.trace is not None:
            self.trace.append((self.t, pc, disassemble(ins)))
        eff = isa.kept_effects(ins, qbias=self.qbias, extw=len(self.ext), pc=pc, sram=self.sram)
        op = ins.op
        if op == isa.OP_HALT:
            self._stall_until(self.dma.drained_at(self.t))
            idle = max(self.free.values())  # and the engines finish (then nothing runs)
            if idle > self.t:
                self.counters.hold_sync += idle - self.t
                self.t = idle
            self._event("go", pc, "seq")
            self.t += 1
            return False
        if op in (isa.OP_LOAD, isa.OP_STORE):
            self._dma_transfer(pc, ins, eff, op == isa.OP_LOAD)
        elif op == isa.OP_WAIT:
            self._stall_until(self.dma.drained_at(self.t, ins.cnt))
            self.known_done = max(self.known_done, len(self.issued) - ins.cnt)
            self._event("go", pc, "seq")
            self.t += 1
        elif op == isa.OP_QCFG:
            self.qa, self.qb, self.qs, self.qbias = ins.a, ins.b, ins.c, ins.d
            self._event("go", pc, "seq")
            self.t += 1
        elif op == isa.OP_MM:
            self._mm(pc, ins, eff)
        elif op == isa.OP_VEC:
            self._vec(pc, ins, eff)
        else:
            self._smax(pc, ins, eff)
        return True

    def run(self, code: list[int], max_instrs: int = isa.IMEM_INSTRS) -> Counters:
        """Run a program from reset to HALT; fills and returns the counters."""
        if len(code) % isa.WORDS_PER_INSTR:
            raise ProgramError(f"code of {len(code)} words is not a whole number of instructions")
        n_instr = len(code) // isa.WORDS_PER_INSTR
        if n_instr > max_instrs:
            raise ProgramError(f"program of {n_instr} instructions exceeds IMEM ({max_instrs})")
        pc = 0
        while True:
            if pc == max_instrs:
                raise ProgramError(f"the program runs past the last instruction of IMEM ({max_instrs}) without a HALT")
            words = tuple(code[pc * 4 : pc * 4 + 4]) if pc < n_instr else (0, 0, 0, 0)
            if not self.step(pc, isa.decoded(words)):
                break
            pc += 1
        self.counters.cycles = self.t
        self.counters.dma_busy = self.dma.busy_cycles
        return self.counters


def disassemble(ins: Instr) -> str:
    """One readable line per instruction, as printed beside the encoding by ``asm.listing``
    (" chain" and " overlap" end the line of an instruction with CHAIN or OVERLAP)."""
    return _operands(ins) + (" chain" if ins.chain else "") + (" overlap" if ins.overlap else "")


def _operands(ins: Instr) -> str:
    name = isa.OP_NAMES.get(ins.op, f"op{ins.op}")
    if ins.op == isa.OP_LOAD and ins.flags == isa.LD_GATHER:
        f = isa.gather_fields(ins)
        return (f"load.gather sram={f.sram} table={f.table} rows={f.rows} cols={f.cols} first={f.first} "
                f"page_shift={f.page_shift} ext_stride={f.ext_stride} offset={f.offset}")
    if ins.op in (isa.OP_LOAD, isa.OP_STORE):
        f = isa.dma_fields(ins)
        return (f"{name} sram={f.sram} ext={f.ext} rows={f.rows} cols={f.cols} "
                f"ext_stride={f.ext_stride} sram_stride={f.sram_stride}")
    if ins.op == isa.OP_QCFG:
        return f"qcfg qa={ins.a} qb={ins.b} shift={ins.c} bias={ins.d}"
    if ins.op == isa.OP_MM:
        fl = [f for bit, f in ((isa.MM_OUT8, "out8"), (isa.MM_RELU, "relu"), (isa.MM_BIAS, "bias"),
                               (isa.MM_BROWS, "brows")) if ins.flags & bit]
        f = isa.mm_fields(ins)
        window = f" tiles={f.first}+{ins.sub or 'all'}" if ins.sub or f.first else ""
        stride = f" stride={f.stride}" if f.stride else ""
        return f"mm A={ins.a} B={ins.b} out={ins.c} R={ins.cnt} K={ins.d} M={f.m}{window}{stride} {'|'.join(fl)}"
    if ins.op == isa.OP_VEC:
        rows = f" rows={ins.d}" if ins.d > 1 else ""
        return f"vec.{isa.VEC_NAMES.get(ins.sub, ins.sub)} a={ins.a} b={ins.b} dst={ins.c} n={ins.cnt}{rows}"
    if ins.op == isa.OP_SMAX and ins.sub:
        smul = f" smul={(ins.e >> 8) & 0xFFFF}" if ins.sub == isa.SM_STEP else ""
        return (f"{isa.SM_MODE_NAMES.get(ins.sub, f'smax.{ins.sub}')} src={ins.a} state={ins.b} dst={ins.c} "
                f"n={ins.cnt}{smul}")
    if ins.op == isa.OP_SMAX:
        sink = f" sink={((ins.e & 0xFF) ^ 0x80) - 0x80}" if ins.flags & isa.SM_SINK else ""
        return f"smax src={ins.a} dst={ins.c} n={ins.cnt} smul={(ins.e >> 8) & 0xFFFF}{sink}"
    if ins.op == isa.OP_WAIT and ins.cnt:
        return f"wait keep={ins.cnt}"
    return name



def run_program(code: list[int], ext: list[int] | np.ndarray, extw: int | None = None,
                ext_latency: int | None = None, stall: StallSchedule | None = None) -> Machine:
    """Run `code` on a fresh machine whose external memory starts as `ext` (zero-padded to extw),
    on a memory that is always ready or stalls on `stall`'s schedule."""
    m = Machine.with_ext(ext, extw, ext_latency=ext_latency, stall=stall)
    m.run(list(code))
    return m
