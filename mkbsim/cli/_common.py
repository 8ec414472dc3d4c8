"""Options and helpers shared by several commands."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkbsim.events import EventStore
    from mkbsim.lab import Lab

DEFAULT_STORE = "events.sqlite"
#: What a terminal acts on or reorders: the C0 controls but newline and tab (ESC starts cursor moves, erasures,
#: concealment), DEL and the C1 controls (U+009B is CSI, like ESC [), and the bidirectional marks, embeddings,
#: overrides and isolates (U+202E shows text reversed); and lone surrogates, which no terminal's encoding takes
#: (writing one raised ``UnicodeEncodeError``: red team rt38 F2). Stored text (command output, skills, feedback, a
#: submission's exception message) is the agents' and carries them verbatim; what a command prints escapes them.
_TERMINAL_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def terminal_safe(text: str) -> str:
    """``text`` with every terminal control in it escaped as ``\\u001b`` (a JSON line stays the same JSON: JSON
    escapes the C0 controls itself)."""
    return _TERMINAL_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
#: Below this many events to apply, bringing the projections current is quick and not announced.
ANNOUNCE_PENDING = 20_000


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=DEFAULT_STORE,
        type=Path,
        help=f"event store file (default: ./{DEFAULT_STORE})",
    )


def open_store(path: Path, *, create: bool = False, readonly: bool = False) -> EventStore:
    """Open an existing store (a missing file is a one-line error), or create it when asked."""
    from mkbsim.events import EventStore

    return EventStore(path, create=create, readonly=readonly)


@contextlib.contextmanager
def open_lab(path: Path, *, appends: str | None = None) -> Iterator[Lab]:
    """The read model of an existing store, its projections brought current (announced on stderr when that
    takes a while; a read-only store is said so). Print what was read only after the block: leaving it
    raises ``StoreDamaged`` if SQLite's integrity check finds damaged pages, so no number read from a
    damaged file is ever printed. The check runs alongside the block's reads when the projections are
    current, else before they are updated (a damaged file is not written to). ``appends``: what the
    command will append, refused at once on a read-only store (``StoreReadOnly``)."""
    from mkbsim.errors import StoreReadOnly
    from mkbsim.lab import Lab

    lab = Lab(path, catch_up=False)
    try:
        if appends is not None and lab.readonly:
            raise StoreReadOnly(f"{path}: the store is read-only and {appends} are appended to it")
        pending = lab.pending()
        if pending or appends is not None:
            lab.verify()
        else:
            lab.start_verify()
        if pending >= ANNOUNCE_PENDING:
            print(f"bringing the projections up to date: {pending:,} events to apply…", file=sys.stderr, flush=True)
        lab.refresh()
        note = lab.freshness().note()
        if note is not None:
            print(note, file=sys.stderr)
        yield lab
        lab.verify()
    finally:
        lab.close()


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
