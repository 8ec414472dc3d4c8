"""Launches from several threads at once (README, "Concurrent launches"; red team rt13 F2 and FP3).

On a correctness draw the gate's bookkeeping judges a launch by what its tensors hold between its BEFORE and its
AFTER, so those windows must hold that launch's writes alone: launches of any number of threads, nested gates and
audited eager operators run one at a time under the worker's launch lock. Off the draws nothing waits (the scored
calls keep their parallelism), and an evidence call compares each thread's launch with its own copies.

Each "kernel" here is Python standing for native code, behind a counted gate (``test_provenance_bytes``). Without the
lock (main before this change) the three-thread and nested cases credit one launch's third of the output only
(outside share 2/3) and undo only it on the suppressed draw, the eager write inside a launch's window is the DSL's
(outside share 0), and an evidence call counts one launch's bytes (1/3 of the output's).
"""

from __future__ import annotations

import _thread
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from mkbsim.verifier import VerifierSession, _control, _provenance
from mkbsim.verifier._provenance import gate, page_layout, provenance_lib, provenance_vault
from mkbsim.verifier._vault import Registry
from tests.verifier.test_provenance_bytes import ROWS, Audit, N, _answer, audit

__all__ = ["audit"]  # the fixture

THREADS = 3
#: How long a kernel stays in flight: long enough for the other threads to reach their gates meanwhile.
IN_FLIGHT_S = 0.03


