"""What the control arms read (DESIGN §4): a placebo's donor skills in a seeded order, and a matched control's
neutral note.

A placebo reads, under the same header, the skill its model wrote for another problem of the same family in
the source DSL: the first of the family's other problems, in an order drawn from the campaign's seed, whose
solo left a skill. A matched control reads a note with as many characters and sentences as the skill its
treatment reads (so reading it takes as long) that says nothing about the task: no sentence of it carries a
cue of the claim classifier (``mkbsim.claims``), a number or a plan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

CONTROLS = ("aa", "placebo", "matched")

# one line of the note, repeated and cut to length: plain words that no rubric cue, plan phrase or speedup matches
_FILLER = "This line of the note is left blank and says nothing about the task or the code "
_SHORTEST = 8  # characters of a sentence at least ("This li.")


def donor_order(seed: object, model: str, problem: str, replicate: int, direction: str,
                others: Sequence[str]) -> list[str]:  # fmt: skip
    """``others`` in an order drawn from ``seed`` and the placebo's place (stable across runs and processes)."""

    def key(other: str) -> bytes:
        text = "\x1f".join(map(str, ("placebo", seed, model, problem, replicate, direction, other)))
        return hashlib.blake2b(text.encode(), digest_size=8).digest()

    return sorted(others, key=key)


def neutral_note(length: int, sentences: int) -> str:
    """A non-informative note of exactly ``length`` characters in ``sentences`` sentences (fewer where the
    length leaves no room for that many)."""
    if length <= 0:
        return ""
    count = max(1, min(sentences, (length + 1) // (_SHORTEST + 1)))
    room = length - (count - 1)  # the spaces between sentences
    sizes = [room // count + (i < room % count) for i in range(count)]
    return " ".join(_sentence(size) for size in sizes)


def _sentence(size: int) -> str:
    """One sentence of exactly ``size`` characters: filler words cut to fit, then a full stop."""
    if size < 2:
        return "."[:size]
    words = (_FILLER * (size // len(_FILLER) + 1))[: size - 1]
    return words[:-1] + ("a" if words[-1] == " " else words[-1]) + "."
