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
import functools
import gc
import opcode
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


#: The instructions that look a name up in a function's globals or builtins when they run.
_LOAD_GLOBAL = opcode.opmap["LOAD_GLOBAL"]
_BY_NAME = frozenset(opcode.opmap[name] for name in ("LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME"))
_EXTENDED_ARG = opcode.EXTENDED_ARG


def global_names(code: types.CodeType) -> tuple[set[str], set[str]]:
    """The names ``code`` and the code nested in it (comprehensions, inner functions) look up in their globals when
    they run, and those they write or look up by name there (read from the raw bytecode: ``dis`` costs 0.5 ms a
    function at every worker's start)."""
    loads: set[str] = set()
    writes: set[str] = set()
    pending = [code]
    while pending:
        current = pending.pop()
        raw, names, arg = current.co_code, current.co_names, 0
        for i in range(0, len(raw), 2):
            op, arg = raw[i], arg << 8 | raw[i + 1]
            if op == _EXTENDED_ARG:
                continue
            if op == _LOAD_GLOBAL:
                loads.add(names[arg >> 1])  # the low bit says whether a NULL is pushed too (3.11, 3.12)
            elif op in _BY_NAME:
                writes.add(names[arg])
            arg = 0
        pending += [const for const in current.co_consts if type(const) is types.CodeType]
    return loads, writes


class Unbindable(TypeError):
    """A function made a hook looks up, when it runs, something the submission could change by then."""


