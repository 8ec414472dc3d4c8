"""The store's JSON codec, its refusal of NaN, the windowed reads by type, the layout of new and old files,
and the ids it makes."""

from __future__ import annotations

import itertools
import math
import sqlite3
import uuid
from pathlib import Path

import numpy as np
import pytest

from kits.store_kit import step
from mkbsim.events import ConcurrencyError, EventStore, NewEvent, PayloadError, new_event_ids
from mkbsim.events._codec import encode_many
from mkbsim.events._store import PAGE_SIZE


def _result(attempt: str, **extra: object) -> NewEvent:
    payload = {"attempt_id": attempt, "submission": 1, "backend": "analytic", "protocol": "paper", "passed": True,
               "correct": True, "runtime_ms": 1.5, "eager_ms": 3.0, "speedup": 2.0, "bypass_ok": True,
               "forbidden": [], "inline_cuda": False, "failure": None, "details": {"plan": "fused"}}  # fmt: skip
    payload.update(extra)
    return NewEvent(f"attempt-{attempt}", "VerifierResult", payload)


@pytest.mark.parametrize(
    "bad",
    [
        {"runtime_ms": math.nan},  # a typed field
        {"details": {"plan": "fused", "max_error": math.inf}},  # inside a free-form field
        {"details": {"draws": [{"error": -math.inf}]}},  # deeper
        {"extra": [1.0, math.nan]},  # an extra field
        {"extra": np.float64("nan")},  # a float subclass
    ],
)
def test_nan_and_infinity_are_refused_anywhere_and_nothing_is_written(tmp_path: Path, bad: dict[str, object]) -> None:
    # the encoder would store them as null: validation must catch them first
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        with pytest.raises(PayloadError, match="NaN or infinity is not JSON"):
            store.append([_result("a"), _result("b", **bad)])
        assert store.count() == 0


def test_payloads_round_trip_as_json_does(tmp_path: Path) -> None:
    big = 2**70 + 1  # beyond 64 bits: kept exact both ways
    payload = {"tiny": 1e-05, "huge": 1e300, "big": big, "negative_big": -big, "text": "µs → ×2 ✓",
               "subclass": np.float64(0.25), "nested": {"t": (1, 2)}}  # fmt: skip
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append([_result("a", **payload)])
        (event,) = store.read()
        stored = store.connection.execute("SELECT payload FROM events").fetchone()[0]
    assert event.payload["big"] == big and type(event.payload["big"]) is int
    assert event.payload["negative_big"] == -big
    assert event.payload["tiny"] == 1e-05 and event.payload["huge"] == 1e300
    assert event.payload["text"] == "µs → ×2 ✓" and "µs → ×2 ✓" in stored  # UTF-8, not escaped
    assert event.payload["subclass"] == 0.25 and event.payload["nested"] == {"t": [1, 2]}
    assert ", " not in stored and ": " not in stored  # compact


def test_reads_by_type_cross_windows_in_order_with_limits_and_bounds(tmp_path: Path) -> None:
    events = [step(f"s{i % 7}", i) if i % 5 else _result(f"r{i}") for i in range(1, 400)]
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append(events)
        every = list(store.read())
        results = [e.position for e in every if e.type == "VerifierResult"]
        for window in (1, 3, 17, 1000):
            assert [e.position for e in store.read(types=["VerifierResult"], window=window)] == results
            got = [e.position for e in store.read(40, 300, types=["VerifierResult"], window=window, page_size=4)]
            assert got == [p for p in results if 40 < p <= 300]
            got = [e.position for e in store.read(types=["VerifierResult"], limit=9, window=window, page_size=4)]
            assert got == results[:9]
        both = [e.position for e in store.read(types=["AgentStep", "VerifierResult"], window=13, page_size=7)]
        assert both == [e.position for e in every]
        in_stream = [e.position for e in every if e.stream_id == "s3"]
        assert [e.position for e in store.read(stream_id="s3", types=["AgentStep"], page_size=5)] == in_stream
        assert list(store.read(types=[])) == []


