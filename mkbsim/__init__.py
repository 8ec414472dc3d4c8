"""mkbsim: an event-sourced research instrument for agent memory in GPU-kernel optimization.

Kept import-light: the verifier and catalogue run on bare GPU machines, and `mkbsim --help`
must start fast. Heavy parts are imported from their subpackages; ``mkbsim.Lab`` (the read model,
``mkbsim.lab``) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mkbsim._version import __version__

if TYPE_CHECKING:
    from mkbsim.lab import Lab

__all__ = ["Lab", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Lab":
        from mkbsim.lab import Lab

        return Lab
    raise AttributeError(f"module 'mkbsim' has no attribute {name!r}")
