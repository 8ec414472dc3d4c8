"""mkbsim's foreseeable failures, one class per kind, each with the exit code the CLI ends with.

The CLI prints one line (``mkbsim COMMAND: error: MESSAGE``) and exits with the class's ``exit_code``;
README "Exit codes" lists them. Only ``UserError`` means the user's input was wrong (exit 2); a store
fault, a concurrency conflict or an invalid event is not the user's mistake and says which it is.
"""

from __future__ import annotations

from typing import ClassVar


class MkbsimError(Exception):
    """The root: a failure mkbsim foresaw and can describe in one line."""

    exit_code: ClassVar[int] = 1


class UserError(MkbsimError):
    """Bad input from the user: a missing file, an unknown name, an invalid option value."""

    exit_code = 2


class StoreMissing(UserError):
    """The store path names no file (``mkbsim events init`` or ``mkbsim run`` creates one)."""


class NotAStore(UserError):
    """The path names a file that is not an mkbsim event store (or one newer than this mkbsim)."""


class StoreError(MkbsimError):
    """The store failed in a way none of its subclasses names (an SQLite error of another kind)."""

    exit_code = 3


class StoreReadOnly(StoreError):
    """The command must write (append events, update projections) and the store cannot be written."""

    exit_code = 4


class StoreDamaged(StoreError):
    """SQLite's integrity check fails: pages of the file are damaged. Nothing read from it is reported."""

    exit_code = 5


class StoreFull(StoreError):
    """The disk (or file system) holding the store is full; the failed transaction wrote nothing."""

    exit_code = 6


class StoreBusy(StoreError):
    """Another process held the store's write lock for longer than the busy timeout."""

    exit_code = 7


class ConcurrencyError(StoreError):
    """A stream's version is not what the writer expected: another writer appended to it first."""

    exit_code = 8


class InvalidEvent(MkbsimError, ValueError):
    """An event that does not match its type's schema, or of a type this mkbsim does not know: a fault of
    the code that produced it, refused before anything was written (DESIGN §3)."""

    exit_code = 9


class PayloadError(InvalidEvent):
    """A payload that does not match its event type's schema (names the field)."""


class UnknownEventType(InvalidEvent):
    """An event type this version of mkbsim does not know (refused on append)."""
