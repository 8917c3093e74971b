"""systolic (N x N output-stationary int8 MAC array) against numpy matmul, N read from the port widths.

Contract (rtl/systolic.v header). The array is split into groups of rows by `inj`: a group starts at a
row g with inj[g] set and runs down to the next such row. The test is the driver of every group, each
with its own stream of tiles (A: h x K rows of the group, B: K x N): reduction step k of a tile is "group
step" tau, and PE(g+r, c) sees A[r][k] and B[k][c] in cycle tau + r + c. So
  a_left lane g+r in cycle tau + r carries A[r][k], with first_left (k = 0) and last_left (k = K-1);
  b_inj row g column c in cycle tau + c carries B[k][c] (b_inj rows without inj carry random garbage).
Checked timing: an operand pair on a PE's inputs in cycle x is in res from cycle x + 3, so PE(g+r, c)
shows a tile's sum A[r] . B[:, c] from cycle tau_last + r + c + 3 on, and holds it until the next tile's
sum arrives. res of every PE is compared with that expectation in every cycle.

Tiles follow each other with no gap (the next tile's first step right after the previous tile's last)
or after a few bubbles (zero operands, no flags); K is random, including K = 1. The layouts (inj on row 0;
on rows 0 and N/2; on every row) follow each other in one stream, each switched in once the previous
layout's operands have passed every PE.
"""

from __future__ import annotations

import cocotb
import numpy as np
from capra import isa
from capra.machine import wrap32

from benches.cocotb_util import Cycles, reset, rng, s32, start_clock

RESULT_DELAY = 3  # operands on a PE's inputs in cycle x are in res from x + 3
# tiles per group in each layout; N = 8 costs most per cycle (64 PEs to compare), so it gets fewer
TILES = {2: 60, 4: 60, 8: 40}
MAX_K = 32


def array_size(dut) -> int:
    return len(dut.a_left) // 8


