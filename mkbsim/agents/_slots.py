"""Verifier slots: at most K verifications at once across all the attempts of a campaign.

``ScoringSlots`` is the semaphore: a scoring takes a free slot number (0..K-1) and gives it back
when its verdict is in. ``limit_scoring`` wraps a campaign's scorer factory with it. A factory
that places work by slot (``SlottedScorers``: ``VerifierSlots`` here, one verifier process per
slot) is asked for the slot's own scorer, so slot i's process always measures on GPU i % n.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mkbsim.agents._scoring import Scorer, ScorerFactory, SubmissionIndex, Verdict

if TYPE_CHECKING:
    from mkbsim.catalog import Problem
    from mkbsim.verifier import Protocol as VerifierProtocol


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (empty without CUDA)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:  # keep the operator's selection (indices or UUIDs), in its order
        return [d.strip() for d in given.split(",") if d.strip()][:count]
    return [str(i) for i in range(count)]


def default_verifier_slots(backend: str) -> int:
    """One slot per visible GPU on cuda (a GPU measures one kernel at a time, or timings interfere);
    half the cores on cpu (each verification runs its reference and candidate with a few threads)."""
    if backend == "cuda":
        return max(1, len(visible_gpus()))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // 2)


class ScoringSlots:
    """``count`` slot numbers; ``hold()`` blocks until one is free."""

    def __init__(self, count: int) -> None:
        if count <= 0:
            raise ValueError(f"verifier slots must be positive, got {count}")
        self.count = count
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for slot in range(count):
            self._free.put(slot)

    @contextmanager
    def hold(self) -> Iterator[int]:
        slot = self._free.get()
        try:
            yield slot
        finally:
            self._free.put(slot)


@runtime_checkable
class SlottedScorers(Protocol):
    """A scorer factory whose work can be placed on one slot (a process, a GPU)."""

    def for_slot(self, slot: int) -> ScorerFactory: ...


def limit_scoring(factory: ScorerFactory, slots: ScoringSlots) -> ScorerFactory:
    """``factory``'s scorers, each scoring only while it holds one of ``slots``."""

    def make(problem: Problem, dsl: str) -> Scorer:
        return _LimitedScorer(factory, slots, problem, dsl)

    return make


@dataclass(frozen=True)
class _LimitedScorer:
    factory: ScorerFactory
    slots: ScoringSlots
    problem: Problem
    dsl: str

    def score(self, kernel_path: Path, *, attempt_id: str, submission: SubmissionIndex) -> Verdict:
        with self.slots.hold() as slot:
            place = self.factory.for_slot(slot) if isinstance(self.factory, SlottedScorers) else self.factory
            return place(self.problem, self.dsl).score(kernel_path, attempt_id=attempt_id, submission=submission)


class VerifierSlots:
    """A slotted ``ScorerFactory``: one verifier process per slot (``mkbsim.verifier._slot``), each
    with its own warm session; on cuda slot i sees only GPU i % n (its CUDA_VISIBLE_DEVICES).

    Processes start on first use (a campaign stopped by its cost cap starts none) and restart after
    a crash (the verification in flight then fails as infrastructure). Used outside ``limit_scoring``
    every scorer goes to slot 0. Close it when the campaign ends.
    """

    def __init__(self, backend: str | None, protocol: str | VerifierProtocol, slots: int | None = None) -> None:
        from mkbsim.verifier import default_backend

        self.backend = backend or default_backend()
        if self.backend not in ("cuda", "cpu"):
            raise ValueError(f"unknown backend {self.backend!r}; use cuda or cpu")
        self.gpus = visible_gpus() if self.backend == "cuda" else []
        if self.backend == "cuda" and not self.gpus:
            raise ValueError("the cuda backend needs an NVIDIA GPU; none is visible")
        self.protocol = protocol
        self.count = slots or default_verifier_slots(self.backend)
        self._procs: dict[int, _SlotProcess] = {}
        self._slot_locks: dict[int, threading.Lock] = {}
        self._lock = threading.Lock()

    def device_of(self, slot: int) -> str | None:
        """The CUDA_VISIBLE_DEVICES of ``slot``'s process (None on cpu)."""
        return self.gpus[slot % len(self.gpus)] if self.gpus else None

    def for_slot(self, slot: int) -> ScorerFactory:
        def make(problem: Problem, dsl: str) -> Scorer:
            return _SlotScorer(self, slot, problem.id, dsl)

        return make

    def __call__(self, problem: Problem, dsl: str) -> Scorer:
        return _SlotScorer(self, 0, problem.id, dsl)

    def process(self, slot: int) -> _SlotProcess:
        with self._lock:
            slot_lock = self._slot_locks.setdefault(slot, threading.Lock())
        with slot_lock:  # per slot: starting one slot's process (seconds of imports) does not hold up the others
            proc = self._procs.get(slot)
            if proc is None or not proc.alive():
                if proc is not None:
                    proc.close()
                proc = _SlotProcess(self.backend, self.device_of(slot))
                with self._lock:
                    self._procs[slot] = proc
            return proc

    def close(self) -> None:
        with self._lock:
            for proc in self._procs.values():
                proc.close()
            self._procs.clear()

    def __enter__(self) -> VerifierSlots:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class _SlotScorer:
    owner: VerifierSlots
    slot: int
    problem: str
    dsl: str

    def score(self, kernel_path: Path, *, attempt_id: str, submission: SubmissionIndex) -> Verdict:
        request = {"kernel": str(kernel_path), "problem": self.problem, "dsl": self.dsl,
                   "protocol": self.owner.protocol, "attempt_id": attempt_id, "submission": submission}  # fmt: skip
        return verdict_of(self.owner.process(self.slot).call(request), f"verifier slot {self.slot}")


def verdict_of(reply: tuple[str, Any, str], where: str) -> Verdict:
    """A verifier slot's reply (``mkbsim.verifier._slot.handle``) as a verdict; raises when the verifier
    itself failed (the attempt records that as infrastructure)."""
    status, payload, text = reply
    if status != "ok":
        raise RuntimeError(f"{where}: {text}")
    return Verdict(payload, text)


class _SlotProcess:
    """One slot's verifier process; ``call`` is serialized (the slot semaphore makes that the rule anyway)."""

    def __init__(self, backend: str, device: str | None) -> None:
        from mkbsim.verifier._slot import read_frame

        env = dict(os.environ)
        # a cpu slot must not touch a GPU; a cuda slot sees exactly its own
        env["CUDA_VISIBLE_DEVICES"] = device if device is not None else ""
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mkbsim.verifier._slot", backend], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, start_new_session=True,  # Ctrl-C is the campaign's to handle
        )  # fmt: skip
        self._lock = threading.Lock()
        assert self._proc.stdout is not None
        try:
            status, _, why = read_frame(self._proc.stdout)
        except EOFError:
            self.close()
            raise RuntimeError("the verifier slot process did not start (see its stderr)") from None
        if status != "ready":
            self.close()
            raise RuntimeError(f"the verifier slot process failed to start: {why}")

    def alive(self) -> bool:
        return self._proc.poll() is None

    def call(self, request: dict[str, Any]) -> tuple[str, Any, str]:
        from mkbsim.verifier._slot import read_frame, write_frame

        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            try:
                write_frame(self._proc.stdin, request)
                reply: tuple[str, Any, str] = read_frame(self._proc.stdout)
            except (EOFError, BrokenPipeError) as exc:
                raise RuntimeError(f"the verifier slot process died (exit {self._proc.poll()})") from exc
        return reply

    def close(self) -> None:
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
