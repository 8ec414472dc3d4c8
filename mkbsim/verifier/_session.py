"""The verifier's side of a verification (DESIGN §5): draws, anchors, timing, verdict.

Everything secret stays in this process: the seeds (fresh from `random.SystemRandom` for every
draw, never stored), the reference, the anchors and the choice of re-checked timed calls. The
submission runs in a worker forked from the zygote and sees only the inputs of the current call.
"""

from __future__ import annotations

import math
import os
import random
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch

from mkbsim.catalog import Catalog, Problem, load_catalog
from mkbsim.verifier._arena import Arena
from mkbsim.verifier._compare import Check, OutputRef, anchor_outputs, build_refs, compare
from mkbsim.verifier._devices import profile_for, speed_of_light
from mkbsim.verifier._env import capture
from mkbsim.verifier._process import Exchange, WorkerFailed, WorkerHandle, Zygote
from mkbsim.verifier._protocol import Limits, Protocol, resolve_protocol
from mkbsim.verifier._result import VerifierReport
from mkbsim.verifier._rules import DSLS
from mkbsim.verifier._static import scan_source
from mkbsim.verifier._timing import Calibration, cross_check, median, overheads

BACKENDS = ("cpu", "cuda")
WORKLOADS = ("smoke", "production")
_PRELOAD = {
    "cpu": ["torch", "numpy", "tvm", "tvm.script.tirx", "tvm_ffi"],
    "cuda": ["torch", "numpy", "tvm", "tvm.script.tirx", "tvm_ffi", "cutlass", "cutlass.cute",
             "cutlass.torch", "cutlass.base_dsl.jit_executor", "cutlass.cutlass_dsl.tvm_ffi_provider",
             "cutlass._mlir.dialects.llvm"],
}  # fmt: skip
#: Device work still running this long after the measured region ends means a side stream...
_PENDING_LIMIT_MS = 0.1
#: ...when it happens on this share of a verification's calls (and at least on _PENDING_CALLS). The wait is
#: read on the host clock, so honest calls overrun now and then: an honest 12 us CuTe DSL kernel on the H200
#: overran by 0.2-1.1 ms on 3 of 65 calls in every verification but a session's first. Side-stream work shows
#: on every call; below the share, a timed call that overran is charged its overrun (``timing``).
_PENDING_SHARE = 0.25
_PENDING_CALLS = 3


def pending_limit(protocol: Protocol) -> int:
    """Overrunning calls that make a verification's verdict ``background_work``."""
    calls = protocol.correctness_draws + protocol.warmup_calls + protocol.timed_calls
    return max(_PENDING_CALLS, math.ceil(_PENDING_SHARE * calls))
_DSL_ERROR_MODULES = ("tvm", "tvm_ffi", "cutlass")

_rng = random.SystemRandom()


def default_backend() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_workload(backend: str) -> str:
    return "production" if backend == "cuda" else "smoke"


class _Verdict(Exception):
    """Stops a verification at the first broken rule."""

    def __init__(self, failure: str, feedback: str) -> None:
        super().__init__(feedback)
        self.failure = failure
        self.feedback = feedback


@dataclass
class EagerBaseline:
    """The reference timed like a submission, in its own (trusted) worker."""

    median_ms: float
    timed_ms: list[float]
    round_trip_ms: list[float]
    cpu_ms: list[float | None]
    measured_s: float

    @property
    def calibration(self) -> Calibration:
        """The trusted harness's overheads, against which a submission's worker is checked."""
        cpu = overheads(self.cpu_ms, self.timed_ms)
        return Calibration(
            wall_ms=median([rt - t for rt, t in zip(self.round_trip_ms, self.timed_ms, strict=True)]),
            cpu_ms=median(cpu) if cpu else None,
        )

    def as_dict(self, cached: bool) -> dict[str, Any]:
        return {
            "median_ms": self.median_ms,
            "timed_ms": self.timed_ms,
            "round_trip_ms": self.round_trip_ms,
            "cpu_ms": self.cpu_ms,
            "measured_s": self.measured_s,
            "cached": cached,
        }