def layouts(n: int) -> dict[str, list[int]]:
    """inj patterns: one group, two groups (rows 0 and N/2), a group per row."""
    return {
        "one group (inj on row 0)": [0],
        f"two groups (inj on rows 0 and {n // 2})": [0, n // 2],
        "a group per row": list(range(n)),
    }


def random_matrix(r, rows: int, cols: int) -> np.ndarray:
    values = [r.choice((-128, 127)) if r.random() < 0.15 else r.randint(-128, 127) for _ in range(rows * cols)]
    return np.array(values, dtype=np.int64).reshape(rows, cols)


class Group:
    """One group's tiles (A: h x K, B: K x N) and its step schedule: step tau (a cycle number: the cycle its
    operands enter row g, column 0) is steps[tau - start] = (tile, k), or None for a bubble."""

    def __init__(self, first_row: int, tiles: list[tuple[np.ndarray, np.ndarray]], gaps: list[int]) -> None:
        """gaps[t] bubbles come before tile t (0: right after the previous tile's last step)."""
        self.g = first_row
        self.h = tiles[0][0].shape[0]
        self.tiles = tiles
        self.start = 0
        self.steps: list[tuple[int, int] | None] = []
        for t, ((a, _), gap) in enumerate(zip(tiles, gaps, strict=True)):
            self.steps += [None] * gap + [(t, k) for k in range(a.shape[1])]

    @property
    def last_step(self) -> int:
        return self.start + len(self.steps) - 1

    def step(self, tau: int) -> tuple[int, int] | None:
        return self.steps[tau - self.start] if self.start <= tau <= self.last_step else None

    def is_last(self, tau: int) -> bool:
        s = self.step(tau)
        return s is not None and s[1] == self.tiles[s[0]][0].shape[1] - 1


def random_group(r, first_row: int, rows: int, n: int, tiles: int) -> Group:
    """Random tiles of random K (1, 2, N, up to MAX_K); 30 % of them after one to three bubbles."""
    mats, gaps = [], []
    for t in range(tiles):
        k_len = r.choice((1, 1, 2, n, r.randint(1, MAX_K))) if t < 6 else r.randint(1, MAX_K)
        mats.append((random_matrix(r, rows, k_len), random_matrix(r, k_len, n)))
        gaps.append(r.randint(1, 3) if r.random() < 0.3 else 0)
    return Group(first_row, mats, gaps)


class Segment:
    """A group layout from cycle `switch` on: inj set on the first row of each group."""

    def __init__(self, switch: int, groups: list[Group]) -> None:
        self.switch = switch
        self.groups = groups
        self.inj = sum(1 << grp.g for grp in groups)


def drive_schedule(segments: list[Segment], n: int, r, cycles: int) -> list[tuple[int, int, int, int, int]]:
    """(inj, a_left, first_left, last_left, b_inj) for every cycle: see the module docstring."""
    out = []
    for x in range(cycles):
        seg = [s for s in segments if s.switch <= x][-1]
        a_left = first = last = 0
        b_inj = r.getrandbits(8 * n * n)  # garbage in every row without inj ...
        for grp in seg.groups:
            for c in range(n):  # ... and the group's B row (zero in bubbles) on its inj row
                b_inj &= ~(0xFF << (8 * (grp.g * n + c)))
                s = grp.step(x - c)
                if s is not None:
                    b_inj |= (int(grp.tiles[s[0]][1][s[1], c]) & 0xFF) << (8 * (grp.g * n + c))
            for rr in range(grp.h):
                lane = grp.g + rr
                s = grp.step(x - rr)
                if s is not None:
                    a_left |= (int(grp.tiles[s[0]][0][rr, s[1]]) & 0xFF) << (8 * lane)
                    first |= int(s[1] == 0) << lane
                    last |= int(grp.is_last(x - rr)) << lane
        out.append((seg.inj, a_left, first, last, b_inj))
    return out


def result_events(groups: list[Group], n: int) -> dict[int, list[tuple[int, int, int]]]:
    """cycle -> [(row, column, sum)]: when each tile's sum appears in res (numpy, wrapped to int32)."""
    events: dict[int, list[tuple[int, int, int]]] = {}
    for grp in groups:
        sums = [wrap32(a @ b) for a, b in grp.tiles]
        for tau in range(grp.start, grp.last_step + 1):
            if not grp.is_last(tau):
                continue
            tile = grp.step(tau)[0]
            for rr in range(grp.h):
                for c in range(n):
                    due = tau + rr + c + RESULT_DELAY
                    events.setdefault(due, []).append((grp.g + rr, c, int(sums[tile][rr, c])))
    return events


def read_res(dut, n: int) -> np.ndarray:
    bits = int(dut.res.value)
    return np.array([s32(bits >> (32 * p)) for p in range(n * n)], dtype=np.int64).reshape(n, n)


def place_segments(layouts_groups: list[list[Group]], n: int, r) -> list[Segment]:
    """One segment per layout, each switched in 2N-1 to 2N+1 cycles after the previous layout's last step:
    by then that step's operands have passed every PE of its group (PE(g+r, c) sees them r + c <= 2N-2
    cycles after the step), so the new inj pattern cannot take one of them."""
    segments, switch = [], 0
    for groups in layouts_groups:
        for grp in groups:
            grp.start = switch
        segments.append(Segment(switch, groups))
        switch = max(grp.last_step for grp in groups) + 2 * n - 1 + r.randint(0, 2)
    return segments


async def stream(dut, cycles: Cycles, n: int, segments: list[Segment], r, what: str) -> None:
    """Reset, then drive every segment's groups and compare res with the expected sums in every cycle."""
    groups = [grp for seg in segments for grp in seg.groups]
    total = max(grp.last_step for grp in groups) + 2 * n + RESULT_DELAY + 1
    inputs = drive_schedule(segments, n, r, total)
    events = result_events(groups, n)
    assert max(events) < total, "the stream ends before every result is due"
    for name in ("inj", "a_left", "first_left", "last_left", "b_inj"):
        getattr(dut, name).value = 0
    await reset(dut, cycles)
    want = np.zeros((n, n), dtype=np.int64)  # res after reset
    for x in range(total):
        inj, a_left, first, last, b_inj = inputs[x]
        dut.inj.value = inj
        dut.a_left.value = a_left
        dut.first_left.value = first
        dut.last_left.value = last
        dut.b_inj.value = b_inj
        for row, col, value in events.get(x, []):
            want[row, col] = value
        got = read_res(dut, n)
        if not (got == want).all():
            bad = [(i, c) for i in range(n) for c in range(n) if got[i, c] != want[i, c]]
            i, c = bad[0]
            inj_rows = [grp.g for grp in [s for s in segments if s.switch <= x][-1].groups]
            raise AssertionError(f"N={n} {what}, cycle {x} of the stream (inj on rows {inj_rows}): res of "
                                 f"PE({i},{c}) = {got[i, c]}, numpy says {want[i, c]} ({len(bad)} PEs differ)\n"
                                 f" got {got.tolist()}\n want {want.tolist()}")
        await cycles.next()


async def setup(dut) -> Cycles:
    dut.rst.value = 1
    dut.en.value = 1
    for name in ("inj", "a_left", "first_left", "last_left", "b_inj"):
        getattr(dut, name).value = 0
    return await start_clock(dut)


@cocotb.test()
async def test_systolic_tiles_back_to_back_in_every_group_layout(dut):
    """Random int8 tiles, random K (K = 1 included), back to back and after bubbles, in each inj layout; the
    layouts follow each other in one stream (res keeps each PE's last sum across a change of layout)."""
    cycles = await setup(dut)
    n = array_size(dut)
    r = rng()
    per_layout = []
    for inj_rows in layouts(n).values():
        bounds = inj_rows + [n]
        per_layout.append([random_group(r, g, bounds[i + 1] - g, n, TILES.get(n, 10)) for i, g in enumerate(inj_rows)])
    await stream(dut, cycles, n, place_segments(per_layout, n, r), r, "layouts " + ", then ".join(layouts(n)))
    tiles = sum(len(grp.tiles) for groups in per_layout for grp in groups)
    dut._log.info("systolic N=%d: %d tiles in %d layouts, res of every PE checked in every cycle", n, tiles,
                  len(per_layout))


@cocotb.test()
async def test_systolic_extremes(dut):
    """The longest reduction of the chip with the largest products: all -128 (K x 2^14 = 2^24 per PE),
    then -128 and 127 mixed against 127, back to back."""
    cycles = await setup(dut)
    n = array_size(dut)
    r = rng()
    k_len = isa.MM_MAX_K
    corner = (np.full((n, k_len), -128, dtype=np.int64), np.full((k_len, n), -128, dtype=np.int64))
    mixed = (np.where(np.arange(n * k_len).reshape(n, k_len) % 3 == 0, 127, -128),
             np.full((k_len, n), 127, dtype=np.int64))
    await stream(dut, cycles, n, [Segment(0, [Group(0, [corner, mixed], [0, 0])])], r, f"extremes K={k_len}")


@cocotb.test()
async def test_systolic_holds_while_enable_is_low(dut):
    """With en low the array does not move: operands and flags that would finish tiles change no
    result (every res stays as the reset left it)."""
    n = array_size(dut)
    cycles = await setup(dut)
    await reset(dut, cycles)
    r = rng()
    dut.en.value = 0
    for _ in range(6 * n):
        dut.inj.value = r.getrandbits(n)
        dut.a_left.value = r.getrandbits(8 * n)
        dut.first_left.value = r.getrandbits(n)
        dut.last_left.value = (1 << n) - 1
        dut.b_inj.value = r.getrandbits(8 * n * n)
        await cycles.next()
    assert not read_res(dut, n).any(), "res changed while en was low"
