"""The Ray executor on one machine (``ray.init(num_cpus=2)``): the same events as the local executor,
and an attempt whose worker process dies is retried."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
from campaign_kit import small_campaign

from mkbsim.campaigns import RayExecutor, run_campaign
from mkbsim.events import CampaignFinished, EventStore, NewEvent, UnknownEventType, campaign_stream

ray = pytest.importorskip("ray")

# one local Ray cluster at a time: under pytest-xdist every Ray module runs in one worker, on one cluster
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray"), pytest.mark.usefixtures("local_ray")]


def _attempt_payloads(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    rows = sorted(conn.execute("SELECT stream_id, type, payload FROM events WHERE stream_id LIKE 'attempt-%'"))
    conn.close()
    return rows


def test_the_ray_executor_records_the_same_events_as_the_local_one(tmp_path: Path) -> None:
    campaign = small_campaign(problems="p28,p36,p62")
    results = {}
    for executor in ("ray", "local"):
        with EventStore(tmp_path / f"{executor}.sqlite", create=True) as store:
            results[executor] = run_campaign(store, campaign, executor=executor)
    assert results["ray"].ran == results["local"].ran == 24
    assert _attempt_payloads(tmp_path / "ray.sqlite") == _attempt_payloads(tmp_path / "local.sqlite")


def test_an_attempt_whose_worker_dies_is_retried(tmp_path: Path) -> None:
    def die_once(marker: str) -> int:
        if not os.path.exists(marker):
            Path(marker).touch()
            os._exit(1)  # the worker process dies mid-attempt
        return os.getpid()

    with EventStore(tmp_path / "e.sqlite", create=True) as store:
        executor = RayExecutor(die_once, 2, None, str(store.path))
        try:
            executor.submit("attempt", str(tmp_path / "died"))
            deadline, done = time.monotonic() + 120, []
            while not done and time.monotonic() < deadline:
                done = executor.wait(0.5)
        finally:
            executor.close()
    assert (tmp_path / "died").exists() and done and done[0][0] == "attempt"


def test_a_batch_the_writer_cannot_append_fails_the_run_and_keeps_the_earlier_ones(tmp_path: Path) -> None:
    # batches queue at the writer actor (several in flight): one it refuses must still surface in the driver
    with EventStore(tmp_path / "e.sqlite", create=True) as store:
        executor = RayExecutor(lambda arg: arg, 1, None, str(store.path))
        try:
            for name in ("c1", "c2", "c3"):
                event = NewEvent.of(campaign_stream(name), CampaignFinished(campaign_id=name, counts={}))
                executor.append(store, [event if name != "c2" else NewEvent(event.stream_id, "Finished", {})])
            with pytest.raises(UnknownEventType, match="unknown event type 'Finished'"):
                executor.appended()
        finally:
            executor.close()
        assert [e.stream_id for e in store.read()] == [campaign_stream("c1")]
