"""`mkbsim tui`: the Textual terminal UI over an event store (the `tui` package; needs mkbsim[tui])."""

from __future__ import annotations

import argparse

from mkbsim.cli._common import add_store_option
from mkbsim.errors import UserError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tui",
        help="terminal UI: live monitor, comparisons, step-by-step replay, skills and filters, chains",
        description="Opens the store in an interactive terminal UI (keys: 1-5 screens, ? help, q quit). "
        "A missing or empty store is shown as such; the UI waits for a campaign to fill it.",
    )
    add_store_option(p)
    p.set_defaults(handler=_tui)


def _tui(args: argparse.Namespace) -> int:
    try:  # textual is an optional dependency; `mkbsim --help` must not import it
        from tui.app import MkbsimApp
    except ImportError as exc:
        raise UserError(f"the TUI needs the tui extra: pip install 'mkbsim[tui]' (missing: {exc.name})") from None
    MkbsimApp(args.store).run()
    return 0
