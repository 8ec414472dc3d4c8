"""`mkbsim tui`: the Textual terminal UI over an event store (the `tui` package, an entry point of group
``mkbsim.tui``; needs mkbsim[tui])."""

from __future__ import annotations

import argparse

from mkbsim.cli._common import add_store_option


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
    from mkbsim.plugins import tui_app

    tui_app()(args.store)  # the `tui` package, found through its entry point (it imports mkbsim, not the reverse)
    return 0
