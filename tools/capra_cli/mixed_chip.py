"""The mixed windowed/global model on GA2 in int8: per-layer error, greedy decode on the machine model, a replay.

    python tools/mixed_chip.py                   # calibrate, error table, passkeys decoded, one step replayed
    python tools/mixed_chip.py --no-rtl          # the same without the simulators
    python tools/mixed_chip.py --lengths 128 1024 --eval-trials 2

The model is inference/mixed_lm.py's make_mixed_model (four layers windowed/global/windowed/global,
grouped-query attention, partial rotary, clamped sinks). A decode step is 20 programs (inference/
mixed_chip.py: per layer and KV group a projection program and an attention program, per layer an
output program), for a chip with a scratchpad of 16,384 words. Attention over more than a tile of
keys (192) streams K and V from external memory with the online softmax (capra.tiled_attention),
in several programs where one would not fit the instruction memory.

1. Calibration: the ranges of every tensor from passkey prompts (seeded apart from the evaluation's,
   their passkeys disjoint from it) followed by the float model's own greedy answer.
2. Per-layer error: evaluation prompts decoded token by token on the chip (its own int8 KV cache,
   the programs' integer semantics) and by the float model; the relative error of each layer's
   output residual and the top-1 agreement of the logits (over all positions, and over those where
   the float model's lead is more than two int8 steps of the logits).
3. Greedy decode: after each evaluation prompt, --decode-steps tokens on the machine model (every
   program also run in its integer semantics: a differing output word is a failure), compared with
   the float model's greedy tokens; a passkey prompt's answer is read back.
4. The largest context: a one-shot attention program's (by bisection of the compiler's answer),
   and with the tiled attention the one whose weights and KV fit the largest external memory.
5. Unless --no-rtl: the programs of one decode step at context --replay-context replayed on Icarus
   and Verilator, every word and counter compared with the machine model.

With --kv paged the K/V lies in pages of the chip's external memory (inference/chip_pages.py) and
every attention, short or long, is the tiled program with each K and V tile gathered through the
block table (capra.paged_attention, 128-key tiles); the host writes per step the new rows, the
descriptors that changed and the programs' small inputs (the replay line prints that count).

Exit status 0 when every check passes (machine model = integer semantics, the chip's tokens are the
float model's, every passkey retrieved, both simulators PASS), 1 when one fails, 2 for a bad argument.
"""

from __future__ import annotations

import time

import numpy as np
from capra import config
from inference import chip_context
from inference.generate import generate
from inference.long_context import PasskeyEvaluator, shortest_prompt
from inference.mixed_chip import (
    CHIP,
    KV_MODES,
    LayerError,
    MixedChip,
    calibrate,
    equalize,
    largest_one_shot,
    layer_errors,
)
from inference.mixed_lm import make_mixed_model

from .common import BadArgument, Parser, Progress, distinct, finish, int_range, own_chip, replay_checks

CALIB_SEED = 7  # the calibration prompts' passkeys: random.Random(7 + length)
EVAL_SEED = 42  # the evaluation's: random.Random(42 + length), PasskeyEvaluator's default
ANSWER = 7  # tokens of a passkey answer: five digits, ".", and one more
PASSKEY_DIGITS = 5  # a digit a token: the fewest decode steps that can answer
REPLAY_CONTEXT = 16  # the context of the decode step replayed unless --replay-context says
ONE_SHOT_MAX = 494  # the most rows a one-shot attention program compiles for (largest_one_shot)
MAX_LENGTH = 8192  # the longest prompt taken (a prompt runs token by token through the programs)
SHORTEST = shortest_prompt()  # the needle and the question: the shortest passkey prompt


def arguments(ap: Parser) -> None:
    ap.add_argument("--calib-lengths", type=int_range(SHORTEST, MAX_LENGTH), nargs="+", default=[64, 200], metavar="N",
                    help=f"lengths of the calibration prompts, {SHORTEST}..{MAX_LENGTH} (default 64 200)")
    ap.add_argument("--calib-trials", type=int_range(1, 50), default=3, metavar="K",
                    help="calibration prompts per length (default 3)")
    ap.add_argument("--lengths", type=int_range(SHORTEST, MAX_LENGTH), nargs="+", default=[48, 160, 400], metavar="N",
                    help=f"lengths of the evaluation prompts, {SHORTEST}..{MAX_LENGTH} (default 48 160 400: past 192 "
                         "the global layers' attention is tiled)")
    ap.add_argument("--eval-trials", type=int_range(1, 50), default=2, metavar="K",
                    help="evaluation prompts per length (default 2)")
    ap.add_argument("--decode-steps", type=int_range(PASSKEY_DIGITS, 32), default=ANSWER, metavar="S",
                    help=f"greedy steps on the machine model after each prompt, {PASSKEY_DIGITS}..32 (fewer than the "
                         f"passkey's {PASSKEY_DIGITS} digits can never retrieve it; default {ANSWER})")
    ap.add_argument("--replay-context", type=int_range(1, MAX_LENGTH), default=None, metavar="N",
                    help=f"the context of the decode step replayed on the simulators, 1..{MAX_LENGTH} (default "
                         f"{REPLAY_CONTEXT}; not with --no-rtl)")
    ap.add_argument("--one-shot-rows", type=int_range(1, ONE_SHOT_MAX), default=None, metavar="R",
                    help=f"run attention over up to R rows one-shot, 1..{ONE_SHOT_MAX} (default: one tile, 192, where "
                         "the one-shot program is the faster; more compares it with the tiled one; not with --kv "
                         "paged, where every attention is tiled)")
    ap.add_argument("--kv", choices=KV_MODES, default="contiguous",
                    help="where the K/V lies: contiguous (a copy of the attended rows in each attention program's "
                         "image) or paged (pages of the chip's external memory, every attention tiled with its "
                         "tiles gathered through the block table) (default contiguous)")
    ap.add_argument("--no-rtl", action="store_true", help="skip the replay on the simulators")
    ap.add_argument("--no-bisect", action="store_true", help="skip the search for the largest context")


