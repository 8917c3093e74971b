"""``isa.effects`` against what the machine model's arithmetic does.

The compiler places its WAITs, and the machine model finds races and reads of unwritten words,
with the scratchpad and external words ``isa.effects`` says an instruction reads and writes. If it
left out a word an instruction reads, a program could read a word still in flight and no check
would notice; if it named a word never written, or missed one that is, the model's record of
what the program wrote would be wrong. Here each claim is tested on the data itself: an
instruction runs on two machines that agree only on the words it claims to read (everything else
is different random data). Then

* every word it claims to write holds the same value on both (it is a function of what it
  reads alone), and differs from what both held before unless both held it or it is read too;
* every other word, in both memories, is what it was.

The instructions are the random programs' (capra.randprog), over a scratchpad the program has
written completely, so every operand placement and size the replay tests use is covered.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from capra import asm, isa, machine
from capra.isa import Instr
from capra.machine import Machine, ProgramError
from capra.randprog import random_instruction

CASES = 1500
EXTW = 2048


def _pair(rng: np.random.Generator, eff, qregs: tuple[int, int, int, int]) -> tuple[Machine, Machine]:
    """Two machines with random memories that agree on the words `eff` claims to read and differ
    in every other word, both memories, under the same QCFG registers."""
    machines = []
    sram = rng.integers(0, 1 << 32, isa.SRAM_WORDS, dtype=np.uint64).astype(np.uint32)
    ext = rng.integers(0, 1 << 32, EXTW, dtype=np.uint64).astype(np.uint32)
    for flip in (False, True):
        m = Machine.with_ext(ext.copy())
        m.sram[:] = sram
        if flip:
            m.sram ^= np.uint32(0xA5A5A5A5)
            m.ext ^= np.uint32(0x5A5A5A5A)
            m.sram[eff.reads] = sram[eff.reads]
            m.ext[eff.ext_reads] = ext[eff.ext_reads]
        m.written[:] = True
        m.qa, m.qb, m.qs, m.qbias = qregs
        machines.append(m)
    return machines[0], machines[1]


def _instructions(seed: int):
    """Random legal instructions with the QCFG state they run under (QCFGs themselves are only the
    source of that state: they touch no memory)."""
    rng = random.Random(seed)
    written = np.ones(isa.SRAM_WORDS, dtype=bool)
    qregs = (1, 1, 8, 0)
    made = 0
    while made < CASES:
        ins = Instr.decode(random_instruction(rng, written, qregs[3], lambda n: rng.randrange(EXTW - n)))
        if ins.op == isa.OP_QCFG:
            qregs = (ins.a, ins.b, ins.c, ins.d)
            continue
        try:
            eff = isa.effects(ins, qbias=qregs[3], extw=EXTW)
        except ProgramError:
            continue
        made += 1
        yield ins, eff, qregs


@pytest.mark.parametrize("seed", [1, 2])
def test_effects_name_exactly_the_words_an_instruction_reads_and_writes(seed):
    data = np.random.default_rng(seed)
    units = set()
    for ins, eff, qregs in _instructions(seed):
        units.add(eff.unit)
        one, two = _pair(data, eff, qregs)
        before = {mem: (getattr(one, mem).copy(), getattr(two, mem).copy()) for mem in ("sram", "ext")}
        for m in (one, two):
            m.step(0, ins)
        what = f"{machine.disassemble(ins)} ({eff.unit})"
        for mem, claimed in (("sram", eff.writes), ("ext", eff.ext_writes)):
            after = getattr(one, mem), getattr(two, mem)
            # equal after, so a function of the claimed reads alone; and where the two differed
            # before (every claimed write that is not also a claimed read), really written
            differ = np.flatnonzero(after[0][claimed] != after[1][claimed])
            assert not len(differ), (f"{what}: {mem} word {claimed[differ[0]]} is said to be written but differs "
                                    "between the runs: it is not written, or depends on a word not said to be read")
            for now, old in zip(after, before[mem], strict=True):
                untouched = np.ones(len(old), dtype=bool)
                untouched[claimed] = False
                changed = np.flatnonzero(untouched & (now != old))
                assert not len(changed), f"{what}: {mem} word {changed[0]} changed, but it is not said to be written"
    assert units == set(isa.UNITS)


def test_effects_of_the_sequencer_instructions_touch_nothing():
    for words in (asm.halt(), asm.wait(1), asm.qcfg(qa=3, qb=2, shift=5, bias=100)):
        eff = isa.effects(Instr.decode(words))
        assert eff.unit == "seq" and eff.cycles == 0
        assert not (len(eff.reads) or len(eff.writes) or len(eff.ext_reads) or len(eff.ext_writes))
