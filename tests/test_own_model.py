"""The guide to compiling your own model (docs/own_model.md) runs as written: `python
tools/own_model.py` builds its graph with capra.Graph, compiles it, and its program agrees with the
graph's float model and, replayed, with both simulators."""

from __future__ import annotations

import numpy as np
import pytest
from capra import compile_graph, run
from capra_cli import own_model
from capra_cli.__main__ import run_command
from conftest import needs_simulators


def call(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = run_command("own-model", list(argv), prog="own_model.py")
    return rc, capsys.readouterr().out


@needs_simulators
def test_the_guides_model_runs_on_both_simulators_as_on_the_machine_model(capsys):
    rc, out = call(capsys)
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("graph own_mlp: 10 nodes, compiled to ")
    cycles = int(next(line for line in lines if line.startswith("cycles: ")).split()[1])
    for sim in ("Icarus", "Verilator"):
        line = next(line for line in lines if line.startswith(sim))
        assert "PASS: 1 programs match" in line and f"{cycles} cycles in total" in line, line
    assert lines[-1].startswith("VERDICT: PASS")


@pytest.mark.parametrize("dim, hidden, seed", [(8, 16, 3), (32, 64, 5)])
def test_other_sizes_compile_and_agree_with_the_float_model(capsys, dim, hidden, seed):
    rc, out = call(capsys, "--dim", str(dim), "--hidden", str(hidden), "--seed", str(seed), "--no-rtl")
    assert rc == 0, out


def test_the_graph_is_the_documented_mlp_block():
    """The float model the guide describes, computed here with numpy alone."""
    g = own_model.build(16, 32, 0)
    w1, w2, w3 = (g.nodes[n].attrs["value"] for n in ("w1", "w2", "w3"))
    x = np.random.default_rng(9).standard_normal((1, 16))
    logits = (x + np.maximum(x @ w1, 0) @ w2) @ w3
    got = g.evaluate({"x": x})
    assert np.allclose(got["logits"], logits)
    assert int(np.ravel(got["cls"])[0]) == int(np.argmax(logits))
    P = compile_graph(g, [{"x": x}])
    assert run(P, {"x": x})["cls"][0][0][0] == int(np.argmax(logits))
