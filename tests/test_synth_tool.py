"""`capra synth` (tools/capra_cli/synth.py): the memory-inference check passes a memory Yosys puts in
iCE40 block RAM and fails one it would build from flip-flops or logic, on tiny designs (seconds), and
a whole run of one block counts its block RAMs and measures its Fmax. Skipped where Yosys (or, for
the end-to-end run, nextpnr-ice40) is missing: make installs both from PyPI (the synth extra).
Its argument mistakes are in tests/test_cli.py."""

import json
import threading
from pathlib import Path

import pytest
from capra_cli import synth
from capra_cli.common import tool_path

pytestmark = pytest.mark.heavy  # Yosys and nextpnr start for every test: make test, not make test-fast

DATA = Path(__file__).resolve().parent / "data" / "synth"
# The synth extra's YoWASP tools (make installs them), else the yosys and nextpnr-ice40 on PATH.
TOOLS = next((t for t in (synth.PYPI_TOOLS, synth.SYSTEM_TOOLS) if tool_path(t.yosys)), synth.PYPI_TOOLS)
needs_yosys = pytest.mark.skipif(tool_path(TOOLS.yosys) is None,
                                 reason="no Yosys: neither the synth extra (pip install -e '.[synth]') nor yosys")
needs_nextpnr = pytest.mark.skipif(tool_path(TOOLS.nextpnr) is None,
                                   reason=f"{TOOLS.nextpnr} is not installed")


def check(tmp_path: Path, top: str, source: Path) -> synth.MemoryCheck:
    block = synth.Block(top, top, (str(source),))
    workdir = tmp_path / top
    workdir.mkdir()
    options = synth.Options(out=tmp_path, tools=TOOLS)
    result, _design, _sources = synth.memory_stage(synth.Children(), block, options, workdir, keep_premap=False)
    return result


@needs_yosys
def test_synchronous_1r1w_ram_maps_to_block_ram_and_passes(tmp_path):
    result = check(tmp_path, "ram_1r1w_256x32", DATA / "ram_1r1w_256x32.v")
    assert result.passed
    assert result.block_ram == ["mem"]


@needs_yosys
def test_ram_with_three_asynchronous_reads_fails_naming_it(tmp_path):
    result = check(tmp_path, "ram_3async_4096x32", DATA / "ram_3async_4096x32.v")
    assert not result.passed
    [memory] = result.offenders
    assert (memory.name, memory.words, memory.width, memory.bits) == ("mem", 4096, 32, 131072)
    line = memory.line("blk")
    assert line.startswith("blk: memory mem, 4096 x 32 = 131072 bits") and "3 asynchronous read ports" in line


@needs_yosys
def test_a_module_missing_from_the_block_files_is_read_from_rtl(tmp_path):
    """rowmem's row lists rowmem.v only: its ram_1r1w parts (four for each of its four banks) come
    from rtl/ram_1r1w.v (-libdir)."""
    result = check(tmp_path, "rowmem", Path("rtl/rowmem.v"))
    assert result.passed
    assert len(result.block_ram) == 4 * 4, result.block_ram


@needs_yosys
def test_memory_under_1024_bits_passes(tmp_path):
    assert check(tmp_path, "ram_1r1w_16x32", DATA / "ram_1r1w_16x32.v").passed


def case_rom(tmp_path: Path, registered: bool) -> Path:
    """A 128 x 16 = 2048-bit ROM written as a case statement, read combinationally or through a register."""
    name = "rom_reg" if registered else "rom_comb"
    cases = "\n".join(f"            7'd{i}: e = 16'd{(i * 40503) % 65536};" for i in range(128))
    output = "output reg [15:0] q" if registered else "output wire [15:0] q"
    use = "always @(posedge clk) q <= e;" if registered else "assign q = e;"
    path = tmp_path / f"{name}.v"
    path.write_text(f"""module {name} (input wire clk, input wire [6:0] a, {output});
    reg [15:0] e;
    always @(*) begin
        case (a)
{cases}
            default: e = 16'd0;
        endcase
    end
    {use}
endmodule
""")
    return path


