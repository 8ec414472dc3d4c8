"""The verifier's wait for a block's answer: the call's time limit is the submission's; the gate vault's work on a
watched call extends it, never beyond ``VAULT_GRACE`` limits of the call's start (``WorkerHandle.wait``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from mkbsim.verifier import _process
from mkbsim.verifier._process import WorkerFailed, WorkerHandle

LIMIT_S = 0.2


class _Silent:
    """A channel on which no answer ever comes."""

    def wait_readable(self, timeout: float) -> bool:
        time.sleep(timeout)
        return False


class _Worker(WorkerHandle):
    def __init__(self) -> None:
        self.chan, self.memory_bytes, self.pid, self.answer_key = _Silent(), 0, -1, None  # type: ignore[assignment]
        self.killed = False

    def kill(self) -> None:
        self.killed = True


def _waited(progress: Callable[[], tuple[int, int]] | None) -> tuple[float, str]:
    worker = _Worker()
    start = time.monotonic()
    with pytest.raises(WorkerFailed) as failed:
        worker.wait(LIMIT_S, progress)
    assert failed.value.kind == "timeout" and worker.killed
    return time.monotonic() - start, str(failed.value)


def _counter(step: Callable[[int], tuple[int, int]]) -> Callable[[], tuple[int, int]]:
    ticks = [0]

    def progress() -> tuple[int, int]:
        ticks[0] += 1
        return step(ticks[0])

    return progress


def test_a_call_with_no_progress_has_its_limit() -> None:
    waited, message = _waited(lambda: (3, 7))
    assert LIMIT_S <= waited < LIMIT_S * 3 and f"within {LIMIT_S:g} s" in message


def test_the_vault_s_work_extends_the_wait_up_to_its_grace_only() -> None:
    # the vault works without end (a submission handing it launch after launch): the wait ends at the ceiling
    waited, message = _waited(_counter(lambda tick: (1, tick)))
    grace = LIMIT_S * _process.VAULT_GRACE
    assert grace <= waited < grace + LIMIT_S * 3 and "of a call's start" in message


def test_a_call_that_starts_renews_the_grace() -> None:
    # calls start one after another (each with vault work between): every start renews the ceiling, so the wait
    # outlives one grace; it ends once calls stop starting and the vault's work has had its grace again
    starts = int(LIMIT_S * _process.VAULT_GRACE * 1.5 / _process._WATCH_INTERVAL_S)
    waited, _ = _waited(_counter(lambda tick: (min(tick, starts), tick)))
    assert waited > LIMIT_S * _process.VAULT_GRACE * 1.5
