"""A writer killed mid-batch leaves all or nothing of it; ordering and idempotency properties."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kits.store_kit import step
from mkbsim.events import EventStore, PayloadError

WRITER = textwrap.dedent(
    """
    import sys
    from mkbsim.events import EventStore, NewEvent
    store = EventStore(sys.argv[1], create=True)
    size = int(sys.argv[2])
    batch = 0
    while True:
        events = [
            NewEvent("s%d" % (i % 7), "AgentStep",
                     {"attempt_id": "b%d" % batch, "step": i, "kind": "note", "content": "x" * 200, "elapsed_s": 0.0})
            for i in range(size)
        ]
        store.append(events)
        print(batch, flush=True)
        batch += 1
    """
)


def test_sigkill_mid_batch_leaves_whole_batches(tmp_path: Path) -> None:
    size = 20_000
    rng = random.Random(7)
    for trial in range(3):
        path = tmp_path / f"s{trial}.sqlite"
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(size)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # at least one batch committed
        time.sleep(rng.uniform(0.05, 0.4))  # then somewhere inside a later batch
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        store = EventStore(path)
        report = store.check()
        assert report.ok, report.problem
        per_batch = dict(
            store.connection.execute(
                "SELECT json_extract(payload, '$.attempt_id'), COUNT(*) FROM events GROUP BY 1"
            ).fetchall()
        )
        assert per_batch and all(n == size for n in per_batch.values()), per_batch
        store.append([step("after", 0)])  # still writable
        assert store.check().ok
        store.close()


appends = st.lists(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 30)), min_size=1, max_size=6),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=appends)
def test_positions_versions_and_idempotency(tmp_path_factory, batches) -> None:  # type: ignore[no-untyped-def]
    """Any sequence of batches (ids drawn from a small pool, so retries happen) keeps the invariants."""
    store = EventStore(tmp_path_factory.mktemp("h") / "s.sqlite", create=True)
    seen: list[str] = []
    for batch in batches:
        events = list(
            {f"{s}-{n}": step(s, n, f"{s}-{n}") for s, n in batch}.values()
        )  # unique within a batch
        before = store.count()
        result = store.append(events)
        fresh = [e.event_id for e in events if e.event_id not in seen]
        assert (result.appended, result.duplicates) == (len(fresh), len(events) - len(fresh))
        seen.extend(i for i in fresh if i is not None)
        assert store.count() == before + result.appended
    events = list(store.read())
    assert [e.position for e in events] == list(range(1, len(events) + 1))
    assert [e.event_id for e in events] == seen
    for stream in "abc":
        versions = [e.version for e in events if e.stream_id == stream]
        assert versions == list(range(1, len(versions) + 1))
    assert store.check().ok
    store.close()


def test_duplicate_ids_inside_one_batch_are_refused_whole(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    with pytest.raises(PayloadError, match="'same' appears twice in one batch"):
        store.append([step("a", 0, "same"), step("a", 1, "same")])
    assert store.count() == 0
