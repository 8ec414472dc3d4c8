"""Typed event payloads (DESIGN §3), their validation, and upcasters for old schema versions.

A payload class declares the fields other parts may rely on; payloads are stored as JSON objects
and may carry extra fields (add freely, never rename). Validation runs on every append (the store's
hot path), so each class is mirrored once, at registration, by a msgspec ``Struct`` whose types
accept only what the class allows (floats finite, free-form values made of JSON values):
``msgspec.convert`` then decides a whole batch in C. Only a payload it refuses, or one with extra
fields (the structs forbid them, for extras must still be walked for NaN), is looked at field by
field in Python, which accepts it or names the problem.

The Python check follows msgspec's type rules and accepts everything the structs accept (more, too:
extra fields, values nested deeper), so the verdict never depends on which path decided it: a ``str``
or ``int`` subclass counts as one (it is written as its plain value), an array may be a list, tuple or
set and an object any mapping (the encoder decides whether it can write one). The stored JSON does not
depend on the structs: payloads are encoded from the dicts given (``mkbsim.events._codec``).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import operator
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import msgspec

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
#: event type -> the msgspec struct accepting exactly its valid payloads without extra fields
_STRUCTS: dict[str, type[msgspec.Struct]] = {}
#: event type -> ``list`` of its struct (a batch's payloads of that type are checked in one call)
_STRUCT_LISTS: dict[str, Any] = {}
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def event_type(cls: type[P]) -> type[P]:
    """Class decorator: register a payload class under its ``TYPE`` and compile its validators."""
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
    _STRUCTS[cls.TYPE] = msgspec.defstruct(
        f"{cls.__name__}Check",
        [(name, _json_type(tp)) if required else (name, _json_type(tp), None) for name, required, tp in fields],
        forbid_unknown_fields=True,
        kw_only=True,  # a default is never checked: it only marks the field optional
        gc=False,  # made and dropped by the thousand per batch, never in a cycle: not the collector's work
    )
    _STRUCT_LISTS[cls.TYPE] = types.GenericAlias(list, _STRUCTS[cls.TYPE])
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


def all_valid(type_names: Sequence[str], payloads: Sequence[Any]) -> bool:
    """Whether every payload is a valid one of its type without extra fields, decided in C (no Python
    call per event). False says only that ``validate`` must look at each one.

    The payloads are grouped by type (in C: a list per type, appended to by ``map``) and each group is
    checked by one ``msgspec.convert`` into a list of its struct: msgspec resolves the target type and
    parses its arguments once per type and batch, not once per payload.
    """
    if {*map(type, payloads)} != {dict}:
        return False
    groups: dict[str, list[Any]] = {name: [] for name in dict.fromkeys(type_names)}
    collections.deque(map(list.append, map(groups.__getitem__, type_names), payloads), maxlen=0)
    try:
        for name, group in groups.items():
            msgspec.convert(group, _STRUCT_LISTS[name])
    except (KeyError, msgspec.ValidationError):  # an unknown type, or a payload to look at closer
        return False
    return True


def validate(type_name: str, payload: Any) -> None:
    """Raise ``PayloadError``/``UnknownEventType`` naming the problem; return None if valid."""
    if type_name not in _VALIDATORS:
        raise UnknownEventType(f"unknown event type {type_name!r} (known: {', '.join(sorted(_REGISTRY))})")
    if type(payload) is not dict:
        raise PayloadError(f"{type_name} payload must be a JSON object, got {type(payload).__name__}")
    try:
        msgspec.convert(payload, _STRUCTS[type_name])
    except msgspec.ValidationError:
        _check_fields(type_name, payload)


def _check_fields(type_name: str, payload: dict[str, Any]) -> None:
    """The field-by-field check of a payload of a known type: raise ``PayloadError`` naming the problem.
    It accepts every payload ``all_valid`` accepts (and more: extra fields, values nested deeper)."""
    for name, required, check, expected in _VALIDATORS[type_name]:
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


# -- the checks in C: msgspec types of the JSON each field allows ----------------------------------

#: a float JSON can hold: NaN fails both bounds, the infinities one
_FINITE_FLOAT = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
_JSON_SCALAR = str | int | _FINITE_FLOAT | bool | None
#: free-form values (``Any``, ``dict``): JSON values, containers nested up to four deep (a deeper one is
#: walked in Python; each level doubles the type msgspec builds on first use: about 14 ms at four)
_JSON_VALUE: Any = _JSON_SCALAR
for _ in range(4):
    _JSON_VALUE = _JSON_SCALAR | list[_JSON_VALUE] | dict[str, _JSON_VALUE]


def _json_type(tp: Any) -> Any:
    """A msgspec type accepting no more than ``_compile(tp)`` accepts (NaN and infinities refused)."""
    if tp is float:
        return _FINITE_FLOAT
    if tp in (int, str, bool, type(None)):
        return tp
    if tp is Any:
        return _JSON_VALUE
    origin = typing.get_origin(tp)
    if origin is Literal:
        return tp
    if origin in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, map(_json_type, typing.get_args(tp)))
    if origin is list or tp is list:
        args = typing.get_args(tp)
        return types.GenericAlias(list, _json_type(args[0]) if args else _JSON_VALUE)
    if origin is dict or tp is dict:
        return dict[str, _JSON_VALUE]
    raise TypeError(f"unsupported payload field type {tp!r}")


# -- the checks in Python: each field's test, to name the problem -----------------------------------


def finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity, at any depth (JSON has neither, and the encoder would
    write them as null)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(map(finite, value.values()))
    if isinstance(value, list | tuple | set | frozenset):
        return all(map(finite, value))
    return True


def _is_any(v: Any) -> bool:
    return finite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and type(v) is not bool


def _is_float(v: Any) -> bool:
    return (type(v) is float and math.isfinite(v)) or _is_int(v)


def _is_bool(v: Any) -> bool:
    return type(v) is bool


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_none(v: Any) -> bool:
    return v is None


def _is_dict(v: Any) -> bool:
    return isinstance(v, Mapping) and finite(v)


def _is_array(v: Any) -> bool:
    return isinstance(v, list | tuple | set | frozenset)


_SIMPLE: dict[Any, Check] = {
    Any: _is_any, float: _is_float, int: _is_int, bool: _is_bool, str: _is_str,
    type(None): _is_none, dict: _is_dict,
}  # fmt: skip


def _compile(tp: Any) -> Check:
    origin = typing.get_origin(tp)
    if tp in _SIMPLE:
        return _SIMPLE[tp]
    if origin is Literal:
        allowed = frozenset(typing.get_args(tp))
        return lambda v: (_is_str(v) or _is_int(v)) and v in allowed
    if origin in (typing.Union, types.UnionType):
        alts = [_compile(a) for a in typing.get_args(tp)]
        return lambda v: any(c(v) for c in alts)
    if origin is list or tp is list:
        args = typing.get_args(tp)
        if not args:
            return lambda v: _is_array(v) and finite(v)
        item = _compile(args[0])
        return lambda v: _is_array(v) and all(map(item, v))
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