class _Shape:
    """A problem at one workload: the call signature the verifier and the worker agree on."""

    def __init__(self, problem: Problem, workload: str, device: torch.device, factor: float) -> None:
        self.problem = problem
        self.workload = workload
        self.axes = problem.smoke if workload == "smoke" else problem.workload
        self.device = device
        self.factor = factor
        input_names = list(problem.inputs)
        self.inplace = [input_names.index(n) for n in problem.inplace]
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

    def draw(self) -> list[Any]:
        """Fresh inputs from a fresh 63-bit seed; the seed is forgotten at once."""
        return list(self.problem.make_inputs(self.axes, seed=_rng.getrandbits(63), device=str(self.device)))

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


class VerifierSession:
    """Verifies submissions on one backend, reusing a warm zygote and the eager baselines.

    The eager baseline of a (problem, workload, protocol) is measured once per session: it does not
    depend on the submission, and its inputs are fresh draws like everything else. Anchors are
    never reused: each draw has its own seed, so a submission cannot carry answers from one
    verification to the next.
    """

    def __init__(
        self,
        backend: str | None = None,
        *,
        limits: Limits | None = None,
        preload: Sequence[str] | None = None,
    ) -> None:
        self.backend = backend or default_backend()
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; use one of {BACKENDS}")
        if self.backend == "cuda" and not torch.cuda.is_available():
            raise ValueError("the cuda backend needs an NVIDIA GPU; none is visible")
        self.device = (
            torch.device("cuda", torch.cuda.current_device()) if self.backend == "cuda" else torch.device("cpu")
        )
        self.limits = limits or Limits.for_backend(self.backend)
        env_preload = os.environ.get("MKBSIM_VERIFIER_PRELOAD")
        self.preload = list(preload) if preload is not None else (
            env_preload.split(",") if env_preload is not None else _PRELOAD[self.backend]
        )  # fmt: skip
        self._zygote: Zygote | None = None
        self._eager: dict[tuple[str, str, str], EagerBaseline] = {}
        self._env: dict[str, Any] | None = None
        self._catalog: Catalog | None = None

    # --- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> VerifierSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def zygote(self) -> Zygote:
        if self._zygote is None or not self._zygote.alive():
            # A preloaded library that initialises CUDA (TVM's FFI does on a GPU machine) leaves
            # forked workers unable to use the GPU: fall back to ever smaller preload lists.
            lists = [self.preload, [m for m in self.preload if not m.startswith("cutlass")]]
            lists.append([m for m in self.preload if m in ("torch", "numpy")])
            for preload in dict.fromkeys(tuple(x) for x in lists):
                zygote = Zygote(list(preload), self.limits.cpu_threads)
                if not zygote.ready.get("cuda_initialized"):
                    self.preload, self._zygote = list(preload), zygote
                    return zygote
                zygote.close()
            self._zygote = None
            raise RuntimeError(f"preloading {self.preload} initialises CUDA; set MKBSIM_VERIFIER_PRELOAD")
        return self._zygote

    def env(self) -> dict[str, Any]:
        if self._env is None:
            self._env = capture(self.device)
        return self._env

    def problem(self, problem: str | Problem) -> Problem:
        if isinstance(problem, Problem):
            return problem
        if self._catalog is None:
            self._catalog = load_catalog()
        return self._catalog.get(problem)

    # --- workers -------------------------------------------------------------------------------------
    def start_worker(self, role: str, path: Path, dsl: str, protocol: Protocol) -> tuple[WorkerHandle, dict[str, Any]]:
        """Fork a worker, send its setup, and return it with its first answer (the import)."""
        worker = self.zygote().spawn()
        worker.memory_bytes = self.limits.memory_bytes
        here = Path(__file__).resolve().parent
        setup = {
            "role": role,
            "path": str(path),
            "dsl": dsl,
            "device": str(self.device),
            "sync": protocol.sync,
            "cache_flush": protocol.cache_flush,
            "memory_bytes": self.limits.memory_bytes,
            "file_size_bytes": self.limits.file_size_bytes,
            "cpu_threads": self.limits.cpu_threads,
            "off_limits": [str(here.parent), str(_problems_dir())],
            "workdir": worker.workdir,
        }
        try:
            worker.chan.send(setup)
            hello = worker.wait(self.limits.import_timeout_s)
        except WorkerFailed:
            worker.close()
            raise
        return worker, hello

    def eager_baseline(self, problem: Problem, workload: str, protocol: Protocol) -> tuple[EagerBaseline, bool]:
        """The reference's median end-to-end time under ``protocol`` (cached per session)."""
        key = (problem.id, workload, protocol.hash)
        if key in self._eager:
            return self._eager[key], True
        t0 = time.perf_counter()
        shape = _Shape(problem, workload, self.device, protocol.allowance_factor)
        worker, hello = self.start_worker("reference", problem.path, "tirx", protocol)
        try:
            if not hello.get("ok"):
                raise RuntimeError(f"the reference of {problem.id} failed to import: {hello.get('error')}")
            timed: list[float] = []
            trips: list[float] = []
            cpus: list[float | None] = []
            held: list[Arena] = []
            kept_bytes = 0
            reusable: Arena | None = None
            for i in range(protocol.warmup_calls + protocol.timed_calls):
                arena, reuse = _timed_arena(reusable, shape.draw(), shape, protocol)
                keep = protocol.unique_input_buffers and kept_bytes + arena.nbytes <= self.limits.unique_buffer_bytes
                if keep:
                    kept_bytes += arena.nbytes
                    held.append(arena)
                else:
                    reusable = arena
                ex = _send_call(worker, arena, protocol, self.limits, keep=keep, reuse=reuse)
                if not ex.reply.get("ok"):
                    raise RuntimeError(f"the reference of {problem.id} failed: {ex.reply.get('error')}")
                if i >= protocol.warmup_calls:
                    timed.append(float(ex.reply["ms"]))
                    trips.append(ex.round_trip_ms)
                    cpus.append(ex.cpu_ms)
        finally:
            worker.close()
        baseline = EagerBaseline(
            median_ms=median(timed),
            timed_ms=timed,
            round_trip_ms=trips,
            cpu_ms=cpus,
            measured_s=time.perf_counter() - t0,
        )
        self._eager[key] = baseline
        return baseline, False

    # --- the verification ------------------------------------------------------------------------------
    def verify(
        self,
        submission: str | Path,
        problem: str | Problem,
        dsl: str,
        *,
        protocol: str | Protocol = "paper",
        workload: str | None = None,
        static_scan: bool = True,
    ) -> VerifierReport:
        """Verify one submission file against ``problem`` (an id, a name or a loaded Problem).

        ``static_scan=False`` skips the source scan's verdict (its findings are still recorded); it
        exists to test that the runtime guards alone catch what the scan would have."""
        if dsl not in DSLS:
            raise ValueError(f"unknown DSL {dsl!r}; use one of {DSLS}")
        if dsl == "cutedsl" and self.backend != "cuda":
            raise ValueError("CuTe DSL kernels run only on the cuda backend")
        workload = workload or default_workload(self.backend)
        if workload not in WORKLOADS:
            raise ValueError(f"unknown workload {workload!r}; use one of {WORKLOADS}")
        path = Path(submission).resolve()
        source = path.read_text()
        verification = _Verification(
            self, path, source, self.problem(problem), dsl, resolve_protocol(protocol), workload
        )
        return verification.run(static_scan)