def test_new_stores_have_large_pages_and_old_ones_lose_the_type_index(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with EventStore(path, create=True) as store:
        store.append([step("a", 0)])
        assert store.connection.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
        store.connection.execute("CREATE INDEX events_by_type ON events (type, position)")  # as older stores had
    has_index = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_by_type'"
    with EventStore(path, readonly=True) as reader:  # a reader leaves the file as it is
        assert reader.connection.execute(has_index).fetchone()[0]
    EventStore(path).close()  # a writer drops it: it cost appends a fifth of their time
    with sqlite3.connect(path) as conn:
        assert not conn.execute(has_index).fetchone()[0]


def test_event_ids_are_uuid7_and_strictly_increasing_across_a_counter_overflow() -> None:
    ids = new_event_ids(5000) + new_event_ids(3)  # 5000 > the 4096 a millisecond's counter holds
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122 and str(parsed) == text
    # the random bits reach every position: all four variant digits, and no two tails alike
    assert {text[19] for text in ids} == set("89ab") and len({text[19:] for text in ids}) == len(ids)


def test_a_batch_encodes_to_one_text_per_payload_whatever_its_strings_hold(tmp_path: Path) -> None:
    tricky = {"text": "line 1\nline 2\r\n\u2028end", "key\nwith newline": "\n", "nested": {"a\nb": ["\n\n"]}}
    events = [_result(f"a{i}", **(tricky if i % 2 else {})) for i in range(5)]
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append(events)
        stored = [e.payload for e in store.read()]
    assert stored == [e.payload for e in events]
    assert encode_many([]) == []


def test_a_value_json_cannot_hold_names_its_event_and_nothing_is_written(tmp_path: Path) -> None:
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        with pytest.raises(PayloadError, match=r"^event 2 \(attempt-c\) VerifierResult: payload is not JSON"):
            store.append([_result("a"), _result("b"), _result("c", extra=object()), _result("d", extra={1, 2})])
        assert store.count() == 0


def test_a_batch_mixing_stored_given_and_missing_ids_appends_the_rest_in_order(tmp_path: Path) -> None:
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append([step("a", 0, "first"), step("b", 0)])
        result = store.append([step("a", 1), step("a", 0, "first"), step("b", 1, "mine"), step("a", 2)])
        events = list(store.read())
    assert (result.appended, result.duplicates, result.first_position, result.last_position) == (3, 1, 3, 5)
    assert [(e.stream_id, e.version, e.payload["step"]) for e in events] == [
        ("a", 1, 0), ("b", 1, 0), ("a", 2, 1), ("b", 2, 1), ("a", 3, 2),
    ]  # fmt: skip
    assert events[0].event_id == "first" and events[3].event_id == "mine"
    made = [events[i].event_id for i in (1, 2, 4)]
    assert all(uuid.UUID(i).version == 7 for i in made) and made == sorted(made)


@pytest.mark.parametrize("bound_values", [None, 999, 20])  # today's default (32,766), older SQLite's, a tiny one
def test_batches_of_any_size_keep_their_order_whatever_the_statements_they_are_cut_into(
    tmp_path: Path, bound_values: int | None
) -> None:
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        if bound_values is not None:
            store.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, bound_values)
        sizes = [1, 3, 255, 256, 257, 1000]
        results = [store.append([step(f"s{i % 7}", i) for i in range(size)]) for size in sizes]
        events = list(store.read())
        assert store.check().ok
    assert [e.position for e in events] == list(range(1, sum(sizes) + 1))
    ends = list(itertools.accumulate(sizes))
    assert [(r.first_position, r.last_position) for r in results] == [
        (e - k + 1, e) for e, k in zip(ends, sizes, strict=True)
    ]
    expected = [(f"s{i % 7}", i) for size in sizes for i in range(size)]
    assert [(e.stream_id, e.payload["step"]) for e in events] == expected
    seen: dict[str, int] = {}
    for e in events:
        seen[e.stream_id] = seen.get(e.stream_id, 0) + 1
        assert e.version == seen[e.stream_id]
    assert len({e.recorded_at for e in events}) == len(sizes)  # one timestamp a batch


def test_stream_heads_are_found_whatever_characters_name_the_stream(tmp_path: Path) -> None:
    streams = ['a"b', "back\\slash", "ü-ß-€-𝄞", "tab\there", "new\nline", "[1,2]"]
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append([step(s, 0) for s in streams], expected_version=dict.fromkeys(streams, 0))
        store.append([step(s, 1) for s in streams], expected_version=dict.fromkeys(streams, 1))
        with pytest.raises(ConcurrencyError, match="is at version 2, expected 1"):
            store.append([step(streams[2], 2)], expected_version=1)
        assert [store.stream_version(s) for s in streams] == [2] * len(streams)


def test_a_clash_inside_the_insert_rolls_back_the_whole_batch_and_the_store_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append([step("late", 0)])
        # stale heads (as a writer that skipped the lock would see): the batch's last row clashes with a
        # stored one after three earlier statements' rows went in
        monkeypatch.setattr(EventStore, "_heads", staticmethod(lambda conn, streams: dict.fromkeys(streams, 0)))
        batch = [step(f"s{i % 5}", i) for i in range(300)] + [step("late", 1)]
        with pytest.raises(ConcurrencyError, match="concurrent append clashed"):
            store.append(batch)
        assert store.count() == 1 and not store.connection.in_transaction
        monkeypatch.undo()
        assert store.append(batch).first_position == 2 and store.count() == 302
        assert store.check().ok