def _in_threads(*targets: Callable[[], object]) -> list[BaseException]:
    """Runs each target in a thread of its own, released together; returns what they raised."""
    start = threading.Barrier(len(targets))
    raised: list[BaseException] = []

    def body(target: Callable[[], object]) -> None:
        start.wait()
        try:
            target()
        except BaseException as exc:
            raised.append(exc)

    threads = [threading.Thread(target=body, args=(t,), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a launch never came back: the threads deadlocked"
    return raised


class Spans:
    """When each kernel ran: [(start, end)], to tell whether any two overlapped."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []

    def writer(self, values: torch.Tensor) -> Callable[[torch.Tensor], None]:
        def kernel(part: torch.Tensor) -> None:
            start = time.perf_counter()
            time.sleep(IN_FLIGHT_S)  # the GIL released, as a native launch's
            part.copy_(values)
            self.spans.append((start, time.perf_counter()))

        return kernel

    def overlapped(self) -> bool:
        ordered = sorted(self.spans)
        return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(ordered))


def _thirds(audit: Audit) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """An output made by an eager empty (NaN on a draw), the answer, and both split into row thirds' views."""
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    answer = _answer()
    bounds = [0, 5, 10, ROWS]
    parts = [out[a:b] for a, b in itertools.pairwise(bounds)]
    return out, answer, parts, [answer[a:b] for a, b in itertools.pairwise(bounds)]


def test_three_threads_launches_are_each_credited_and_none_overlaps(audit: Audit) -> None:
    out, answer, parts, values = _thirds(audit)
    spans = Spans()
    kernels = [spans.writer(v) for v in values]
    assert not _in_threads(*(lambda k=k, p=p: audit.launch(k, p) for k, p in zip(kernels, parts, strict=True)))
    assert not spans.overlapped()
    assert torch.equal(out, answer)
    assert audit.outside_share(out) == 0.0


def test_three_threads_suppressed_launches_are_all_undone(audit: Audit) -> None:
    audit.control.begin_call(suppress=True, audit=True)
    out, _, parts, values = _thirds(audit)
    kernels = [Spans().writer(v) for v in values]
    assert not _in_threads(*(lambda k=k, p=p: audit.launch(k, p) for k, p in zip(kernels, parts, strict=True)))
    assert out.isnan().all()  # every launch's writes taken back, not the first one's only


def test_nested_gates_in_three_threads_are_each_watched_by_their_outermost(audit: Audit) -> None:
    """A CuTe call passes a gate above the launch and the launch's own, in its thread: the lock is reentrant."""
    out, answer, parts, values = _thirds(audit)
    spans = Spans()
    kernels = [spans.writer(v) for v in values]
    inner = [audit.registry.protect(gate, _send=audit.send, _original=k, _count=True, _serial=audit.serial)
             for k in kernels]  # fmt: skip
    for kernel, hook in zip(kernels, inner, strict=True):
        audit.send((0, kernel, "launch"))
        audit.send((0, hook, "outer"))

    def outer_call(k: int) -> None:
        audit.registry.protect(gate, _send=audit.send, _original=inner[k], _count=False, _serial=audit.serial)(parts[k])

    assert not _in_threads(*(lambda k=k: outer_call(k) for k in range(THREADS)))
    assert not spans.overlapped()
    assert torch.equal(out, answer)
    assert audit.outside_share(out) == 0.0


def test_a_launch_raising_in_one_thread_holds_no_other_back(audit: Audit) -> None:
    out, answer, parts, values = _thirds(audit)
    spans = Spans()

    def failing(part: torch.Tensor) -> None:
        time.sleep(IN_FLIGHT_S)
        raise ValueError("bad shape")

    def first_fails_then_retries() -> None:
        with pytest.raises(ValueError, match="bad shape"):
            audit.launch(failing, parts[0])
        audit.launch(spans.writer(values[0]), parts[0])

    others = [lambda k=k: audit.launch(spans.writer(values[k]), parts[k]) for k in (1, 2)]
    assert not _in_threads(first_fails_then_retries, *others)
    assert torch.equal(out, answer)
    assert audit.outside_share(out) == 0.0


def test_an_eager_write_while_another_threads_launch_is_in_flight_is_eager(audit: Audit) -> None:
    """rt13 F2: a pool thread's launch takes ``out`` and leaves it alone; the calling thread writes the eager answer
    into ``out`` while it is in flight. The write waits for the launch's AFTER and is judged as eager. (Here the eager
    result is a candidate copy besides, which h3e's, derived from a DSL intermediate, was not.)"""
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    # a product of two factors, neither of which holds the answer's values (h3e's x * inv * w into ``out``)
    scale = torch.rand(ROWS, N // ROWS) + 1.0
    answer = _answer()
    factor = answer / scale
    started = threading.Event()

    def busy(o: torch.Tensor) -> None:
        started.set()
        time.sleep(5 * IN_FLIGHT_S)

    pool = threading.Thread(target=audit.launch, args=(busy, out), daemon=True)
    pool.start()
    assert started.wait(10)
    audit.eager("aten.mul.out", (factor, scale), {"out": out})
    pool.join(timeout=30)
    assert torch.equal(out, factor * scale)
    audit.registry.protect(_provenance.report_result, _send=audit.send)([out])
    (left,) = [r[3] for r in audit.control.report([N])["records"] if r[0] == "produced"]
    assert 1 not in left  # no sampled element holds what the launch left (main: every one did)


@pytest.fixture
def page() -> Iterator[_control.ControlPage]:
    control = _control.ControlPage()
    yield control
    control.close()


def _gates(control: _control.ControlPage) -> tuple[Registry, Any, Any]:
    registry = Registry()
    send = registry.open(provenance_vault, control.buf, provenance_lib(torch.device("cpu")), page_layout(), [], [], {})
    return registry, send, _thread.RLock()


@pytest.mark.parametrize("evidence", [False, True], ids=["scored", "evidence"])
def test_off_the_draws_launches_of_several_threads_run_at_once(page: _control.ControlPage, evidence: bool) -> None:
    """The kernels meet at a barrier inside their launches: they can only return if all three are in flight at
    once. An evidence call counts each launch's changed bytes against its own copies (all of the output's)."""
    registry, send, serial = _gates(page)
    meet = threading.Barrier(THREADS, timeout=10)
    out = torch.zeros(ROWS, N // ROWS)

    def kernel(part: torch.Tensor) -> None:
        meet.wait()
        part.fill_(1.0)

    send((0, kernel, "launch"))
    send((0, None, None))
    launch = registry.protect(gate, _send=send, _original=kernel, _count=True, _serial=serial)
    page.begin_call(suppress=False, audit=False, evidence=evidence)
    assert not _in_threads(*(lambda k=k: launch(out[k * 5 : (k + 1) * 5 + (k == 2)]) for k in range(THREADS)))
    registry.protect(_provenance.report_result, _send=send)([out])
    assert _control.get(page.buf, _control.LAUNCHES) == THREADS
    if evidence:  # every byte the three launches changed (1.0 over 0.0: two of a float's four)
        changed = torch.zeros_like(out).view(torch.uint8) != out.view(torch.uint8)
        assert _control.get(page.buf, _control.WORK_BYTES) == int(changed.sum())


CASES = Path(__file__).parent


def test_an_eager_answer_written_inside_a_pool_launch_is_eager_end_to_end(cpu_session: VerifierSession) -> None:
    """rt13 F2 in a worker: the bypass test itself finds the answer eager (main: dsl_share 1.0, suppressed_wrong 1.0,
    caught by the eager-work price alone)."""
    report = cpu_session.verify(CASES / "adversarial" / "pool_launch_window_launders_eager_out.py", "p36", "tirx")
    assert report.failure == "decorative_dsl", report.feedback
    (output,) = report.details["bypass"][0]["outputs"]
    assert output["dsl_share"] == 0.0 and output["suppressed_wrong"] == 0.0, output


def test_overlapping_pool_launches_are_all_the_dsls_end_to_end(cpu_session: VerifierSession) -> None:
    """rt13 FP3 in a worker, three threads (main: one third credited, two thirds left by the suppressed draw). It
    passes on a quiet host too, where its three timed launches run on both cores: the CPU clock's cross-check bounds
    the call's wall time by the CPU its threads spent at once (``_trusted.wall_bound``); before, it failed there as
    ``timing_tamper`` (CPU 3.3 ms against a reported 2.2 ms wall, tolerance 25%)."""
    report = cpu_session.verify(CASES / "evidence" / "pool_launches_overlap.py", "p36", "tirx")
    assert report.passed, report.feedback
    assert report.details["bypass"][0]["dsl_share"] == 1.0
