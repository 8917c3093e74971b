"""make waves (tools/capra_cli/waves.py) writes the waveform docs/waveforms.md reads: every signal
the GTKWave save file tb/ga2.gtkw opens on is in it with the width the file names, and what the
guide says of it holds (the counters end at the step's cycles, pc counts the listing's
instructions, the first LOAD's read address goes out on AR after it issues)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from capra import isa
from capra_cli import waves
from capra_cli.__main__ import run_command
from conftest import needs_icarus
from replay import runs

SAVE_FILE = runs.ROOT / "tb" / "ga2.gtkw"
SCOPE = "ga2_tb.u_sys.u_ga2"
PAGE = runs.ROOT / "docs" / "waveforms.md"
COUNTERS = ("c0[31:0]", "c1[31:0]", "c2[31:0]", "c3[31:0]", "c4[31:0]", "h_unit[31:0]", "h_sync[31:0]")


def number(text: str) -> int:
    """A number as the page writes it (1,855)."""
    return int(text.replace(",", ""))


def vcd_vars(path: Path) -> dict[str, tuple[str, int]]:
    """'scope.name[msb:lsb]' (as GTKWave names a vector) -> (the VCD's identifier, width)."""
    scopes: list[str] = []
    found = {}
    with path.open() as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "$scope":
                scopes.append(words[2])
            elif words[0] == "$upscope":
                scopes.pop()
            elif words[0] == "$var":
                width, ident, name = int(words[2]), words[3], words[4]
                rng = words[5] if words[5].startswith("[") else ""
                found[".".join([*scopes, name]) + rng] = (ident, width)
            elif words[0] == "$enddefinitions":
                break
    return found


def vcd_changes(path: Path, idents: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """name -> [(time in ps, value)] for the named identifiers (X and Z read as 0)."""
    by_id = {ident: name for name, ident in idents.items()}
    changes: dict[str, list[tuple[int, int]]] = {name: [] for name in idents}
    now, body = 0, False
    with path.open() as f:
        for line in f:
            if not body:
                body = line.startswith("$enddefinitions")
                continue
            line = line.strip()
            if line.startswith("#"):
                now = int(line[1:])
            elif line[:1] in "bB":
                value, ident = line[1:].split()
                if ident in by_id:
                    changes[by_id[ident]].append((now, int(re.sub("[xXzZ]", "0", value), 2)))
            elif line[:1] in "01xXzZ" and line[1:] in by_id:
                changes[by_id[line[1:]]].append((now, 1 if line[0] == "1" else 0))
    return changes


def saved_signals() -> list[str]:
    return [line.strip() for line in SAVE_FILE.read_text().splitlines()
            if line.strip() and line[0] not in "[@-*"]


def value_at(series: list[tuple[int, int]], time: int) -> int:
    """The value a signal holds at `time` (its last change at or before it)."""
    value = 0
    for t, v in series:
        if t > time:
            break
        value = v
    return value


@needs_icarus
def test_make_waves_writes_every_signal_the_save_file_opens_on(tmp_path, monkeypatch, capsys):
    vcd = tmp_path / "ga2.vcd"
    monkeypatch.setattr(waves, "VCD", vcd)
    capsys.readouterr()
    assert run_command("waves", [], prog="waves.py") == 0
    out = capsys.readouterr().out
    assert f"gtkwave {vcd} tb/ga2.gtkw" in out, out[-500:]
    cycles = int(re.search(r"\((\d+) cycles\)", out).group(1))
    listing = [line for line in out.splitlines() if re.match(r"\s+\d+\s+[0-9a-f]{8} ", line)]

    found = vcd_vars(vcd)
    signals = saved_signals()
    assert len(signals) >= 30 and all(s.startswith(SCOPE + ".") for s in signals)
    missing = [s for s in signals if s not in found]
    assert not missing, f"in tb/ga2.gtkw but not in the waveform: {missing}"
    for s in signals:  # a vector's range in the name is its width in the waveform
        m = re.search(r"\[(\d+):(\d+)\]$", s)
        assert found[s][1] == (int(m.group(1)) - int(m.group(2)) + 1 if m else 1), s

    names = {n: found[f"{SCOPE}.{n}"][0] for n in ("clk", "pc[9:0]", "c0[31:0]", "halted", "start_dma",
                                                   "m_axi_arvalid", "m_axi_rvalid", "op[3:0]", "sm_busy", "rst",
                                                   *COUNTERS)}
    ch = vcd_changes(vcd, names)
    rises = [t for t, v in ch["clk"] if v == 1]
    assert rises[:2] == [5000, 15000]  # a rising edge every 10 ns, the first at 5 ns
    assert ch["c0[31:0]"][-1][1] == cycles  # the cycle counter ends at the step's cycles
    assert ch["halted"][-1][1] == 1
    assert max(v for _t, v in ch["pc[9:0]"]) == len(listing) - 1  # pc walks the listing to its HALT
    # the first LOAD: start_dma at a rising edge with pc 0 and op LOAD (1); its read address on AR later
    first = next(t for t in rises if value_at(ch["start_dma"], t - 1) == 1)
    assert value_at(ch["pc[9:0]"], first - 1) == 0 and value_at(ch["op[3:0]"], first - 1) == 1
    assert any(t > first and v == 1 for t, v in ch["m_axi_arvalid"])
    # cycle 1 is the first rising edge after reset; cycle n is 10n ns later than reset's end
    reset_end = next(t for t, v in ch["rst"] if v == 0)
    assert first == reset_end + 10_000 and value_at(ch["c0[31:0]"], first) == 1
    assert ch["halted"][-1][0] == reset_end + 10_000 * cycles
    # the first read request the cycle after the first LOAD issues, its word EXT_LATENCY + 1 cycles later
    ar = next(t for t, v in ch["m_axi_arvalid"] if v == 1)
    r = next(t for t, v in ch["m_axi_rvalid"] if v == 1)
    assert ar == first + 10_000 and r - ar == 10_000 * (isa.EXT_LATENCY + 1)
    # the step's one SMAX (n = 4, the context) keeps sm_busy high for the formula's cycles
    up = next(t for t, v in ch["sm_busy"] if v == 1)
    down = next(t for t, v in ch["sm_busy"] if v == 0 and t > up)
    assert (down - up) // 10_000 == isa.smax_cycles(4)

    # docs/waveforms.md reads this step: its instructions, reset, end, SMAX and counters are this run's
    page = " ".join(PAGE.read_text().split())
    shown = re.search(r"for these (\d+) instructions lasts until ([\d,]+) ns", page)
    assert shown and (int(shown[1]), number(shown[2])) == (len(listing), reset_end // 1000), shown
    shown = re.search(r"The step ends at cycle (\d+) \(([\d,]+) ns\)", page)
    assert shown and (int(shown[1]), number(shown[2])) == (cycles, ch["halted"][-1][0] // 1000), shown
    shown = re.search(r"The SMAX at pc (\d+) starts in cycle (\d+) \(([\d,]+) ns\)", page)
    assert shown and number(shown[3]) == up // 1000 and (up - reset_end) // 10_000 == int(shown[2]), shown
    assert value_at(ch["pc[9:0]"], up - 1) == int(shown[1]), "the SMAX's pc"
    shown = re.search(r"they read ([\d, ]+) and (\d+);", page)
    assert shown and [int(x) for x in shown[1].split(", ")] + [int(shown[2])] == \
        [ch[c][-1][1] for c in COUNTERS], shown


@pytest.mark.parametrize("flag", ["[dumpfile]", "[size]"])
def test_the_save_file_names_the_waveform_and_a_window(flag):
    text = SAVE_FILE.read_text()
    assert any(line.startswith(flag) for line in text.splitlines()), flag
    assert '[dumpfile] "out/ga2.vcd"' in text
