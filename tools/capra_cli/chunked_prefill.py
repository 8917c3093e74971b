"""Chunked prefill of the mixed model on GA2: cycles per prompt token against token-by-token prefill.

    capra chunked-prefill                              # prompts of 64, 128 and 256 tokens, chunks of 8 and 16
    capra chunked-prefill --lengths 64 --chunks 4 8 16 --no-rtl

The chip is calibrated as `capra mixed-chip` calibrates it. Each passkey prompt (seeded as the
evaluation's) is prefilled in chunks of C tokens (inference/mixed_chunk.py: per layer and KV group
a projection program over all C rows and the attention programs of its rows, per layer an output
program; the weights load once per chunk) on the machine model, and its cycles are divided by the
prompt's tokens; a second line splits them by program kind (projection, one-shot attention, tiled
attention, output). Token-by-token prefill runs every prompt token as a decode step: its cycles are the sum of
the decode steps' at each context (inference/chip_context.py; a program's cycles do not depend on
its data).

Checks: every chunk program on the machine model computes its integer semantics; the K/V cache,
every position's logits and greedy token after the chunked prefill are those of the vectorised
prefill (inference/mixed_prefill.py, an independent numpy evaluation of the decode arithmetic);
the answer decoded after it is the float model's and holds the passkey. Unless --no-rtl, the
programs of the last chunk of the last prompt at the first chunk size are replayed on Icarus and
Verilator, every word and counter compared with the machine model.

Exit status 0 when every check passes, 1 when one fails, 2 for a bad argument.
"""

from __future__ import annotations

import numpy as np
from capra import config
from inference.chip_context import StepCycles, step_cost
from inference.generate import generate
from inference.mixed_chunk import CHUNK_MAX, ChunkedPrefill
from inference.mixed_lm import make_mixed_model
from inference.mixed_prefill import VectorisedPrefill

from .chip_context import chip_for_benchmark
from .common import Parser, Progress, distinct, finish, int_range, own_chip, replay_checks
from .mixed_chip import ANSWER, EVAL_SEED, SHORTEST, _prompts

MAX_LENGTH = 1024


def arguments(ap: Parser) -> None:
    ap.add_argument("--lengths", type=int_range(SHORTEST, MAX_LENGTH), nargs="+", default=[64, 128, 256], metavar="N",
                    help=f"passkey prompt lengths, {SHORTEST}..{MAX_LENGTH} (default 64 128 256)")
    ap.add_argument("--chunks", type=int_range(1, CHUNK_MAX), nargs="+", default=[8, 16], metavar="C",
                    help=f"chunk sizes in tokens, 1..{CHUNK_MAX} (default 8 16)")
    ap.add_argument("--no-rtl", action="store_true", help="skip the replay on the simulators")


def _same(chip, traces, res) -> list[str]:
    """Where the chunk traces differ from the vectorised prefill `res` (cache compared by the caller)."""
    got_logits = np.vstack([t.logits for t in traces])
    got_tokens = np.concatenate([t.next_tokens for t in traces])
    problems = []
    if not np.array_equal(got_logits, res.logits):
        problems.append("logits differ from the vectorised prefill's")
    if not np.array_equal(got_tokens, res.next_tokens):
        problems.append("greedy tokens differ from the vectorised prefill's")
    return problems


def main(args) -> int:
    distinct("--lengths", args.lengths)
    distinct("--chunks", args.chunks)
    own_chip()
    if not args.no_rtl:
        import replay

        replay.require()
    chip = chip_for_benchmark()
    model = chip.model
    float_model = make_mixed_model()
    evals, ev = _prompts(float_model, args.lengths, 1, EVAL_SEED, answer=False)
    costs = StepCycles(chip)
    problems: list[str] = []
    checks = 0
    replay_runs = None
    print("chunked prefill on the machine model; token-by-token: the decode steps' cycles (chip-context)")
    print(f"{'tokens':>6} {'chunk':>5} {'cycles':>11} {'per token':>10} {'token-by-token':>15} {'speed-up':>8} "
          f"{'programs':>8}  checks")
    for ids, key in evals:
        prompt = ids[:-1]
        per_token = sum(step_cost(costs, "mixed", p + 1).cycles for p in range(len(prompt))) / len(prompt)
        res = VectorisedPrefill(chip).prefill(prompt)
        want_cache = [[k.copy() for k in layer] for layer in chip.keys]
        for c in args.chunks:
            chip.reset()
            filled = Progress(f"tokens prefilled ({len(prompt)}-token prompt, chunks of {c})", len(prompt))
            traces = ChunkedPrefill(chip, c).prefill(
                prompt, executor="both", progress=lambda done, filled=filled: filled.step(done - filled.done))
            cycles = sum(sum(t.cycles) for t in traces)
            programs = sum(len(t.cycles) for t in traces)
            found = _same(chip, traces, res)
            if not all(np.array_equal(chip.keys[layer][g], want_cache[layer][g])
                       for layer in range(model.n_layers) for g in range(model.n_kv_heads)):
                found.append("the K cache differs from the vectorised prefill's")
            tok, got = int(ids[-1]), []
            for _ in range(ANSWER):
                tok = chip.step(tok).next_token
                got.append(tok)
            want = [int(t) for t in generate(float_model, np.array([ids]), max_new_tokens=ANSWER,
                                             temperature=0.0)[0][len(ids):]]
            if got != want:
                found.append(f"the answer {ev.tokenizer.decode(got)!r} is not the float model's "
                             f"{ev.tokenizer.decode(want)!r}")
            if ev.extract_passkey_from_output(ev.tokenizer.decode(got)) != key:
                found.append(f"passkey {key:05d} not retrieved")
            checks += 1
            problems += [f"{len(prompt)} tokens, chunk {c}: {p}" for p in found]
            print(f"{len(prompt):6d} {c:5d} {cycles:11d} {cycles / len(prompt):10.0f} {per_token:15.0f} "
                  f"{per_token * len(prompt) / cycles:8.2f} {programs:8d}  "
                  + ("same cache, logits and tokens as the vectorised prefill; answer "
                     f"{ev.tokenizer.decode(got)!r}" if not found else "; ".join(found)))
            parts = {"projection": "cproj", "one-shot attention": "cattn", "tiled attention": ("ctiled", "tiled"),
                     "output": "cout"}
            spent = {what: sum(cyc for t in traces for r, cyc in zip(t.runs, t.cycles, strict=True)
                               if r.name.startswith(prefix)) for what, prefix in parts.items()}
            print("       cycles per token: " + ", ".join(f"{what} {n / len(prompt):.0f}" for what, n in spent.items()))
            if c == args.chunks[0]:  # the longest prompt's (past 192 tokens its global rows run ctiled)
                replay_runs = (len(prompt), c, traces[-1])
    if not args.no_rtl and replay_runs is not None:
        from replay import image

        length, c, trace = replay_runs
        with config.use(chip.ext_config(max(r.ext_words for r in trace.runs))):
            records = [image.record(r.code, r.ext()) for r in trace.runs]
            print(f"\nreplay: the last chunk of the {length}-token prompt with chunks of {c} (positions "
                  f"{trace.position}..{trace.position + len(trace.tokens) - 1}: {len(records)} programs, "
                  f"{sum(trace.cycles)} cycles on the machine model)")
            checks += replay_checks(records, problems, name="chunked_prefill", tool="chunked-prefill")
    return finish(problems, checks=checks,
                  passed="the chunked prefill gives the vectorised prefill's cache, logits and tokens and the float "
                         "model's answer" + ("" if args.no_rtl else "; both simulators agree with the machine model "
                                             "on every word and counter"))

