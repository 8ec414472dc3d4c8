"""The store watcher: a thread that owns the read model (``mkbsim.lab.Lab``), follows the store's head by
position, keeps the projections current and recomputes the paired-lift cells, reporting through callbacks
(the app turns them into messages).

Until the store can be opened (a path where no store exists yet, a file a campaign is still creating)
it reports why and tries again at every poll. Once open, it checks the file for damaged pages once; a
damaged store is reported and not followed (nothing read from it is shown). Stopping interrupts a long
rebuild (SQLite rolls the unfinished page back, and the engine redoes it next time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkbsim.errors import MkbsimError, StoreDamaged, StoreError
from mkbsim.events import EventStore
from mkbsim.lab import Lab
from mkbsim.metrics._sections import ComparisonRecord, groups

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
    #: how the views relate to a read-only store (None for a writable one)
    note: str | None = None


@dataclass(frozen=True)
class LiftUpdate:
    campaign_id: str | None
    rows: list[dict[str, Any]]
    resolved: int
    pending: int


def lift_rows(records: Sequence[ComparisonRecord]) -> list[dict[str, Any]]:
    """The report's cells per model × direction, then each direction pooled over models (model "all")."""
    if not records:
        return []
    return [*groups(records, ("model", "direction")), *groups(records, ("direction",))]


class StoreWatcher:
    def __init__(
        self,
        path: Path,
        on_state: Callable[[StoreState], object],
        on_lift: Callable[[LiftUpdate], object],
        on_lab: Callable[[Lab], object],
        *,
        poll_s: float = 0.5,
        lift_every_s: float = 2.0,
    ) -> None:
        """``on_lab`` gets the read model when it is first current, and again whenever it moves its views
        (a read-only store whose projections fell behind): readers made from an earlier one are stale."""
        self.path = path
        self._on_state = on_state
        self._on_lift = on_lift
        self._on_lab = on_lab
        self._poll_s = poll_s
        self._lift_every_s = lift_every_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        # (campaign,) the cells are for; None until the monitor names one after its first paint, which
        # the cells (a second of work on a big store) must not delay
        self._lift_for: tuple[str | None] | None = None
        self._lift_requested = False
        self._store: EventStore | None = None  # the read model's store, interrupted by ``stop``
        self._thread = threading.Thread(target=self._run, name="mkbsim-tui-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop and wait; a rebuild in progress is interrupted at its next SQL statement."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        while self._thread.is_alive() and time.monotonic() < deadline:
            store = self._store
            if store is not None:
                store.interrupt()
            self._thread.join(0.02)

    def follow_campaign(self, campaign_id: str | None) -> None:
        """Compute the paired-lift cells of this campaign (None: every campaign's plain comparisons)."""
        self._lift_for = (campaign_id,)
        self._lift_requested = True
        self._wake.set()

    def refresh(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        lab: Lab | None = None
        try:
            while not self._stop.is_set():
                lab = lab or self._open()
                if lab is not None:
                    self._follow(lab)
                    return
                self._wake.wait(self._poll_s)
                self._wake.clear()
        except StoreDamaged as exc:
            self._report(StoreState(0, 0, str(exc), synced=False))
        except MkbsimError as exc:
            if not self._stop.is_set():  # an interrupted statement is how stop() ends a long catch-up
                self._report(StoreState(0, 0, f"the store watcher stopped: {exc}", synced=False))
        finally:
            self._store = None
            if lab is not None:
                lab.close()

    def _open(self) -> Lab | None:
        """The read model, checked for damage; None (and the reason reported) while the store cannot be opened."""
        try:
            lab = Lab(self.path, catch_up=False)
        except StoreDamaged:
            raise
        except MkbsimError as exc:  # not there yet, not a store, locked: say so, try again at the next poll
            self._report(StoreState(0, 0, str(exc), synced=False))
            return None
        if not lab.store.initialised:  # a file a campaign is still creating: wait for its tables
            lab.close()
            self._report(StoreState(0, 0, synced=False, note="the file holds no event tables yet"))
            return None
        try:
            lab.verify()
        except BaseException:
            lab.close()
            raise
        self._store = lab.store
        return lab

    def _follow(self, lab: Lab) -> None:
        seen_head = -1
        published = -1  # the Lab generation the app reads through
        lift_at = 0.0
        lift_head = -1
        while not self._stop.is_set():
            head = lab.head
            if head != seen_head:
                behind = lab.pending()
                if behind >= ANNOUNCE_LAG:
                    self._report(StoreState(head, behind, synced=published >= 0))
                problem, applied = None, 0
                try:
                    applied = lab.refresh()
                    seen_head = head
                except StoreDamaged:
                    raise
                except StoreError as exc:  # locked by a long writer: say so, retry at the next poll
                    problem = str(exc)
                if lab.generation != published and problem is None:
                    self._on_lab(lab)  # before the state: screens reload on it through the new readers
                    published = lab.generation
                note = lab.freshness().note()
                self._report(StoreState(head, 0 if problem is None else behind, problem, published >= 0, applied, note))
            due = time.monotonic() - lift_at >= self._lift_every_s
            if published >= 0 and self._lift_for is not None and (
                self._lift_requested or (seen_head != lift_head and due)
            ):
                self._lift_requested = False
                (campaign,) = self._lift_for
                records, pending = lab.transfer.lift_records(campaign)
                self._on_lift(LiftUpdate(campaign, lift_rows(records), len(records), pending))
                lift_at, lift_head = time.monotonic(), seen_head
            self._wake.wait(self._poll_s)
            self._wake.clear()

    def _report(self, state: StoreState) -> None:
        if not self._stop.is_set():
            self._on_state(state)
