"""The forms of everything the verifier reads from the worker's side, checked in one place (DESIGN §5).

A worker runs the submission, which can write bytes of its own where the harness writes: on the channel
(its socket is a descriptor of the worker's process) and, with native code, into the control page. So each
answer on the channel and each record decoded from the control page is checked against the form the harness
writes before the verifier reads a field of it. A value of another form (a wrong type, a missing or unknown
key, an integer beyond 64 bits, a non-finite time, an index past the outputs) is ``Malformed``: the
submission's tampering, judged ``harness_tamper`` and counted, never an exception in the verifier's own
code, which would be an uncounted ``infra_error`` that campaigns retry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from mkbsim.verifier._channel import UntrustedMessage


class Malformed(UntrustedMessage):
    """A value from the worker's side that is not of the form the harness writes."""


#: Checks a value at a path (named in the error) and raises ``Malformed`` when it is not of its form.
Check = Callable[[Any, str], None]

#: Integers the harness sends are counts, sizes, indices and line numbers: 64 bits hold all of them (and a
#: larger one could not even be printed: Python refuses int -> str beyond 4300 digits).
_INT_RANGE = (-(1 << 63), 1 << 63)


def _fail(at: str, want: str, value: Any) -> Malformed:
    return Malformed(f"{at} is {type(value).__name__}, expected {want}")


def _bool(value: Any, at: str) -> None:
    if type(value) is not bool:
        raise _fail(at, "a bool", value)


def _int(value: Any, at: str) -> None:
    if type(value) is not int or not _INT_RANGE[0] <= value < _INT_RANGE[1]:
        raise _fail(at, "a 64-bit int", value)


def _count(value: Any, at: str) -> None:
    _int(value, at)
    if value < 0:
        raise Malformed(f"{at} is negative")


def _number(value: Any, at: str) -> None:
    if type(value) is float:
        if not math.isfinite(value):
            raise Malformed(f"{at} is not finite")
    else:
        _int(value, at)


def _sample(value: Any, at: str) -> None:
    """A sampled element (float64, int64 or bool): NaN and infinities are values an output may hold."""
    if type(value) not in (float, bool):
        _int(value, at)


def _str(value: Any, at: str) -> None:
    if type(value) is not str:
        raise _fail(at, "a str", value)


def _optional(check: Check) -> Check:
    def optional(value: Any, at: str) -> None:
        if value is not None:
            check(value, at)

    return optional


def _list_of(item: Check, length: int | None = None) -> Check:
    def list_of(value: Any, at: str) -> None:
        if type(value) not in (list, tuple):
            raise _fail(at, "a list", value)
        if length is not None and len(value) != length:
            raise Malformed(f"{at} has {len(value)} items, expected {length}")
        for i, x in enumerate(value):
            item(x, f"{at}[{i}]")

    return list_of


def _row(*items: Check) -> Check:
    """A fixed-length sequence (a pickled tuple, or a list), each item of its own form."""

    def row(value: Any, at: str) -> None:
        if type(value) not in (list, tuple) or len(value) != len(items):
            raise Malformed(f"{at} is not a sequence of {len(items)} items")
        for i, (x, check) in enumerate(zip(value, items, strict=True)):
            check(x, f"{at}[{i}]")

    return row


def _fields(known: dict[str, Check], required: Sequence[str] = ()) -> Check:
    """A dict of string keys, each known and of its form; ``required`` keys present."""

    def fields(value: Any, at: str) -> None:
        if type(value) is not dict:
            raise _fail(at, "a dict", value)
        for key, x in value.items():
            if type(key) is not str or key not in known:
                raise Malformed(f"{at} holds an unknown key {str(key)[:40]!r}")
            known[key](x, f"{at}.{key}")
        missing = [key for key in required if key not in value]
        if missing:
            raise Malformed(f"{at} lacks {', '.join(missing)}")

    return fields


def _tagged(tag: str, forms: dict[str, Check]) -> Check:
    """A dict whose ``tag`` key names its form."""

    def tagged(value: Any, at: str) -> None:
        kind = value.get(tag) if type(value) is dict else None
        if type(kind) is not str or kind not in forms:
            raise Malformed(f"{at} is not a dict with a known {tag!r}")
        forms[kind](value, at)

    return tagged


