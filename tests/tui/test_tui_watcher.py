"""The store watcher's thread: stopping it while it closes the read model."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mkbsim.events import EventStore
from tui.data.watcher import StoreWatcher


def test_stopping_the_watcher_never_interrupts_a_closed_store(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # stop() interrupts the watcher's store while the thread, told to stop, closes it: under load the two met
    # (sqlite3.ProgrammingError: Cannot operate on a closed database). A slow interrupt widens that window.
    original = EventStore.interrupt

    def slow_interrupt(self: EventStore) -> None:
        time.sleep(0.05)
        original(self)

    monkeypatch.setattr(EventStore, "interrupt", slow_interrupt)
    for _ in range(3):
        watcher = StoreWatcher(store, lambda state: None, lambda update: None, lambda lab: None, poll_s=0.01)
        watcher.start()
        deadline = time.monotonic() + 10
        while watcher._store is None and time.monotonic() < deadline:
            time.sleep(0.01)
        watcher.stop()
        assert not watcher._thread.is_alive()
