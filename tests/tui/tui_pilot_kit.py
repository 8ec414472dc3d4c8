"""Driving the app in tests: wait until the watcher has synced and background queries have finished."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from textual.pilot import Pilot

from tui.app import MkbsimApp


async def settle(pilot: Pilot[None], *, timeout_s: float = 10.0) -> None:
    """Until the watcher has reported the synced store and the lift cells, and no worker is running."""
    app = pilot.app
    assert isinstance(app, MkbsimApp)
    await wait_for(pilot, lambda: app.store_state.synced and app.lift is not None, timeout_s=timeout_s)
    await idle(pilot)


async def idle(pilot: Pilot[None]) -> None:
    """Until background queries (thread workers) are done and their results drawn."""
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def wait_for(pilot: Pilot[None], condition: Callable[[], bool], *, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the app did not reach the expected state in time")
        await pilot.pause(0.02)
    await asyncio.sleep(0)
