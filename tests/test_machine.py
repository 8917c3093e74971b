"""The machine model on its own: numerics against independent formulas, timing, and errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from capra import asm, config, isa
from capra.machine import HazardError, Machine, ProgramError, requantize, run_program, softmax_int8
from int_reference import requantize_ref, softmax_ref


def pack(values) -> list[int]:
    v = np.zeros(-(-len(values) // 4) * 4, dtype=np.int8)
    v[: len(values)] = values
    return [int(w) for w in v.view(np.uint32)]


def int8_words(words, n) -> list[int]:
    return list(np.asarray(words, dtype=np.uint32).view(np.int8)[:n])


def test_requantize_matches_independent_formula_on_extremes_and_random():
    rng = np.random.default_rng(0)
    accs = [-(1 << 31), (1 << 31) - 1, 0, 1, -1] + [int(x) for x in rng.integers(-(1 << 31), 1 << 31, 300)]
    for mult in (0, 1, 0xFFFF, 12345):
        for shift in (0, 1, 13, isa.MAX_SHIFT):
            got = requantize(np.array(accs), mult, shift)
            assert list(got) == [requantize_ref(a, mult, shift) for a in accs]


def test_softmax_matches_independent_formula():
    rng = np.random.default_rng(1)
    for n in (1, 3, 16, 61):
        for sink in (None, -128, 0, 127):
            for smul in (1, 64, 1000, 65535):
                x = rng.integers(-128, 128, n)
                assert list(softmax_int8(x, sink, smul)) == softmax_ref(list(x), sink, smul)


def test_softmax_probabilities_sum_to_about_one():
    p = softmax_int8(np.array([16, 0, -16, 5]), None)
    assert abs(int(p.sum()) - 128) <= 4


def test_matmul_both_layouts_against_numpy():
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (3, 10))
    b = rng.integers(-128, 128, (10, 6))
    ext = [w for mat in (a, b, b.T) for row in mat for w in pack(row)]
    a_w, b_w = 3 * 3, 10 * 2
    code = (asm.load(0, 0, 1, len(ext)) + asm.wait()
            + asm.mm(0, a_w, 200, 3, 10, 6, brows=True)
            + asm.mm(0, a_w + b_w, 300, 3, 10, 6)
            + asm.mm(0, a_w, 400, 3, 10, 6, brows=True, relu=True)
            + asm.store(200, 500, 1, 18) + asm.store(300, 600, 1, 18) + asm.store(400, 700, 1, 18) + asm.halt())
    m = run_program(code, ext, 1024)
    want = (a @ b).reshape(-1)
    assert list(m.ext[500:518].view(np.int32)) == list(want)
    assert list(m.ext[600:618].view(np.int32)) == list(want)
    assert (want < 0).any() and list(m.ext[700:718].view(np.int32)) == list(np.maximum(want, 0))  # RELU, int32


def test_cycle_counts_follow_the_documented_formulas():
    code = (asm.load(0, 0, 2, 8) + asm.wait() + asm.qcfg(qa=1) + asm.mm(0, 0, 100, 1, 8, 4, out8=True)
            + asm.vec(isa.VEC_RELU, 0, 200, 9) + asm.smax(0, 300, 9) + asm.halt())
    m = run_program(code, [1] * 16, 64, ext_latency=4)
    # Worked by hand from docs/isa.md, external latency 4:
    # cycle 0  LOAD of 16 words: setup in 1, requests 2..17, written 7..22, ends at 1+16+4+2 = 23;
    #          the DMA is busy in cycles 1..22 (22 cycles)
    # cycle 1  WAIT stalls in 1..22 (22 cycles) and goes at 23
    # cycle 24 QCFG
    # cycle 25 MM, dot form, R = 1, K = 8 (2 words), M = 4: setup (1), A load of one line of 2 words
    #          plus the turnaround (2), one pass of 4 * 2 reads (its last in execute cycle 11); the
    #          writer reads its single slot 9 cycles later (20) and writes it 6 later: done in execute
    #          cycle 26
    # cycle 52 VEC RELU of 9 elements (3 words): setup, reads in 2..4, the last word's data in 6,
    #          written 8 cycles later (products, sum, the requant bank's five stages, the write): 14
    # cycle 67 SMAX of 9 (3 words): pass 1 reads in 2..4 and its maximum is final two cycles after
    #          the last word's data (a tree, then the running max), so pass 2 reads in 6..8; the sink's
    #          slot in 9 reaches the sum in 15, the division starts in 16 and is done in 49, pass 3 reads
    #          in 50..52 and its last word is written in 59: 59 cycles
    # cycle 127 HALT with nothing in flight: 128 cycles in all
    # The sequencer decodes each instruction in the cycle after it issued the last: the VEC in 26
    # waits for the matmul's engine until 52 (h_unit 26); the SMAX, without OVERLAP, in 53 waits
    # for that engine to finish the VEC until 67, and HALT in 68 for the softmax until 127 (h_sync).
    mm, vec, smax = 26, 14, 59
    assert m.counters.with_holds() == [128, 22, mm, vec + smax, 22, mm, vec + smax]


def test_overlap_runs_the_softmax_beside_the_matmul():
    """The same matmul and softmax on words of different bank groups, the softmax with OVERLAP: it
    issues in the cycle after the matmul and the two run side by side (cycles from isa's formulas)."""
    data = asm.load(0, 0, 1, 16) + asm.load(2048, 0, 1, 8) + asm.wait() + asm.qcfg(qa=1)
    mm = asm.mm(0, 4, 100, 1, 8, 4, out8=True)
    sm = asm.smax(2048, 3000, 9)
    mm_cycles, sm_cycles = isa.effects(isa.Instr.decode(mm)).cycles, isa.effects(isa.Instr.decode(sm)).cycles
    apart = Machine.with_ext([1] * 16, 64, ext_latency=4, events=True)
    apart.run(data + mm + sm + asm.halt())
    beside = Machine.with_ext([1] * 16, 64, ext_latency=4, events=True)
    beside.run(data + mm + asm.overlap(sm) + asm.halt())
    go = {e.pc: e.cycle for e in beside.events if e.kind == "go"}
    assert go[5] == go[4] + 1  # the softmax issues right after the matmul
    assert mm_cycles < sm_cycles and beside.counters.hold_sync == sm_cycles  # HALT waits for the softmax
    assert apart.counters.cycles - beside.counters.cycles == mm_cycles
    assert (beside.sram == apart.sram).all() and (beside.ext == apart.ext).all()


@pytest.mark.parametrize("first, second, kind", [
    (asm.smax(0, 2048, 9), asm.mm(2048, 4, 100, 1, 8, 4, out8=True), "RAW"),  # reads what the softmax writes
    (asm.smax(0, 2048, 9), asm.mm(1024, 1028, 0, 1, 8, 4, out8=True), "WAR"),  # writes what it reads
    (asm.smax(0, 2048, 9), asm.vec(isa.VEC_COPY, 1024, 2049, 8), "WAW"),  # writes a word it writes
    (asm.smax(0, 2048, 9), asm.vec(isa.VEC_COPY, 4, 1100, 8), "read port"),  # reads a bank it reads
    (asm.smax(0, 2048, 9), asm.vec(isa.VEC_COPY, 1024, 2056, 8), "write port"),  # writes a bank it writes
    (asm.mm(1024, 1028, 1100, 1, 8, 4, out8=True), asm.load(1030, 0, 1, 2), "WAR"),  # a LOAD over the B rows
])
def test_overlap_where_the_engines_conflict_is_rejected_naming_the_kind(first, second, kind):
    data = asm.load(0, 0, 1, 16) + asm.load(1024, 0, 1, 16) + asm.wait() + asm.qcfg(qa=1)
    ext = list(range(1, 17))
    run_program(data + first + second + asm.halt(), ext, 64)  # without OVERLAP the second waits: fine
    with pytest.raises(HazardError, match=f"instruction 5 {kind}: .* instruction 4 .* may still be running"):
        run_program(data + first + asm.overlap(second) + asm.halt(), ext, 64)


@pytest.mark.parametrize("dot, cycles, gap", [
    (False, 37, 0),  # the same layout (BROWS, one row, four groups): max(0, G - 16 B reads) = 0
    (True, 34, 8),   # the dot form changes the layout: max(G, 2N) = 8
])
def test_a_chained_matmul_starts_while_the_one_before_it_drains(dot, cycles, gap):
    """Two independent one-row matmuls, the second with CHAIN: the engine takes it in the cycle
    after the first one's last read (1 setup + 2 of A load, one line and its write, + 16 B reads =
    19 execute cycles: docs/isa.md), and its first B read (its own cycle 3 + 1 = 4) comes no sooner
    than the first one's last read + gap + 1. On the first one's layout the second follows as its
    next pass would: its last B read G = 4 + 4 - 1 = 7 or more after the first one's, which its
    own 16 B reads already give (gap 0); a dot-form second (1 x 16 x 4: 1 + 2 + 16 reads, then
    9 + 6 to its one slot's write: 34 cycles) changes the layout and waits max(G, 2N = 8). The
    results are the same as one after the other."""
    data = asm.load(0, 0, 1, 100) + asm.wait() + asm.qcfg(qa=300, shift=9)
    one = asm.mm(0, 16, 1100, 1, 16, 16, out8=True, brows=True)
    two = asm.mm(4, 20, 1200, 1, 16, 4, out8=True) if dot else asm.mm(4, 20, 1200, 1, 16, 16, out8=True, brows=True)
    ext = list(range(7, 107))
    apart = Machine.with_ext(ext, 256, events=True)
    apart.run(data + one + two + asm.halt())
    chained = Machine.with_ext(ext, 256, events=True)
    chained.run(data + one + asm.chain(two) + asm.halt())
    go = {e.pc: e.cycle for e in chained.events if e.kind == "go"}
    done = {e.pc: e.cycle for e in chained.events if e.kind == "done"}
    assert go[4] == go[3] + 19 + 1
    first_read = max(go[4] + 4, go[3] + 19 + gap + 1)
    assert done[4] - go[4] == cycles + (first_read - (go[4] + 4))
    assert chained.counters.mm_busy == done[4] - go[3]  # c2: cycles some MM executes
    assert chained.counters.hold_unit == apart.counters.hold_unit - (37 + 1 - 20)
    assert (chained.sram == apart.sram).all() and (chained.ext == apart.ext).all()


def test_chain_on_a_matmul_that_reads_the_one_before_it_is_rejected():
    data = asm.load(0, 0, 1, 100) + asm.wait() + asm.qcfg(qa=300, shift=9)
    one = asm.mm(0, 16, 1100, 1, 16, 16, out8=True, brows=True)
    reads_it = asm.mm(1100, 20, 1200, 1, 16, 16, out8=True, brows=True)
    run_program(data + one + reads_it + asm.halt(), list(range(100)), 256)  # without CHAIN it waits: fine
    with pytest.raises(HazardError, match="instruction 4 RAW: reads scratchpad word 1100, which instruction 3 "
                                          r"\(the MM before it\) writes, and that may still be draining"):
        run_program(data + one + asm.chain(reads_it) + asm.halt(), list(range(100)), 256)
    with pytest.raises(ProgramError, match="CHAIN is set on vec: only MM takes it"):
        run_program(data + [asm.vec(isa.VEC_COPY, 0, 300, 8)[0] | isa.CHAIN_BIT, *asm.vec(isa.VEC_COPY, 0, 300, 8)[1:]]
                    + asm.halt(), list(range(100)), 256)


@pytest.mark.parametrize("latency, stall", [(0, 0), (4, 0), (16, 0), (0, 50), (16, 50)])
def test_a_draining_matmul_blocks_overlap_on_every_memory(latency, stall):
    """A softmax with OVERLAP that reads what an MM writes, after a second MM has chained on that one:
    the first may still drain beside the second (docs/isa.md), so the program is refused, on every
    memory. Four loads and a WAIT between the MMs take longer than the first MM on a slow memory
    (it has finished by the clock) and not on a fast one: a rule that looked at the clock accepted
    the program on the slow memory only. Without CHAIN the second MM waits for the first, and the
    same softmax may overlap it."""
    data = asm.load(0, 0, 1, 100) + asm.wait() + asm.qcfg(qa=300, shift=9)
    one = asm.mm(0, 16, 1100, 1, 16, 16, out8=True, brows=True)  # reads banks 0-3, writes 1100.. (4-7)
    loads = sum((asm.overlap(asm.load(2048 + 4 * i, 0, 1, 4)) for i in range(4)), []) + asm.wait()  # banks 8-11
    two = asm.mm(4, 20, 1200, 1, 16, 16, out8=True, brows=True)
    reads_one = asm.overlap(asm.smax(1100, 2304, 16))
    ext = list(range(7, 107))
    with config.use(dataclasses.replace(config.active(), ext_latency=latency, ext_stall=stall)):
        with pytest.raises(HazardError, match="instruction 10 RAW: reads scratchpad word 1100, which instruction 3 "
                                              r"\(mmvec\) writes, and that may still be running"):
            run_program(data + one + loads + asm.chain(two) + reads_one + asm.halt(), ext, 256)
        unchained = run_program(data + one + loads + two + reads_one + asm.halt(), ext, 256)
        chained = run_program(data + one + loads + asm.chain(two) + asm.smax(1100, 2304, 16) + asm.halt(), ext, 256)
    assert (unchained.sram == chained.sram).all()


def test_overlap_only_on_the_instructions_that_take_it():
    for words in (asm.wait(), asm.qcfg(qa=1), asm.halt()):
        with pytest.raises(ProgramError, match="OVERLAP is set on"):
            run_program([words[0] | isa.OVERLAP_BIT, *words[1:]] + asm.halt(), [0], 8)
    with pytest.raises(ValueError, match="does not take OVERLAP"):
        asm.overlap(asm.wait())


def test_dma_runs_in_background_and_wait_stalls_for_it():
    ext = list(range(100))
    fast = run_program(asm.load(0, 0, 1, 50) + asm.halt(), ext, 128)
    assert fast.counters.dma_stall == fast.counters.dma_busy  # HALT waited for the whole transfer
    assert fast.counters.cycles == 1 + fast.counters.dma_busy + 1


def test_compute_racing_the_dma_is_rejected():
    code = asm.load(0, 0, 1, 50) + asm.vec(isa.VEC_COPY, 10, 100, 4) + asm.halt()
    with pytest.raises(HazardError, match="instruction 1 touches SRAM word 10"):
        run_program(code, list(range(64)), 64)
    # the same read after a WAIT is fine
    run_program(asm.load(0, 0, 1, 50) + asm.wait() + asm.vec(isa.VEC_COPY, 10, 100, 4) + asm.halt(), [1] * 64, 64)


def test_a_transfer_counts_as_in_flight_until_the_program_knows_it_ended():
    """The rule is timing-free: a LOAD that has ended by the model's clock still conflicts until a
    WAIT (or DMA_QUEUE later transfers, each issued only with room in the queue) makes it certain
    on every memory. Without it the program would be right only on memories as fast as this one."""
    ext = [1] * 64
    ready = asm.load(1100, 0, 1, 64) + asm.wait()  # pcs 0, 1: data in bank group 1
    load = asm.load(0, 0, 1, 16)  # pc 2: words 0..15, group 0
    busy = asm.vec(isa.VEC_COPY, 1100, 1300, 64) * 4  # pcs 3..6: about 120 cycles in group 1
    use = asm.vec(isa.VEC_COPY, 0, 100, 16)  # reads what pc 2 loads
    m = Machine.with_ext(ext, 64, events=True)
    m.run(ready + load + busy + asm.wait() + use + asm.halt())
    load_end = next(e.cycle for e in m.events if e.kind == "end" and e.pc == 2)
    wait_go = next(e.cycle for e in m.events if e.kind == "go" and e.pc == 7)
    assert load_end < wait_go  # by this memory's clock the WAIT is not needed ...
    with pytest.raises(HazardError, match="instruction 7 touches SRAM word 0 that the LOAD of instruction 2 "
                                          "writes.*WAIT keep=0"):
        run_program(ready + load + busy + use + asm.halt(), ext, 64)  # ... but the rule needs it
    # four transfers after it: the fourth is issued only once the LOAD has ended, on any memory
    later = [asm.load(2100 + 16 * i, 0, 1, 16) for i in range(isa.DMA_QUEUE)]
    run_program(ready + load + sum(later, []) + use + asm.halt(), ext, 64)
    with pytest.raises(HazardError, match="WAIT keep=3"):
        run_program(ready + load + sum(later[:-1], []) + use + asm.halt(), ext, 64)


def test_a_load_beside_compute_needs_another_bank_group():
    ready = asm.load(0, 0, 1, 40) + asm.wait()
    # the LOAD writes group 1 (words 1100..1139) while the copy writes group 0: fine
    run_program(ready + asm.load(1100, 0, 1, 40) + asm.vec(isa.VEC_COPY, 0, 200, 16) + asm.halt(), [1] * 64, 64)
    # the LOAD writes other words of group 0 while the copy writes group 0: one write port per bank
    with pytest.raises(HazardError, match="write port of scratchpad bank"):
        run_program(ready + asm.load(500, 0, 1, 40) + asm.vec(isa.VEC_COPY, 0, 200, 16) + asm.halt(), [1] * 64, 64)
    # a STORE reads group 0 while the copy reads group 0: one read port per bank
    with pytest.raises(HazardError, match="read port of scratchpad bank"):
        run_program(ready + asm.store(20, 0, 1, 20) + asm.vec(isa.VEC_COPY, 0, 1200, 16) + asm.halt(), [1] * 64, 64)


def test_reading_a_word_the_program_never_wrote_is_rejected():
    with pytest.raises(ProgramError, match="reads scratchpad word 5 before the program wrote it"):
        run_program(asm.load(0, 0, 1, 5) + asm.wait() + asm.vec(isa.VEC_COPY, 0, 100, 24) + asm.halt(), [1] * 64, 64)
    with pytest.raises(ProgramError, match="STORE reads scratchpad word 7"):
        run_program(asm.load(0, 0, 1, 7) + asm.wait() + asm.store(0, 10, 1, 8) + asm.halt(), [1] * 64, 64)


def test_writing_what_a_store_is_reading_is_rejected():
    code = asm.load(0, 0, 1, 40) + asm.wait() + asm.store(0, 10, 1, 20) + asm.vec(isa.VEC_COPY, 20, 5, 4) + asm.halt()
    with pytest.raises(HazardError, match="instruction 3 writes SRAM word 5 that the STORE of instruction 2 reads"):
        run_program(code, [], 64)


@pytest.mark.parametrize("code, message", [
    (asm.load(4000, 0, 1, 200) + asm.halt(), "DMA reaches SRAM word"),
    (asm.load(0, 60, 1, 10) + asm.halt(), "EXTW=64"),
    (asm.mm(0, 0, 100, 1, 2000, 4) + asm.halt(), "K <= 1024"),
    (asm.mm(0, 10, 12, 2, 16, 4) + asm.halt(), "output overlaps"),
    (asm.vec(isa.VEC_ADD, 0, 1, 16, b=40) + asm.halt(), "partly overlaps"),
    (asm.qcfg(shift=48) + asm.halt(), "shift 48"),
    ([0xF0000000, 0, 0, 0], "unknown opcode 15"),
    (asm.smax(0, 0, 0) + asm.halt(), "SMAX of 0"),
])
def test_invalid_programs_raise_program_error_naming_the_problem(code, message):
    with pytest.raises(ProgramError, match=message):
        run_program(code, [0] * 64, 64)


def test_program_longer_than_instruction_memory_is_rejected():
    with pytest.raises(ProgramError, match="exceeds IMEM"):
        Machine.with_ext([], 64).run(asm.wait() * (isa.IMEM_INSTRS + 1))


def test_image_larger_than_external_memory_is_rejected():
    with pytest.raises(ProgramError, match="exceeds EXTW=8"):
        Machine.with_ext([1] * 9, 8)


def test_argmax_returns_first_of_ties():
    ext = pack([3, 7, -2, 7, 7, 1])
    m = run_program(asm.load(0, 0, 1, 2) + asm.wait() + asm.vec(isa.VEC_ARGMAX, 0, 10, 6)
                    + asm.store(10, 20, 1, 1) + asm.halt(), ext, 32)
    assert int(m.ext[20]) == 1


def test_program_filling_imem_without_halt_is_rejected():
    with pytest.raises(ProgramError, match="runs past the last instruction of IMEM"):
        Machine.with_ext([], 64).run(asm.wait() * isa.IMEM_INSTRS)


def test_huge_dma_is_an_error_not_an_allocation():
    with pytest.raises(ProgramError, match="DMA reaches SRAM word"):
        run_program(asm.load(0, 0, 65535, 65535) + asm.halt(), [], 64)


# Every VEC sub-op on one pair of rows, its result worked out by hand from docs/isa.md's table
# (the QCFG registers qa=3, qb=2, qs=2; requant rounds half up and saturates to int8). A sub-op
# added to capra.isa.VEC_OPS needs its row here: the test fails until it has one.
VEC_A = [5, -7, 100, -128, 0, 1]
VEC_B = [2, 3, 90, -128, -1, 1]
VEC_BY_HAND = {
    "copy": [5, -7, 100, -128, 0, 1],
    "add": [5, -4, 120, -128, 0, 1],  # (3a + 2b + 2) >> 2: 21>>2, -13>>2 = -4, 482>>2, -638>>2 saturated, 0>>2
    "mul": [8, -16, 127, 127, 0, 1],  # (3ab + 2) >> 2: 32>>2, -61>>2 = -16, 27002>>2 saturated, ...
    "max": [5, 3, 100, -128, 0, 1],
    "relu": [5, 0, 100, 0, 0, 1],
    "argmax": 2,  # the index of the first maximum of a
}


def test_every_vec_sub_op_computes_its_documented_result():
    missing = set(isa.VEC_NAMES.values()) - set(VEC_BY_HAND)
    assert not missing, f"every sub-op of isa.VEC_OPS needs a row in VEC_BY_HAND: none for {sorted(missing)}"
    assert set(VEC_BY_HAND) <= set(isa.VEC_NAMES.values()), "a row of VEC_BY_HAND names no sub-op"
    n = len(VEC_A)
    for code, name in isa.VEC_NAMES.items():
        words = 1 if isinstance(VEC_BY_HAND[name], int) else 2
        m = run_program(asm.load(0, 0, 1, 4) + asm.wait() + asm.qcfg(qa=3, qb=2, shift=2)
                        + asm.vec(code, 0, 20, n, b=2) + asm.store(20, 40, 1, words) + asm.halt(),
                        pack(VEC_A + [0, 0]) + pack(VEC_B + [0, 0]), 64)
        if isinstance(VEC_BY_HAND[name], int):
            assert int(m.ext[40]) == VEC_BY_HAND[name], name
        else:
            got = np.asarray(m.ext[40:42], dtype=np.uint32).view(np.int8)[:n].tolist()
            assert got == VEC_BY_HAND[name], name


def test_a_copy_runs_on_alone_and_leaves_the_original_as_it_was():
    """Machine.copy (the random-program generator and the visibility measure try an instruction
    and go back) must share nothing that a later step changes: run a copy made mid-program to the
    end, and the original must still equal a deep copy taken at the same moment, then finish the
    program exactly as a fresh run does."""
    import copy

    from capra.randprog import random_program

    code, ext = random_program(3)
    whole = Machine.with_ext(ext, isa.EXT_MEMORY)
    pcs = []
    pc = 0
    while whole.step(pc, isa.Instr.decode(code[4 * pc: 4 * pc + 4])):
        pcs.append(pc)
        pc += 1
    middle = len(pcs) // 2
    mach = Machine.with_ext(ext, isa.EXT_MEMORY)
    for pc in range(middle):
        mach.step(pc, isa.Instr.decode(code[4 * pc: 4 * pc + 4]))
    twin, deep = mach.copy(), copy.deepcopy(mach)
    pc = middle
    twin.sram[:] ^= 1  # a change of every word, then the rest of the program on the copy
    while twin.step(pc, isa.Instr.decode(code[4 * pc: 4 * pc + 4])):
        pc += 1
    assert np.array_equal(mach.sram, deep.sram) and np.array_equal(mach.ext, deep.ext)
    assert np.array_equal(mach.written, deep.written)
    assert (mach.t, mach.counters, mach.known_done, mach.last_writes) == (deep.t, deep.counters, deep.known_done,
                                                                         deep.last_writes)
    assert len(mach.issued) == len(deep.issued) and len(mach.dma.transfers) == len(deep.dma.transfers)
    assert vars(mach.dma).keys() == vars(deep.dma).keys()
    assert all(getattr(mach.dma, k) == getattr(deep.dma, k) for k in vars(deep.dma) if k != "transfers")
    pc = middle
    while mach.step(pc, isa.Instr.decode(code[4 * pc: 4 * pc + 4])):
        pc += 1
    assert np.array_equal(mach.ext, whole.ext) and np.array_equal(mach.sram, whole.sram)
    assert (mach.t, mach.counters) == (whole.t, whole.counters)


def test_the_beat_by_beat_timeline_of_a_memory_that_never_stalls_is_the_documented_one():
    """Two independent ways to the DMA's timing: the closed formulas of docs/isa.md, and the engine
    followed beat by beat as it runs under a stall schedule (here one that never stalls). Random
    runs of LOADs and STOREs, rows starting at odd and even addresses, both bus widths and
    latencies from 0 to 30: every transfer's setup and end, and the busy cycles, must agree."""
    import random

    from capra.dma import DmaTimeline, StallSchedule

    r = random.Random(5)
    for bus in (1, 2):
        for latency in (0, 1, 4, 17, 30):
            for _ in range(25):
                formulas, beats = DmaTimeline(latency, bus), DmaTimeline(latency, bus, StallSchedule(0))
                t = 0
                for _ in range(r.randint(1, 12)):
                    rows, cols, ext = r.randint(1, 3), r.choice([1, 2, 3, 5, 8, 40]), r.randint(0, 100)
                    ext_words = (ext + 7 * np.arange(rows)[:, None] + np.arange(cols)).reshape(-1)
                    load = r.random() < 0.5
                    t = max(formulas.room_at(t), beats.room_at(t))
                    x = formulas.issue(t, load, np.arange(rows * cols), cols, ext_words=ext_words)
                    y = beats.issue(t, load, np.arange(rows * cols), cols, ext_words=ext_words)
                    assert (x.setup, x.end, x.beats) == (y.setup, y.end, y.beats), (bus, latency, load, rows, cols)
                    t += r.choice([1, 1, 3, 20])
                assert formulas.busy_cycles == beats.busy_cycles


def test_a_memory_that_stalls_moves_the_cycles_not_the_results():
    """The same program on memories that stall 0, 10 and 50% of the cycles: the same external
    memory and scratchpad, more cycles with more stalls, and the stall rate the schedule promises
    (about `percent` of the cycles of each channel)."""
    from capra.dma import CHANNELS, StallSchedule

    code = (asm.load(0, 0, 2, 8, ext_stride=8, sram_stride=8) + asm.wait() + asm.vec(isa.VEC_ADD, 0, 64, 32, b=8)
            + asm.store(64, 100, 1, 8) + asm.load(128, 100, 1, 8) + asm.wait() + asm.halt())
    ext = list(range(1, 17))
    runs = [run_program(code, ext, 256, stall=StallSchedule(p, seed=3) if p else None) for p in (0, 10, 50)]
    for m in runs[1:]:
        assert np.array_equal(m.ext, runs[0].ext) and np.array_equal(m.sram, runs[0].sram)
    cycles = [m.counters.cycles for m in runs]
    assert cycles[0] < cycles[1] < cycles[2], cycles
    for percent in (10, 50):
        schedule = StallSchedule(percent, seed=11)
        for channel in range(len(CHANNELS)):
            share = sum(schedule.stalled(channel, c) for c in range(20_000)) / 20_000
            assert abs(share - percent / 100) < 0.02, (percent, channel, share)