def _problems_dir() -> Path:
    from mkbsim.catalog import problems_root

    return problems_root()


def _call_message(
    arena: Arena, *, suppress: bool, flush: bool, keep: bool, reuse: bool = False
) -> tuple[dict[str, Any], list[int]]:
    desc, fds = arena.descriptor(reuse=reuse)
    return {"op": "call", "arena": desc, "suppress": suppress, "flush": flush, "keep": keep}, fds


def _timed_arena(reusable: Arena | None, inputs: list[Any], shape: _Shape, protocol: Protocol) -> tuple[Arena, bool]:
    """The arena of one warmup or timed call, and whether the worker is to reuse its mapping.

    Without `unique_input_buffers` (paper), the previous call's arena is refilled with the new draw:
    the worker maps nothing between timed calls, as a plain timing loop allocates nothing between
    them (mapping fresh memory before each call cost a tiny CPU kernel ~20 µs per call inside the
    timed region: benchmarks/verifier_overhead.py). The draw is still fresh; the verifier keeps its
    private copies and reads the outputs back before it refills. Hardened keeps distinct buffers.
    """
    if reusable is not None and not protocol.unique_input_buffers and reusable.refill(inputs):
        return reusable, True
    return Arena(inputs, shape.out_specs, shape.device), False


def _send_call(
    worker: WorkerHandle, arena: Arena, protocol: Protocol, limits: Limits, *, keep: bool, reuse: bool = False
) -> Exchange:
    """One warmup or timed call; the verifier stays idle while it runs."""
    if arena.device.type == "cuda":
        torch.cuda.synchronize(arena.device)
    msg, fds = _call_message(arena, suppress=False, flush=protocol.cache_flush, keep=keep, reuse=reuse)
    try:
        return worker.request(msg, fds, timeout=limits.call_timeout_s)
    finally:
        arena.release_fd()


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _error_text(error: dict[str, Any]) -> str:
    text = f"{error.get('type', 'Exception')}: {error.get('message', '')}".strip()
    frames = error.get("frames") or []
    if frames:
        lineno, func, code = frames[-1]
        text += f"\n  at line {lineno} in {func}: {code}"
    return text


