"""Event store benchmark on a real campaign's events: appends and reads side by side with their baselines.

The events come from a store `mkbsim run` wrote (``--source STORE``; default: ``mkbsim run --replicates
18`` into a temporary folder, about 1.04M events). Read back in position order they carry a real
campaign's payload mix and interleaving of streams; they are appended without ids, as campaigns append.

Appends (the first ``--append-events``, batches of ``--batch``), each into a fresh file, in
``--rounds`` rounds whose order rotates, timed by wall clock and by the process's CPU time:
- mkbsim ``EventStore.append``: validation, time-ordered ids, stream versions, one transaction a batch;
- raw ``executemany`` into the same table (same DDL, page size and pragmas, same JSON codec and ids, no
  checks): the issue's anchor;
- "raw VALUES": the same rows by the store's own multi-row ``INSERT … VALUES`` statements, the floor of
  the way mkbsim now inserts;
- the ``eventsourcing`` library's SQLite application recorder, given the same JSON bytes; the one UUID
  per stream it needs is made before the clock starts.
Reads, on a fresh store filled with every source event by ``EventStore.append``: ``read()`` of every
event with its payload against a raw ``SELECT`` of the same columns plus ``json.loads`` (and plus
mkbsim's decoder, the floor of its own work); ``read(types=[T])`` for one rare type against the raw
``SELECT … WHERE type = ?``; the rebuild of the ``attempts`` projection; catch-up after each of 50
attempts' worth of held-back events.

    .venv/bin/python benchmarks/store.py [--source STORE] [--append-events 200000] [--rounds 3] [--appends-only]
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from mkbsim.events import EventStore, NewEvent, new_event_ids
from mkbsim.events._codec import decode, encode
from mkbsim.events._insert import insert_events
from mkbsim.events._store import _DDL, PAGE_SIZE
from mkbsim.projections import AttemptsProjection, ProjectionEngine

#: (wall seconds, CPU seconds of this process)
Times = tuple[float, float]
_INSERT = (
    "INSERT INTO events (event_id, stream_id, version, type, schema_version, recorded_at, payload)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def timed(fn: Callable[[], object]) -> Times:
    gc.collect()
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def source_store(path: Path | None, tmp: Path, replicates: int) -> Path:
    if path is not None:
        return path
    made = tmp / "source.sqlite"
    print(f"simulating the default campaign with {replicates} replicates into {made} …", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "mkbsim", "run", "--replicates", str(replicates), "--store", str(made)],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return made


def campaign_events(source: Path) -> list[NewEvent]:
    """Every event of ``source`` in position order, as a campaign appended it (no event ids)."""
    conn = sqlite3.connect(f"{source.absolute().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT stream_id, type, payload FROM events ORDER BY position").fetchall()
    finally:
        conn.close()
    return [NewEvent(stream, type_, json.loads(payload)) for stream, type_, payload in rows]


def batches(events: Sequence[NewEvent], size: int) -> Iterator[Sequence[NewEvent]]:
    for i in range(0, len(events), size):
        yield events[i : i + size]


def append_mkbsim(path: Path, events: Sequence[NewEvent], batch: int) -> Times:
    store = EventStore(path, create=True)
    try:
        return timed(lambda: [store.append(chunk) for chunk in batches(events, batch)])
    finally:
        store.close()


def append_raw(path: Path, events: Sequence[NewEvent], batch: int, *, multirow: bool = False) -> Times:
    """The floor: the same rows (same codec, time-ordered ids, versions counted in memory) into the same
    table, with the same pragmas, and no checks: by ``executemany`` (one statement run a row), or with
    ``multirow`` by the store's own multi-row ``INSERT … VALUES`` statements (the rows transposed into
    columns first)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_DDL)
    versions: dict[str, int] = {}

    def run() -> None:
        for chunk in batches(events, batch):
            now = datetime.now(UTC).isoformat(timespec="microseconds")
            rows = []
            for event_id, ev in zip(new_event_ids(len(chunk)), chunk, strict=True):
                v = versions[ev.stream_id] = versions.get(ev.stream_id, 0) + 1
                rows.append((event_id, ev.stream_id, v, ev.type, 1, now, encode(ev.payload)))
            conn.execute("BEGIN")
            if multirow:
                ids, streams, versions_, types_, schema_versions, _, texts = zip(*rows, strict=True)
                insert_events(conn, now, ids, streams, versions_, types_, schema_versions, texts)
            else:
                conn.executemany(_INSERT, rows)
            conn.execute("COMMIT")

    try:
        return timed(run)
    finally:
        conn.close()


