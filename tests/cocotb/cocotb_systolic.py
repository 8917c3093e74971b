"""systolic (N x N output-stationary int8 MAC array) against numpy matmul, N read from the port widths.

The test is the driver: A[i][k] enters lane i of a_left in step k+i and B[k][j] lane j of b_top in step
k+j, zero outside those windows. After every step the accumulators must hold the partial sums the
skew implies (PE(i,j) has seen k = 0 .. step-i-j), and after K+2N-2 steps the full product A @ B.
"""

from __future__ import annotations

import cocotb
import numpy as np
from capra import isa
from capra.machine import wrap32
from cocotb_util import Cycles, rng, s32, start_clock

# Icarus spends about 10 ms per cycle on the 8 x 8 array (its 2048-bit accumulator vector), so the
# larger array gets fewer and shorter matmuls; N = 4 is the chip's size and gets the most.
MATMULS = {2: 40, 4: 60, 8: 10}
MAX_RANDOM_K = {2: 48, 4: 48, 8: 20}


def array_size(dut) -> int:
    return len(dut.a_left) // 8


def pack_lanes(values) -> int:
    word = 0
    for lane, v in enumerate(values):
        word |= (int(v) & 0xFF) << (8 * lane)
    return word


def read_acc(dut, n: int) -> np.ndarray:
    bits = int(dut.acc.value)
    flat = [s32(bits >> (32 * p)) for p in range(n * n)]
    return np.array(flat, dtype=np.int64).reshape(n, n)


def partial_products(a: np.ndarray, b: np.ndarray, step: int) -> np.ndarray:
    """What PE(i,j) holds after `step`+1 enabled cycles: sum over k <= step - i - j of A[i][k] * B[k][j]."""
    n, k_len = a.shape
    out = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in range(n):
            last = min(step - i - j, k_len - 1)
            if last >= 0:
                out[i, j] = int(a[i, : last + 1] @ b[: last + 1, j])
    return wrap32(out)


async def run_matmul(dut, cycles: Cycles, a: np.ndarray, b: np.ndarray, r, bubbles: float) -> None:
    n, k_len = a.shape
    dut.clear.value = 1
    dut.en.value = 0
    await cycles.next()
    dut.clear.value = 0
    assert not read_acc(dut, n).any(), "accumulators not zero after clear"
    steps = k_len + 2 * n - 2
    for step in range(steps):
        while r.random() < bubbles:  # a stalled cycle: garbage on the inputs must not move the array
            dut.en.value = 0
            dut.a_left.value = r.getrandbits(8 * n)
            dut.b_top.value = r.getrandbits(8 * n)
            before = read_acc(dut, n)
            await cycles.next()
            assert (read_acc(dut, n) == before).all(), f"accumulators changed with en=0 before step {step}"
        a_col = [a[i, step - i] if 0 <= step - i < k_len else 0 for i in range(n)]
        b_row = [b[step - j, j] if 0 <= step - j < k_len else 0 for j in range(n)]
        dut.en.value = 1
        dut.a_left.value = pack_lanes(a_col)
        dut.b_top.value = pack_lanes(b_row)
        await cycles.next()
        got = read_acc(dut, n)
        want = partial_products(a, b, step)
        assert (got == want).all(), f"N={n} K={k_len} after step {step}:\n got {got.tolist()}\n want {want.tolist()}"
    dut.en.value = 0
    got = read_acc(dut, n)
    want = wrap32(a @ b)
    assert (got == want).all(), f"N={n} K={k_len}: acc {got.tolist()} != numpy A @ B {want.tolist()}"


def random_matrix(r, rows: int, cols: int) -> np.ndarray:
    values = [r.choice((-128, 127)) if r.random() < 0.15 else r.randint(-128, 127) for _ in range(rows * cols)]
    return np.array(values, dtype=np.int64).reshape(rows, cols)


async def setup(dut) -> Cycles:
    dut.clear.value = 0
    dut.en.value = 0
    dut.a_left.value = 0
    dut.b_top.value = 0
    return await start_clock(dut)


@cocotb.test()
async def test_systolic_random_matmuls(dut):
    """Random int8 A (N x K) and B (K x N), random K, one matmul after another, each starting with clear."""
    cycles = await setup(dut)
    n = array_size(dut)
    r = rng()
    count = MATMULS.get(n, 20)
    for m in range(count):
        k_len = r.choice((1, 2, n, n + 1)) if m < 4 else r.randint(1, MAX_RANDOM_K.get(n, 16))
        await run_matmul(dut, cycles, random_matrix(r, n, k_len), random_matrix(r, k_len, n), r, bubbles=0.1)
    dut._log.info("systolic N=%d: %d random matmuls", n, count)


@cocotb.test()
async def test_systolic_extremes(dut):
    """All -128 (the largest product, 2^14) over the longest K of the chip (2^24 in total), and mixed -128 / 127."""
    cycles = await setup(dut)
    n = array_size(dut)
    r = rng()
    k_len = isa.MM_MAX_K if n <= 4 else 64
    corner = np.full((n, k_len), -128, dtype=np.int64)
    await run_matmul(dut, cycles, corner, corner.T.copy(), r, bubbles=0.0)
    mixed = np.where(np.arange(n * k_len).reshape(n, k_len) % 3 == 0, 127, -128)
    await run_matmul(dut, cycles, mixed, corner.T.copy(), r, bubbles=0.0)