def _prompts(model, lengths, trials, seed, answer=True):
    """(ids, passkey) per prompt; with `answer` the float model's greedy answer appended."""
    ev = PasskeyEvaluator(model, base_seed=seed)
    out = []
    for length in lengths:
        for key in ev.passkeys_for(length, trials):
            ids = ev.tokenizer.encode(ev.build_prompt(length, key))
            if answer:
                ids = [int(t) for t in generate(model, np.array([ids]), max_new_tokens=ANSWER, temperature=0.0)[0]]
            out.append((ids, key))
    return out, ev


def main(args) -> int:
    if args.no_rtl and args.replay_context is not None:
        raise BadArgument("--replay-context", "sets the replay, which --no-rtl leaves out")
    if args.kv == "paged" and args.one_shot_rows is not None:
        raise BadArgument("--one-shot-rows", "with --kv paged every attention is tiled (no one-shot program)")
    args.replay_context = REPLAY_CONTEXT if args.replay_context is None else args.replay_context
    distinct("--calib-lengths", args.calib_lengths)
    distinct("--lengths", args.lengths)
    own_chip()
    if not args.no_rtl:
        import replay

        replay.require()  # before any output: a missing simulator is one line
    model = make_mixed_model()
    calib, _ = _prompts(model, args.calib_lengths, args.calib_trials, CALIB_SEED)
    evals, ev = _prompts(model, args.lengths, args.eval_trials, EVAL_SEED, answer=False)
    shared = {k for _ids, k in calib} & {k for _ids, k in evals}
    if shared:
        raise BadArgument("--calib-lengths and --lengths", f"passkeys {sorted(shared)} are in both sets: choose "
                          "other lengths")
    chip_model, _factors = equalize(model, [ids for ids, _k in calib])
    ranges = calibrate(chip_model, [ids for ids, _k in calib])
    longest = max(max(len(ids) for ids, _k in evals) + args.decode_steps, args.replay_context)
    chip = MixedChip(chip_model, ranges, kv=args.kv, max_context=longest)
    if args.one_shot_rows is not None:
        chip.one_shot_rows = args.one_shot_rows
    problems: list[str] = []
    checks = 0
    print(f"chip: {CHIP.n}x{CHIP.n} array, scratchpad {CHIP.sram_words} words, external memory {CHIP.ext_memory} "
          f"words; a decode step is {model.n_layers * (2 * model.n_kv_heads + 1)} programs")
    if args.kv == "paged":
        print(f"  K/V paged: pages of {chip.cache.page} rows in the chip's external memory, every attention tiled "
              f"({chip.paged_tile}-key tiles) with each K and V tile gathered through the block table")
    sizes = {name: chip.program(kind, 0, 0, 1) for name, kind in (("projection", "proj"), ("output", "out"))}
    for name, P in sizes.items():
        print(f"  {name} program (layer 0): {len(P.code) // 4} instructions, {P.ext_words} words of external memory")
    print(f"calibration: q and k columns equalized per KV group, then {len(calib)} passkey prompts of "
          f"{'/'.join(map(str, args.calib_lengths))} tokens with "
          f"the float model's greedy answer (passkeys seeded {CALIB_SEED}, disjoint from the evaluation's)")
    score_ranges = ", ".join(f"{ranges['s' + str(i)]:.1f}" for i in range(model.n_layers))
    q_ranges = ", ".join(f"{ranges['q' + str(i)]:.3g}" for i in range(model.n_layers))
    print(f"  score ranges per layer: {score_ranges}; q ranges: {q_ranges}")

    # 2. per-layer error, teacher-forced over the evaluation prompts
    total = LayerError([[] for _ in range(model.n_layers)], [], [])
    progress = Progress("per-layer error", sum(len(ids) for ids, _k in evals))
    for ids, _key in evals:
        total.add(layer_errors(chip, ids, reference=model))
        progress.step(len(ids))
    print(f"\nper-layer error over {len(total.top1)} positions of {len(evals)} evaluation prompts "
          f"(lengths {'/'.join(map(str, args.lengths))}; ||x_chip - x_float|| / ||x_float|| of each layer's "
          "output residual):")
    # the positions whose global layers attend over more than a tile: their attention is tiled
    tiled = np.array([pos + 1 > chip.tile for ids, _key in evals for pos in range(len(ids))])
    how = "tiled" if chip.one_shot_rows == chip.tile else f"one-shot up to {chip.one_shot_rows} rows"
    if args.kv == "paged":
        how = f"paged: every attention gathered in {chip.paged_tile}-key tiles"
    agree = np.array(total.top1)
    dec = np.array(total.decisive)
    for title, pick in (("all positions", np.ones_like(tiled)), (f"positions past {chip.tile} ({how})", tiled)):
        if not pick.any():
            continue
        print(f"  {title}: {pick.sum()}\n  layer  kind      mean      p95       max")
        for layer, rel in enumerate(total.rel):
            r = np.array(rel)[pick]
            print(f"  {layer:5d}  {model.layer_kinds[layer]:8s}  {r.mean():.4f}    {np.percentile(r, 95):.4f}    "
                  f"{r.max():.4f}")
        print(f"  top-1 agreement of the logits: {agree[pick].sum()}/{pick.sum()} positions; where the float "
              f"model's lead exceeds two int8 steps: {agree[pick & dec].sum()}/{(pick & dec).sum()}")
    checks += 1
    if not agree[dec].all():
        problems.append(f"top-1 differs at {(~agree[dec]).sum()} decisive positions")

    # 3. greedy decode on the machine model
    print(f"\ngreedy decode: {args.decode_steps} steps on the machine model after each prompt (prefill: the "
          "programs' integer semantics)")
    for ids, key in evals:
        want = [int(t) for t in generate(model, np.array([ids]), max_new_tokens=args.decode_steps,
                                         temperature=0.0)[0][len(ids):]]
        start = time.monotonic()
        try:
            got, traces = chip.generate(ids, args.decode_steps, executor="both")
        except AssertionError as error:
            problems.append(str(error))
            continue
        steps = traces[-args.decode_steps:]
        cycles = [sum(t.cycles) for t in steps]
        answer = ev.extract_passkey_from_output(ev.tokenizer.decode(got))
        ok = got == want
        checks += 1
        print(f"  {len(ids):4d} tokens, passkey {key:05d}: float {ev.tokenizer.decode(want)!r}, chip "
              f"{ev.tokenizer.decode(got)!r} -> {'same tokens' if ok else 'DIFFERENT'}, passkey "
              f"{'retrieved' if answer == key else 'MISSED'}; cycles per step {min(cycles)}..{max(cycles)} "
              f"({time.monotonic() - start:.1f} s)")
        if not ok:
            problems.append(f"the chip's tokens after the {len(ids)}-token prompt differ from the float model's")
        if answer != key:
            problems.append(f"passkey {key:05d} at {len(ids)} tokens not retrieved on the chip")

    # 4. the largest context
    if not args.no_bisect:
        rows = largest_one_shot(chip_model, ranges)
        print(f"\nlargest context of a one-shot attention program: {rows} K/V rows (one KV group: K and V at 16 "
              f"words a row each, the scores and probabilities at a word per 4 keys, in {CHIP.sram_words} words); "
              f"the chip runs one-shot up to {chip.one_shot_rows} rows and tiled beyond")
    for layout in chip_context.LAYOUTS[:2]:
        t = chip_context.largest_context(chip, layout)
        print(f"largest context, {layout}: {t} tokens (the weights and every layer's K and V in the largest external "
              f"memory, {config.EXT_MEMORY_MAX} words)")

    # 5. one decode step replayed
    if not args.no_rtl:
        from replay import image

        ids = evals[0][0]
        prompt = (ids * (args.replay_context // len(ids) + 1))[:args.replay_context]
        chip.reset()
        filled = Progress(f"tokens of the replay's {len(prompt) - 1}-token prefill", len(prompt) - 1)
        chip.prefill(prompt[:-1], progress=lambda done: filled.step(done - filled.done))
        trace = chip.step(prompt[-1], executor="machine")
        with config.use(chip.ext_config(max(r.ext_words for r in trace.runs))):
            records = [image.record(r.code, r.ext()) for r in trace.runs]
            print(f"\nreplay: the decode step at context {args.replay_context} ({len(records)} programs, "
                  f"{sum(trace.cycles)} cycles on the machine model, {trace.host_words} words written by the host)")
            checks += replay_checks(records, problems, name="mixed_chip", tool="mixed-chip")
    return finish(problems, checks=checks,
                  passed="the machine model computes the programs' integer semantics, the chip's greedy tokens "
                         "are the float model's, every passkey retrieved"
                         + ("" if args.no_rtl else ", both simulators agree with the machine model on every word "
                            "and counter"))
