"""Errors that reach the user as one line (the CLI exits 2), never as a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a missing file, an unknown name, an invalid option value."""