_ERROR = _fields(
    {"type": _str, "message": _str, "frames": _list_of(_row(_optional(_int), _str, _str)), "memory": _bool}
)
_FACT = _tagged(
    "kind",
    {
        "tensor": _fields(
            {"kind": _str, "dtype": _str, "shape": _list_of(_count), "device": _str, "layout": _str, "lazy": _str},
            required=("kind", "dtype", "shape", "device", "layout"),
        ),
        "scalar": _fields({"kind": _str, "type": _str, "value": _sample}, required=("kind", "type", "value")),
        "subclass": _fields({"kind": _str, "type": _str}, required=("kind", "type")),
        "other": _fields({"kind": _str, "type": _str}, required=("kind", "type")),
    },
)
#: An answer on the channel: the import's (``ok``, ``import_s`` or ``error``), a call's, or a block's (its
#: calls' answers under ``calls``).
_ANSWER_FIELDS: dict[str, Check] = {
    "ok": _bool,
    "import_s": _number,
    "process_filter": _str,
    "error": _ERROR,
    "tampered": _list_of(_str),
    "timer_tampered": _list_of(_str),
    "left_mode": _bool,
    "ran": _bool,
    "modes": _count,
    "background": _list_of(_str),
    "audit_threads": _count,
    "audit_busy": _list_of(_str),
    "audit_dark_us": _count,
    "structure": _fields({"container": _str, "items": _list_of(_FACT)}),
    "alias": _list_of(_row(_count, _count)),
    "copied": _bool,
}
_REPLY = _fields({**_ANSWER_FIELDS, "calls": _list_of(_fields(_ANSWER_FIELDS, required=("ok",)))}, required=("ok",))
#: The guards' vault's region of the control page.
_GUARD_RECORDS = _fields({"violations": _list_of(_str), "inline": _list_of(_str)}, required=("violations", "inline"))


def _size(value: Any, at: str) -> None:
    """A tensor's size: its element count fits 63 bits, as every tensor's does (products of sizes stay finite)."""
    _list_of(_count)(value, at)
    numel = 1
    for n in value:
        numel *= n
        if numel >= _INT_RANGE[1]:
            raise Malformed(f"{at} holds more elements than any tensor")


_SIZES = _list_of(_size)


def reply(message: Any) -> dict[str, Any]:
    """``message`` if it is an answer of the harness's form, else ``Malformed``."""
    _REPLY(message, "the answer")
    return dict(message)


def guard_records(found: Any) -> tuple[list[str], list[str]]:
    """(violations, inline CUDA sites) from the guards' region, else ``Malformed``."""
    _GUARD_RECORDS(found, "the guards' records")
    return list(found["violations"]), list(found["inline"])


def provenance_records(records: Any, samples: Sequence[int]) -> list[Any]:
    """The provenance vault's records of a correctness draw (``_provenance``), each of its kind's form; an
    output's sampled values are as many as the positions the verifier sent for it (``samples[i]``)."""
    if type(records) not in (list, tuple):
        raise _fail("the provenance records", "a list", records)
    for n, record in enumerate(records):
        _provenance_record(record, f"provenance record {n}", samples)
    return list(records)


def _provenance_record(record: Any, at: str, samples: Sequence[int]) -> None:
    kind = record[0] if type(record) in (list, tuple) and record else None
    if kind in ("eager_ops", "fed_ops"):
        _row(_str, _list_of(_row(_row(_str, _SIZES, _SIZES), _count)))(record, at)
    elif kind == "eager_time":  # the eager operators' own runs: CPU ms, operators
        _row(_str, _number, _count)(record, at)
    elif kind in ("fault", "uncounted"):  # a fault of the vault's; a launch an argument left uncounted
        _row(_str, _str)(record, at)
    elif kind == "memory":  # bytes no recorded writer left, erased before a read; the census: storages, bytes, ms
        _row(_str, _count, _count, _count, _number)(record, at)
    elif kind == "twin":  # the twin draw: launches kept, compared, missed, unmatched; bytes differing, compared; where;
        # bytes written otherwise without the fill
        _row(_str, _count, _count, _count, _count, _count, _count, _int, _int, _count)(record, at)
    elif kind == "decoded":  # a launch the decode rule judged: number, changed elements, share, map, withdrawn
        _row(_str, _count, _count, _number, _str, _bool)(record, at)
    elif kind in ("candidate", "contains", "result", "produced"):
        index = record[2] if len(record) > 2 else None
        if type(index) is not int or not 0 <= index < len(samples):
            raise Malformed(f"{at} names no output the verifier sampled")
        values = _list_of({"contains": _bool, "produced": _count}.get(kind, _sample), samples[index])
        _row(_str, _str, _int, values, *((_bool,) if kind == "result" else ()))(record, at)
    else:
        raise Malformed(f"{at} is of no known kind")


def times(page: dict[str, Any], keys: Sequence[str]) -> None:
    """The control page's times are finite (a time of the wrong size is the trusted clock's to judge)."""
    for key in keys:
        value = page[key]
        if value is not None and not math.isfinite(value):
            raise Malformed(f"the control page's {key} is {value!r}")


def work(found: dict[str, Any]) -> None:
    """The gate's work record: a finite, non-negative time (what the vault spent) and shares within [0, 1]."""
    for spent in (found["ms"], found["after_ms"]):
        if not math.isfinite(spent) or spent < 0:
            raise Malformed(f"the control page's work time is {spent!r}")
    for share in (*found["shares"], *found["copied"], *found["carried"]):
        if not 0.0 <= share <= 1.0:  # NaN fails too
            raise Malformed(f"the control page's output share is {share!r}")
