"""Entry point: builds the parser from the command modules and turns user errors into exit 2."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from mkbsim.errors import UserError

# Module names under mkbsim.cli, each exposing register(subparsers). Order = order in --help.
COMMAND_MODULES = (
    "run",
    "events",
    "problems",
    "verify",
    "report",
    "calibrate",
    "filter-test",
    "chain",
    "label",
    "tui",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit 2 (its default code), without usage spam."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from mkbsim import __version__

    parser = _Parser(
        prog="mkbsim",
        description="Event-sourced research instrument for agent memory in GPU-kernel optimization.",
    )
    parser.add_argument("--version", action="version", version=f"mkbsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"mkbsim.cli._{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
    except UserError as exc:
        sys.stderr.write(f"mkbsim {args.command}: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("mkbsim: interrupted\n")
        if argv is None:  # the program itself (not a caller's main([...])): everything was closed on the way
            # out, so skip the interpreter's teardown of torch/TVM/litellm (seconds) and stop now
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return 130
    except BrokenPipeError:  # e.g. `mkbsim events tail | head`
        return 0
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
