"""`capra passkey --chip`: the passkey table on the int8 chip path next to the float (numpy) model.

For each model (the mixed one, and the windowed-only control) and each cell (context length,
needle depth), every trial's prompt is answered twice:

* by the float model, as `capra passkey` answers it (``generate``, greedy, prompts in batches of
  two, eight new tokens);
* by ``MixedChip`` in int8: the prompt but its last token prefilled through the vectorised executor
  (``inference.mixed_prefill``: the decode programs' integer semantics for every position at once,
  word for word the token-by-token prefill), then ``MixedChip.step`` with the reference executor
  from the prompt's last token until the answer is settled (a run of five digits closed by another
  token) or eight tokens are out.

The chip of each model is calibrated as `capra mixed-chip` calibrates it (q and k equalized, the
ranges from passkey prompts of 64 and 200 tokens, passkeys seeded 7, with the float model's answer
appended); the evaluated passkeys (seeded ``--seed`` + length) must be disjoint from those.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from inference.generate import generate
from inference.long_context import POSITIONS, TARGET_ACCURACY, PasskeyEvaluator, wilson_interval
from inference.mixed_chip import MixedChip, calibrate, equalize
from inference.mixed_lm import make_mixed_model
from inference.mixed_prefill import VectorisedPrefill
from replay.runs import note

from .common import BadArgument, Progress, finish

CALIB_SEED = 7  # as `capra mixed-chip`: the calibration prompts' passkeys come from random.Random(7 + length)
CALIB_LENGTHS = (64, 200)
CALIB_TRIALS = 3
ANSWER_TOKENS = 7  # the calibration prompts carry the float model's answer: five digits, ".", one more
QUICK_LENGTHS = (256, 1024)
QUICK_TRIALS = 5
FULL_TRIALS = 40
BATCH = 2  # prompts the float model decodes together, as `capra passkey` does


@dataclass
class Cell:
    """One (model, length, depth): each trial's passkey and the digits each path retrieved."""

    model: str
    length: int
    position: str
    keys: list[int] = field(default_factory=list)
    float_got: list[int | None] = field(default_factory=list)
    chip_got: list[int | None] = field(default_factory=list)
    float_tokens: list[str] = field(default_factory=list)
    chip_tokens: list[str] = field(default_factory=list)
    back: list[int] = field(default_factory=list)  # tokens from the needle's first digit to the prompt's end
    seconds_float: float = 0.0
    seconds_prefill: float = 0.0
    seconds_decode: float = 0.0

    def correct(self, got: list[int | None]) -> int:
        return sum(g == k for g, k in zip(got, self.keys, strict=True))

    @property
    def agree(self) -> int:
        return sum(a == b for a, b in zip(self.float_got, self.chip_got, strict=True))


def commit() -> str:
    """The checkout's commit (with '+changes' when the work tree differs), or 'unknown'."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("+changes" if dirty else "")


def settled(tokens: list[int], tok: PasskeyTokenizerLike) -> bool:
    """True once more tokens cannot change the first 5-digit number of the decoded answer: a run of
    exactly five digit tokens closed by a token that is not a digit. (An earlier run of another
    length is no number of five digits whatever follows it.)"""
    run = 0
    for t in tokens:
        if tok.vocab[int(t)].isdigit():
            run += 1
        else:
            if run == 5:
                return True
            run = 0
    return False


PasskeyTokenizerLike = object  # anything with ``vocab`` (PasskeyTokenizer)


def make_chip(model, ev_seed_keys: set[int]) -> tuple[MixedChip, set[int]]:
    """The model's chip, calibrated as `capra mixed-chip` does, and the calibration passkeys."""
    ev = PasskeyEvaluator(model, base_seed=CALIB_SEED)
    calib, keys = [], set()
    for length in CALIB_LENGTHS:
        for key in ev.passkeys_for(length, CALIB_TRIALS):
            ids = ev.tokenizer.encode(ev.build_prompt(length, key))
            out = generate(model, np.array([ids]), max_new_tokens=ANSWER_TOKENS, temperature=0.0)[0]
            calib.append([int(t) for t in out])
            keys.add(key)
    shared = keys & ev_seed_keys
    if shared:
        raise BadArgument("--seed", f"the evaluation's passkeys {sorted(shared)} are also calibration passkeys "
                          f"(seeded {CALIB_SEED}): choose another seed")
    chip_model, _factors = equalize(model, calib)
    return MixedChip(chip_model, calibrate(chip_model, calib)), keys


def needle_back(prompt: list[int], needle: list[int]) -> int:
    """Tokens from the needle's first digit to the prompt's end (the answer's first step sees the
    digit iff this is within a windowed layer's reach)."""
    for i in range(len(prompt) - len(needle) + 1):
        if prompt[i:i + len(needle)] == needle:
            return len(prompt) - (i + 3)  # "the passkey is", then the first digit
    raise ValueError("needle not found in prompt")


