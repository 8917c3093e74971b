"""The timeline: the machine model's events against the RTL's own, cycle for cycle.

The replays compare each program's final memory and five counters. Equal counters could still hide
a model that puts the cycles in the wrong places (a transfer that sets up late and a compute unit
that finishes early add up to the same total). Here the testbench, run with +TIMELINE, prints
every instruction the sequencer takes, every compute unit's last cycle and every transfer's setup
and end from the RTL's signals, and they must be the machine model's events exactly, in both
simulators, at several memory latencies. The lanes the timeline tool draws must add up to the
counters, which the model keeps by separate bookkeeping.
"""

from __future__ import annotations

import pytest
from capra import asm, isa
from capra.machine import Machine
from capra.randprog import random_program
from capra_cli.timeline import counted, lane_counts, slices
from conftest import needs_icarus, needs_verilator
from replay import image
from replay.simulators import ICARUS, VERILATOR
from replay.timeline import ordered, parse_events, rtl_events


def _model_events(code, ext, latency):
    m = Machine.with_ext(ext, isa.EXT_MEMORY, ext_latency=latency, events=True)
    m.run(code)
    return m


def test_transfer_events_belong_to_the_loads_and_stores_in_issue_order():
    code = asm.load(0, 0, 1, 4) + asm.qcfg() + asm.store(0, 8, 1, 4) + asm.halt()
    out = "\n".join(["EVENT 0 0 go 0", "EVENT 0 1 go 1", "EVENT 0 1 setup", "EVENT 0 2 go 2", "EVENT 0 9 end",
                     "EVENT 0 10 setup", "EVENT 0 14 end", "EVENT 0 15 go 3", "COUNTERS 0 16 0 0 0 0"])
    (events,) = parse_events(out, [code])
    assert [(e.kind, e.pc, e.unit) for e in events if e.kind in ("setup", "end")] == [
        ("setup", 0, "dma"), ("end", 0, "dma"), ("setup", 2, "dma"), ("end", 2, "dma")]
    assert [(e.pc, e.unit) for e in events if e.kind == "go"] == [(0, "dma"), (1, "seq"), (2, "dma"), (3, "seq")]


@pytest.mark.parametrize("bad, message", [
    ("EVENT 0 3 setup", "before its LOAD or STORE"),
    ("EVENT 2 3 go 0", "the image holds 1"),
])
def test_events_that_cannot_be_placed_are_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        parse_events(bad, [asm.halt()])


@pytest.mark.parametrize("latency", [0, 4, 17])
def test_the_timeline_lanes_add_up_to_the_counters(latency):
    for seed in range(20):
        code, ext = random_program(seed, 14, ext_latency=latency)
        m = _model_events(code, ext, latency)
        sl = slices(code, m.events, latency)
        lanes, want = lane_counts(sl, m.counters.cycles), counted(m.counters.with_holds())
        assert lanes == want, f"seed {seed}, latency {latency}: lanes {lanes}, counters {want}"


@needs_icarus
@needs_verilator
@pytest.mark.parametrize("latency", [0, 4, 17])
def test_rtl_timeline_equals_the_model_event_for_event(latency):
    programs = [random_program(seed, 14, ext_latency=latency) for seed in range(100 + latency, 108 + latency)]
    records = [image.record(code, ext, ext_latency=latency) for code, ext in programs]
    want = [ordered(_model_events(code, ext, latency).events) for code, ext in programs]
    assert sum(len(w) for w in want) > 8 * 10  # the programs do something
    for sim in (ICARUS, VERILATOR):
        verdict, found = rtl_events(records, sim, latency=latency)
        assert verdict.passed, verdict.problems
        for p, (w, got) in enumerate(zip(want, found, strict=True)):
            got = ordered(got)
            first = next((i for i, (x, y) in enumerate(zip(w, got)) if x != y), min(len(w), len(got)))
            assert w == got, (f"{sim.name}, latency {latency}, program {p}: event {first} differs: the model's "
                              f"{w[first] if first < len(w) else None}, the RTL's "
                              f"{got[first] if first < len(got) else None}")
