"""The projection engine: incremental catch-up equals rebuild, atomic checkpoints, version bumps."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kits.campaign_events import campaign
from mkbsim.events import EventStore
from mkbsim.projections import AttemptsProjection, ProjectionEngine, ProjectionTx, Row


def _attempt_rows(store: EventStore) -> list[tuple[object, ...]]:
    """Every column but ``started_at``: the time of the append, which differs between two stores."""
    columns = [r[1] for r in store.connection.execute("PRAGMA table_info(attempts)") if r[1] != "started_at"]
    return store.connection.execute(f"SELECT {', '.join(columns)} FROM attempts ORDER BY attempt_id").fetchall()


def _store(tmp_path: Path, name: str = "s.sqlite") -> EventStore:
    return EventStore(tmp_path / name, create=True)


def test_attempts_projection_has_one_row_per_attempt_with_outcome(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append(list(campaign(1, 20)))
    engine = ProjectionEngine(store, [AttemptsProjection()])
    engine.catch_up()
    rows = store.connection.execute("SELECT attempt_id, status, passed, submissions FROM attempts").fetchall()
    assert len(rows) == 20
    assert all(status == "finished" and submissions == 2 for _, status, _, submissions in rows)
    passes = {e.payload["attempt_id"]: e.payload["passed"] for e in store.read(types=["AttemptFinished"])}
    assert {a: bool(p) for a, _, p, _ in rows} == passes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(1, 400), max_size=6), page=st.integers(3, 50))
def test_incremental_catch_up_equals_full_rebuild(tmp_path_factory, seed, cuts, page) -> None:  # type: ignore[no-untyped-def]
    events = list(campaign(seed, 25))
    base = tmp_path_factory.mktemp("p")
    live = EventStore(base / "live.sqlite", create=True)
    engine = ProjectionEngine(live, [AttemptsProjection()], page_size=page)
    engine.catch_up()
    for lo, hi in zip([0, *sorted(cuts)], [*sorted(cuts), len(events)], strict=False):
        live.append(events[lo:hi])
        engine.catch_up()
    rebuilt = EventStore(base / "rebuilt.sqlite", create=True)
    rebuilt.append(events)
    ProjectionEngine(rebuilt, [AttemptsProjection()]).rebuild("attempts")
    assert _attempt_rows(live) == _attempt_rows(rebuilt)
    (status,) = engine.status()
    assert status.lag == 0


class _Exploding(AttemptsProjection):
    name = "exploding"
    tables: ClassVar[dict[str, str]] = {"exploding_attempts": AttemptsProjection.tables["attempts"]}
    indexes: ClassVar[dict[str, tuple[str, str]]] = {}
    fail_after = 1

    def apply(self, tx: ProjectionTx, rows: Sequence[Row]) -> None:
        super().apply(ProjectionTx(tx.conn, {"attempts": tx.t["exploding_attempts"]}), rows)
        self.fail_after -= 1
        if self.fail_after < 0:
            raise RuntimeError("crash inside a page")


def test_a_crash_inside_a_page_rolls_back_update_and_checkpoint(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append(list(campaign(3, 10)))
    projection = _Exploding()
    engine = ProjectionEngine(store, [projection], page_size=20)
    projection.fail_after = 10**9
    engine.catch_up()
    before = store.connection.execute("SELECT COUNT(*) FROM exploding_attempts").fetchone()[0]
    store.append(list(campaign(4, 10)))
    projection.fail_after = 1  # the second page of the catch-up fails
    with pytest.raises(RuntimeError, match="crash inside a page"):
        engine.catch_up()
    (status,) = engine.status()
    applied = store.connection.execute("SELECT COUNT(*) FROM exploding_attempts").fetchone()[0]
    # exactly the first page landed, with its checkpoint; nothing of the failed page
    assert status.position is not None and status.position == store.count() - status.lag
    projection.fail_after = 10**9
    engine.catch_up()
    assert store.connection.execute("SELECT COUNT(*) FROM exploding_attempts").fetchone()[0] == 20
    assert before == 10 and 10 <= applied <= 20


def test_a_failed_rebuild_leaves_no_fresh_table_behind(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append(list(campaign(3, 10)))
    projection = _Exploding()
    engine = ProjectionEngine(store, [projection], page_size=20)
    projection.fail_after = 10**9
    engine.catch_up()
    projection.fail_after = 1  # pages are committed one by one: the failure comes after the first landed
    with pytest.raises(RuntimeError, match="crash inside a page"):
        engine.rebuild("exploding")
    tables = {r[0] for r in store.connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    temporary = {r[0] for r in store.connection.execute("SELECT name FROM sqlite_temp_master WHERE type = 'table'")}
    assert "exploding_attempts" in tables and not [t for t in tables | temporary if t.endswith("__rebuild")]
    assert store.connection.execute("SELECT COUNT(*) FROM exploding_attempts").fetchone()[0] == 10  # the old view


def test_version_bump_or_missing_table_triggers_rebuild(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append(list(campaign(5, 8)))
    engine = ProjectionEngine(store, [AttemptsProjection()])
    assert engine.catch_up() == {"attempts": sum(1 for _ in store.read(types=AttemptsProjection.handles))}
    assert engine.catch_up() == {"attempts": 0}
    store.connection.execute("DROP TABLE attempts")
    assert engine.catch_up()["attempts"] > 0

    class Bumped(AttemptsProjection):
        version = AttemptsProjection.version + 1

    engine2 = ProjectionEngine(store, [Bumped()])
    assert engine2.catch_up()["attempts"] > 0
    assert engine2.status()[0].stored_version == Bumped.version
    indexes = {r[0] for r in store.connection.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "attempts_by_campaign" in indexes


def test_unknown_event_types_are_ignored(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append(list(campaign(6, 3)))
    store.connection.execute(
        "INSERT INTO events (event_id, stream_id, version, type, schema_version, recorded_at, payload)"
        " VALUES ('future-1', 'x', 1, 'FromTheFuture', 1, '2026', '{}')"
    )
    engine = ProjectionEngine(store, [AttemptsProjection()])
    engine.catch_up()
    assert len(_attempt_rows(store)) == 3 and engine.status()[0].lag == 0


def test_rebuild_swaps_in_place_and_catches_events_arriving_meanwhile(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append(list(campaign(8, 5)))
    engine = ProjectionEngine(store, [AttemptsProjection()])
    engine.catch_up()
    store.append(list(campaign(9, 5)))
    engine.rebuild("attempts")
    assert len(_attempt_rows(store)) == 10
    tables = {r[0] for r in store.connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not any(t.endswith("__rebuild") for t in tables)


def test_retried_attempt_with_same_id_starts_over(tmp_path: Path) -> None:
    rng = random.Random(0)
    from kits.campaign_events import attempt_events

    store = _store(tmp_path)
    first = attempt_events(rng, "same")
    store.append(first[:-1])  # crashed before finishing
    store.append(attempt_events(rng, "same", steps=3))  # the resume re-runs it under the same id
    engine = ProjectionEngine(store, [AttemptsProjection()], page_size=1000)
    engine.catch_up()
    ((submissions, status),) = store.connection.execute("SELECT submissions, status FROM attempts").fetchall()
    assert (submissions, status) == (1, "finished")
