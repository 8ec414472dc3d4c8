"""The store watcher: a thread that follows the store's head by position, keeps the projections current
and recomputes the paired-lift cells, reporting through callbacks (the app turns them into messages).

It owns its own EventStore (one sqlite connection, used only in its thread). Catching up writes the
projections' tables, as every mkbsim reader of projections does; stopping interrupts a long rebuild
(SQLite rolls the unfinished page back, and the engine redoes it next time).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkbsim.errors import UserError
from mkbsim.events import EventStore
from mkbsim.projections import ProjectionEngine, default_projections
from tui.data.comparisons import comparison_records, lift_rows

#: Below this many unapplied events a catch-up is quick and not announced as "building".
ANNOUNCE_LAG = 20_000


@dataclass(frozen=True)
class StoreState:
    head: int
    #: events the projections still have to apply before the views are current (0: current)
    behind: int
    problem: str | None = None
    #: False until the watcher has brought the projections to ``head`` once
    synced: bool = True
    #: events the projections applied to get there (0: the views were already current)
    applied: int = 0


@dataclass(frozen=True)
class LiftUpdate:
    campaign_id: str | None
    rows: list[dict[str, Any]]
    resolved: int
    pending: int


class StoreWatcher:
    def __init__(
        self,
        path: Path,
        on_state: Callable[[StoreState], object],
        on_lift: Callable[[LiftUpdate], object],
        *,
        poll_s: float = 0.5,
        lift_every_s: float = 2.0,
    ) -> None:
        self.path = path
        self._on_state = on_state
        self._on_lift = on_lift
        self._poll_s = poll_s
        self._lift_every_s = lift_every_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        # (campaign,) the cells are for; None until the monitor names one after its first paint, which
        # the cells (a second of work on a big store) must not delay
        self._lift_for: tuple[str | None] | None = None
        self._lift_requested = False
        self._conn: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._run, name="mkbsim-tui-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop and wait; a rebuild in progress is interrupted at its next SQL statement."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        while self._thread.is_alive() and time.monotonic() < deadline:
            conn = self._conn
            if conn is not None:
                conn.interrupt()
            self._thread.join(0.02)

    def follow_campaign(self, campaign_id: str | None) -> None:
        """Compute the paired-lift cells of this campaign (None: every campaign's plain comparisons)."""
        self._lift_for = (campaign_id,)
        self._lift_requested = True
        self._wake.set()

    def refresh(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        try:
            with EventStore(self.path) as store:
                self._conn = store.connection
                self._follow(store)
        except sqlite3.OperationalError as exc:
            if not self._stop.is_set():  # "interrupted" is how stop() ends a long catch-up
                self._report(StoreState(0, 0, f"the store watcher stopped: {exc}"))
        except UserError as exc:
            self._report(StoreState(0, 0, str(exc)))
        finally:
            self._conn = None

    def _follow(self, store: EventStore) -> None:
        engine = ProjectionEngine(store, default_projections())
        seen_head = -1
        lift_at = 0.0
        lift_head = -1
        while not self._stop.is_set():
            head = store.last_position()
            problem = None
            if head != seen_head:
                behind = max(s.lag if s.stored_version == s.version else s.head for s in engine.status())
                if behind >= ANNOUNCE_LAG:
                    self._report(StoreState(head, behind, synced=False))
                applied = 0
                try:
                    applied = sum(engine.catch_up().values())
                    seen_head = head
                except UserError as exc:  # locked by a long writer, or read-only: say so, retry next poll
                    problem = str(exc)
                self._report(StoreState(head, 0 if problem is None else behind, problem, applied=applied))
            due = time.monotonic() - lift_at >= self._lift_every_s
            if self._lift_for is not None and (self._lift_requested or (seen_head != lift_head and due)):
                self._lift_requested = False
                (campaign,) = self._lift_for
                records, pending = comparison_records(store.connection, campaign)
                self._on_lift(LiftUpdate(campaign, lift_rows(records), len(records), pending))
                lift_at, lift_head = time.monotonic(), seen_head
            self._wake.wait(self._poll_s)
            self._wake.clear()

    def _report(self, state: StoreState) -> None:
        if not self._stop.is_set():
            self._on_state(state)
