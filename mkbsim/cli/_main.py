"""Entry point: builds the parser from the command modules and turns every foreseeable failure into one
line on stderr and its exit code (``mkbsim.errors``; README "Exit codes")."""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from mkbsim.errors import MkbsimError, StoreFull

# Module names under mkbsim.cli, each exposing register(subparsers). Order = order in --help.
COMMAND_MODULES = (
    "run",
    "events",
    "problems",
    "verify",
    "report",
    "power",
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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or only of ``command`` when it names one (each command module is
    compiled and run to register it: a command run needs only its own)."""
    from mkbsim._version import __version__

    parser = _Parser(
        prog="mkbsim",
        description="Event-sourced research instrument for agent memory in GPU-kernel optimization.",
    )
    parser.add_argument("--version", action="version", version=f"mkbsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in (command,) if command in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f"mkbsim.cli._{name.replace('-', '_')}").register(sub)
    return parser


#: Exit codes of a run stopped by SIGINT / SIGTERM (128 + the signal's number, as shells report them).
STOPPED_BY_SIGNAL = (130, 143)


def main(argv: Sequence[str] | None = None) -> int:
    code = _main(argv)
    if argv is None and code in STOPPED_BY_SIGNAL:
        # the program itself (not a caller's main([...])), stopped by a signal: everything was closed on the way
        # out, so skip the interpreter's teardown of torch/TVM/litellm (seconds on a busy machine) and stop now
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """Stop the process without the interpreter's teardown (freeing every object, module by module)."""
    with contextlib.suppress(BrokenPipeError):  # e.g. `mkbsim report | head`: the reader has gone
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words[0] if words else None)  # `mkbsim --help` and bad usage: every command
    args = parser.parse_args(words)
    try:
        code = args.handler(args)
    except MkbsimError as exc:
        return _fail(args, exc)
    except sqlite3.Error as exc:  # a store error some code path did not translate: still one line, its class
        from mkbsim.events import store_fault

        return _fail(args, store_fault(exc, Path(getattr(args, "store", "the store"))))
    except BrokenPipeError:  # e.g. `mkbsim events tail | head`
        return 0
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        return _fail(args, StoreFull(f"{exc.filename or 'a file'}: the disk is full ({exc.strerror})"))
    except KeyboardInterrupt:
        sys.stderr.write("mkbsim: interrupted\n")
        return 130
    if argv is None and getattr(args, "exit_at_once", False):
        # the program itself, whose command has closed everything and asked to skip the teardown (a report
        # frees ~100k records and rows: 5% of its CPU time)
        _exit_now(int(code or 0))
    return int(code or 0)


def _fail(args: argparse.Namespace, exc: MkbsimError) -> int:
    message = " ".join(str(exc).split())  # one line, whatever the message holds
    sys.stderr.write(f"mkbsim {args.command}: error: {message}\n")
    return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
