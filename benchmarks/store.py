"""Event store benchmark: appends, durable appends, projection rebuild and catch-up, side by side.

Runs the same workload through mkbsim's EventStore, raw sqlite3 `executemany` into the same
table, and the `eventsourcing` library's SQLite application recorder, and prints rates and ratios.

    .venv/bin/python benchmarks/store.py [--events 1000000] [--batch 1000]
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from mkbsim.events import EventStore, NewEvent, new_event_ids
from mkbsim.events._store import _DDL
from mkbsim.projections import AttemptsProjection, ProjectionEngine

STEPS_PER_ATTEMPT = 18  # start + 12 steps + 2 × (submission + verifier result) + finish


def synthetic(n: int) -> list[NewEvent]:
    """``n`` events shaped like a campaign: attempts of ~18 events on their own streams."""
    events: list[NewEvent] = []
    attempt = 0
    while len(events) < n:
        aid = new_event_ids(1)[0]
        stream = f"attempt-{aid}"
        events.append(
            NewEvent(stream, "AttemptStarted", {
                "attempt_id": aid, "campaign_id": "bench", "model": f"m{attempt % 6}",
                "problem": f"p{attempt % 74 + 1:02d}", "family": "mlp_norm", "dsl": "tirx", "arm": "solo_tirx",
                "replicate": 0, "budget": {"minutes": 40, "submissions": 10}, "source_attempt_id": None,
            })
        )  # fmt: skip
        for i in range(12):
            events.append(
                NewEvent(stream, "AgentStep", {
                    "attempt_id": aid, "step": i, "kind": "command", "content": "python bench.py --size 4096 " * 3,
                    "elapsed_s": 12.5 * i,
                })
            )  # fmt: skip
            if i in (5, 11):
                events.append(
                    NewEvent(stream, "SubmissionMade", {
                        "attempt_id": aid, "submission": i // 6, "counted": True, "code_sha256": "ab" * 32, "code": "",
                    })
                )  # fmt: skip
                events.append(
                    NewEvent(stream, "VerifierResult", {
                        "attempt_id": aid, "submission": i // 6, "backend": "analytic", "protocol": "paper",
                        "passed": True, "correct": True, "runtime_ms": 0.2, "eager_ms": 0.9, "speedup": 4.5,
                        "bypass_ok": True, "forbidden": [], "inline_cuda": False, "failure": None,
                    })
                )  # fmt: skip
        events.append(
            NewEvent(stream, "AttemptFinished", {
                "attempt_id": aid, "status": "finished", "passed": True, "runtime_ms": 0.2, "speedup": 4.5,
                "skipped": False, "reason": None,
            })
        )  # fmt: skip
        attempt += 1
    return events[:n]


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_mkbsim(path: Path, events: list[NewEvent], batch: int) -> float:
    store = EventStore(path, create=True)
    seconds = timed(lambda: [store.append(events[i : i + batch]) for i in range(0, len(events), batch)])
    store.close()
    return seconds


def bench_raw(path: Path, events: list[NewEvent], batch: int) -> float:
    """The floor: the same rows (JSON-encoded, time-ordered ids) through executemany, no checks."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_DDL)
    versions: dict[str, int] = {}

    def run() -> None:
        now = datetime.now(UTC).isoformat()
        for i in range(0, len(events), batch):
            chunk = events[i : i + batch]
            ids = new_event_ids(len(chunk))
            rows = []
            for eid, ev in zip(ids, chunk, strict=True):
                v = versions[ev.stream_id] = versions.get(ev.stream_id, 0) + 1
                rows.append((eid, ev.stream_id, v, ev.type, 1, now, json.dumps(ev.payload)))
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO events (event_id, stream_id, version, type, schema_version, recorded_at, payload)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.execute("COMMIT")

    seconds = timed(run)
    conn.close()
    return seconds


