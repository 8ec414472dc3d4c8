"""The comparisons projection: incremental catch-up equals a full rebuild after any interleaving."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metrics.transfer_kit import attempt, interleave, random_campaign
from mkbsim.events import EventStore, NewEvent
from mkbsim.metrics import COMPARISON_FIELDS
from mkbsim.projections import ComparisonsProjection, ProjectionEngine


def _tables(store: EventStore) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    conn = store.connection
    comparisons = conn.execute("SELECT * FROM comparisons").fetchall()
    attempts = conn.execute("SELECT * FROM transfer_attempts").fetchall()
    return sorted(comparisons, key=repr), sorted(attempts, key=repr)


def _rebuilt(path: Path, events: list[NewEvent]) -> EventStore:
    store = EventStore(path, create=True)
    store.append(events)
    ProjectionEngine(store, [ComparisonsProjection()]).rebuild("comparisons")
    return store


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(1, 2000), max_size=8), page=st.integers(5, 400))
def test_incremental_catch_up_equals_full_rebuild(tmp_path_factory, seed, cuts, page) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    events = list(interleave(rng, random_campaign(seed, models=2, problems=3, replicates=2)))
    base = tmp_path_factory.mktemp("c")
    live = EventStore(base / "live.sqlite", create=True)
    engine = ProjectionEngine(live, [ComparisonsProjection()], page_size=page)
    bounds = sorted({min(c, len(events)) for c in cuts})
    for lo, hi in zip([0, *bounds], [*bounds, len(events)], strict=True):
        live.append(events[lo:hi])
        engine.catch_up()
    rebuilt = _rebuilt(base / "rebuilt.sqlite", events)
    assert _tables(live) == _tables(rebuilt)
    comparisons, _ = _tables(rebuilt)
    assert comparisons, "the campaign must produce comparisons"
    assert engine.status()[0].lag == 0


def test_a_restart_that_moves_an_attempt_clears_its_old_comparison(tmp_path: Path) -> None:
    live = EventStore(tmp_path / "live.sqlite", create=True)
    engine = ProjectionEngine(live, [ComparisonsProjection()])
    first = attempt("ct", "cutedsl2tirx_skill", problem="p01", status=None)
    again = attempt("ct", "cutedsl2tirx_skill", problem="p02", runtime_ms=0.5)
    solos = attempt("t1", "solo_tirx", problem="p01") + attempt("t2", "solo_tirx", problem="p02")
    live.append(solos + first)
    engine.catch_up()
    assert live.connection.execute("SELECT problem, resolved FROM comparisons").fetchall() == [("p01", 0)]
    live.append(again)
    engine.catch_up()
    assert live.connection.execute("SELECT problem, r FROM comparisons").fetchall() == [("p02", 2.0)]
    assert _tables(live) == _tables(_rebuilt(tmp_path / "rebuilt.sqlite", solos + first + again))


def test_a_late_baseline_in_another_campaign_updates_the_comparison_naming_it(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    engine = ProjectionEngine(store, [ComparisonsProjection()])
    store.append(attempt("rerun", "cutedsl2tirx_skill", campaign="c2", baseline="t-old", runtime_ms=1.0))
    engine.catch_up()
    store.append(attempt("t-old", "solo_tirx", campaign="c1", status=None))
    engine.catch_up()
    assert store.connection.execute("SELECT resolved FROM comparisons").fetchall() == [(0,)]
    store.append(attempt("t-old", "solo_tirx", campaign="c1", runtime_ms=3.0)[-1:])  # its AttemptFinished
    engine.catch_up()
    assert store.connection.execute("SELECT campaign_id, r FROM comparisons").fetchall() == [("c2", 3.0)]


def test_the_final_verdict_carries_inline_cuda_and_submissions_are_not_read(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    store.append(attempt("t", "solo_tirx", inline_cuda=True, submissions=3, runtime_ms=0.1)
                 + attempt("ct", "cutedsl2tirx_skill", runtime_ms=1.0))  # fmt: skip
    applied = ProjectionEngine(store, [ComparisonsProjection()]).catch_up()["comparisons"]
    assert applied == 2 + 1 + 2  # two starts, one final verdict, two finishes; no per-submission results
    row = store.connection.execute("SELECT baseline_passed, baseline_tier, r, verdict_change FROM comparisons")
    assert row.fetchall() == [(0, 0, 4.0, "rescue")]
    assert store.connection.execute("SELECT inline_cuda, passed FROM transfer_attempts WHERE attempt_id = 't'"
                                    ).fetchone() == (1, 1)  # fmt: skip


def test_table_columns_are_the_comparison_fields(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    ProjectionEngine(store, [ComparisonsProjection()]).catch_up()
    columns = [r[1] for r in store.connection.execute("PRAGMA table_info(comparisons)")]
    assert tuple(columns) == COMPARISON_FIELDS


def test_the_report_reads_comparisons_from_one_range_of_a_covering_index(tmp_path: Path) -> None:
    from mkbsim.lab import Lab

    path = tmp_path / "s.sqlite"
    with EventStore(path, create=True) as store:
        store.append(list(interleave(random.Random(3), random_campaign(3))))
    statements: list[str] = []
    with Lab(path) as lab:
        lab.store.connection.set_trace_callback(statements.append)
        data = lab.transfer.report_data()
        lab.store.connection.set_trace_callback(None)
        reads = [s for s in statements if "comparisons" in s and s.lstrip().startswith("SELECT")]
        plans = {s: " ".join(r[3] for r in lab.store.connection.execute(f"EXPLAIN QUERY PLAN {s}")) for s in reads}
    assert data.comparisons and len(plans) == 3  # the records, the pending count, the control arms
    for statement, plan in plans.items():
        assert "USING COVERING INDEX" in plan and "_for_report" in plan, (statement, plan)
        assert "TEMP B-TREE" not in plan, (statement, plan)  # read in the report's order, not sorted after
