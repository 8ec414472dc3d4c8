"""Payload validation (DESIGN §3): the batch check in C (msgspec) and the field-by-field check in Python
give one verdict, NaN is refused in any container at any depth, and valid payloads take the fast path."""

from __future__ import annotations

import enum
import math
import random
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kits.campaign_events import attempt_events
from mkbsim.events import EventStore, NewEvent, PayloadError
from mkbsim.events._schema import _check_fields, all_valid


class Level(enum.IntEnum):
    ONE = 1


class Kind(enum.StrEnum):
    NOTE = "note"


class Text(str):
    def __str__(self) -> str:
        return "not the value"


VALID: dict[str, dict[str, Any]] = {
    "AgentStep": {"attempt_id": "a", "step": 1, "kind": "llm", "content": "x", "elapsed_s": 0.5, "tokens": 3,
                  "cost_usd": None},
    "VerifierResult": {"attempt_id": "a", "submission": "final", "backend": "analytic", "protocol": "paper",
                       "passed": True, "correct": True, "runtime_ms": 1.5, "eager_ms": 3, "speedup": None,
                       "bypass_ok": None, "forbidden": ["torch"], "inline_cuda": False, "failure": None,
                       "details": {"draws": [{"error": 0.1}], "plan": "fused"}, "env": {}},
    "AttemptStarted": {"attempt_id": "a", "campaign_id": "c", "model": "m", "problem": "p01", "family": "f",
                       "dsl": "tirx", "arm": "solo_tirx", "replicate": 0, "budget": {"minutes": 40},
                       "source_attempt_id": None, "hop": 2},
    "LabelAssigned": {"subject": "skill", "subject_id": "s", "labeler": "l",
                      "labels": {"sentences": [{"text": "t", "accurate": True, "score": 0.5}]}},
    "AttemptFinished": {"attempt_id": "a", "status": "finished", "passed": False, "runtime_ms": None,
                        "speedup": 2.5, "skipped": False},
}  # fmt: skip

#: values a producer may hand over: JSON's own, their look-alikes (subclasses, other containers, numpy),
#: and what JSON cannot hold
_ODD = [math.nan, math.inf, -math.inf, np.float64(0.5), np.float64("nan"), Level.ONE, Kind.NOTE, Text("note"),
        2**70, -(2**70), 2**1100, "final", "note", "solo_tirx", "skill", True, b"x", object(), (Text("x"),),
        {Text("k"): Level.ONE}, [], {}, None, 0.25, 7, "x"]  # fmt: skip
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3), st.sampled_from(_ODD))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
        st.dictionaries(st.text(max_size=2), inner, max_size=3).map(OrderedDict),
        st.frozensets(st.sampled_from([1, 2.5, math.nan, "a"]), max_size=2),
    ),
    max_leaves=8,
)


def _agree(type_name: str, payload: dict[str, Any]) -> None:
    # whether a payload is stored must not depend on which path decided it (a batch with one odd event
    # goes field by field): every payload msgspec accepts, the Python check accepts too
    if all_valid([type_name], [payload]):
        _check_fields(type_name, payload)


def test_the_check_in_c_accepts_nothing_the_field_check_refuses_in_any_one_field() -> None:
    for type_name, valid in VALID.items():
        for name in [*valid, "extra"]:
            for value in _ODD:
                _agree(type_name, valid | {name: value})


@settings(max_examples=300, deadline=None)
@given(
    type_name=st.sampled_from(sorted(VALID)),
    changes=st.lists(st.tuples(st.integers(0, 20), st.one_of(st.sampled_from(_ODD), _VALUES)), max_size=3),
    dropped=st.lists(st.integers(0, 20), max_size=2),
)
def test_the_check_in_c_accepts_nothing_the_field_check_refuses(
    type_name: str, changes: list[tuple[int, Any]], dropped: list[int]
) -> None:
    payload = dict(VALID[type_name])
    names = [*payload, "extra"]
    for index, value in changes:
        payload[names[index % len(names)]] = value
    for index in dropped:
        payload.pop(names[index % len(names)], None)
    _agree(type_name, payload)


def test_valid_payloads_and_a_simulated_campaign_take_the_fast_path() -> None:
    rng = random.Random(0)
    events = [ev for i in range(20) for ev in attempt_events(rng, f"a{i}")]
    assert all_valid([ev.type for ev in events], [ev.payload for ev in events])
    assert all(all_valid([name], [payload]) for name, payload in VALID.items())


def test_what_the_fast_path_leaves_to_python() -> None:
    step = VALID["AgentStep"]
    assert not all_valid(["AgentStep"], [step | {"new_field": 1}])  # extras: walked for NaN in Python
    assert not all_valid(["Bogus"], [step])  # an unknown type
    assert not all_valid(["AgentStep"], [OrderedDict(step)])  # a payload must be a dict
    deep: Any = 1.0
    for _ in range(7):
        deep = [deep]
    assert not all_valid(["VerifierResult"], [VALID["VerifierResult"] | {"details": {"deep": deep}}])
    _check_fields("VerifierResult", VALID["VerifierResult"] | {"details": {"deep": deep}})  # and Python takes it


def _nested(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"k": [value]}
    return value


@pytest.mark.parametrize(
    "details",
    [
        OrderedDict(error=math.nan),  # a mapping that is not a dict
        {"errors": frozenset({math.inf})},  # a set (written as an array)
        {"errors": (1.0, -math.inf)},  # a tuple
        _nested(math.nan, 8),  # deeper than the check in C looks
    ],
)
def test_nan_is_refused_in_any_container_at_any_depth(tmp_path: Path, details: Any) -> None:
    bad = NewEvent("attempt-b", "VerifierResult", VALID["VerifierResult"] | {"details": details})
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        with pytest.raises(PayloadError, match=r"^event 1 \(attempt-b\): VerifierResult.details: NaN or infinity"):
            store.append([NewEvent("attempt-a", "AgentStep", VALID["AgentStep"]), bad])
        with pytest.raises(PayloadError, match="NaN or infinity"):
            store.append([NewEvent("attempt-b", "VerifierResult", VALID["VerifierResult"] | {"extra": details})])
        assert store.count() == 0


def test_str_and_int_subclasses_are_stored_as_their_values_by_either_path(tmp_path: Path) -> None:
    odd = VALID["AgentStep"] | {"step": Level.ONE, "kind": Kind.NOTE, "attempt_id": Text("a")}
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append([NewEvent("a", "AgentStep", odd)])  # the fast path
        store.append([NewEvent("a", "AgentStep", odd | {"new_field": 1})])  # field by field
        stored = [row[0] for row in store.connection.execute("SELECT payload FROM events ORDER BY position")]
    assert stored[0].startswith('{"attempt_id":"a","step":1,"kind":"note",')
    assert stored[1] == stored[0][:-1] + ',"new_field":1}'