@needs_yosys
def test_roms_count_as_memories(tmp_path):
    combinational = check(tmp_path, "rom_comb", case_rom(tmp_path, registered=False))
    assert [(m.words, m.width) for m in combinational.offenders] == [(128, 16)]
    assert "ROM" in combinational.offenders[0].name
    assert check(tmp_path, "rom_reg", case_rom(tmp_path, registered=True)).passed  # one SB_RAM40_4K


@needs_yosys
def test_array_turned_into_registers_by_the_front_end_fails(tmp_path):
    # An asynchronous reset makes the Verilog front end replace the array by 64 registers (no $mem cell).
    path = tmp_path / "regfile.v"
    path.write_text("""module regfile (input wire clk, input wire rst, input wire we, input wire [5:0] wa,
                input wire [31:0] wd, input wire [5:0] ra, output reg [31:0] rd);
    reg [31:0] regs [0:63];
    integer i;
    always @(posedge clk or posedge rst) begin
        if (rst) begin
            for (i = 0; i < 64; i = i + 1) regs[i] <= 32'd0;
        end else if (we) regs[wa] <= wd;
    end
    always @(posedge clk) rd <= regs[ra];
endmodule
""")
    result = check(tmp_path, "regfile", path)
    assert [(m.name, m.words, m.width) for m in result.offenders] == [("regs", 64, 32)]
    assert "front end" in result.offenders[0].detail
    # An array of combinational values goes the same way but stores nothing: not a memory.
    path = tmp_path / "sums.v"
    path.write_text("""module sums (input wire [5:0] a, input wire [31:0] x, output wire [31:0] y);
    reg [31:0] t [0:63];
    integer i;
    always @(*) for (i = 0; i < 64; i = i + 1) t[i] = x + i;
    assign y = t[a];
endmodule
""")
    assert check(tmp_path, "sums", path).passed


@needs_yosys
def test_two_runs_of_one_block_at_once_each_work_in_a_folder_of_their_own(tmp_path, monkeypatch):
    """Two memory checks of ram_1r1w at once (as two `capra synth --check-memories --no-cache
    ram_1r1w` in one checkout): both Yosys runs are started together, each writes and reads its own
    check.json (one shared folder made this a JSONDecodeError), and the folder kept afterwards is one
    run's whole folder; a third run on the same sources comes from the cache."""
    real = synth.run_yosys
    folders: list[Path] = []
    together = threading.Barrier(2, timeout=120)

    def side_by_side(children, options, script, workdir, *args):
        folders.append(workdir)
        together.wait()  # the other run is at this point too: its folder exists, its Yosys about to start
        return real(children, options, script, workdir, *args)

    monkeypatch.setattr(synth, "run_yosys", side_by_side)
    block = next(b for b in synth.BLOCKS if b.name == "ram_1r1w")
    options = synth.Options(out=tmp_path, tools=TOOLS, check_only=True, no_cache=True)
    results = synth.run_all([block, block], options, jobs=2)
    assert [(r.memory_ok, r.memory_summary, r.error) for r in results] == [(True, "pass (block RAM: mem)", "")] * 2
    kept = tmp_path / "ram_1r1w.hx8k"
    assert len(set(folders)) == 2 and kept not in folders, folders
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "ram_1r1w.hx8k"]  # no run's folder left
    assert sorted(p.name for p in kept.iterdir()) == ["check.json", "check.log", "check.ys"]
    assert "ram_1r1w" in json.loads((kept / "check.json").read_text())["modules"]
    again = synth.run_all([block], synth.Options(out=tmp_path, tools=TOOLS, check_only=True), jobs=1)
    assert again[0].cached and again[0].memory_ok and len(folders) == 2


@needs_yosys
@needs_nextpnr
def test_full_run_counts_block_ram_and_measures_fmax(tmp_path):
    block = synth.Block("ram", "ram_1r1w_256x32", (str(DATA / "ram_1r1w_256x32.v"),))
    result = synth.Result("ram")
    synth.full_block(synth.Children(), block, synth.Options(out=tmp_path, tools=TOOLS), result)
    assert result.memory_ok and result.counts is not None
    assert result.counts["bram"] == 2 and result.counts["dsp"] == 0
    assert result.fmax is not None and result.fmax > 20