def append_eventsourcing(path: Path, events: Sequence[NewEvent], batch: int) -> Times | None:
    try:
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore
    except ImportError:
        return None
    datastore = SQLiteDatastore(str(path))
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()
    originators = {ev.stream_id: uuid.uuid4() for ev in events}  # its aggregate ids, made before timing
    versions: dict[str, int] = {}

    def run() -> None:
        for chunk in batches(events, batch):
            stored = []
            for ev in chunk:
                v = versions[ev.stream_id] = versions.get(ev.stream_id, 0) + 1
                stored.append(StoredEvent(originators[ev.stream_id], v, ev.type, encode(ev.payload).encode()))
            recorder.insert_events(stored)

    try:
        return timed(run)
    finally:
        datastore.close()


def compare_appends(events: Sequence[NewEvent], batch: int, rounds: int, tmp: Path) -> dict[str, list[Times]]:
    runners: dict[str, Callable[[Path, Sequence[NewEvent], int], Times | None]] = {
        "mkbsim": append_mkbsim, "raw": append_raw, "raw VALUES": functools.partial(append_raw, multirow=True),
        "eventsourcing": append_eventsourcing,
    }  # fmt: skip
    names = list(runners)
    out: dict[str, list[Times]] = {}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            path = tmp / f"append-{name}-{r}.sqlite"
            result = runners[name](path, events, batch)
            if result is not None:
                out.setdefault(name, []).append(result)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    return out


def read_mkbsim(path: Path, types: list[str] | None = None) -> Times:
    store = EventStore(path, readonly=True)
    try:
        return timed(lambda: sum(1 for _ in store.read(types=types)))
    finally:
        store.close()


def read_raw(path: Path, loads: Callable[[str], object] | None, type_: str | None = None) -> Times:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    sql = "SELECT position, event_id, stream_id, version, type, schema_version, recorded_at, payload FROM events"
    sql += " WHERE type = ? ORDER BY position" if type_ else " ORDER BY position"

    def run() -> None:
        cursor = conn.execute(sql, (type_,) if type_ else ())
        if loads is None:
            cursor.fetchall()
            return
        for row in cursor:
            loads(row[7])

    try:
        return timed(run)
    finally:
        conn.close()


