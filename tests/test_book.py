"""The chapter's own listing runs unchanged and passes.

The book's ch15_run listing puts tools/ and model/ on its path by hand, imports the modules it
names (hw, ga2_progs, tiny_lm, paged_lm, paged_tests), writes out/ga2_programs.hex as the number
of programs followed by ga2_progs.record(code, ext) for each step, and runs the testbench with
hw.sim_icarus and hw.sim_verilator on the sources the chapter lists (the blocks of rtl/,
tb/extmem_rw.v and tb/ga2_tb.v, in its order), no +PROG, defines EXTW and DUMP. This test does
the same, in a copy of the repository (the listing writes a fixed path under the repository's
out/), and requires both simulators to pass with identical counters.
"""

from __future__ import annotations

import os
import subprocess
import sys

from capra_cli import mutation
from conftest import needs_simulators
from replay.simulators import CACHE_ENV, cache_dir

# The listing's steps, written for this test: the calls and their shapes are the chapter's.
LISTING = r'''
import os, re, sys
os.environ["GA2_EXT"] = "8192"
tools = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, tools)
sys.path.insert(0, os.path.join(tools, "..", "model"))
import hw, ga2_progs, tiny_lm, paged_lm, paged_tests

sources = ["rtl/sram.v", "rtl/dma.v", "rtl/systolic.v", "rtl/requant.v", "rtl/exp_lut.v", "rtl/divu.v",
           "rtl/rowmem.v", "rtl/ga2_vec.v", "rtl/ga2_sm.v", "rtl/ga2_mm.v", "rtl/ga2.v", "tb/extmem_rw.v",
           "tb/ga2_tb.v"]
steps = 8
model = tiny_lm.make_model("structured")
tokens, records = paged_lm.PagedChip(model, steps, 4).generate(0, steps)
assert tokens == paged_tests.rule_tokens(0, steps)
words = [len(records)]
for r in records:
    words += ga2_progs.record(r["code"], r["ext"])
with open(os.path.join(hw.ROOT, "out", "ga2_programs.hex"), "w") as image:
    image.write("\n".join("%08x" % (w & 0xFFFFFFFF) for w in words) + "\n")
counters = {}
for name, simulate in (("Icarus", hw.sim_icarus), ("Verilator", hw.sim_verilator)):
    rc, out = simulate(sources, "ga2_tb", defines=("EXTW=8192", "DUMP"))
    verdict = [line for line in out.splitlines() if line.startswith(("PASS", "FAIL", "MISMATCH"))]
    print(name, verdict, "exit", rc)
    assert len(verdict) == 1 and verdict[0].startswith("PASS: %d programs" % steps), out[-2000:]
    counters[name] = re.findall(r"COUNTERS (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", out)
assert counters["Icarus"] == counters["Verilator"] and len(counters["Icarus"]) == steps
assert [int(c[1]) for c in counters["Icarus"]] == [r["counters"][0] for r in records]
print("the listing passes")
'''


@needs_simulators
def test_the_chapters_listing_runs_unchanged_and_passes(tmp_path):
    root = mutation.copy_repo(tmp_path)
    (root / "out").mkdir()
    (root / "tools" / "listing.py").write_text(LISTING)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GA2_CONFIG", "GA2_EXT")}
    env[CACHE_ENV] = str(cache_dir())  # the builds of the same sources are shared, not made again
    proc = subprocess.run([sys.executable, str(root / "tools" / "listing.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "the listing passes" in proc.stdout
