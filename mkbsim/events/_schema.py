"""Typed event payloads (DESIGN §3), their validation, and upcasters for old schema versions.

A payload class declares the fields other parts may rely on; payloads are stored as JSON objects
and may carry extra fields (add freely, never rename). Validation is compiled once per class into a
list of cheap checks, because it runs on every append (the store's hot path).
"""

from __future__ import annotations

import dataclasses
import math
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
#: event type -> its current schema version (read for every decoded event)
_VERSIONS: dict[str, int] = {}
_VALIDATORS: dict[str, list[tuple[str, bool, Check, str]]] = {}
_FAST: dict[str, Callable[[Any], bool]] = {}
_MISSING = object()
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def event_type(cls: type[P]) -> type[P]:
    """Class decorator: register a payload class under its ``TYPE`` and compile its validator."""
    if not cls.TYPE:
        cls.TYPE = cls.__name__
    _REGISTRY[cls.TYPE] = cls
    _VERSIONS[cls.TYPE] = cls.SCHEMA_VERSION
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
    return _VERSIONS.get(type_name, 1)


def versions() -> dict[str, int]:
    """The live map of event type -> current schema version (types not in it are at version 1)."""
    return _VERSIONS


def fast_validators() -> dict[str, Callable[[Any], bool]]:
    """The live map of event type -> its generated check of a valid payload (True: valid). False says
    only that ``validate`` must look closer (and raise naming the problem)."""
    return _FAST


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
            if not finite(payload[name]):
                raise PayloadError(f"{type_name}.{name}: NaN or infinity is not JSON: {payload[name]!r:.60}")
            if not check(payload[name]):
                got = type(payload[name]).__name__
                raise PayloadError(f"{type_name}.{name}: expected {expected}, got {got} {payload[name]!r:.60}")
        elif required:
            raise PayloadError(f"{type_name}.{name}: required field is missing")
    for name, value in payload.items():  # extra fields: stored as given, as long as JSON can hold them
        if not finite(value):
            raise PayloadError(f"{type_name}.{name}: NaN or infinity is not JSON: {value!r:.60}")


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

def finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity, at any depth (JSON has neither, and the encoder would
    write them as null)."""
    kind = type(value)
    if kind is dict:
        items: Any = value.values()
    elif kind is list or kind is tuple:
        items = value
    elif kind is float:
        return bool(value - value == 0.0)  # NaN and ±inf give NaN
    else:
        return not isinstance(value, float) or math.isfinite(value)
    for item in items:  # scalars inline: payloads are mostly flat
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if item - item != 0.0:
                return False
        elif not finite(item):
            return False
    return True


def _fast_validator(fields: list[tuple[str, bool, Any]]) -> Callable[[Any], bool]:
    """One boolean function for the valid case (the hot path): a subscript and a type test per field,
    then a count of the keys, which says whether extra fields must be walked for NaN.

    Only when it says no does ``validate`` walk the per-field checks to name the bad field.
    """
    env: dict[str, Any] = {"_M": _MISSING, "_finite": finite}
    lines = ["def fast(p):", "    present = 0", "    try:"]
    for i, (name, required, tp) in enumerate(fields):
        test = _inline(tp, f"_c{i}", env)
        if required:
            lines += [f"        x = p[{name!r}]", f"        if not ({test}):", "            return False"]
        else:
            lines += [f"        x = p.get({name!r}, _M)", "        if x is not _M:", "            present += 1",
                      f"            if not ({test}):", "                return False"]  # fmt: skip
    required_count = sum(1 for _, required, _ in fields if required)
    lines += ["    except KeyError:", "        return False",
              f"    return len(p) == {required_count} + present or all(map(_finite, p.values()))"]  # fmt: skip
    exec("\n".join(lines) + "\n", env)  # generated once per event type at import: no per-field calls
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
    return finite(v)


def _is_float(v: Any) -> bool:
    return (type(v) is float and v - v == 0.0) or type(v) is int


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_bool(v: Any) -> bool:
    return type(v) is bool


def _is_str(v: Any) -> bool:
    return type(v) is str


def _is_none(v: Any) -> bool:
    return v is None


def _is_dict(v: Any) -> bool:
    return type(v) is dict and finite(v)


_SIMPLE: dict[Any, Check] = {
    Any: _is_any, float: _is_float, int: _is_int, bool: _is_bool, str: _is_str,
    type(None): _is_none, dict: _is_dict,
}  # fmt: skip
# the same tests as inline expressions over ``x``, for the generated fast validator
_INLINE: dict[Check, str] = {
    _is_any: "_finite(x)", _is_float: "((type(x) is float and x - x == 0.0) or type(x) is int)",
    _is_int: "type(x) is int", _is_bool: "type(x) is bool", _is_str: "type(x) is str", _is_none: "x is None",
    _is_dict: "(type(x) is dict and _finite(x))",
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
            return lambda v: type(v) is list and finite(v)
        item = _compile(args[0])
        return lambda v: type(v) is list and all(map(item, v))
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
