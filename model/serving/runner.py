"""The serving runner: a batch of sequences in, one decode program run, a ``host.Step`` out.

Each sequence feeds its next token and attends the rows its window reaches, gathered through its
block table (``BlockManager.window_rows``); ``host.ModelRunner`` turns the batch into one program
(the requests longest context first) and runs it on GA2's machine model.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq

from host import ModelRunner, Step

from .block_manager import BlockManager
from .sequence import Sequence


def run_batch(runner: ModelRunner, blocks: BlockManager, batch: Seq[Sequence], check: bool = False) -> Step:
    """One step of every sequence of `batch`; the Step's requests are in batch order."""
    caches = [blocks.window_rows(seq) for seq in batch]
    return runner.run([seq.next_token for seq in batch], caches, check=check)
