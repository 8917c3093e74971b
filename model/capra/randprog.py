"""Random valid GA2 programs: random instruction mixes over random data, for the replay tests.

A program is grown one instruction at a time. Each candidate is tried on a copy of a machine
model that has run the program so far; candidates the model rejects (a race with the DMA, a bank
port in use, a word read before it was written, an operand past the end of the scratchpad) are
dropped, so every program produced is valid and exercises DMA/compute overlap, and the two
compute engines side by side (OVERLAP), wherever the model allows it. Every word a compute
instruction writes is then stored to external memory, so the results reach it through the DMA
too; the testbench compares the external memory, the scratchpad words the program wrote and all
seven counters (tools/visibility.py measures how much of what the programs compute a replay
would see).
"""

from __future__ import annotations

import random

import numpy as np

from . import asm, isa
from .machine import Machine, ProgramError

SPAN = 1024  # external words a random program uses: data below DATA_WORDS, results above
DATA_WORDS = 512  # words 0..511 hold random data; results are stored above
OVERLAP_SHARE = 0.7  # of the instructions that may take OVERLAP, those tried with it first
CHAIN_SHARE = 0.6  # of the MMs, those tried with CHAIN first (behind a draining MM, unless it reads its output)
TABLE_PAGES = 16  # a random program's block table: descriptors in the last data words, loaded at the start
PAGE_SPAN = 96  # the external words a page may reach from its descriptor (offset, rows, stride, cols below)


def _pick_qcfg(rng: random.Random, src) -> list[int]:
    """Requantization settings biased towards useful ranges, with the extremes now and then, and
    often power-of-two multipliers with small shifts: then exact ties of the rounding (a product
    p with p mod 2^shift = 2^(shift-1)), negative ones included, are common and land inside int8,
    so a rounding error shows in what the programs compute (random multipliers almost never tie)."""
    roll = rng.random()
    if roll < 0.1:
        return asm.qcfg(qa=rng.choice([0, 1, 0xFFFF]), qb=rng.choice([0, 1, 0xFFFF]),
                        shift=rng.choice([0, 1, isa.MAX_SHIFT]), bias=src(17))
    if roll < 0.5:
        a, b = rng.randrange(5), rng.randrange(5)
        return asm.qcfg(qa=1 << a, qb=1 << b, shift=max(a, b) + rng.randint(1, 8), bias=src(17))
    return asm.qcfg(qa=rng.randrange(1, 1 << 16), qb=rng.randrange(0, 1 << 16),
                    shift=rng.randrange(8, 26), bias=src(17))