def run_cell(name: str, model, chip: MixedChip, prefill: VectorisedPrefill, ev: PasskeyEvaluator, length: int,
             position: str, n_trials: int, batch: int) -> Cell:
    cell = Cell(name, length, position)
    keys = ev.passkeys_for(length, n_trials)
    tok = ev.tokenizer
    for start in range(0, n_trials, batch):
        chunk = keys[start:start + batch]
        prompts = [tok.encode(ev.build_prompt(length, key, position)) for key in chunk]
        t0 = time.perf_counter()
        ids = np.array(prompts, dtype=np.int64)
        out = generate(model, ids, max_new_tokens=ev.max_new_tokens, temperature=0.0, use_cache=True)
        cell.seconds_float += time.perf_counter() - t0
        for key, prompt, row in zip(chunk, prompts, out[:, ids.shape[1]:], strict=True):
            cell.keys.append(key)
            cell.back.append(needle_back(prompt, tok.encode(ev.needle(key))))
            text = tok.decode(row)
            cell.float_tokens.append(text)
            cell.float_got.append(ev.extract_passkey_from_output(text))
            t0 = time.perf_counter()
            prefill.prefill(prompt[:-1])
            t1 = time.perf_counter()
            answer: list[int] = []
            nxt = prompt[-1]
            while len(answer) < ev.max_new_tokens and not settled(answer, tok):
                nxt = chip.step(nxt, executor="reference").next_token
                answer.append(nxt)
            cell.seconds_prefill += t1 - t0
            cell.seconds_decode += time.perf_counter() - t1
            text = tok.decode(answer)
            cell.chip_tokens.append(text)
            cell.chip_got.append(ev.extract_passkey_from_output(text))
    return cell


_WORKER: dict = {}  # in each worker process: the models, chips, prefills and evaluators (built before the fork)


