"""The `mkbsim` command line (DESIGN §9).

Each subcommand lives in its own module with a ``register(subparsers)`` function; heavy imports
(torch, tvm, litellm, textual, scipy) happen inside the handlers so `mkbsim --help` starts fast.
"""

from mkbsim.cli._main import main

__all__ = ["main"]
