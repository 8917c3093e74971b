"""The decode-step benchmark of the mixed model on GA2 (inference/chip_context.py): the word bound
recomputed from the model's own arrays, the cycles of a step found once per distinct program against
a whole step run on the machine model with random data, and the largest context by external memory
from a closed form."""

from __future__ import annotations

import numpy as np
import pytest
from capra import config
from inference.chip_context import LAYOUTS, StepCycles, largest_context, step_cost
from inference.mixed_chip import MixedChip, calibrate, visible_rows
from inference.mixed_lm import make_mixed_model


@pytest.fixture(scope="module")
def chip():
    model = make_mixed_model()
    ids = [i % 30 + 1 for i in range(200)]  # the scales set immediates only: any calibration will do
    return MixedChip(model, calibrate(model, [ids]))


def _weight_words(model) -> int:
    """Every weight once, int8, four to a word, from the numpy arrays; plus the rotary pair swap, a
    head_dim x head_dim int8 constant in each of the layer x KV group projection programs."""
    weights = sum(lw.wq.size + lw.wk.size + lw.wv.size + lw.wo.size for lw in model.layers) + model.unembed.size
    swaps = model.n_layers * model.n_kv_heads * model.head_dim ** 2
    return (weights + swaps) // 4


def _rows(model, layout: str, t: int) -> int:
    kinds = {"mixed": [lw.windowed for lw in model.layers], "all-global": [False] * model.n_layers,
             "all-windowed": [True] * model.n_layers}[layout]
    return sum(min(t, model.window) if w else t for w in kinds) * model.n_kv_heads


@pytest.mark.parametrize("t", [1, 128, 300, 5000])
def test_word_bound_is_every_weight_and_every_kv_row_read(chip, t):
    model = chip.model
    costs = StepCycles(chip)
    for layout in LAYOUTS:
        c = step_cost(costs, layout, t)
        kv = 2 * _rows(model, layout, t) * model.head_dim // 4
        assert c.word_bound == _weight_words(model) + kv, layout
        assert c.kv_words == kv and c.kv_rows == _rows(model, layout, t)
        assert c.cycles >= c.word_bound  # one word a cycle: no step beats its bound


@pytest.mark.parametrize("context, tile", [(100, None), (300, None), (2000, 16)])
def test_step_cycles_are_those_of_a_step_run_on_random_data(chip, context, tile):
    """A decode step of the mixed model run whole on the machine model, its cache random int8 rows,
    takes the cycles step_cost adds up from each distinct program run once on zeros (one-shot
    attention at 100; tiled at 300; at 2000 in 16-key tiles, two programs per tiled attention)."""
    model = chip.model
    rng = np.random.default_rng(context)
    saved = chip.tile
    try:
        chip.tile = tile or saved
        chip.reset()
        for layer in range(model.n_layers):
            for grp in range(model.n_kv_heads):
                n = visible_rows(model, layer, context) - 1
                chip.keys[layer][grp] = rng.integers(-127, 128, (n, model.head_dim))
                chip.values[layer][grp] = rng.integers(-127, 128, (n, model.head_dim))
        chip.position = context - 1
        trace = chip.step(int(rng.integers(0, model.vocab_size)), executor="machine")
        want = step_cost(StepCycles(chip), "mixed", context)
    finally:
        chip.tile = saved
        chip.reset()
    assert sum(trace.cycles) == want.cycles
    # at 2000 in tiles of 16: two global layers x two KV groups, each attention a second program
    assert len(trace.runs) == want.programs == (24 if tile else 20)


def test_largest_context_by_external_memory(chip):
    """The longest context whose weights and K/V fit the largest external memory, in closed form."""
    model = chip.model
    free = config.EXT_MEMORY_MAX - _weight_words(model)
    row = 2 * model.head_dim // 4 * model.n_kv_heads  # K and V of one token in one layer, every KV head
    windowed = sum(lw.windowed for lw in model.layers)
    mixed = (free - windowed * model.window * row) // ((model.n_layers - windowed) * row)
    assert largest_context(chip, "mixed") == mixed
    assert largest_context(chip, "all-global") == free // (model.n_layers * row)
    assert largest_context(chip, "all-windowed") == config.EXT_MEMORY_MAX
