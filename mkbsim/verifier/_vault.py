"""Vaults: harness state that no Python object of the submission leads to (DESIGN §5).

The submission runs in the worker's interpreter, so every object the harness keeps there could be
reached: through closures (``__closure__``/``cell_contents``), module globals (``__globals__``),
instances (``__self__``, ``__dict__``), class hierarchies (``__subclasses__``) or frames. A vault
closes all of these by construction rather than by enumerating them:

* its state lives only in the frame of a suspended generator, which Python exposes through two
  attributes alone, ``gi_frame`` and ``gi_code``, and through ``gc``. All three raise audit events,
  and the guards' audit hook refuses them for vaults (and ``gc`` introspection for everybody once the
  submission is loaded);
* the vault's code runs with empty globals and no builtins: everything it calls was bound when it was
  opened (C functions of the interpreter and torch), so patching a module or a class afterwards
  changes nothing it does;
* the hooks that talk to a vault (``protect``) hold only its ``send`` method, as a keyword-only
  default (``__kwdefaults__`` is audited too), and carry nothing a caller could use beyond what
  calling the hook already does;
* no submission code ever runs while a vault's frame is on the stack: vaults call only C functions,
  with torch's Python dispatch (modes, tensor subclasses) excluded, and hand any exception back with
  its traceback stripped.

What a vault does is therefore whatever its requests make it do, and every request kind is designed so
that a forged one gains nothing (a launch counted for nothing, a timer stopped later, a violation
recorded against oneself). What remains out of reach of this design is native code reading the
process's memory; the verifier's own clocks and the outputs it reads itself bound what that could
change (see the README's threat model).
"""

from __future__ import annotations

import _thread
import builtins
import gc
import types
from collections.abc import Callable, Generator
from typing import Any

#: What a vault answers: (RESULT, value) or (RAISE, exception).
RESULT, RAISE = 0, 1

#: An object's identity as a key without ``id()``, which is an audited event: each runs the guards' audit hook, a
#: Python function, on the calling thread (0.5 µs on the 2-core VM, paid inside the scored calls' launches).
#: ``object.__hash__`` is the base slot of an immutable type, never a class's own ``__hash__``: the object's address
#: rotated by four bits, one to one.
identity_key = object.__hash__

Send = Callable[[Any], Any]


def _isolated(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` with empty globals. Builtins stay the interpreter's own (``exec`` called through a hook takes
    its caller's builtins for the code it runs); that neither vaults nor hooks look a builtin up is checked
    on their bytecode by the tests."""
    copy = types.FunctionType(fn.__code__, {"__builtins__": builtins.__dict__}, fn.__name__, fn.__defaults__, None)
    copy.__kwdefaults__ = dict(fn.__kwdefaults__ or {})
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    return copy


class Registry:
    """The vaults and hook functions of one worker, handed to the audit hook once all exist."""

    def __init__(self) -> None:
        self.objects: list[Any] = []  # vault generators and hooks: their code and defaults are never read
        self.vault_codes: list[types.CodeType] = []  # a frame running one of these holds a vault's state
        self.hook_codes: list[types.CodeType] = []  # frames the guards look past, to whoever called the hook

    def open(self, body: Callable[..., Generator[Any, Any, None]], *state: Any) -> Send:
        """Start the generator ``body(*state)`` and return the hook that sends it requests."""
        isolated = _isolated(body)  # type: ignore[arg-type]
        gen = isolated(*state)
        next(gen)
        self.objects += [gen, isolated]
        self.vault_codes.append(isolated.__code__)
        # one request at a time: a vault's torch operations release the GIL, and a launch from another thread
        # (a pool's) would otherwise find the generator running
        return self.protect(_send, _send=gen.send, _gc=(gc.isenabled, gc.disable, gc.enable), _one=_thread.RLock())

    def protect(self, fn: Callable[..., Any], **kwdefaults: Any) -> Any:
        """A hook: ``fn`` isolated, with these keyword-only defaults (typically a vault's ``send``)."""
        hook = _isolated(fn)  # type: ignore[arg-type]
        hook.__kwdefaults__ = {**(hook.__kwdefaults__ or {}), **kwdefaults}
        self.objects.append(hook)
        self.hook_codes.append(hook.__code__)
        return hook


def _send(request: Any, *, _send: Any, _gc: Any, _one: Any) -> Any:
    """One request to a vault, one thread at a time. No garbage collection runs meanwhile (a finalizer of the
    submission's would run inside the vault); the caller holds the request's objects, so no reference the vault
    drops is the last one either."""
    with _one:
        enabled = _gc[0]()
        _gc[1]()
        try:
            return _send(request)
        finally:
            if enabled:
                _gc[2]()


def unwrap(answer: tuple[int, Any]) -> Any:
    """A vault's answer as a value, or raised (for use outside vaults, in trusted harness code)."""
    kind, value = answer
    if kind == RAISE:
        raise value
    return value