def median(samples: list[Times]) -> Times:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, help="a store written by `mkbsim run` (default: simulate one)")
    ap.add_argument("--replicates", type=int, default=18, help="replicates of the simulated source (default 18)")
    ap.add_argument("--append-events", type=int, default=200_000, help="events per append run (default 200,000)")
    ap.add_argument("--batch", type=int, default=1000, help="events per append batch (default 1000)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every measurement (default 3)")
    ap.add_argument("--appends-only", action="store_true", help="measure the batched appends only")
    args = ap.parse_args()
    scratch = tempfile.TemporaryDirectory(prefix="mkbsim-bench-")  # removed at exit (a million-event copy)
    tmp = Path(scratch.name)
    print(
        f"mkbsim event store benchmark — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}"
    )
    source = source_store(args.source, tmp, args.replicates)
    events = campaign_events(source)
    gc.collect()
    gc.freeze()  # the harness's million payloads are not the measured code's garbage (campaigns freeze theirs too)
    attempts = sum(1 for ev in events if ev.type == "AttemptStarted")
    print(f"source: {source} — {len(events):,} events of {attempts:,} attempts")

    sample = events[: args.append_events]
    results = compare_appends(sample, args.batch, args.rounds, tmp)
    n = len(sample)
    print(f"\nbatched append ({n:,} events, batches of {args.batch}; {args.rounds} interleaved rounds, median):")
    mk = median(results["mkbsim"])
    for name, samples in results.items():
        wall, cpu = median(samples)
        line = f"  {name:<14} {n / wall:>9,.0f} events/s wall  {n / cpu:>9,.0f} events/s CPU"
        if name != "mkbsim":
            per_round = ", ".join(f"{o[1] / m[1]:.2f}" for o, m in zip(samples, results["mkbsim"], strict=False))
            line += f"   mkbsim/{name}: {wall / mk[0]:.2f} wall, {cpu / mk[1]:.2f} CPU (CPU per round {per_round})"
        print(line)
    if args.appends_only:
        return

    durable = EventStore(tmp / "durable.sqlite", create=True, durable=True)
    singles = events[:2000]
    wall, _ = timed(lambda: [durable.append([ev]) for ev in singles])
    durable.close()
    print(f"\nsingle durable append (synchronous=FULL, one event per transaction): {len(singles) / wall:,.0f} events/s")

    held = 50 * max(1, len(events) // max(1, attempts))
    big = tmp / "big.sqlite"
    store = EventStore(big, create=True)
    wall, cpu = timed(lambda: [store.append(chunk) for chunk in batches(events[:-held], 5000)])
    total = store.count()
    print(f"\nfilled {total:,} events in {wall:.1f} s wall, {cpu:.1f} s CPU ({total / wall:,.0f} events/s, "
          "batches of 5000)")  # fmt: skip

    counts = store.type_counts()
    rare = min((t for t in counts if counts[t] >= total // 100), key=counts.__getitem__)
    reads: dict[str, list[Times]] = {}
    for _ in range(args.rounds):
        reads.setdefault("read()", []).append(read_mkbsim(big))
        reads.setdefault("raw SELECT + json.loads", []).append(read_raw(big, json.loads))
        reads.setdefault("raw SELECT + msgspec", []).append(read_raw(big, decode))
        reads.setdefault("raw SELECT", []).append(read_raw(big, None))
        reads.setdefault(f"read(types=[{rare}])", []).append(read_mkbsim(big, [rare]))
        reads.setdefault(f"raw SELECT {rare} + json.loads", []).append(read_raw(big, json.loads, rare))
    print(f"\nreads of {total:,} events ({counts[rare]:,} {rare}); {args.rounds} interleaved rounds, median:")
    for name, samples in reads.items():
        wall, cpu = median(samples)
        k = counts[rare] if rare in name else total
        print(f"  {name:<40} {k / wall:>10,.0f} events/s wall {k / cpu:>10,.0f} events/s CPU")
    for ours, theirs in (("read()", "raw SELECT + json.loads"),
                         (f"read(types=[{rare}])", f"raw SELECT {rare} + json.loads")):  # fmt: skip
        (w1, c1), (w2, c2) = median(reads[ours]), median(reads[theirs])
        print(f"  {ours} vs {theirs}: {w2 / w1:.2f}× wall, {c2 / c1:.2f}× CPU")

    engine = ProjectionEngine(store, [AttemptsProjection()])
    wall, cpu = timed(lambda: engine.rebuild("attempts"))
    print(f"\nfull rebuild of `attempts` over {total:,} events: {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"= {total / wall:,.0f} events/s")  # fmt: skip

    per_attempt = held // 50
    latencies = []
    for chunk in batches(events[-held:], per_attempt):
        store.append(chunk)
        latencies.append(timed(engine.catch_up)[0])
    latencies.sort()
    print(f"incremental catch-up after each of 50 appends of {per_attempt} events: "
          f"median {latencies[len(latencies) // 2] * 1e3:.2f} ms, max {latencies[-1] * 1e3:.2f} ms")  # fmt: skip
    store.close()


if __name__ == "__main__":
    main()
