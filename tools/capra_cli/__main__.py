"""capra: every command of the project, one argparse tree.

    python -m capra_cli <command> [options]      (or `capra <command>` inside .venv)
    python -m capra_cli <command> --help         what a command does and its options

The book's scripts in tools/ (``python tools/ch15_run.py`` and the others) run these same commands
under their own names.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .common import BadArgument, Parser, naming_chip, no_chip, program_name, run

# command -> (its module in this package, one line for the list). A command's module has a
# docstring (its --help), ``arguments(parser)`` and ``main(args) -> exit status``; it is imported
# only when the command runs, so the list itself starts fast.
COMMANDS: dict[str, tuple[str, str]] = {
    "sim": ("sim", "Chapter 15: checks, the three decodes, every step replayed on both simulators (make sim)"),
    "ch12": ("ch12", "Chapter 12: the 32-step decode replayed on both simulators"),
    "accuracy": ("accuracy", "Chapter 12: the int8 chip against the float model, on random models"),
    "example-a": ("example_a", "Chapter 15, example A: the page table event by event"),
    "example-b": ("example_b", "Chapter 15, example B: what paging, sharing and windows buy"),
    "figures": ("figures", "Chapter 15's figures 15.1-15.7 as PNG files in out/"),
    "selfcheck": ("selfcheck", "Chapter 15's self-check questions, answered by the code"),
    "sinks": ("sinks", "Chapter 15, exercise 3's worked answer: attention sinks on the paged host, checked"),
    "mut": ("mut", "mutation runs: break copies of the code and see the checks notice"),
    "report": ("report", "cycles of every decode step against the roofline bound"),
    "serve": ("serve", "many requests on one chip: continuous batching, checked on the RTL"),
    "soak": ("soak", "random programs through the machine model and both simulators"),
    "dse": ("dse", "the design-space sweep: every configuration exact on both simulators"),
    "synth": ("synth", "iCE40 area, Fmax and the block-RAM check of every RTL block"),
    "fpga": ("fpga", "the whole chip placed and routed on an ECP5: utilization, Fmax over seeds, worst paths"),
    "bench": ("bench", "simulator speed, machine-model time and kernel efficiencies"),
    "gather": ("gather", "the host's gather through the block table against a plain copy"),
    "visibility": ("visibility", "how much of what programs compute a replay would see wrong"),
    "waves": ("waves", "a VCD waveform of one decode step"),
    "timeline": ("timeline", "where a solo and a batch-8 step's cycles go: Perfetto trace, PNG, RTL events checked"),
    "passkey": ("passkey", "passkey retrieval of the mixed windowed/global model"),
    "kv-bench": ("kv_bench", "the mixed cache's memory against a full cache, derived and measured"),
    "own-model": ("own_model", "your own small model: a graph compiled for GA2, run four ways, replayed on the RTL"),
    "mixed-chip": ("mixed_chip", "the mixed windowed/global model on GA2 in int8: per-layer error, decode, replay"),
    "chunked-prefill": ("chunked_prefill", "the mixed model's prompt prefilled in chunks on GA2: cycles per token"),
    "tiled-attention": ("tiled_attention", "decode attention tiled over the context: error, cycles, word bound"),
    "chip-context": ("chip_context", "cycles per decode step of the mixed model on GA2 against the context"),
    "page-groups": ("page_groups", "KV rows the paged host holds for the mixed model, per-layer page groups"),
    "paged-attention": ("paged_attention", "the chip gathers KV pages where they lie: host words removed, cycles"),
    "gen": ("gen", "write or check what is generated from the model: rtl/exp_lut.v, docs/isa.md's VEC table"),
}


# What each command does with the chip configuration (GA2_CONFIG / GA2_EXT), so that a setting is never
# ignored in silence. A command that runs the configured chip names it on its first line when it is
# not the default (these print that line themselves; every other such command gets it from
# run_command); one that runs a chip of its own refuses another (common.own_chip: mixed-chip,
# chunked-prefill, chip-context, passkey --chip); one that runs none refuses a setting, saying why.
NAMES_ITS_CHIP = {"sim", "serve", "soak", "fpga"}
OWN_CHIP = {"mixed-chip", "chunked-prefill", "chip-context"}
NO_CHIP = {
    "gather": "the gather benchmark runs the host's page table, no chip",
    "kv-bench": "kv-bench measures the numpy model's caches, no chip",
    "page-groups": "page-groups counts the host's page groups, no chip",
    "dse": "dse sweeps configurations of its own (--only names them)",
    "synth": "synth builds each block at the default chip's sizes (--define sets others)",
    "gen": "gen writes what is generated from the model, the same for every chip",
}


def _module(name: str):
    return importlib.import_module(f"capra_cli.{COMMANDS[name][0]}")


def command_parser(name: str, prog: str | None = None) -> Parser:
    """The parser of one command, its --help the command module's docstring."""
    module = _module(name)
    ap = Parser(prog=prog or f"capra {name}", description=module.__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    module.arguments(ap)
    return ap


def run_command(name: str, argv: Sequence[str], prog: str | None = None) -> int:
    """Parse `argv` for command `name` and run it (``common.run``: exit statuses, Ctrl-C). Every
    line the command prints about itself (an error, progress) starts with `prog` (default
    ``capra <name>``), as its parser's errors do."""
    prog = prog or f"capra {name}"

    def go() -> int:
        ap = command_parser(name, prog)
        args = ap.parse_args(list(argv))
        try:
            if name in NO_CHIP:
                no_chip(NO_CHIP[name])
            if name == "passkey" and not args.chip:
                no_chip("passkey (without --chip) runs the numpy model, no chip")
            if name in NAMES_ITS_CHIP | OWN_CHIP or name in NO_CHIP or name == "passkey":
                return _module(name).main(args)
            with naming_chip():
                return _module(name).main(args)
        except BadArgument as error:
            ap.error(str(error))

    with program_name(prog):
        return run(go)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = Parser(prog="capra", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                 epilog="commands:\n" + "\n".join(f"  {n:<11} {s}" for n, (_m, s) in COMMANDS.items()))
    top.add_argument("command", choices=list(COMMANDS), metavar="command", help="one of the commands below")
    top.add_argument("options", nargs=argparse.REMAINDER, help="the command's own options (see capra <command> -h)")
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0 if argv else 2
    if argv[0].startswith("-"):  # argparse would say "the following arguments are required"
        top.error(f"{argv[0]!r} is not a command: the command comes first (capra <command> [options])")
    args = top.parse_args(argv[:1])
    return run_command(args.command, argv[1:])


if __name__ == "__main__":
    sys.exit(main())
