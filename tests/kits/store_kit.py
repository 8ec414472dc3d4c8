"""A reusable contract test kit for event store backends (in the spirit of eventsourcing's).

A backend's test module subclasses ``EventStoreContract`` and provides the ``make_store`` fixture.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from mkbsim.events import (
    AgentStep,
    AttemptStarted,
    ConcurrencyError,
    EventStore,
    NewEvent,
    PayloadError,
    UnknownEventType,
)

MakeStore = Callable[[], EventStore]


def step(stream: str, i: int, event_id: str | None = None) -> NewEvent:
    return NewEvent.of(
        stream, AgentStep(attempt_id=stream, step=i, kind="note", content=f"s{i}", elapsed_s=0.5), event_id
    )


def started(attempt: str) -> NewEvent:
    payload = AttemptStarted(
        attempt_id=attempt, campaign_id="c1", model="m", problem="p28", family="mlp_norm", dsl="tirx",
        arm="solo_tirx", replicate=0, budget={"minutes": 40, "submissions": 10},
    )  # fmt: skip
    return NewEvent.of(f"attempt-{attempt}", payload)


class EventStoreContract:
    def test_positions_are_gap_free_and_versions_count_per_stream(self, make_store: MakeStore) -> None:
        store = make_store()
        store.append([step("a", 0), step("b", 0), step("a", 1)])
        store.append([step("b", 1)])
        events = list(store.read())
        assert [e.position for e in events] == [1, 2, 3, 4]
        assert [(e.stream_id, e.version) for e in events] == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
        assert store.stream_version("a") == 2 and store.stream_version("nope") == 0
        assert store.check().ok

    def test_payload_round_trips(self, make_store: MakeStore) -> None:
        store = make_store()
        store.append([started("x1")])
        (ev,) = store.read()
        assert ev.type == "AttemptStarted" and ev.payload["budget"] == {"minutes": 40, "submissions": 10}
        assert ev.payload["source_attempt_id"] is None and ev.recorded_at.endswith("+00:00")

    def test_expected_version(self, make_store: MakeStore) -> None:
        store = make_store()
        store.append([step("a", 0)], expected_version=0)
        store.append([step("a", 1)], expected_version=1)
        with pytest.raises(ConcurrencyError, match="at version 2, expected 1"):
            store.append([step("a", 2)], expected_version=1)
        with pytest.raises(ConcurrencyError):
            store.append([step("a", 2)], expected_version=0)
        store.append([step("a", 2), step("b", 0)], expected_version={"a": 2, "b": 0})
        with pytest.raises(ConcurrencyError, match="single stream"):
            store.append([step("a", 3), step("b", 1)], expected_version=3)
        assert store.count() == 4

    def test_append_is_idempotent_on_event_id(self, make_store: MakeStore) -> None:
        store = make_store()
        batch = [step("a", 0, "id-1"), step("a", 1, "id-2")]
        first = store.append(batch, expected_version=0)
        again = store.append(batch, expected_version=0)  # a retry after an unknown outcome
        assert (first.appended, again.appended, again.duplicates) == (2, 0, 2)
        mixed = store.append([step("a", 1, "id-2"), step("a", 2, "id-3")])
        assert (mixed.appended, mixed.duplicates) == (1, 1)
        assert [e.event_id for e in store.read()] == ["id-1", "id-2", "id-3"]

    def test_bad_payload_names_the_field_and_writes_nothing(self, make_store: MakeStore) -> None:
        store = make_store()
        store.append([step("a", 0)])
        bad = NewEvent(
            "a",
            "AgentStep",
            {"attempt_id": "a", "step": "one", "kind": "note", "content": "", "elapsed_s": 0},
        )
        with pytest.raises(PayloadError, match=r"AgentStep\.step: expected int"):
            store.append([step("a", 1), bad])
        with pytest.raises(PayloadError, match="kind"):
            store.append(
                [
                    NewEvent(
                        "a",
                        "AgentStep",
                        {"attempt_id": "a", "step": 1, "kind": "x", "content": "", "elapsed_s": 0},
                    )
                ]
            )
        with pytest.raises(PayloadError, match="required field is missing"):
            store.append([NewEvent("a", "AgentStep", {"attempt_id": "a"})])
        with pytest.raises(PayloadError, match="not JSON"):
            store.append(
                [
                    NewEvent(
                        "a",
                        "AgentStep",
                        {"attempt_id": "a", "step": 1, "kind": "note", "content": "", "elapsed_s": math.nan},
                    )
                ]
            )
        with pytest.raises(PayloadError, match="JSON object"):
            store.append([NewEvent("a", "AgentStep", ["not", "an", "object"])])  # type: ignore[arg-type]
        with pytest.raises(UnknownEventType, match="unknown event type 'Bogus'"):
            store.append([NewEvent("a", "Bogus", {})])
        assert store.count() == 1 and store.stream_version("a") == 1

    def test_extra_payload_fields_are_kept(self, make_store: MakeStore) -> None:
        store = make_store()
        payload = step("a", 0).payload | {"new_field": [1, 2]}
        store.append([NewEvent("a", "AgentStep", payload)])
        assert next(store.read()).payload["new_field"] == [1, 2]

    def test_read_by_range_stream_type_and_limit(self, make_store: MakeStore) -> None:
        store = make_store()
        store.append([step("a", i) for i in range(5)] + [started("z")] + [step("b", i) for i in range(5)])
        assert [e.position for e in store.read(2, 4)] == [3, 4]
        assert [e.version for e in store.read(stream_id="b")] == [1, 2, 3, 4, 5]
        assert [e.position for e in store.read(types=["AttemptStarted"])] == [6]
        assert [e.position for e in store.read(limit=3, page_size=2)] == [1, 2, 3]
        assert len(list(store.read(page_size=3))) == 11
        assert list(store.read(types=[])) == []
        assert store.count("AgentStep") == 10 and store.type_counts() == {
            "AgentStep": 10,
            "AttemptStarted": 1,
        }

    def test_tail_stops_when_idle(self, make_store: MakeStore) -> None:
        store = make_store()
        store.append([step("a", i) for i in range(3)])
        got = [e.position for e in store.tail(1, poll_interval=0.01, idle_timeout=0.05)]
        assert got == [2, 3]


def file_store(tmp_path: Path) -> MakeStore:
    counter = iter(range(1_000_000))
    return lambda: EventStore(tmp_path / f"store{next(counter)}.sqlite", create=True)
