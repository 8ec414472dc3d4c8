"""One verification (DESIGN §5): its state, and the exchange of one call with the worker.

The phases themselves (``_phases``) read and extend this state and return a ``Failure`` or None; the
first failure ends the verification. Everything secret stays in this process: the seeds (fresh from
``random.SystemRandom`` for every draw, never stored), the reference, the anchors, which draw is
suppressed and which timed calls are re-checked.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mkbsim.catalog import Problem
from mkbsim.verifier import _blocks
from mkbsim.verifier._blocks import Block
from mkbsim.verifier._compare import OutputRef, anchor_outputs, build_refs
from mkbsim.verifier._control import ControlPage
from mkbsim.verifier._judge import Failure, tampering, worker_failed
from mkbsim.verifier._plankind import PlanKind
from mkbsim.verifier._process import WorkerFailed, WorkerHandle
from mkbsim.verifier._protocol import Protocol
from mkbsim.verifier._result import VerifierReport
from mkbsim.verifier._schema import Malformed
from mkbsim.verifier._trusted import Trusted

if TYPE_CHECKING:
    from mkbsim.verifier._session import VerifierSession

rng = random.SystemRandom()


class Shape:
    """A problem at one workload: the call signature the verifier and the worker agree on."""

    def __init__(self, problem: Problem, workload: str, device: torch.device, factor: float) -> None:
        self.problem = problem
        self.workload = workload
        self.axes = problem.smoke if workload == "smoke" else problem.workload
        self.device = device
        self.factor = factor
        self.input_names = list(problem.inputs)
        self.inplace = [self.input_names.index(n) for n in problem.inplace]
        self.out_specs: list[tuple[tuple[int, ...], torch.dtype] | None] = []
        for spec in problem.outputs.values():
            shape = problem.shape_of(spec, self.axes)
            self.out_specs.append(None if shape is None else (shape, getattr(torch, spec[1])))
        self.labels = [f"output '{n}'" for n in problem.outputs] + [f"in-place input '{n}'" for n in problem.inplace]
        self.out_dtypes: list[torch.dtype | None] = [s[1] if s else None for s in self.out_specs]
        self.out_dtypes += [getattr(torch, problem.inputs[n][1]) for n in problem.inplace]

    @property
    def n_outputs(self) -> int:
        return len(self.out_specs)

    def draw(self, seed: int | None = None) -> list[Any]:
        """Inputs from ``seed``; by default a fresh 63-bit one, forgotten at once (the timing phase keeps its
        scored calls' seeds, in this process, to draw again the inputs of the calls it re-checks)."""
        seed = rng.getrandbits(63) if seed is None else seed
        return list(self.problem.make_inputs(self.axes, seed=seed, device=str(self.device)))

    def numels(self) -> list[int]:
        """Elements of every output (scalars count one), then of every in-place input."""
        outs = [1 if s is None else int(torch.Size(s[0]).numel()) for s in self.out_specs]
        inputs = self.problem.inputs
        for j in self.inplace:
            shape = self.problem.shape_of(inputs[self.input_names[j]], self.axes)
            outs.append(int(torch.Size(shape or ()).numel()))
        return outs

    def refs(self, inputs: Sequence[Any]) -> list[OutputRef]:
        reference = self.problem.reference
        native = anchor_outputs(reference, inputs, self.n_outputs, self.inplace, promote=False)
        anchor = anchor_outputs(reference, inputs, self.n_outputs, self.inplace, promote=True)
        for spec, out, label in zip(self.out_specs, native, self.labels, strict=False):
            if spec is not None and (
                not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(spec[0]) or out.dtype != spec[1]
            ):
                raise RuntimeError(f"{self.problem.id}: the reference's {label} does not match OUTPUTS {spec}")
        return build_refs(self.labels, native, anchor, self.out_dtypes, self.factor)


@dataclass
class Draw:
    """One correctness draw: its inputs (private copies), anchors and what the submission returned."""

    number: int  # 1.. for the checked draws, 0 for the suppressed one
    inputs: list[Any]
    refs: list[OutputRef]
    reply: dict[str, Any]
    page: dict[str, Any]
    outputs: list[Any] | None = None  # outputs, then in-place inputs, as delivered

    @property
    def suppressed(self) -> bool:
        return self.number == 0


@dataclass
class Call:
    """One answer: the worker's reply, what its vaults wrote to the control page, the verifier's measures."""

    reply: dict[str, Any]
    page: dict[str, Any]
    trusted: Trusted


@dataclass
class Verification:
    session: VerifierSession
    path: Path
    source: str
    problem: Problem
    dsl: str
    protocol: Protocol
    shape: Shape
    report: VerifierReport
    enforce_static: bool = True
    phases: dict[str, float] = field(default_factory=dict)
    inline: list[str] = field(default_factory=list)
    worker: WorkerHandle | None = None
    control: ControlPage | None = None
    positions: list[torch.Tensor] = field(default_factory=list)
    draws: list[Draw] = field(default_factory=list)
    timing: dict[str, Any] = field(default_factory=dict)
    plan: PlanKind | None = None  # measured with the eager work (``_plankind``)
    _violations_seen: int = 0

    @property
    def details(self) -> dict[str, Any]:
        return self.report.details

    def timed(self, name: str, t0: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0

    # --- one call ---------------------------------------------------------------------------------------
    def call_block(self, block: Block, wheres: Sequence[str], flush: bool = False,
                   meanwhile: Callable[[], Any] | None = None) -> list[Call] | Failure:  # fmt: skip
        """Send a block of calls (``_blocks``; ``meanwhile`` runs while the worker runs them) and judge every call
        it answered as ``receive`` judges one; the calls in order, up to the first whose answer fails it (the
        worker stops there)."""
        assert self.worker is not None and self.control is not None
        where = wheres[-1] if len(set(wheres)) == 1 else "in the timed calls"
        try:
            if self.worker.chan.pending():
                return Failure("harness_tamper", "The worker sent a message on the verifier's channel that answers "
                               "no request (the harness sends one answer per call).")  # fmt: skip
            sent = _blocks.send(self.worker, self.control, block, flush)
            if meanwhile is not None:
                meanwhile()
            samples = [len(p) for p in self.positions]
            timeout = self.session.limits.call_timeout_s
            reply, wrong = _blocks.receive(self.worker, self.control, block, sent, timeout, samples)
        except WorkerFailed as exc:
            self.details["worker_output_tail"] = self.worker.output_tail()
            return worker_failed(exc, where, self.details)
        except Malformed as exc:
            return _malformed(exc, where)
        failure = self.absorb(reply, where) or tampering(reply, where)
        if failure is None and wrong:
            failure = Failure("harness_tamper", f"The worker's answer to a block of calls is not the harness's: "
                              f"{wrong}.")  # fmt: skip
        if failure is not None:
            return failure
        calls: list[Call] = []
        for call, at in zip(block.calls, wheres, strict=True):
            if call.reply is None or call.page is None or call.trusted is None:
                break
            judged = _judged(call.reply, call.page, call.trusted, at)
            if isinstance(judged, Failure):
                return judged
            calls.append(judged)
        return calls

    def absorb(self, reply: dict[str, Any], where: str) -> Failure | None:
        """Violations the guards recorded (in the control page, not the reply) since the last answer."""
        assert self.control is not None
        try:
            violations, inline = self.control.guard_records()
        except Malformed as exc:
            return _malformed(exc, where)
        self.inline += [s for s in inline if s not in self.inline]
        new = violations[self._violations_seen :]
        self._violations_seen = len(violations)
        if new:
            self.report.forbidden += new
            return Failure("forbidden_api", f"Forbidden APIs used {where}:\n" + "\n".join(f"- {v}" for v in new))
        return self.strays(where)

    def strays(self, where: str) -> Failure | None:
        """Processes left running once an answer came (DESIGN §5, background work): whatever started them (a
        compiler the environment redirected, a detached daemon), they would work unaudited; killed now."""
        found = self.worker.strays() if self.worker is not None else []
        if not found:
            return None
        self.details.setdefault("stray_processes", []).extend(found)
        return Failure(
            "background_work",
            f"Processes were still running {where} ({'; '.join(found[:3])}); a submission may start no process "
            "that outlives its call (only the DSL's own build runs compilers, and waits for them).",
        )

    # --- the driver --------------------------------------------------------------------------------------------
    def run(self, phases: Sequence[tuple[str, Any]]) -> VerifierReport:
        t0 = time.perf_counter()
        self.details["started_at"] = time.time()  # when, on the host's clock (spans ``overhead.total_s``)
        try:
            self.report.env = self.session.env()
            for name, phase in phases:
                failure = phase(self)
                self.details.setdefault("phases_run", []).append(name)
                if failure is not None:
                    self.report.failure, self.report.feedback = failure.code, failure.feedback
                    break
        except Exception as exc:  # the verifier's own failure: never blamed on the submission
            self.report.failure = "infra_error"
            self.report.feedback = (
                f"The verifier failed ({type(exc).__name__}: {exc}); this is not your submission's fault."
            )
            self.details["infra_traceback"] = traceback.format_exc()
        finally:
            self.close_worker()
            self.report.inline_cuda = self.report.inline_cuda or bool(self.inline)
            self.details["inline_cuda_sites"] = sorted(set(self.inline))
            self.phases["total_s"] = time.perf_counter() - t0
            self.details["overhead"] = self.phases
        self.report.passed = self.report.failure is None
        if not self.report.passed:
            self.report.runtime_ms = self.report.speedup = None
        return self.report

    def close_worker(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        if self.control is not None:
            self.control.close()
            self.control = None


def _judged(reply: dict[str, Any], page: dict[str, Any], trusted: Trusted, where: str) -> Call | Failure:
    """One call's answer and control-page record, checked for what only the harness's own forms hold."""
    failure = tampering(reply, where)
    if failure is None and reply.get("ran") is False and reply.get("modes"):
        failure = Failure("lazy_output", f"A torch function or dispatch mode was active before run() {where} "
                          "(entered between calls); enter and exit modes within run().")  # fmt: skip
    # a call that raised may have stopped the timer's vault too (a CUDA fault surfacing in its
    # synchronisation): its error is the answer, judged as the submission's
    if failure is None and reply.get("ok") and not page["acked"]:
        failure = Failure("harness_tamper", f"The worker's timer did not time the call {where}.")
    if failure is None and reply.get("ok") and page["dsl_ms"] is None:
        failure = Failure("harness_tamper", f"The worker's launch gate did not time the DSL launches {where}.")
    return failure or Call(reply, page, trusted)


def _malformed(exc: Malformed, where: str) -> Failure:
    """A record of the control page not of the vaults' form: written by the submission (``_schema``)."""
    return Failure("harness_tamper", f"The worker's records in the verifier's control page {where} are not the "
                   f"harness's: {exc}.")  # fmt: skip
