"""Checking the store path before the app opens it: a one-line verdict on a path that cannot be used."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mkbsim.errors import MkbsimError
from mkbsim.events import EventStore


@dataclass(frozen=True)
class StoreCheck:
    """What opening the store found: ``problem`` is a sentence for the user, or None when usable."""

    path: Path
    problem: str | None
    head: int


def check_store(path: Path) -> StoreCheck:
    """Open the store read-only, the way every mkbsim reader does, and say why it cannot be used, if it cannot."""
    try:
        with EventStore(path, readonly=True) as store:
            return StoreCheck(path, None, store.last_position())
    except MkbsimError as exc:
        return StoreCheck(path, str(exc), 0)