def _isolated(fn: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    """``fn`` over its own globals, ``namespace``. Builtins stay the interpreter's own (``exec`` called through a hook
    takes its caller's globals and builtins for the code it runs): every name the code looks up is in ``namespace``,
    found there before any builtin."""
    copy = types.FunctionType(
        fn.__code__, {**namespace, "__builtins__": builtins.__dict__}, fn.__name__, fn.__defaults__, None
    )
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
        # the harness's functions a hook looks up by name, each made a hook once: id -> (the function, its hook)
        self._bound: dict[int, tuple[types.FunctionType, types.FunctionType]] = {}
        self.states: list[tuple[str, tuple[Any, ...]]] = []  # each vault's state, as opened
        self._watched: dict[int, tuple[type, Any, dict[str, Any]]] = {}  # classes watched for changes (``watch``)
        self._sizes: list[tuple[Any, int]] = []  # each watched class's namespace and its size, checked by ``_send``
        self._compared: list[Any] = []  # objects compared by identity, never called nor read (``compared``)

    def open(self, body: Callable[..., Generator[Any, Any, None]], *state: Any, checked: bool = True) -> Send:
        """Start the generator ``body(*state)`` and return the hook that sends it requests. A vault's code looks
        nothing up by name: all it calls comes in ``state``. ``checked``: its requests are refused while a watched
        class was changed (the answers' signer is not: the answer says so, ``changed``)."""
        loads, writes = global_names(body.__code__)
        if loads or writes:
            raise Unbindable(f"the vault {body.__qualname__} looks names up: {sorted(loads | writes)}")
        isolated = _isolated(body, {})  # type: ignore[arg-type]
        for part in state:
            self._bind_library(part)
        self.states.append((body.__qualname__, state))
        gen = isolated(*state)
        next(gen)
        self.objects += [gen, isolated]
        self.vault_codes.append(isolated.__code__)
        # one request at a time: a vault's torch operations release the GIL, and a launch from another thread
        # (a pool's) would otherwise find the generator running
        return self.protect(
            _send, _send=gen.send, _gc=(gc.isenabled, gc.disable, gc.enable), _one=_thread.RLock(),
            _sizes=self._sizes if checked else (), _len=len, _refused=PermissionError,
        )  # fmt: skip

    def protect(self, fn: Callable[..., Any], **kwdefaults: Any) -> Any:
        """A hook: ``fn`` over globals of its own, with these keyword-only defaults (typically a vault's ``send``).
        Every name its code looks up is bound now, as the harness has it before any submission loads: a function of
        the harness's is made a hook in turn, by the same rule; a module is refused (what a hook uses of one is bound
        when the harness loads, as ``_threads`` binds its clocks)."""
        hook = self._hook(fn, fn.__qualname__, True)  # type: ignore[arg-type]
        hook.__kwdefaults__ = {**(hook.__kwdefaults__ or {}), **kwdefaults}
        return hook

    def bind(self, fn: Callable[..., Any], **kwdefaults: Any) -> Any:
        """``fn`` bound as ``protect`` binds a hook, but judged by the guards as the harness's own code where it is
        (a hook is looked past, to whoever called it): for the harness's steps that call what the guards audit
        (``sys._current_frames``, ``/proc``) by the names their code uses."""
        bound = self._hook(fn, fn.__qualname__, False)  # type: ignore[arg-type]
        bound.__kwdefaults__ = {**(bound.__kwdefaults__ or {}), **kwdefaults}
        return bound

    def _bind_library(self, lib: Any) -> None:
        """The functions of a vault's library (a ``SimpleNamespace``, nested ones too) that look names up replaced by
        their hooks: the vault calls them with its state at hand. (One holding a closure is left for ``unbound`` to
        name: a test's stand-in.)"""
        if type(lib) is not types.SimpleNamespace:
            return
        for name, value in vars(lib).items():
            if type(value) is types.FunctionType and value.__closure__ is None:
                setattr(lib, name, self._value(value, f"a vault's {name}"))
            elif type(value) is _CACHED:  # a cache over a Python function: a cache of its hook
                setattr(lib, name, functools.cache(self._value(value.__wrapped__, f"a vault's {name}")))
            elif type(value) is functools.partial and type(value.func) is types.FunctionType:
                func = self._value(value.func, f"a vault's {name}")
                setattr(lib, name, functools.partial(func, *value.args, **value.keywords))
            elif type(value) is tuple and any(type(part) is types.FunctionType for part in value):
                setattr(lib, name, tuple(self._value(part, f"a vault's {name}") for part in value))
            else:
                self._bind_library(value)

    def compared(self, *objects: Any) -> None:
        """Objects the hooks or vaults compare by identity only (an installed binding, its owner's namespace, a ctypes
        class a call's arguments must be made of): ``unbound`` does not look into them."""
        self._compared += objects

    def watch(self, *classes: type) -> None:
        """Classes whose attributes can be set (pybind11's, a class statement's) the hooks or vaults hand instances of
        to C functions, or make and drop (torch.Tensor: its ``__del__``, set on the class, runs wherever a tensor is
        freed): Python raises no audit event when a class's attribute is set, so ``changed`` tells, on every answer,
        whether one was (the worker reports it as tampering), and every vault request refuses while one has more or
        fewer attributes than it had (a slot like ``__del__`` added: ``_send``)."""
        for cls in classes:
            if id(cls) not in self._watched:
                self._watched[id(cls)] = (cls, vars(cls), dict(vars(cls)))
                self._sizes.append((vars(cls), len(vars(cls))))
                self.compared(*self._watched[id(cls)][1:])  # (read by ``changed``, never called)

    def watched(self) -> tuple[tuple[str, Any, dict[str, Any]], ...]:
        """(name, the live namespace, its items as watched) of each watched class, for ``changed``."""
        return tuple((cls.__qualname__, live, items) for cls, live, items in self._watched.values())

    def _hook(
        self, fn: types.FunctionType, where: str, transparent: bool, remember: bool = False
    ) -> types.FunctionType:  # fmt: skip
        if fn.__closure__ is not None:
            raise Unbindable(f"{where}: {fn.__qualname__} holds a closure (cells a walk over frames reaches)")
        loads, writes = global_names(fn.__code__)
        if writes:
            raise Unbindable(f"{where}: {fn.__qualname__} writes or looks up by name {sorted(writes)}")
        hook = _isolated(fn, {})
        self.objects.append(hook)
        if transparent:
            self.hook_codes.append(hook.__code__)
        if remember:
            self._bound[id(fn)] = (fn, hook)  # before its names: a function may call itself
        own = hook.__globals__
        for name in loads:
            if name in fn.__globals__:
                value = fn.__globals__[name]
            elif name in builtins.__dict__:
                value = builtins.__dict__[name]
            else:
                raise Unbindable(f"{where}: {fn.__qualname__} looks up {name}, which is not defined")
            own[name] = self._value(value, f"{fn.__qualname__}: {name}")
        return hook

    def _value(self, value: Any, where: str) -> Any:
        if type(value) is types.ModuleType:
            raise Unbindable(f"{where} is the module {value.__name__}: bind what is used of it when the harness loads")
        if type(value) is not types.FunctionType:
            return value
        known = self._bound.get(id(value))  # (a function a hook calls is the harness's code where it runs)
        return known[1] if known is not None else self._hook(value, where, False, True)

    def unbound(self, root: Any, opaque: tuple[Any, ...] = (), data: tuple[type, ...] = ()) -> list[str]:
        """What a call of the hook ``root``, or a request to any vault, could look up when it runs that the submission
        may have changed by then: a function that is not one of this registry's hooks, a method of a Python object, a
        module, a class whose attributes can be set (an exception's excepted: only raised; a watched one's too) or an
        instance of one. ``opaque``: objects the hooks hand on or compare, never call nor read (a mode pushed, a
        binding's namespace); ``data``: classes whose instances are only handed to C functions (tensors)."""
        hooks = {id(obj) for obj in self.objects if type(obj) is types.FunctionType}
        found: list[str] = []
        seen = {id(obj) for obj in (*opaque, *self._compared)}  # (all alive: held by the caller and this registry)
        pending: list[tuple[Any, str]] = [(root, "")]
        pending += [(state, f"the vault {name}") for name, state in self.states]
        while pending:
            obj, path = pending.pop()
            kind = type(obj)
            if kind in _LEAVES or id(obj) in seen:
                continue
            seen.add(id(obj))
            if kind is types.FunctionType:
                name = obj.__qualname__
                if id(obj) not in hooks:  # (a function's ``__code__`` and defaults can be replaced, a hook's cannot)
                    found.append(f"{path}: the function {obj.__module__}.{name}, not a hook")
                    continue
                pending += [(v, f"{name}.{k}") for k, v in (obj.__kwdefaults__ or {}).items()]
                if id(obj) in hooks:  # (its own namespace; another function here looks no name up in its module's)
                    pending += [(v, f"{name}: {k}") for k, v in obj.__globals__.items() if k != "__builtins__"]
                pending += [(v, f"{name} (a default)") for v in obj.__defaults__ or ()]
            elif kind in (tuple, list, set, frozenset):
                pending += [(v, f"{path}[]") for v in obj]
            elif kind is dict:
                pending += [(v, f"{path}[{k!r}]") for k, v in obj.items()] + [(k, f"{path} (a key)") for k in obj]
            elif kind is types.SimpleNamespace:
                pending += [(v, f"{path}.{k}") for k, v in vars(obj).items()]
            elif kind is _CACHED:
                pending.append((obj.__wrapped__, f"{path} (cached)"))
            elif kind is functools.partial:
                pending += [(v, f"{path} (partial)") for v in (obj.func, *obj.args, *obj.keywords.values())]
            elif kind is types.MethodType:
                found.append(f"{path}: {obj.__func__.__qualname__}, a method of a {type(obj.__self__).__qualname__}")
            elif kind is types.ModuleType:
                found.append(f"{path}: the module {obj.__name__}")
            elif isinstance(obj, type):
                if not self._fixed(obj) and not issubclass(obj, BaseException):
                    found.append(f"{path}: the class {obj.__module__}.{obj.__qualname__} (its attributes can change)")
            elif not self._fixed(kind) and not isinstance(obj, data):
                found.append(f"{path}: an instance of {kind.__module__}.{kind.__qualname__} (its class can change)")
        return found

    def _fixed(self, cls: type) -> bool:
        return bool(cls.__flags__ & _IMMUTABLE_TYPE) or id(cls) in self._watched


#: What a hook can hold that nothing changes (a C function, a C class's instance, is judged by its type).
_LEAVES = frozenset((int, float, complex, str, bytes, bool, type(None), range, slice, type(Ellipsis)))
_CACHED = type(functools.cache(len))  # functools' cache over a function, a C object calling it
#: Py_TPFLAGS_IMMUTABLETYPE: a class whose attributes cannot be set (C's; a class statement's, pybind11's can be)
_IMMUTABLE_TYPE = 1 << 8


def _send(request: Any, *, _send: Any, _gc: Any, _one: Any, _sizes: Any, _len: Any, _refused: Any) -> Any:
    """One request to a vault, one thread at a time. No garbage collection runs meanwhile (a finalizer of the
    submission's would run inside the vault); the caller holds the request's objects, so no reference the vault
    drops is the last one either. None while an attribute was added to (or deleted from) a watched class: a
    ``__del__`` set on torch.Tensor would run inside the vault wherever it frees a tensor (``Registry.watch``)."""
    for live, size in _sizes:
        if _len(live) != size:
            raise _refused("mkbsim verifier: an attribute of a class the harness uses was set or deleted")
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


def changed(watched: Any) -> list[str]:
    """The watched classes' attributes set, replaced or deleted since ``Registry.watch`` (read from each class's own
    namespace: no lookup through the class or its metaclass)."""
    found = []
    for name, live, items in watched:
        if len(live) != len(items) or any(live.get(key, live) is not value for key, value in items.items()):
            found.append(f"{name} (an attribute of a class the harness uses was set or deleted)")
    return found
