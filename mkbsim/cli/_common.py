"""Options and helpers shared by several commands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkbsim.events import EventStore

DEFAULT_STORE = "events.sqlite"


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=DEFAULT_STORE,
        type=Path,
        help=f"event store file (default: ./{DEFAULT_STORE})",
    )


def open_store(path: Path, *, create: bool = False) -> EventStore:
    """Open an existing store (a missing file is a one-line error), or create it when asked."""
    from mkbsim.events import EventStore

    return EventStore(path, create=create)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value
