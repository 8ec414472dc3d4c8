"""Typed event payloads (DESIGN §3), their validation, and upcasters for old schema versions.

A payload class declares the fields other parts may rely on; payloads are stored as JSON objects
and may carry extra fields (add freely, never rename). Validation is compiled once per class into a
list of cheap checks, because it runs on every append (the store's hot path).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, TypeVar

from mkbsim.errors import PayloadError, UnknownEventType

Check = Callable[[Any], bool]
P = TypeVar("P", bound="Payload")


@dataclasses.dataclass(frozen=True)
class Payload:
    """Base class of typed payloads. ``TYPE`` is the event type; ``SCHEMA_VERSION`` its version."""

    TYPE: ClassVar[str] = ""
    SCHEMA_VERSION: ClassVar[int] = 1

    def to_dict(self) -> dict[str, Any]:
        # shallow on purpose: asdict() deep-copies, which costs more than the JSON encoding
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls: type[P], data: Mapping[str, Any]) -> P:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


_REGISTRY: dict[str, type[Payload]] = {}
_VALIDATORS: dict[str, list[tuple[str, bool, Check, str]]] = {}
_FAST: dict[str, Callable[[Any], bool]] = {}
_MISSING = object()
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def event_type(cls: type[P]) -> type[P]:
    """Class decorator: register a payload class under its ``TYPE`` and compile its validator."""
    if not cls.TYPE:
        cls.TYPE = cls.__name__
    _REGISTRY[cls.TYPE] = cls
    hints = typing.get_type_hints(cls)
    fields = [
        (f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, hints[f.name])
        for f in dataclasses.fields(cls)
    ]
    _VALIDATORS[cls.TYPE] = [(name, required, _compile(tp), _describe(tp)) for name, required, tp in fields]
    _FAST[cls.TYPE] = _fast_validator(fields)
    return cls


def upcaster(event_type_name: str, from_version: int) -> Callable[[Callable[..., dict[str, Any]]], Any]:
    """Register ``fn(payload) -> payload`` lifting ``event_type_name`` from ``from_version`` to +1."""

    def register(fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        _UPCASTERS[(event_type_name, from_version)] = fn
        return fn

    return register


def known_types() -> dict[str, type[Payload]]:
    return dict(_REGISTRY)


def current_version(type_name: str) -> int:
    cls = _REGISTRY.get(type_name)
    return cls.SCHEMA_VERSION if cls else 1


def validate(type_name: str, payload: Any) -> None:
    """Raise ``PayloadError``/``UnknownEventType`` naming the problem; return None if valid."""
    fast = _FAST.get(type_name)
    if fast is not None and type(payload) is dict and fast(payload):
        return
    checks = _VALIDATORS.get(type_name)
    if checks is None:
        raise UnknownEventType(f"unknown event type {type_name!r} (known: {', '.join(sorted(_REGISTRY))})")
    if type(payload) is not dict:
        raise PayloadError(f"{type_name} payload must be a JSON object, got {type(payload).__name__}")
    for name, required, check, expected in checks:
        if name in payload:
            if not check(payload[name]):
                got = type(payload[name]).__name__
                raise PayloadError(f"{type_name}.{name}: expected {expected}, got {got} {payload[name]!r:.60}")
        elif required:
            raise PayloadError(f"{type_name}.{name}: required field is missing")


def upcast(type_name: str, schema_version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Lift a stored payload to the current schema version of its type (unknown types: unchanged)."""
    target = current_version(type_name)
    while schema_version < target:
        fn = _UPCASTERS.get((type_name, schema_version))
        if fn is None:
            raise PayloadError(f"no upcaster for {type_name} v{schema_version} -> v{schema_version + 1}")
        payload = fn(payload)
        schema_version += 1
    return payload


# -- validator compilation ------------------------------------------------------------------------

def _fast_validator(fields: list[tuple[str, bool, Any]]) -> Callable[[Any], bool]:
    """One boolean function for the valid case (the hot path): a dict lookup and a check per field.

    Only when it says no does ``validate`` walk the per-field checks to name the bad field.
    """
    env: dict[str, Any] = {"_M": _MISSING}
    terms = []
    for i, (name, required, tp) in enumerate(fields):
        test = _inline(tp, f"_c{i}", env)
        missing = "False" if required else "True"
        terms.append(f"((x := p.get({name!r}, _M)) is _M and {missing} or x is not _M and ({test}))")
    src = "def fast(p):\n    return " + (" and ".join(terms) or "True") + "\n"
    exec(src, env)  # generated once per event type at import; removes per-field call overhead
    fn: Callable[[Any], bool] = env["fast"]
    return fn


def _inline(tp: Any, key: str, env: dict[str, Any]) -> str:
    """A Python expression over ``x`` testing type ``tp``; falls back to calling the compiled check."""
    if tp in _SIMPLE:
        return _INLINE[_SIMPLE[tp]]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(f"({_inline(a, f'{key}_{j}', env)})" for j, a in enumerate(typing.get_args(tp)))
    if origin is Literal:
        env[key] = frozenset(typing.get_args(tp))
        return f"type(x) in (str, int) and x in {key}"
    env[key] = _compile(tp)
    return f"{key}(x)"


def _is_any(v: Any) -> bool:
    return True


def _is_float(v: Any) -> bool:
    return type(v) is float or type(v) is int


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_bool(v: Any) -> bool:
    return type(v) is bool


def _is_str(v: Any) -> bool:
    return type(v) is str


def _is_none(v: Any) -> bool:
    return v is None


def _is_dict(v: Any) -> bool:
    return type(v) is dict


_SIMPLE: dict[Any, Check] = {
    Any: _is_any, float: _is_float, int: _is_int, bool: _is_bool, str: _is_str,
    type(None): _is_none, dict: _is_dict,
}  # fmt: skip
# the same tests as inline expressions over ``x``, for the generated fast validator
_INLINE: dict[Check, str] = {
    _is_any: "True", _is_float: "(type(x) is float or type(x) is int)", _is_int: "type(x) is int",
    _is_bool: "type(x) is bool", _is_str: "type(x) is str", _is_none: "x is None",
    _is_dict: "type(x) is dict",
}  # fmt: skip


def _compile(tp: Any) -> Check:
    origin = typing.get_origin(tp)
    if tp in _SIMPLE:
        return _SIMPLE[tp]
    if origin is Literal:
        allowed = frozenset(typing.get_args(tp))
        return lambda v: type(v) in (str, int) and v in allowed
    if origin in (typing.Union, types.UnionType):
        alts = [_compile(a) for a in typing.get_args(tp)]
        return lambda v: any(c(v) for c in alts)
    if origin is list or tp is list:
        args = typing.get_args(tp)
        if not args:
            return lambda v: type(v) is list
        item = _compile(args[0])
        return lambda v: type(v) is list and all(item(x) for x in v)
    if origin is dict:
        return _is_dict
    raise TypeError(f"unsupported payload field type {tp!r}")


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is list:
        return f"list of {_describe(typing.get_args(tp)[0])}" if typing.get_args(tp) else "list"
    return getattr(tp, "__name__", str(tp))