def random_instruction(rng: random.Random, written: np.ndarray, qbias: int, store_at, kind: str | None = None,
                       avoid: frozenset[int] = frozenset(), table: int | None = None) -> list[int]:
    """A random instruction (of `kind`, when given). Operands are read mostly from spans of words
    the program wrote, so that the instruction is valid and a wrong result usually shows up in
    what the program stores; matmuls cover R = 1..9 (one to three batch tiles), K = 1 and K not a
    multiple of 4, M = 1. Operands start outside the bank groups in `avoid` (where the other
    engine works), so the instruction can often run beside it. store_at(n) is where a STORE
    spanning n external words goes. With `table`, the scratchpad word of a block table of
    TABLE_PAGES descriptors (page bases in the data), gathers join the mix: pages of 1, 2 or 4 rows
    of up to 16 words, from any logical row the table covers."""
    group = isa.SRAM_GROUP_WORDS
    top = isa.SRAM_WORDS * 3500 // 4096  # operands start at 0..3499 at the default 4096 words
    live = np.flatnonzero(written)
    if avoid:
        live = live[~np.isin(live // group, list(avoid))]
    starts = [g for g in range(isa.SRAM_WORDS // group) if g not in avoid and g * group < top] or [0]

    def sram() -> int:
        g = rng.choice(starts)
        return rng.randrange(g * group, min(top, (g + 1) * group))

    def src(n: int = 1) -> int:
        """The start of n written words in a row (usually), else any word."""
        if len(live) and rng.random() < 0.9:
            for _ in range(8):
                start = int(live[rng.randrange(len(live))])
                if start + n <= len(written) and written[start : start + n].all():
                    return start
        return sram()

    if kind is None:
        kinds, weights = ["load", "store", "wait", "qcfg", "mm", "vec", "smax"], [5, 2, 1, 2, 5, 4, 2]
        if table is not None:
            kinds, weights = kinds + ["gather"], weights + [3]
        kind = rng.choices(kinds, weights=weights)[0]
    if kind == "gather" and table is not None:
        shift, cols = rng.randint(0, 2), rng.randint(1, 16)
        rows = rng.randint(1, 12)
        first = rng.randrange(0, max(1, (TABLE_PAGES << shift) - rows + 1))
        return asm.gather(sram(), table, rows, cols, first=first, page_shift=shift,
                          ext_stride=cols + rng.randint(0, 3), offset=rng.randint(0, 8))
    if kind == "load":
        rows, cols = rng.randint(1, 4), rng.randint(4, 32)
        return asm.load(sram(), rng.randrange(0, DATA_WORDS - 100), rows, cols,
                        ext_stride=cols + rng.randint(0, 3), sram_stride=cols + rng.randint(0, 3))
    if kind == "store":
        rows, cols = rng.randint(1, 3), rng.randint(1, 24)
        stride = cols + rng.choice([0, 0, rng.randint(1, 3)])
        ext_stride = cols + rng.randint(0, 3)
        return asm.store(src((rows - 1) * stride + cols), store_at((rows - 1) * ext_stride + cols), rows, cols,
                         ext_stride=ext_stride, sram_stride=stride)
    if kind == "wait":
        return asm.wait(rng.randrange(isa.DMA_QUEUE))
    if kind == "qcfg":
        return _pick_qcfg(rng, src)
    if kind == "mm":
        r = rng.choice([1, 1, 2, 3, 4, 5, 8, 9, rng.randint(1, 9)])
        k = rng.choice([1, 4, 16, rng.randint(1, 40), rng.randint(1, 40)])
        m = rng.choice([1, 4, rng.randint(1, 17), rng.randint(5, 40)])
        brows = rng.random() < 0.5
        kw, mw = isa.words_for(k), isa.words_for(m)
        bias = rng.random() < 0.3 and bool(written[qbias : qbias + m].all())  # the QCFG bias words exist
        first, tiles = 0, 0
        if mw > 1 and rng.random() < 0.5:  # a column window
            first = rng.randrange(mw)
            tiles = rng.choice([0, rng.randint(1, min(15, mw - first))])
        a, b, out = src(r * kw), src(k * mw if brows else m * kw), sram()
        out8, relu = rng.random() < 0.6, rng.random() < 0.3
        row = mw if out8 else m  # words of an output row
        stride = 0
        if r > 1 and rng.random() < 0.2:  # the output rows apart, with words between them left alone
            stride = min(isa.MM_STRIDE_MAX, row + rng.randint(1, row + 2))
        return asm.mm(a, b, out, r, k, m, out8=out8, relu=relu, bias=bias, brows=brows,
                      first_tile=first, tiles=tiles, stride=stride)
    if kind == "vec":
        sub = rng.choice(list(isa.VEC_NAMES))
        rows = 1 if rng.random() < 0.7 else rng.randint(2, 9)  # several packed rows, a partial word each
        n = rng.randint(1, 70) if rows == 1 else rng.randint(1, 24)
        words = rows * isa.words_for(n)
        a = src(words)
        dst = a if rng.random() < 0.2 else sram()
        return asm.vec(sub, a, dst, n, b=src(words), rows=rows)
    n = rng.randint(1, 70)
    x = src(isa.words_for(n))
    smul = rng.choice([1, isa.SM_SCALE_ONE, 0xFFFF, rng.randrange(1, 1 << 16), rng.randrange(16, 400)])
    if rng.random() < 0.4:  # the online-softmax modes, on a state of three written words
        mode, st = rng.choice([isa.SM_STEP, isa.SM_ACC, isa.SM_NORM]), src(isa.SM_STATE_WORDS)
        if mode == isa.SM_STEP:
            return asm.smax_step(x, st, x if rng.random() < 0.3 else sram(), n, smul=smul)
        m = rng.randint(1, 40)
        if mode == isa.SM_ACC:
            return asm.smax_acc(src(m), st, src(m), m)
        return asm.smax_norm(src(m), st, sram(), m, shift=rng.randrange(16))
    return asm.smax(x, x if rng.random() < 0.2 else sram(), n,
                    sink=rng.randint(-128, 127) if rng.random() < 0.4 else None, smul=smul)


def random_program(seed: int, length: int = 14, ext_latency: int | None = None) -> tuple[list[int], list[int]]:
    """A valid random program of about `length` instructions and its external memory image; it
    grows on until a compute instruction has written a word that is not zero (a program that
    computes only zeros, say with a multiplier of 0, would show few errors)."""
    rng = random.Random(seed)
    ext = [rng.getrandbits(32) for _ in range(DATA_WORDS)]
    # the block table: page bases in the data, in the data's last words (its own stream: the
    # instructions stay those of the seed)
    table_rng = random.Random(seed ^ 0x7AB1E)
    table_ext = DATA_WORDS - TABLE_PAGES
    ext[table_ext:DATA_WORDS] = [table_rng.randrange(0, DATA_WORDS - PAGE_SPAN) for _ in range(TABLE_PAGES)]
    table = isa.SRAM_WORDS * 3500 // 4096  # just above where random operands start
    mach = Machine.with_ext(ext, SPAN, ext_latency=ext_latency)
    code: list[int] = []

    overlap_rng = random.Random(seed ^ 0x0E7E)  # its own stream: the instructions stay those of the seed

    def accept(words: list[int]) -> bool:
        """Append `words` if the machine model accepts them after the program so far: most often
        first with OVERLAP (beside the other engine), where the model allows it."""
        nonlocal mach
        tries = [words]
        if words[0] >> 28 in isa.OVERLAP_OPS and overlap_rng.random() < OVERLAP_SHARE:
            tries.insert(0, asm.overlap(words))
        if words[0] >> 28 == isa.OP_MM and overlap_rng.random() < CHAIN_SHARE:
            tries = [asm.chain(w) for w in tries] + tries
        found = _first_accepted(mach, len(code) // isa.WORDS_PER_INSTR, tries)
        if found is None:
            return False
        mach, taken = found
        code.extend(taken)
        return True

    # data to compute on from the start: a block in one bank group, then (in flight) one in another
    accept(asm.load(rng.randrange(0, 900), 0, 1, rng.randint(64, 200)))
    accept(asm.load(table, table_ext, 1, TABLE_PAGES))
    accept(asm.wait())
    second = rng.randrange(isa.SRAM_GROUP_WORDS, isa.SRAM_WORDS * 3400 // 4096)  # 1024..3399 at 4096 words
    accept(asm.load(second, rng.randrange(0, DATA_WORDS - 100), 1, rng.randint(16, 100)))
    results = DATA_WORDS + rng.randrange(16)  # where the next STORE goes

    def store_at(span: int) -> int:
        """Each STORE after the one before (from the start of the space above the data again when
        it is full), so later STOREs do not overwrite the results the earlier ones keep."""
        nonlocal results
        if results + span > SPAN:
            results = DATA_WORDS + rng.randrange(16)
        at, results = results, results + span + rng.randint(0, 3)
        return at

    attempts = grown = 0
    nonzero = False  # has a compute instruction written a word that is not zero?
    pending: list[list[int]] = []  # the STOREs of the last compute instruction's results, not yet issued

    def flush() -> None:
        for words in pending:
            accept(words)
        pending.clear()

    while (grown < length or not nonzero) and attempts < 50 * length:
        attempts += 1
        words = random_instruction(rng, mach.written, mach.qbias, store_at, *_beside(mach, overlap_rng), table=table)
        if accept(words):
            grown += 1
            if words[0] >> 28 in (isa.OP_MM, isa.OP_VEC, isa.OP_SMAX):
                nonzero = nonzero or bool(mach.sram[sorted(mach.last_writes)].any())
                # store everything it computed, so the external memory holds every result too: mostly
                # only after the next compute instruction, which may then run beside this one
                flush()
                pending += [asm.store(sram, store_at(rows * cols), rows, cols, ext_stride=cols, sram_stride=stride)
                            for sram, rows, cols, stride in _stores_for(sorted(mach.last_writes))]
                if overlap_rng.random() < 0.3:
                    flush()
    flush()
    code += asm.halt()
    return code, ext


def _beside(mach: Machine, rng: random.Random) -> tuple[str | None, frozenset[int]]:
    """Now and then, while one engine's last instruction may still run, an instruction for the
    other engine away from the bank groups it uses: (its kind, the groups to avoid); else (None,
    nothing). Random choices alone almost never find such a pair."""
    if mach.mm_last is not None and rng.random() < 0.6:
        written = frozenset((mach.mm_last[1].writes // isa.SRAM_GROUP_WORDS).tolist())
        if rng.random() < 0.75:
            # an MM behind the matmul engine's last MM, reading none of the words it writes: it may chain
            return "mm", written
        # one reading only the bank groups it writes, so often its results: it must wait for them
        return "mm", frozenset(range(isa.SRAM_WORDS // isa.SRAM_GROUP_WORDS)) - written
    running = [(engine, last) for engine, last in mach.running.items() if last is not None]
    if not running or rng.random() < 0.2:
        return None, frozenset()
    engine, (_pc, eff) = running[-1]
    words = np.concatenate([eff.reads, eff.writes])
    groups = frozenset((words // isa.SRAM_GROUP_WORDS).tolist())
    kind = "smax" if engine == "mmvec" else rng.choice(["mm", "vec"])
    return kind, groups


def _stores_for(words: list[int]) -> list[tuple[int, int, int, int]]:
    """STOREs (sram address, rows, words per row, sram row stride) that read exactly `words`
    (ascending): one strided STORE when the words form equal runs at a constant spacing (the
    rows of a matmul's output, a column window of them), else one STORE per run."""
    runs: list[list[int]] = []
    for w in words:
        if runs and w == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([w, 1])
    spacing = {b[0] - a[0] for a, b in zip(runs, runs[1:])}
    if len({n for _s, n in runs}) == 1 and len(spacing) <= 1:
        return [(runs[0][0], len(runs), runs[0][1], spacing.pop() if spacing else runs[0][1])]
    return [(start, 1, n, n) for start, n in runs]


def handwritten_programs() -> list[tuple[str, list[int], list[int]]]:
    """Small programs written by hand for the corners: empty, DMA only, every unit once, overlap."""
    rng = np.random.default_rng(7)
    ext = [int(x) for x in rng.integers(0, 1 << 32, size=256, dtype=np.uint64)]
    full_queue = [w for i in range(isa.DMA_QUEUE + 1) for w in asm.load(40 * i, 30 * i, 1, 30)]
    progs = [
        ("halt only", asm.halt(), ext),
        ("load and store back", asm.load(0, 0, 2, 16) + asm.store(0, 300, 2, 16) + asm.halt(), ext),
        ("one row loaded three times (ext stride 0)", asm.load(200, 7, 3, 4, ext_stride=0)
         + asm.wait() + asm.store(200, 600, 1, 12) + asm.halt(), ext),
        ("strided dma", asm.load(10, 5, 4, 3, ext_stride=7, sram_stride=5)
         + asm.wait() + asm.store(10, 400, 4, 3, ext_stride=6, sram_stride=5) + asm.halt(), ext),
        ("wait with nothing in flight", asm.wait() + asm.wait(1) + asm.halt(), ext),
        ("a full DMA queue", full_queue + asm.wait(1) + asm.store(0, 300, 1, 30) + asm.wait(1)
         + asm.store(40, 340, 1, 30) + asm.store(40 * isa.DMA_QUEUE, 400, 1, 30) + asm.halt(), ext),
        ("dma overlaps a matmul (another bank group)", asm.load(0, 0, 1, 96) + asm.wait()
         + asm.load(1100, 64, 1, 100) + asm.qcfg(qa=9000, shift=16)
         + asm.mm(0, 16, 100, 1, 16, 16, out8=True, brows=True) + asm.store(100, 600, 1, 4) + asm.halt(), ext),
        ("softmax with and without sink", asm.load(0, 0, 1, 16) + asm.wait()
         + asm.smax(0, 20, 61) + asm.smax(0, 40, 61, sink=127) + asm.smax(0, 60, 5, sink=-128)
         + asm.store(20, 500, 1, 16) + asm.store(40, 520, 1, 16) + asm.store(60, 540, 1, 2) + asm.halt(), ext),
        ("argmax of ties", asm.load(0, 0, 1, 3) + asm.wait() + asm.qcfg(qa=0)
         + asm.vec(isa.VEC_MUL, 0, 10, 9, b=0) + asm.vec(isa.VEC_ARGMAX, 10, 5, 9)
         + asm.store(5, 700, 1, 1) + asm.halt(), ext),
        ("int32 matmul with bias and relu", asm.load(0, 0, 1, 80) + asm.wait() + asm.qcfg(bias=40)
         + asm.mm(0, 8, 100, 5, 7, 9, bias=True, relu=True) + asm.store(100, 500, 1, 45) + asm.halt(), ext),
        ("a one-row matmul over three passes, K not a multiple of 4", asm.load(0, 0, 1, 200) + asm.wait()
         + asm.qcfg(qa=300, shift=12) + asm.mm(0, 3, 300, 1, 9, 40, out8=True, brows=True)
         + asm.store(300, 800, 1, 10) + asm.halt(), ext),
        ("the longest reduction with BROWS (K = 1024, B rows from the image four times)",
         asm.load(0, 0, 1, 256) + asm.load(256, 0, 4, 256, ext_stride=0, sram_stride=256) + asm.wait()
         + asm.qcfg(qa=3, shift=12) + asm.mm(0, 256, 1400, 1, isa.MM_MAX_K, 4, out8=True, brows=True)
         + asm.store(1400, 700, 1, 1) + asm.halt(), ext),
        ("nine rows: three batch tiles", asm.load(0, 0, 1, 200) + asm.wait() + asm.qcfg(qa=77, shift=10)
         + asm.mm(0, 60, 400, 9, 21, 6, out8=True) + asm.store(400, 900, 1, 18) + asm.halt(), ext),
        # the second matmul computes the same sums as the first; its results must lose the bias, although
        # nothing in the array changes between the two (the writer must follow the new flags)
        ("the same one-result matmul with bias, then without", asm.load(0, 0, 1, 80) + asm.wait()
         + asm.qcfg(bias=40) + asm.mm(0, 8, 100, 1, 5, 1, bias=True) + asm.mm(0, 8, 120, 1, 5, 1)
         + asm.store(100, 500, 1, 1) + asm.store(120, 501, 1, 1) + asm.halt(), ext),
        ("requantization at exact ties, half of them negative (rounding is half up: -2.5 -> -2)",
         asm.load(0, 0, 1, 33) + asm.wait() + asm.qcfg(qa=1, qb=1, shift=1)
         + asm.vec(isa.VEC_ADD, 0, 100, 64, b=17) + asm.qcfg(qa=3, qb=1, shift=2)
         + asm.vec(isa.VEC_ADD, 0, 116, 64, b=17) + asm.store(100, 800, 1, 32) + asm.halt(), ext),
    ]
    # The two engines side by side, OVERLAP set wherever the model allows it; each pair below would
    # break one of the engine rules if it ran side by side, so the model makes it wait, and a model
    # that let it run shows in what the chip computes.
    # A matmul writing the words a long softmax reads in its third pass (write after read):
    sources = asm.load(0, 0, 1, 16) + asm.load(1024, 16, 1, 80) + asm.wait() + asm.qcfg(qa=40, shift=10)
    war = (sources + asm.smax(0, 2048, 64) + asm.mm(1024, 1040, 0, 1, 16, 16, out8=True, brows=True)
           + asm.store(2048, 900, 1, 16) + asm.store(0, 940, 1, 4) + asm.halt())
    # softmaxes writing bank group 2 while a long copy writes there too, one word each cycle, at
    # four alignments (write port: the softmax's writes would be lost):
    copy = (asm.load(1024, 0, 4, 128, ext_stride=40, sram_stride=128) + asm.wait()
            + asm.vec(isa.VEC_COPY, 1024, 2048, 2048))
    port = (sources + copy + [w for i in range(4) for w in asm.smax(0, 2600 + 17 * i, 16)]
            + asm.store(2048, 400, 1, 512) + asm.store(2600, 950, 4, 4, ext_stride=4, sram_stride=17) + asm.halt())
    both = sources + asm.smax(0, 2048, 64) + asm.mm(1024, 1040, 1200, 1, 16, 16, out8=True, brows=True) + asm.halt()
    progs += [("HALT waits for both engines", overlap_where_allowed(both, ext), ext),
              ("the engines side by side: a write after a read is held back", overlap_where_allowed(war, ext), ext),
              ("the engines side by side: two writes to one bank are held back", overlap_where_allowed(port, ext), ext)]
    # Back-to-back MMs in the matmul engine, CHAIN set wherever the model allows it: each MM has
    # flags, a scale, a bias, a layout and a destination of its own, which the engine's back end
    # must keep while the next MM's reads begin; a QCFG between two MMs changes the scale and the
    # bias address the draining one must not take.
    data = asm.load(0, 0, 1, 200) + asm.wait()
    mixed = (data + asm.qcfg(qa=300, shift=11, bias=40)
             + asm.mm(0, 8, 1100, 5, 7, 9, bias=True, relu=True)              # int32, BIAS, two tiles
             + asm.qcfg(qa=9000, shift=16, bias=120)
             + asm.mm(0, 16, 1200, 1, 16, 16, out8=True, brows=True)          # four groups side by side
             + asm.mm(20, 60, 1300, 3, 12, 8, out8=True)                       # dot form
             + asm.mm(4, 40, 1400, 2, 8, 6, bias=True, out8=True, brows=True)  # the new bias words
             + asm.mm(0, 100, 1500, 4, 16, 16, out8=True, relu=True, brows=True, stride=9)
             + asm.store(1100, 500, 1, 45) + asm.store(1200, 550, 1, 4) + asm.store(1300, 560, 1, 6)
             + asm.store(1400, 570, 1, 4) + asm.store(1500, 580, 4, 4, ext_stride=4, sram_stride=9) + asm.halt())
    short = (data + asm.qcfg(qa=77, shift=9)
             + [w for i in range(6) for w in asm.mm(3 * i, 30 + i, 1100 + 2 * i, 1, 1, 4, out8=bool(i % 2))]
             + asm.store(1100, 600, 1, 12) + asm.halt())
    dependent = (data + asm.qcfg(qa=5000, shift=14)
                 + asm.mm(0, 16, 1100, 1, 16, 16, out8=True, brows=True)
                 + asm.mm(1100, 32, 1200, 1, 16, 16, out8=True, brows=True)   # reads the one before: waits
                 + asm.mm(0, 48, 1300, 1, 16, 16, out8=True, brows=True)      # reads neither: chains
                 + asm.store(1100, 600, 1, 4) + asm.store(1200, 610, 1, 4) + asm.store(1300, 620, 1, 4) + asm.halt())
    # a matmul of one reduction step makes its only B read in the cycle before the engine takes the
    # next MM: the array's layout for that step (four groups) must not follow the next MM's flags
    one_step = (data + asm.qcfg(qa=3000, shift=13)
                + asm.mm(0, 16, 1100, 1, 1, 16, out8=True, brows=True)
                + asm.mm(100, 120, 1200, 5, 4, 4)
                + asm.store(1100, 600, 1, 4) + asm.store(1200, 610, 1, 20) + asm.halt())
    progs += [("back-to-back matmuls of every form, each with its own flags, scale and bias",
               chain_where_allowed(mixed, ext), ext),
              ("a one-step matmul of four groups, then a matmul of another layout",
               chain_where_allowed(one_step, ext), ext),
              ("a run of one-step matmuls (the engine holds two at most)", chain_where_allowed(short, ext), ext),
              ("a matmul that reads the one before it waits; the next one chains",
               chain_where_allowed(dependent, ext), ext)]
    return progs


def chain_where_allowed(code: list[int], ext: list[int]) -> list[int]:
    """`code` with CHAIN on every MM, and OVERLAP on every instruction that may take it, where the
    machine model accepts them (what a compiler that always chains would emit)."""
    mach = Machine.with_ext(ext, isa.EXT_MEMORY)
    out: list[int] = []
    for pc in range(len(code) // isa.WORDS_PER_INSTR):
        words = code[4 * pc : 4 * pc + 4]
        tries = [asm.overlap(words)] if words[0] >> 28 in isa.OVERLAP_OPS else []
        if words[0] >> 28 == isa.OP_MM:
            tries = [asm.chain(w) for w in tries + [words]] + tries
        found = _first_accepted(mach, pc, tries + [words])
        if found is None:
            raise ProgramError(f"chain_where_allowed: instruction {pc} is not a program")
        mach, taken = found
        out += taken
    return out


def overlap_where_allowed(code: list[int], ext: list[int]) -> list[int]:
    """`code` with OVERLAP on every instruction that may take it where the machine model accepts
    it, trying them in order (what a compiler that always overlaps would emit)."""
    mach = Machine.with_ext(ext, isa.EXT_MEMORY)
    out: list[int] = []
    for pc in range(len(code) // isa.WORDS_PER_INSTR):
        words = code[4 * pc : 4 * pc + 4]
        found = _first_accepted(mach, pc, [asm.overlap(words)] if words[0] >> 28 in isa.OVERLAP_OPS else [])
        if found is None:  # as written, or the model's error naming why not
            found = (mach.copy(), words)
            found[0].step(pc, isa.Instr.decode(words))
        mach, taken = found
        out += taken
    return out


def _first_accepted(mach: Machine, pc: int, tries: list[list[int]]) -> tuple[Machine, list[int]] | None:
    """The first of `tries` (one instruction's encodings) that the model accepts as instruction
    `pc` after what `mach` has run, with the machine that ran it; None when it takes none."""
    for attempt in tries:
        trial = mach.copy()
        try:
            trial.step(pc, isa.Instr.decode(attempt))
        except ProgramError:
            continue
        return trial, attempt
    return None
