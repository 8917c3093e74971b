"""The configuration (model/capra/config.py): validation, the active one, and exactness at corners."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from capra import config, isa
from capra.config import Config, ConfigError
from capra.machine import Machine
from replay import runs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fields, named", [
    ({"ext_latency": -1}, "ext_latency=-1"), ({"ext_latency": 32}, "ext_latency=32"),
    ({"sram_words": 3000}, "power of two"), ({"sram_words": 1024}, "2048..16384"),
    ({"sram_words": 32768}, "2048..16384"), ({"dma_queue": 0}, "dma_queue=0"), ({"dma_queue": 17}, "dma_queue=17"),
    ({"n": 3}, "n=3: the systolic array is built as 2 x 2, 4 x 4 or 8 x 8"), ({"n": 16}, "n=16"),
    ({"n": 1}, "n=1"), ({"ext_words": 3}, "ext_words=3: it must be 1 or 2"),
    ({"ext_words": 0}, "ext_words=0"),
    ({"dma_queue": True}, "integer"), ({"sram_words": 4096.0}, "integer"),
])
def test_bad_configurations_are_named(fields, named):
    with pytest.raises(ConfigError, match=named):
        Config(**fields)


def test_parse_round_trips_and_refuses_by_name():
    cfg = Config(ext_latency=8, sram_words=2048, dma_queue=2)
    assert Config.parse(cfg.key()) == cfg
    assert Config.parse("") == config.DEFAULT
    assert Config.parse(" ext_latency = 0 ") == Config(ext_latency=0)
    for text, named in (("latency=3", "expected name=value"), ("ext_latency=x", "decimal integer"),
                        ("dma_queue=2,dma_queue=4", "given twice"), ("sram_words", "expected name=value"),
                        ("sram_words=4_096", "decimal integer"), ("n=\u0664", "decimal integer"),  # int() takes both
                        ("n=+4", "decimal integer")):
        with pytest.raises(ConfigError, match=named):
            Config.parse(text)


def test_a_seed_without_stalls_is_no_setting():
    """A memory that never stalls has no schedule: its seed is the default's (one chip, one key), and
    a configuration text that seeds it is refused rather than quietly meaning the default chip."""
    assert config.Config(ext_seed=5) == config.DEFAULT
    assert config.Config(ext_seed=5).key() == config.DEFAULT.key()
    assert config.Config(ext_stall=10, ext_seed=5).ext_seed == 5
    with pytest.raises(config.ConfigError, match="ext_seed=5 without ext_stall"):
        config.Config.parse("ext_seed=5")
    with pytest.raises(config.ConfigError, match="without ext_stall"):
        config.Config.parse("ext_stall=0,ext_seed=5")
    assert config.Config.parse("ext_stall=3,ext_seed=5") == config.Config(ext_stall=3, ext_seed=5)
    assert config.Config.parse("ext_seed=1") == config.DEFAULT


def test_default_is_todays_chip_and_emits_no_defines():
    assert config.DEFAULT == Config(ext_latency=4, sram_words=4096, dma_queue=4, n=4, ext_words=1)
    assert config.DEFAULT.rtl_defines() == ()
    # the latency is the memory's: the testbench takes it at run time, so it is no define
    assert Config(ext_latency=8, sram_words=8192, dma_queue=2).rtl_defines() == (
        "GA2_SRAM_WORDS_D=8192", "GA2_DMA_QUEUE_D=2")
    assert Config(ext_words=2).rtl_defines() == ("GA2_EXT_WORDS_D=2",)
    assert Config(n=8, ext_words=2).rtl_defines() == ("GA2_EXT_WORDS_D=2", "GA2_N_D=8")
    assert Config(ext_words=2).label() == "L4 S4096 Q4 E2" and config.DEFAULT.label() == "L4 S4096 Q4"
    assert Config(n=2).label() == "L4 S4096 Q4 N2"


def test_use_sets_isa_and_the_machine_and_restores():
    before = (isa.SRAM_WORDS, isa.SRAM_GROUP_WORDS, isa.DMA_QUEUE, isa.EXT_LATENCY)
    with config.use(Config(ext_latency=8, sram_words=2048, dma_queue=2)):
        assert (isa.SRAM_WORDS, isa.SRAM_GROUP_WORDS, isa.DMA_QUEUE, isa.EXT_LATENCY) == (2048, 512, 2, 8)
        m = Machine.with_ext([0] * 4, 16)
        assert (len(m.sram), m.ext_latency, m.dma.latency) == (2048, 8, 8)
        assert isa.bank_of(512) == 4 and isa.bank_of(2047) == 15  # groups are quarters of 2048 words
    assert (isa.SRAM_WORDS, isa.SRAM_GROUP_WORDS, isa.DMA_QUEUE, isa.EXT_LATENCY) == before


def test_environment_variable_selects_the_configuration_at_import():
    code = "from capra import isa; print(isa.SRAM_WORDS, isa.DMA_QUEUE, isa.EXT_LATENCY)"
    env = {**os.environ, "GA2_CONFIG": "ext_latency=8,sram_words=2048"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT / "model", capture_output=True, text=True)
    assert out.stdout.split() == ["2048", "4", "8"], out.stderr
    env["GA2_CONFIG"] = "ext_latency=99"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT / "model", capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout)
    lines = out.stderr.strip().splitlines()  # one line naming the variable, no traceback
    assert len(lines) == 1 and "GA2_CONFIG='ext_latency=99': ext_latency=99" in lines[0], out.stderr


def documented_loads(q: int, latency: int, sizes: list[int], wait: bool = False,
                     load_stalls: list[int] | None = None) -> list[int]:
    """The five counters of LOADs of `sizes` words each (one row), then WAIT 0 if `wait`, then
    HALT, worked out from docs/isa.md alone (a shadow of the timing, not the machine model's code):
    an instruction issues a cycle after the one before; a LOAD issued at t with `q` transfers
    unfinished stalls until the oldest ends; it takes its descriptor at s = max(t + 1, the engine
    free), ends at s + n + L + 2 and frees the engine at s + n + 1; HALT (and WAIT 0) stall until
    the last transfer has ended; c1 counts the cycles some transfer is between s and its end.
    `load_stalls`, if given, gets each LOAD's own stall on the full queue."""
    t, engine, stall, ends, busy = 0, 0, 0, [], set()
    for n in sizes:
        unfinished = sorted(e for e in ends if e > t)
        waited = 0
        if len(unfinished) >= q:
            waited = unfinished[len(unfinished) - q] - t  # until the oldest of them ends
            stall, t = stall + waited, t + waited
        if load_stalls is not None:
            load_stalls.append(waited)
        s = max(t + 1, engine)
        ends.append(s + n + latency + 2)
        engine = s + n + 1
        busy.update(range(s, ends[-1]))
        t += 1
    for _ in range(2 if wait else 1):  # WAIT 0, then HALT; or HALT alone
        last = max(ends)
        stall += max(0, last - t)
        t = max(t, last) + 1
    return [t, len(busy), 0, 0, stall]


def test_documented_loads_matches_a_count_by_hand():
    # q = 2, L = 0: LOAD0 s=1 ends 4, LOAD1 s=3 ends 6, LOAD2 waits at cycles 2, 3 for LOAD0, s=5
    # ends 8; HALT at 5 waits 5, 6, 7 and halts in cycle 8: 9 cycles, DMA busy 1..7, 2 + 3 stalls.
    assert documented_loads(2, 0, [1, 1, 1]) == [9, 7, 0, 0, 5]


@pytest.mark.parametrize("q, latency, size", [(1, 0, 1), (2, 0, 1), (2, 8, 3), (4, 8, 1), (8, 30, 2), (16, 30, 1)])
def test_a_full_queue_follows_the_configuration(q, latency, size):
    """q + 1 LOADs: the last one waits for the first to end when (and only as long as) the queue
    is full. The machine model's counters must equal the documented timing's exactly, and the same
    program with one LOAD fewer (the queue never full) must stall on HALT only."""
    from capra import asm

    with config.use(Config(dma_queue=q, ext_latency=latency)):
        for count in (q + 1, q):
            code = [w for i in range(count) for w in asm.load(4 * i, 4 * i, 1, size)] + asm.halt()
            m = Machine.with_ext(list(range(4 * count + 4)), 16 + 4 * count)
            m.run(code)
            assert m.counters.as_list() == documented_loads(q, latency, [size] * count), (count, size)
        m = Machine.with_ext(list(range(4 * q + 4)), 16 + 4 * q)
        m.run([w for i in range(q) for w in asm.load(4 * i, 4 * i, 1, size)] + asm.wait() + asm.halt())
        assert m.counters.as_list() == documented_loads(q, latency, [size] * q, wait=True)
    stalls: list[int] = []
    documented_loads(q, latency, [size] * (q + 1), load_stalls=stalls)
    assert stalls[:q] == [0] * q and stalls[q] > 0  # each case fills the queue: the last LOAD waits


def test_a_transfer_moves_in_beats_of_the_interface_width():
    """One LOAD of rows x cols words, alone: the DMA is busy (counter c1) from its setup to its end,
    its beats + L + 2 cycles (docs/isa.md's LOAD timing, counted independently here; rows start at
    odd and even addresses), and the roofline counts the same beats; every word arrives whatever
    the width."""
    from capra import asm
    from capra.analysis import roofline

    for ext_words in (1, 2):
        for rows, cols in ((1, 1), (1, 2), (3, 5), (2, 8)):
            with config.use(Config(ext_words=ext_words, ext_latency=3)):
                code = asm.load(100, 7, rows, cols, ext_stride=cols + 2, sram_stride=cols + 1) + asm.wait() + asm.halt()
                ext = list(range(1000, 1100))
                m = Machine.with_ext(ext, 100)
                m.run(code)
                # a two-word bus moves the words of a row in one aligned pair of addresses together
                firsts = [7 + r * (cols + 2) for r in range(rows)]
                beats = rows * cols if ext_words == 1 else sum((e + cols - 1) // 2 - e // 2 + 1 for e in firsts)
                assert m.counters.as_list()[1] == beats + 3 + 2, (ext_words, rows, cols)
                assert roofline(code).dma_beats == beats and roofline(code).dma_words == rows * cols
                for r in range(rows):
                    got = m.sram[100 + r * (cols + 1): 100 + r * (cols + 1) + cols].tolist()
                    assert got == ext[7 + r * (cols + 2): 7 + r * (cols + 2) + cols]


# every array size x the fastest and a slow memory x either port, and two scratchpad / queue corners
ARRAY_GRID = tuple(Config(n=n, ext_latency=lat, ext_words=e) for n in (2, 4, 8) for lat in (0, 8) for e in (1, 2))
CORNERS = ARRAY_GRID + (Config(ext_latency=0, sram_words=2048, dma_queue=2, ext_words=2, n=2),
                        Config(ext_latency=8, sram_words=8192, dma_queue=8))
RANDOM_PER_CORNER = 8  # random programs per configuration here; make soak runs thousands on any one

# make test replays three of the corners, on two chip builds beyond the default (a Verilator build
# is a quarter of a minute here; the n = 8 one is shared with the test below): every array size,
# both ports, the small scratchpad and queue, both latencies. make test-full replays all fourteen,
# every chip at both latencies, the large scratchpad and queue among them.
IN_MAKE_TEST = {"L0 S4096 Q4", "L0 S2048 Q2 E2 N2", "L8 S4096 Q4 N8"}


RTL_CORNERS = tuple({c.rtl_defines(): c for c in CORNERS}.values())  # one per chip: the latency is no RTL


@pytest.mark.needs_tool("verilator")
@pytest.mark.parametrize("cfg", RTL_CORNERS, ids=lambda c: c.label().split(" ", 1)[1].replace(" ", "_"))
def test_rtl_lints_clean_at_each_swept_size(cfg):
    cmd = ["verilator", "--lint-only", "-Wall", "--default-language", "1364-2005", "-Irtl",
           *[f"-D{d}" for d in cfg.rtl_defines()], "rtl/lint.vlt", *sorted(str(p.relative_to(ROOT))
                                                                          for p in (ROOT / "rtl").glob("*.v")),
           "--top-module", "ga2"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_make_test_replays_every_array_size_port_and_latency():
    """The corners make test keeps exist (a misspelt label would drop one silently), and between
    them build every array size and both external ports, and run both latencies."""
    kept = [c for c in CORNERS if c.label() in IN_MAKE_TEST]
    assert len(kept) == len(IN_MAKE_TEST)
    for field in ("n", "ext_words", "ext_latency"):
        assert {getattr(c, field) for c in kept} == {getattr(c, field) for c in CORNERS}, field
    assert min(c.sram_words for c in kept) == min(c.sram_words for c in CORNERS)


def _corner_params() -> list:
    """Each corner in both simulators; make test's corners in Icarus there (it compiles a chip in
    seconds) and in Verilator in make test-full (a quarter of a minute a build: make test builds
    Verilator for the default chip only, which every other replay uses)."""
    params = []
    for c in CORNERS:
        name = c.label().replace(" ", "_")
        if c.label() in IN_MAKE_TEST:
            params += [pytest.param(c, ("icarus",), id=f"{name}-icarus", marks=pytest.mark.needs_tool("iverilog")),
                       pytest.param(c, ("verilator",), id=f"{name}-verilator",
                                    marks=[pytest.mark.needs_tool("verilator"), pytest.mark.slow])]
        else:
            params.append(pytest.param(c, ("icarus", "verilator"), id=name,
                                       marks=[pytest.mark.needs_tool("iverilog"), pytest.mark.needs_tool("verilator"),
                                              pytest.mark.slow]))
    return params


@pytest.mark.parametrize("cfg,sims", _corner_params())
def test_corner_configuration_is_exact_on_both_simulators(cfg, sims):
    """Random programs and the 32-step decode, replayed in Icarus and Verilator built for `cfg`
    (one build per chip configuration: the latency is the testbench's run-time +LATENCY)."""
    import replay
    from capra_cli import dse

    before = config.active()
    with config.use(cfg):
        result = dse.point(cfg, RANDOM_PER_CORNER, tuple(replay.simulators.BY_NAME[s] for s in sims))
    assert config.active() == before
    assert "fits" not in result, result.get("fits")
    assert "batch_fits" not in result, result.get("batch_fits")  # the batch of the table compiles here too
    assert result["batch_tok_per_kcyc"] > 0
    assert result["problems"] == []
    assert result["programs"] == RANDOM_PER_CORNER + dse.STEPS
    prov = result["provenance"]  # the cached row says what measured it
    assert (prov["config"], prov["sources"], prov["commit"]) == (cfg.key(), runs.sources_hash(), runs.source_commit())


@pytest.mark.parametrize("sim", [pytest.param("icarus", marks=pytest.mark.needs_tool("iverilog")),
                                 pytest.param("verilator", marks=[pytest.mark.needs_tool("verilator"),
                                                                  pytest.mark.slow])])
def test_an_eight_wide_dot_read_past_a_row_adds_nothing_in_a_four_state_simulator(sim):
    """N = 8 reads two words of a B row a cycle; a second word past the row is not read, and must
    enter the array as zero: an unread port lane is X in Icarus, and X times A's zero lanes is X.
    These random programs (found by make soak) stored X words in Icarus before that was so (the
    four-state simulator is the one that shows it: Verilator, two-state, in make test-full)."""
    import replay
    from capra.randprog import random_program
    from replay import image

    for seed, latency in ((10000750, 16), (10001000, 0), (10004750, 16)):
        with config.use(Config(n=8, ext_latency=latency)):
            code, ext = random_program(seed, ext_latency=latency)
            for verdict in replay.replay([image.record(code, ext)], name=f"n8_dot_seed{seed}",
                                         simulators=(replay.simulators.BY_NAME[sim],)):
                assert verdict.passed, f"seed {seed}: {verdict.simulator}: {verdict.line}"


def test_rtl_defines_name_the_configuration_and_nothing_else():
    """from_defines is the inverse of rtl_defines (synth.py --define checks its arguments with it),
    and a define the chip does not have, one given twice or a value out of range is refused by name."""
    for cfg in (Config(), Config(n=8, ext_words=2), Config(sram_words=8192, dma_queue=8, n=2),
                Config(sram_words=2048, dma_queue=2, ext_words=2)):
        assert Config.from_defines(cfg.rtl_defines()) == cfg
    for bad, named in ((["GA2_N_D=3"], "'GA2_N_D=3': n=3"), (["FOO=1"], "'FOO=1'"),
                       (["GA2_N_D=4", "GA2_N_D=8"], "GA2_N_D given twice"),
                       (["GA2_SRAM_WORDS_D=3000"], "'GA2_SRAM_WORDS_D=3000': sram_words=3000"),
                       (["GA2_DMA_QUEUE_D=x"], "'GA2_DMA_QUEUE_D=x'")):
        with pytest.raises(config.ConfigError) as error:
            Config.from_defines(bad)
        assert named in str(error.value)


def test_numpy_integers_are_ints_and_other_types_are_named():
    import numpy as np

    cfg = Config(ext_latency=np.int64(8), n=np.int32(8))
    assert cfg == Config(ext_latency=8, n=8) and type(cfg.ext_latency) is int and cfg.key() == Config(
        ext_latency=8, n=8).key()
    for make, named in ((lambda: Config(n=np.bool_(True)), "must be an integer"),
                        (lambda: Config(n=4.0), "must be an integer"),
                        (lambda: Config.parse(None), "a configuration is text"),
                        (lambda: Config.parse(b"n=4"), "a configuration is text"),
                        (lambda: Config.from_defines("GA2_N_D=8"), "not one string"),
                        (lambda: Config.from_defines([8]), "NAME=VALUE string")):
        with pytest.raises(ConfigError, match=named):
            make()