def _worker_init() -> None:
    """A worker ends quietly when the pool ends it (the CLI's SIGTERM handler is the parent's)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _cell_job(job: tuple[str, int, str, int]) -> Cell:
    name, length, position, n_trials = job
    w = _WORKER
    return run_cell(name, w["models"][name], w["chips"][name], w["prefills"][name], w["evaluators"][name], length,
                    position, n_trials, BATCH)


def _digits(x: int | None) -> str:
    return "none" if x is None else f"{x:05d}"


def main(args) -> int:
    lengths = list(args.context_lengths)
    n_trials = args.n_trials
    positions = POSITIONS if args.position == "all" else (args.position,)
    models = {"mixed": make_mixed_model(seed=0, kind="mixed", window=args.window),
              "windowed": make_mixed_model(seed=0, kind="windowed", window=args.window)}
    evaluators = {name: PasskeyEvaluator(m, base_seed=args.seed) for name, m in models.items()}
    eval_keys = {k for length in lengths for k in evaluators["mixed"].passkeys_for(length, n_trials)}
    t0 = time.perf_counter()
    chips = {}
    for name, m in models.items():
        chip, _calib_keys = make_chip(m, eval_keys)
        if m.window > chip.one_shot_rows:
            raise BadArgument("--window", f"{m.window} is past the one-shot attention's {chip.one_shot_rows} rows, "
                              "which the vectorised prefill needs for windowed layers")
        chips[name] = chip
    calib_seconds = time.perf_counter() - t0
    m = models["mixed"]
    print(f"passkey retrieval on the int8 chip path (GA2 programs of inference/mixed_chip.py), commit {commit()}")
    print(f"models: mixed ({', '.join(m.layer_kinds)}) and the windowed-only control; window {m.window}; "
          f"{m.n_heads} query heads, {m.n_kv_heads} KV heads")
    print(f"{n_trials} distinct passkeys per cell from random.Random({args.seed} + length); calibration: "
          f"{len(CALIB_LENGTHS) * CALIB_TRIALS} prompts of {'/'.join(map(str, CALIB_LENGTHS))} tokens per model, "
          f"passkeys from random.Random({CALIB_SEED} + length), disjoint from the evaluated ones "
          f"({calib_seconds:.1f} s)")
    print("float: the numpy model, greedy, 8 new tokens (as `capra passkey`); chip: prefill through the "
          "VECTORISED executor (inference/mixed_prefill.py: the int8 programs' integer semantics for every prompt "
          "position at once, word for word token-by-token MixedChip.prefill), then MixedChip.step with the "
          "reference executor until the answer's five digits are settled (at most 8 steps)")
    print()
    print(f"{'model':<9} {'context':>7}  {'depth':<7} {'float':>7}  {'chip':>7}  {'chip 95% interval':>17}  "
          f"{'agree':>7}  {'float s':>7}  {'prefill s':>9}  {'decode s':>8}")
    for name, chip in chips.items():  # compile the programs once, before the workers fork
        chip.reset()
        VectorisedPrefill(chip).prefill(evaluators[name].tokenizer.encode(
            evaluators[name].build_prompt(max(CALIB_LENGTHS), 0)))
    _WORKER.update(models=models, chips=chips, evaluators=evaluators,
                   prefills={name: VectorisedPrefill(chip) for name, chip in chips.items()})
    jobs = [(name, length, position, n_trials) for name in models for length in lengths for position in positions]
    progress = Progress("passkey cells on the chip path", len(jobs), every=10.0)
    cells: list[Cell] = []
    pool = mp.get_context("fork").Pool(min(args.jobs, len(jobs)), _worker_init) if args.jobs > 1 else None
    try:
        for cell in pool.imap(_cell_job, jobs, chunksize=1) if pool is not None else map(_cell_job, jobs):
            cells.append(cell)
            progress.step()
            n = len(cell.keys)
            lo, hi = wilson_interval(cell.correct(cell.chip_got), n)
            print(f"{cell.model:<9} {cell.length:>7}  {cell.position:<7} {cell.correct(cell.float_got):>3}/{n:<3}  "
                  f"{cell.correct(cell.chip_got):>3}/{n:<3}  {f'[{lo:6.1%}, {hi:6.1%}]':>17}  "
                  f"{cell.agree:>3}/{n:<3}  {cell.seconds_float:>7.1f}  {cell.seconds_prefill:>9.1f}  "
                  f"{cell.seconds_decode:>8.1f}", flush=True)
    except BaseException:
        if pool is not None:
            pool.terminate()
        raise
    if pool is not None:
        pool.close()
        pool.join()
    print()
    misses = [(c, i) for c in cells for i in range(len(c.keys)) if c.chip_got[i] != c.keys[i]]
    print(f"misses on the chip ({len(misses)}): cell, passkey, digits the chip got, the float model's, and why")
    for c in cells:
        mine = [i for i in range(len(c.keys)) if c.chip_got[i] != c.keys[i]]
        shared = [i for i in mine if c.float_got[i] == c.chip_got[i]]
        reach = chips[c.model].model.window if c.model == "windowed" else None
        if len(shared) > 3 and reach is not None and all(c.back[i] >= reach for i in shared):
            got = sorted({_digits(c.chip_got[i]) for i in shared})
            keys = ", ".join(f"{c.keys[i]:05d}" for i in shared)
            print(f"  {c.model} {c.length}/{c.position}: {len(shared)} passkeys ({keys}): "
                  f"chip and float both got {'/'.join(got)} -- the needle lies {min(c.back[i] for i in shared)}.."
                  f"{max(c.back[i] for i in shared)} tokens back, past every layer's window of {reach}")
            mine = [i for i in mine if i not in shared]
        for i in mine:
            if reach is not None and c.back[i] >= reach:
                why = f"past every layer's window of {reach}" + (
                    ", the float model gets the same" if c.float_got[i] == c.chip_got[i] else "")
            elif c.float_got[i] == c.chip_got[i]:
                why = "the float model gets the same"
            elif c.float_got[i] != c.keys[i]:
                why = "the float model misses it too, differently"
            else:
                why = "the float model retrieves it: an int8 miss"
            print(f"  {c.model} {c.length}/{c.position}: passkey {c.keys[i]:05d} ({c.back[i]} tokens back), chip "
                  f"{_digits(c.chip_got[i])} ({c.chip_tokens[i]!r}), float {_digits(c.float_got[i])} "
                  f"({c.float_tokens[i]!r}) -- {why}")
    disagreements = [(c, i) for c in cells for i in range(len(c.keys)) if c.chip_got[i] != c.float_got[i]]
    print(f"retrieved digits equal to the float model's: {sum(c.agree for c in cells)} of "
          f"{sum(len(c.keys) for c in cells)} trials ({len(disagreements)} differ)")
    per_trial = {}
    for c in cells:
        per_trial.setdefault((c.model, c.length), []).append(
            (c.seconds_prefill + c.seconds_decode + c.seconds_float) / max(1, len(c.keys)))
    print("seconds per trial (float + chip prefill + chip decode): " + ", ".join(
        f"{model} {length}: {np.mean(v):.2f}" for (model, length), v in per_trial.items()))
    note(f"the chip path's table took {time.perf_counter() - t0:.0f} s")
    mixed = [c for c in cells if c.model == "mixed"]
    failing = [f"{c.length}/{c.position}" for c in mixed if c.correct(c.chip_got) / len(c.keys) < TARGET_ACCURACY]
    if failing:
        print(f"verdict: BELOW TARGET - the mixed model on the chip retrieves < {TARGET_ACCURACY:.0%} at "
              f"{len(failing)} of {len(mixed)} cells ({', '.join(failing)})")
    else:
        low = min(c.correct(c.chip_got) / len(c.keys) for c in mixed)
        print(f"verdict: PASS - the mixed model on the chip retrieves >= {TARGET_ACCURACY:.0%} in every cell "
              f"(lowest {low:.1%}); the windowed control is shown for comparison, not held to the target")
    problems = [f"chip accuracy below {TARGET_ACCURACY:.0%} at {len(failing)} of {len(mixed)} mixed cells"] \
        if failing else []
    return finish(problems, checks=sum(len(c.keys) for c in mixed),
                  passed=f"{sum(len(c.keys) for c in mixed)} mixed-model trials in {len(mixed)} cells on the chip")
