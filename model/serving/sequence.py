"""A request, and the sequence it becomes while it runs.

A ``Request`` is what a client submits: a prompt (its first token alone, or several tokens), a
number of tokens to generate, an attention window (or none) and the cycle it arrives in. A
``Sequence`` is a request's state on the chip: the tokens fed so far (each fed token appends one
key/value row to its cache), the tokens generated and the int8 logits behind each, the token it
feeds next, and the pages reserved for it.

Invariants (the scheduler keeps them; tests/test_serving.py checks them after every step):
``0 <= fed <= rows``; ``len(tokens) <= n_new``; a sequence that is still prefilling has generated
nothing (``fed < len(prompt)`` implies ``tokens == []``); while it runs, its block table holds at
most ``reserved`` pages.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from paged_lm import context_size


@dataclass(frozen=True)
class Request:
    """One request: the prompt's tokens (at least one), the tokens to generate, the window (None:
    attend everything) and the cycle it arrives in."""

    rid: Hashable
    prompt: tuple[int, ...]
    n_new: int
    window: int | None = None
    arrival: int = 0

    @property
    def rows(self) -> int:
        """Rows this request appends over its life: one per token it feeds."""
        return len(self.prompt) + self.n_new - 1

    @property
    def max_context(self) -> int:
        """The longest context any of its steps attends."""
        return context_size(self.rows, self.window)

    @property
    def prefix_key(self) -> tuple:
        """What a request must share with another to reuse its prompt's rows: prompt and window."""
        return (self.prompt, self.window)


@dataclass
class Sequence:
    """A request while it runs (module docstring)."""

    req: Request
    fed: int = 0  # tokens fed so far (= rows appended)
    tokens: list[int] = field(default_factory=list)  # generated
    logits: list[list[int]] = field(default_factory=list)  # int8 logits behind each generated token
    next_token: int = 0
    reserved: int = 0  # pages reserved for its block table

    @property
    def rid(self) -> Hashable:
        return self.req.rid

    @property
    def prefilling(self) -> bool:
        """Still feeding its prompt: what the next step produces is not a generated token yet."""
        return self.fed < len(self.req.prompt)

    @property
    def done(self) -> bool:
        return len(self.tokens) == self.req.n_new