def bench_eventsourcing(path: Path, events: list[NewEvent], batch: int) -> float | None:
    try:
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore
    except ImportError:
        return None
    datastore = SQLiteDatastore(str(path))
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()
    ids: dict[str, uuid.UUID] = {}
    versions: dict[str, int] = {}

    def run() -> None:
        for i in range(0, len(events), batch):
            stored = []
            for ev in events[i : i + batch]:
                oid = ids.setdefault(ev.stream_id, uuid.uuid4())
                v = versions[ev.stream_id] = versions.get(ev.stream_id, 0) + 1
                stored.append(StoredEvent(oid, v, ev.type, json.dumps(ev.payload).encode()))
            recorder.insert_events(stored)

    seconds = timed(run)
    datastore.close()
    return seconds


def read_rate(path: Path) -> tuple[float, float]:
    store = EventStore(path)
    raw = timed(lambda: store.connection.execute("SELECT * FROM events").fetchall())
    n = store.count()
    decoded = timed(lambda: sum(1 for _ in store.read()))
    store.close()
    return n / raw, n / decoded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--append-events", type=int, default=200_000, help="events for the side-by-side append run")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mkbsim-bench-"))
    print(
        f"mkbsim event store benchmark — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}"
    )

    events = synthetic(args.append_events)
    n = len(events)
    t_mk = bench_mkbsim(tmp / "mk.sqlite", events, args.batch)
    t_raw = bench_raw(tmp / "raw.sqlite", events, args.batch)
    t_es = bench_eventsourcing(tmp / "es.sqlite", events, args.batch)
    print(f"\nbatched append ({n:,} events, batches of {args.batch}):")
    print(f"  mkbsim EventStore      {n / t_mk:>10,.0f} events/s")
    print(f"  raw sqlite executemany {n / t_raw:>10,.0f} events/s   mkbsim/raw = {t_raw / t_mk:.2f}")
    if t_es is not None:
        print(f"  eventsourcing SQLite   {n / t_es:>10,.0f} events/s   mkbsim/eventsourcing = {t_es / t_mk:.2f}")

    durable = EventStore(tmp / "durable.sqlite", create=True, durable=True)
    singles = events[:2000]
    t_single = timed(lambda: [durable.append([ev]) for ev in singles])
    durable.close()
    print(
        "\nsingle durable append (synchronous=FULL, one event per transaction): "
        f"{len(singles) / t_single:,.0f} events/s"
    )

    big = tmp / "big.sqlite"
    store = EventStore(big, create=True)
    t_fill = timed(lambda: [store.append(chunk) for chunk in _chunks(synthetic(args.events), 5000)])
    print(
        f"\nfilled {store.count():,} events in {t_fill:.1f} s ({store.count() / t_fill:,.0f} events/s, batches of 5000)"
    )
    raw_rate, decoded_rate = read_rate(big)
    print(f"plain scan {raw_rate:,.0f} rows/s; scan with JSON decode {decoded_rate:,.0f} events/s")

    engine = ProjectionEngine(store, [AttemptsProjection()])
    t_rebuild = timed(lambda: engine.rebuild("attempts"))
    total = store.count()
    handled = sum(store.count(t) for t in AttemptsProjection.handles)
    print(
        f"\nfull rebuild of `attempts` over {total:,} events: {t_rebuild:.2f} s = {total / t_rebuild:,.0f} events/s "
        f"({handled:,} handled events decoded, {handled / t_rebuild:,.0f}/s)"
    )

    latencies = []
    for chunk in _chunks(synthetic(50 * STEPS_PER_ATTEMPT), STEPS_PER_ATTEMPT):
        store.append(chunk)
        latencies.append(timed(engine.catch_up))
    latencies.sort()
    print(
        f"incremental catch-up after one attempt's events: median {latencies[len(latencies) // 2] * 1e3:.2f} ms, "
        f"max {latencies[-1] * 1e3:.2f} ms"
    )
    store.close()


def _chunks(items: list[NewEvent], size: int) -> list[list[NewEvent]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


if __name__ == "__main__":
    main()
