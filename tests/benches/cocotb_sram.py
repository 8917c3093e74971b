"""sram (16 one-read one-write banks behind five ports) against a Python dict.

Contract (rtl/sram.v header): bank of a word = {addr[11:10], addr[1:0]} (group, lane). Reads: p0 a line
(word j = p0_addr + j where p0_mask[j], data word j in bits 32j+31:32j), p1 and dr one word each; every
read returns in the second cycle after its request. Writes wc and wd: written in cycle t, readable by a
read issued in t + 1. Programs never give one bank two reads or two writes in a cycle, so the test draws
only such cycles: at most one read per bank across p0's masked words, p1 and dr, at most one write per
bank across wc and wd, and (as in GA2) no read of a word written in the same cycle. Every read of a
word written before is checked two cycles later (unwritten RAM reads X in Icarus).

Addresses come mostly from a few eight-word spans, among them the spans across the three group
boundaries (words 1020..1027, 2044..2051, 3068..3075), so lines cross groups and reads find words
written a cycle or a few before.
"""

from __future__ import annotations

import cocotb

from benches.cocotb_util import SRAM_RD_LAT, rng, show, start_clock, words32

CYCLES = 10000
LINE = 4


def bank_of(addr: int, aw: int) -> int:
    """{group, lane}: address bits aw-1:aw-2 and 1:0, written from the header, not from isa.bank_of."""
    return ((addr >> (aw - 2)) << 2) | (addr & 3)


def crosses_group(addr: int, mask: int, aw: int) -> bool:
    groups = {(addr + j) >> (aw - 2) for j in range(LINE) if mask >> j & 1}
    return len(groups) > 1


@cocotb.test()
async def test_sram_conflict_free_random_cycles(dut):
    aw = len(dut.p1_addr)
    words = 1 << aw
    quarter = words // 4
    for name in ("p0_mask", "p0_addr", "p1_en", "p1_addr", "dr_en", "dr_addr",
                 "wc_en", "wc_addr", "wc_data", "wd_en", "wd_addr", "wd_data"):
        getattr(dut, name).value = 0
    cycles = await start_clock(dut)
    r = rng()
    spans = [0, words - 8] + [g * quarter - 4 for g in (1, 2, 3)] + [r.randrange(words - 8) for _ in range(6)]

    def address() -> int:
        return r.choice(spans) + r.randrange(8) if r.random() < 0.9 else r.randrange(words)

    model: dict[int, int] = {}
    written_at: dict[int, int] = {}  # word -> the cycle of its last write
    due: dict[int, list[tuple[str, int, int, int]]] = {}  # cycle -> [(port, index, word, value)]
    stats = dict(reads=0, line_words=0, crossing_lines=0, right_after_write=0, same_bank_read_and_write=0)
    for c in range(CYCLES + SRAM_RD_LAT):
        # --- the answers to the reads of cycle c - 2 ------------------------------------------------------
        if c in due:
            p0 = words32(dut.p0_data.value)
            single = {"p1": words32(dut.p1_data.value)[0], "dr": words32(dut.dr_data.value)[0]}
            for port, j, word, value in due.pop(c):
                got = p0[j] if port == "p0" else single[port]
                assert got == value, (f"sram {port} read of word {word} in cycle {c - SRAM_RD_LAT}"
                                      f"{f' (line word {j})' if port == 'p0' else ''}: got {show(got)} in cycle {c}, "
                                      f"model {value:#010x}")
                stats["reads"] += 1
        if c >= CYCLES:
            await cycles.next()
            continue
        # --- this cycle's requests, conflict free -----------------------------------------------------
        read_banks: set[int] = set()
        reads: list[tuple[str, int, int]] = []  # (port, line index, word)
        mask = r.choice((0xF, 0xF, 0, r.randrange(16)))
        p0_addr = min(address(), words - LINE)
        line = [p0_addr + j for j in range(LINE) if mask >> j & 1]
        for j in range(LINE):
            if mask >> j & 1:
                read_banks.add(bank_of(p0_addr + j, aw))
                reads.append(("p0", j, p0_addr + j))
        if line and crosses_group(p0_addr, mask, aw) and all(w in model for w in line):
            stats["crossing_lines"] += 1
        dut.p0_mask.value = mask
        dut.p0_addr.value = p0_addr
        for port in ("p1", "dr"):
            addr = address()
            enable = r.random() < 0.7 and bank_of(addr, aw) not in read_banks
            if enable:
                read_banks.add(bank_of(addr, aw))
                reads.append((port, 0, addr))
            getattr(dut, f"{port}_en").value = int(enable)
            getattr(dut, f"{port}_addr").value = addr
        read_words = {w for _, _, w in reads}
        writes: dict[int, int] = {}
        write_banks: set[int] = set()
        for port in ("wc", "wd"):
            addr = address()
            value = r.getrandbits(32)
            enable = r.random() < 0.6 and bank_of(addr, aw) not in write_banks and addr not in read_words
            if enable:
                write_banks.add(bank_of(addr, aw))
                writes[addr] = value
                if bank_of(addr, aw) in read_banks:
                    stats["same_bank_read_and_write"] += 1
            getattr(dut, f"{port}_en").value = int(enable)
            getattr(dut, f"{port}_addr").value = addr
            getattr(dut, f"{port}_data").value = value
        # --- what the reads must return: the model before this cycle's writes ----------------------------
        for port, j, word in reads:
            if word in model:
                due.setdefault(c + SRAM_RD_LAT, []).append((port, j, word, model[word]))
                stats["line_words"] += port == "p0"
                stats["right_after_write"] += written_at[word] == c - 1
        model.update(writes)
        written_at.update(dict.fromkeys(writes, c))
        await cycles.next()
    dut._log.info("sram: %d conflict-free cycles, %s", CYCLES, ", ".join(f"{k} {v}" for k, v in stats.items()))
    for key, count in stats.items():
        assert count > 0, f"no read of kind {key} was checked: {stats}"