class _Verification:
    def __init__(
        self,
        session: VerifierSession,
        path: Path,
        source: str,
        problem: Problem,
        dsl: str,
        protocol: Protocol,
        workload: str,
    ) -> None:
        self.s = session
        self.path = path
        self.source = source
        self.problem = problem
        self.dsl = dsl
        self.protocol = protocol
        self.shape = _Shape(problem, workload, session.device, protocol.allowance_factor)
        self.report = VerifierReport(
            problem=problem.id, problem_name=problem.name, dsl=dsl, backend=session.backend,
            protocol=protocol.name, protocol_hash=protocol.hash, workload=workload,
        )  # fmt: skip
        self.details = self.report.details
        self.details.update(
            shape=dict(self.shape.axes),
            protocol_params=protocol.params(),
            limits={k: v for k, v in vars(session.limits).items()},
            draws=[],
        )
        self.phases: dict[str, float] = {}
        self.pending_overruns: list[float] = []
        self.inline: list[str] = []
        self.worker: WorkerHandle | None = None

    # --- driver ------------------------------------------------------------------------------------------
    def run(self, static_scan: bool) -> VerifierReport:
        t0 = time.perf_counter()
        self.details["started_at"] = time.time()  # when, on the host's clock (spans ``overhead.total_s``)
        try:
            self.report.env = self.s.env()
            self.static(static_scan)
            self.spawn_and_import()
            self.correctness()
            timing = self.timing()
            self.close_worker()
            self.finish(timing)
        except _Verdict as verdict:
            self.report.failure = verdict.failure
            self.report.feedback = verdict.feedback
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
        return self.report

    def close_worker(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def phase(self, name: str, t0: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0

    # --- static scan and import --------------------------------------------------------------------------
    def static(self, enforce: bool) -> None:
        scan = scan_source(self.source, self.dsl, str(self.path))
        if scan.syntax_error:
            raise _Verdict("compile_error", f"The file does not parse: {scan.syntax_error}.")
        self.inline += [f.text() for f in scan.of("inline_cuda")]
        self.details["static"] = {
            kind: [f.text() for f in scan.of(kind)] for kind in ("forbidden", "timing_tamper", "inline_cuda")
        }
        if not enforce:
            return
        tamper = scan.of("timing_tamper")
        if tamper:
            self.report.forbidden = [f.text() for f in tamper]
            raise _Verdict(
                "timing_tamper", "Timing functions must not be replaced:\n" + "\n".join(f"- {f.text()}" for f in tamper)
            )
        forbidden = scan.of("forbidden")
        if forbidden:
            self.report.forbidden = [f.text() for f in forbidden]
            raise _Verdict(
                "forbidden_api",
                "Forbidden APIs found by the static scan:\n" + "\n".join(f"- {f.text()}" for f in forbidden),
            )

    def spawn_and_import(self) -> None:
        t0 = time.perf_counter()
        self.s.zygote()  # started once per session; its cost is its own phase
        self.phase("zygote_start_s", t0)
        t0 = time.perf_counter()
        try:
            self.worker, hello = self.s.start_worker("candidate", self.path, self.dsl, self.protocol)
        except WorkerFailed as exc:
            self.worker_failed(exc, "while importing the file")
        self.phase("spawn_import_s", t0)
        self.details["import_s"] = hello.get("import_s")
        self.absorb(hello, "while importing the file")
        if not hello.get("ok"):
            error = hello.get("error") or {}
            if error.get("memory"):
                raise _Verdict("memory", f"The import ran out of memory: {_error_text(error)}")
            tail = self.worker.output_tail() if self.worker else ""
            more = f"\n  output:\n{tail}" if tail.strip() else ""
            raise _Verdict("compile_error", f"Importing the file failed: {_error_text(error)}{more}")

    # --- answers -------------------------------------------------------------------------------------------
    def worker_failed(self, exc: WorkerFailed, where: str) -> NoReturn:
        if exc.kind == "timeout":
            raise _Verdict("timeout", f"No answer {where}: {exc} (the process was killed).") from None
        if exc.kind == "memory":
            raise _Verdict("memory", f"Memory limit exceeded {where}: {exc} (the process was killed).") from None
        if exc.kind == "crash":
            self.details["crash_status"] = exc.status
            raise _Verdict("crash", f"The process died {where}: {exc}.") from None
        raise _Verdict("harness_tamper", f"The worker's answer {where} was not well-formed: {exc}.") from None

    def absorb(self, reply: dict[str, Any], where: str) -> None:
        """Rules every answer is checked against: forbidden calls, tampering."""
        self.inline += [str(x) for x in reply.get("inline_cuda") or []]
        violations = [str(v) for v in reply.get("violations") or []]
        if violations:
            self.report.forbidden += violations
            raise _Verdict("forbidden_api", f"Forbidden APIs used {where}:\n" + "\n".join(f"- {v}" for v in violations))
        timers = [str(t) for t in reply.get("timer_tampered") or []]
        if timers:
            raise _Verdict("timing_tamper", f"Timing functions were replaced {where}: {', '.join(timers)}.")
        hooks = [str(t) for t in reply.get("tampered") or []]
        if hooks:
            raise _Verdict("harness_tamper", f"The verifier's hooks were replaced {where}: {', '.join(hooks)}.")

    def call_error(self, reply: dict[str, Any], where: str, first: bool) -> _Verdict:
        error = reply.get("error") or {}
        if error.get("memory"):
            return _Verdict("memory", f"run() ran out of memory {where}: {_error_text(error)}")
        if first and str(error.get("type", "")).startswith(_DSL_ERROR_MODULES):
            return _Verdict("compile_error", f"The DSL failed {where} (first call): {_error_text(error)}")
        return _Verdict("exception", f"run() raised {where}: {_error_text(error)}")

    def structure(self, reply: dict[str, Any], where: str) -> None:
        """Container and tensor types, laziness, device, shape and dtype of every output."""
        if reply.get("modes"):
            raise _Verdict(
                "lazy_output",
                f"A torch function or dispatch mode was still active after run() returned {where}; "
                "exit every mode before returning.",
            )
        facts = reply.get("structure") or {}
        expected = "single" if self.shape.n_outputs == 1 else "tuple"
        items = facts.get("items") or []
        if facts.get("container") != expected or len(items) != self.shape.n_outputs:
            want = "one tensor" if expected == "single" else f"a tuple of {self.shape.n_outputs} outputs"
            raise _Verdict(
                "type_mismatch", f"run() returned {facts.get('container')} {where}; the reference returns {want}."
            )
        for label, fact, spec in zip(self.shape.labels, items, self.shape.out_specs, strict=False):
            kind = fact.get("kind")
            if spec is None:
                if kind != "scalar":
                    raise _Verdict(
                        "type_mismatch", f"{label} {where} is a {fact.get('type')}, expected a Python number."
                    )
                continue
            if kind == "subclass":
                raise _Verdict(
                    "lazy_output",
                    f"{label} {where} is a tensor subclass ({fact.get('type')}); return a plain torch.Tensor.",
                )
            if kind != "tensor":
                raise _Verdict("type_mismatch", f"{label} {where} is a {fact.get('type')}, expected a torch.Tensor.")
            if fact.get("lazy"):
                raise _Verdict("lazy_output", f"{label} {where} is {fact['lazy']}; return a materialized tensor.")
            if fact.get("device") != self.s.device.type:
                raise _Verdict(
                    "device_mismatch", f"{label} {where} is on {fact.get('device')}, expected {self.s.device.type}."
                )
            shape, dtype = spec
            if tuple(fact.get("shape") or ()) != tuple(shape):
                raise _Verdict(
                    "shape_mismatch",
                    f"{label} {where} has shape {tuple(fact.get('shape') or ())}, expected {tuple(shape)}.",
                )
            if fact.get("dtype") != str(dtype).removeprefix("torch."):
                raise _Verdict(
                    "dtype_mismatch",
                    f"{label} {where} has dtype {fact.get('dtype')}, expected {str(dtype).removeprefix('torch.')}.",
                )
        if reply.get("alias"):
            out_i, in_j = reply["alias"][0]
            name = list(self.problem.inputs)[in_j] if in_j < len(self.problem.inputs) else in_j
            raise _Verdict(
                "output_alias",
                f"{self.shape.labels[out_i]} {where} shares memory with input '{name}'; return a new tensor.",
            )
        background = reply.get("background") or []
        pending = float(reply.get("pending_ms") or 0.0)
        if pending > _PENDING_LIMIT_MS:
            self.pending_overruns.append(pending)
            self.details["pending_overruns_ms"] = self.pending_overruns
        if background or len(self.pending_overruns) >= pending_limit(self.protocol):
            what = "; ".join(background) or (
                f"device work ran past the end of {len(self.pending_overruns)} calls, up to "
                f"{max(self.pending_overruns):.3f} ms"
            )
            raise _Verdict(
                "background_work",
                f"Work was still running after run() returned {where} ({what}); finish all work before returning.",
            )
        if not reply.get("copied"):
            raise _Verdict("harness_tamper", f"The worker did not deliver the outputs {where}.")

    def mutation(self, arena: Arena, private: Sequence[Any], where: str) -> None:
        names = list(self.problem.inputs)
        for j, (shared, mine) in enumerate(zip(arena.args, private, strict=True)):
            if j in self.shape.inplace or not isinstance(mine, torch.Tensor):
                continue
            if not torch.equal(shared, mine):
                allowed = ", ".join(f"'{n}'" for n in self.problem.inplace)
                rule = (
                    f"only {allowed} may be updated in place" if allowed else "this operator updates no input in place"
                )
                raise _Verdict("input_mutation", f"run() modified input '{names[j]}' {where}; {rule}.")

    def outputs(self, arena: Arena, reply: dict[str, Any]) -> list[Any]:
        """The submission's outputs as delivered (slots, scalars), then the in-place inputs."""
        items = (reply.get("structure") or {}).get("items") or []
        outs: list[Any] = []
        views = iter(arena.out_views)
        for fact, spec in zip(items, self.shape.out_specs, strict=True):
            outs.append(next(views).clone() if spec is not None else fact.get("value"))
        return outs + [arena.args[i].clone() for i in self.shape.inplace]

    def values(self, outs: Sequence[Any], refs: Sequence[OutputRef]) -> list[Check]:
        return [compare(out, ref) for out, ref in zip(outs, refs, strict=True)]

    def judge_values(self, checks: Sequence[Check], where: str) -> None:
        for c in checks:
            if c.nan:
                raise _Verdict("nan", f"{c.label} {where} contains NaN (the anchor has none).")
        for c in checks:
            if not c.ok:
                at = f" at index {c.worst_index}" if c.worst_index is not None else ""
                if c.exact:
                    raise _Verdict(
                        "wrong_output",
                        f"{c.label} {where} differs from the reference in {c.mismatches} elements "
                        f"(first{at}: got {c.got}, expected {c.expected}); integer outputs must match exactly.",
                    )
                raise _Verdict(
                    "wrong_output",
                    f"{c.label} {where}: max |out - anchor| = {_fmt(c.max_error)} "
                    f"exceeds the allowance {_fmt(c.allowance)}{at} "
                    f"(got {_fmt(c.got or 0.0)}, expected {_fmt(c.expected or 0.0)}; {c.mismatches} elements over; "
                    f"allowance = {_fmt(self.protocol.allowance_factor)} x max(reference error {_fmt(c.ref_error)}, "
                    f"eps(dtype) x max|anchor| {_fmt(c.eps_term)})).",
                )

    # --- correctness and the bypass test -------------------------------------------------------------------
    def correctness(self) -> None:
        t0 = time.perf_counter()
        p = self.protocol
        later = [("check", i) for i in range(1, p.correctness_draws)] + [
            ("suppressed", i) for i in range(p.suppressed_draws)
        ]
        _rng.shuffle(later)
        # The first call compiles; a suppressed launch there could break the compilation itself.
        order = [("check", 0), *later]
        anchor_s = 0.0
        bypass: list[dict[str, Any]] = []
        for n, (kind, index) in enumerate(order):
            inputs = self.shape.draw()
            arena = Arena(inputs, self.shape.out_specs, self.s.device)
            if self.s.device.type == "cuda":
                torch.cuda.synchronize(self.s.device)
            msg, fds = _call_message(arena, suppress=kind == "suppressed", flush=False, keep=False)
            where = (
                f"in correctness draw {index + 1} of {p.correctness_draws}"
                if kind == "check"
                else "with DSL launches suppressed"
            )
            assert self.worker is not None
            try:
                self.worker.chan.send(msg, fds)
            finally:
                arena.release_fd()
            ta = time.perf_counter()
            refs = self.shape.refs(inputs)  # computed while the worker runs the call
            anchor_s += time.perf_counter() - ta
            try:
                reply = self.worker.wait(self.s.limits.call_timeout_s)
            except WorkerFailed as exc:
                self.worker_failed(exc, where)
            self.absorb(reply, where)
            if kind == "suppressed":
                bypass.append(self.suppressed(reply, arena, inputs, refs, where))
                continue
            if not reply.get("ok"):
                raise self.call_error(reply, where, first=n == 0)
            self.structure(reply, where)
            self.mutation(arena, inputs, where)
            checks = self.values(self.outputs(arena, reply), refs)
            self.details["draws"].append(
                {
                    "draw": index + 1,
                    "launches": reply.get("launches"),
                    "ms": reply.get("ms"),
                    "outputs": [c.as_dict() for c in checks],
                }
            )
            self.judge_values(checks, where)
            if not reply.get("launches"):
                raise _Verdict(
                    "not_dsl",
                    f"run() launched no {self.dsl} kernel {where}; a submission must run its work in the DSL.",
                )
        self.details["bypass"] = bypass
        self.report.correct = True
        decorative = [b for b in bypass if b["still_correct"]]
        if decorative:
            self.report.bypass_ok = False
            raise _Verdict(
                "decorative_dsl",
                f"With every DSL launch suppressed ({decorative[0]['launches']} launches skipped), run() still "
                "returned correct outputs: the DSL step does not produce the result. Do the operator's work "
                "in the DSL kernel.",
            )
        self.report.bypass_ok = True
        self.phases["anchors_s"] = anchor_s
        self.phase("correctness_s", t0)

    def suppressed(
        self, reply: dict[str, Any], arena: Arena, inputs: Sequence[Any], refs: Sequence[OutputRef], where: str
    ) -> dict[str, Any]:
        """The bypass test: with launches skipped, any failure shows the DSL is needed."""
        launches = reply.get("launches")
        if reply.get("ok") and not launches:
            raise _Verdict(
                "not_dsl", f"run() launched no {self.dsl} kernel {where}; a submission must run its work in the DSL."
            )
        still_correct = False
        if reply.get("ok"):
            try:
                self.structure(reply, where)
                self.mutation(arena, inputs, where)
                still_correct = all(c.ok for c in self.values(self.outputs(arena, reply), refs))
            except _Verdict:
                still_correct = False
        return {"launches": launches, "raised": not reply.get("ok"), "still_correct": still_correct}

    # --- timing ------------------------------------------------------------------------------------------------
    def timing(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        p = self.protocol
        recheck = set(_rng.sample(range(p.timed_calls), min(p.rechecked_timed_calls, p.timed_calls)))
        warm_ms: list[float] = []
        timed: list[float] = []
        host: list[float] = []
        trips: list[float] = []
        cpus: list[float | None] = []
        launches: list[int] = []
        harness: list[tuple[float, float]] = []  # the worker's own account of its work around each call
        kept_bytes = 0
        unique = 0
        held: list[Arena] = []  # kept inputs stay allocated while the worker keeps them mapped
        saved: list[tuple[int, list[Any], list[Any]]] = []
        reusable: Arena | None = None
        for i in range(p.warmup_calls + p.timed_calls):
            k = i - p.warmup_calls
            where = f"in warmup call {i + 1}" if k < 0 else f"in timed call {k + 1} of {p.timed_calls}"
            inputs = self.shape.draw()
            arena, reuse = _timed_arena(reusable, inputs, self.shape, p)
            keep = p.unique_input_buffers and kept_bytes + arena.nbytes <= self.s.limits.unique_buffer_bytes
            if keep:
                kept_bytes += arena.nbytes
                unique += 1
                held.append(arena)
            else:
                reusable = arena
            assert self.worker is not None
            try:
                ex = _send_call(self.worker, arena, p, self.s.limits, keep=keep, reuse=reuse)
            except WorkerFailed as exc:
                self.worker_failed(exc, where)
            reply = ex.reply
            self.absorb(reply, where)
            if not reply.get("ok"):
                raise self.call_error(reply, where, first=False)
            self.structure(reply, where)
            if not reply.get("launches"):
                raise _Verdict(
                    "not_dsl", f"run() launched no {self.dsl} kernel {where}; every call must run its work in the DSL."
                )
            if k < 0:
                warm_ms.append(float(reply["ms"]))
                continue
            pending = float(reply.get("pending_ms") or 0.0)
            # work that ran past the call is charged to it: hiding work on a few calls then gains nothing
            timed.append(float(reply["ms"]) + (pending if pending > _PENDING_LIMIT_MS else 0.0))
            host.append(float(reply["host_ms"]))
            trips.append(ex.round_trip_ms)
            cpus.append(ex.cpu_ms)
            launches.append(int(reply["launches"]))
            harness.append((float(reply.get("prep_ms") or 0.0), float(reply.get("post_ms") or 0.0)))
            if k in recheck:
                self.mutation(arena, inputs, where)
                saved.append((k, inputs, self.outputs(arena, reply)))
        del held
        self.phase("timing_s", t0)
        ta = time.perf_counter()
        rechecked = []
        for k, inputs, outs in saved:
            checks = self.values(outs, self.shape.refs(inputs))
            rechecked.append({"call": k + 1, "outputs": [c.as_dict() for c in checks]})
            self.details["timing_rechecks"] = rechecked
            self.judge_values(checks, f"in timed call {k + 1} (re-checked)")
        self.phases["anchors_s"] = self.phases.get("anchors_s", 0.0) + time.perf_counter() - ta
        return {
            "warmup_ms": warm_ms,
            "timed_ms": timed,
            "host_ms": host,
            "round_trip_ms": trips,
            "worker_cpu_ms": cpus,
            "launches_per_call": launches,
            "worker_prep_ms": [h[0] for h in harness],
            "worker_post_ms": [h[1] for h in harness],
            "median_ms": median(timed),
            "unique_input_buffers": unique if p.unique_input_buffers else None,
        }

    # --- the figures -----------------------------------------------------------------------------------------
    def finish(self, timing: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        eager, cached = self.s.eager_baseline(self.problem, self.shape.workload, self.protocol)
        if not cached:
            self.phase("eager_s", t0)
        self.details["timing"] = timing
        self.details["eager"] = eager.as_dict(cached)
        check = cross_check(timing["timed_ms"], timing["round_trip_ms"], timing["worker_cpu_ms"], eager.calibration)
        self.details["clock_check"] = check
        if check["tampered"]:
            raise _Verdict(
                "timing_tamper", f"The reported call times disagree with the verifier's clock: {check['tampered']}."
            )
        runtime = timing["median_ms"]
        self.report.runtime_ms = runtime
        self.report.eager_ms = eager.median_ms
        self.report.speedup = (
            min(eager.median_ms / runtime, self.protocol.speedup_cap) if runtime > 0 else self.protocol.speedup_cap
        )
        profile = profile_for(self.s.backend, str(self.report.env.get("device", "")))
        if profile is not None:
            sol = speed_of_light(self.problem.cost(self.shape.axes), profile[1])
            sol.update(device_profile=profile[0], fraction=sol["sol_ms"] / runtime if runtime > 0 else None)
            self.details["sol"] = sol
        launches = timing["launches_per_call"]
        self.report.feedback = (
            f"Correct on {self.protocol.correctness_draws} float64-anchored draws and "
            f"{len(self.details.get('timing_rechecks', []))} re-checked timed calls; "
            f"bypass test passed ({min(launches)}-{max(launches)} DSL launches per call). "
            f"Median {_fmt(runtime)} ms vs eager {_fmt(eager.median_ms)} ms."
        )


def verify(
    submission: str | Path,
    problem: str | Problem,
    dsl: str,
    *,
    backend: str | None = None,
    protocol: str | Protocol = "paper",
    workload: str | None = None,
    limits: Limits | None = None,
) -> VerifierReport:
    """Verify one submission in a fresh session (see `VerifierSession` to verify many)."""
    with VerifierSession(backend, limits=limits) as session:
        return session.verify(submission, problem, dsl, protocol=protocol, workload=workload)
