"""A verifier session (DESIGN §5): one warm zygote, the eager baselines and the device's peaks, reused
by every verification it runs (``_verification``, ``_phases``)."""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import Catalog, Problem, load_catalog
from mkbsim.verifier import _blocks
from mkbsim.verifier._control import ControlPage
from mkbsim.verifier._devices import best_profile, measure_profile, profile_for, speed_of_light
from mkbsim.verifier._env import capture
from mkbsim.verifier._phases import PHASES
from mkbsim.verifier._process import WorkerFailed, WorkerHandle, Zygote
from mkbsim.verifier._protocol import Limits, Protocol, resolve_protocol
from mkbsim.verifier._result import VerifierReport
from mkbsim.verifier._rules import DSLS
from mkbsim.verifier._sandboxing import wanted
from mkbsim.verifier._timing import _cpu_llc_bytes, median
from mkbsim.verifier._trusted import Trusted
from mkbsim.verifier._verification import Shape, Verification, rng

BACKENDS = ("cpu", "cuda")
WORKLOADS = ("smoke", "production")
#: torch._dynamo: what the first call of a custom operator (torch.library.custom_op) imports, some 800
#: modules (20-45 s inside that call on a loaded 2-core machine, past a call's timeout), once per session here.
_PRELOAD = {
    "cpu": ["torch", "torch._dynamo", "numpy", "tvm", "tvm.script.tirx", "tvm_ffi"],
    "cuda": ["torch", "torch._dynamo", "numpy", "tvm", "tvm.script.tirx", "tvm_ffi", "cutlass", "cutlass.cute",
             "cutlass.torch", "cutlass.base_dsl.jit_executor", "cutlass.cutlass_dsl.tvm_ffi_provider",
             "cutlass._mlir.dialects.llvm"],
}  # fmt: skip


def default_backend() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_workload(backend: str) -> str:
    return "production" if backend == "cuda" else "smoke"


@dataclass
class EagerBaseline:
    """The reference timed like a submission, in its own (trusted) worker."""

    median_ms: float
    timed_ms: list[float]
    round_trip_ms: list[float]
    measured_s: float
    # null calls among the timed ones, as in a verification: the harness's own overhead, which the
    # submission cannot influence here (``_trusted.calibration_check``, on cuda)
    null_ms: list[float]
    null_trusted: list[Trusted]
    # the worker's CPU between its blocks, per scored call (``_trusted.idle_check`` on cuda)
    idle_cpu_ms: list[float]

    def as_dict(self, cached: bool) -> dict[str, Any]:
        return {"median_ms": self.median_ms, "timed_ms": self.timed_ms, "round_trip_ms": self.round_trip_ms,
                "null_round_trip_ms": [t.round_trip_ms for t in self.null_trusted],
                "null_cpu_ms": [t.cpu_ms for t in self.null_trusted], "idle_cpu_ms": self.idle_cpu_ms,
                "measured_s": self.measured_s, "cached": cached}  # fmt: skip


class VerifierSession:
    """Verifies submissions on one backend, reusing a warm zygote, the eager baselines and the peaks.

    The eager baseline of a (problem, workload, protocol) is measured once per session: it does not
    depend on the submission, and its inputs are fresh draws like everything else. Anchors are never
    reused: each draw has its own seed, so a submission cannot carry answers from one verification to
    the next.
    """

    def __init__(
        self,
        backend: str | None = None,
        *,
        limits: Limits | None = None,
        preload: Sequence[str] | None = None,
        sandbox: bool | None = None,
    ) -> None:
        """``sandbox``: run the workers in bubblewrap (True: required; False: never; None, the default: where it
        runs, or as ``MKBSIM_VERIFIER_SANDBOX`` says)."""
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
        self._profile: tuple[str, dict[str, Any]] | None = None
        self._measured: tuple[str, dict[str, Any]] | None = None  # the profile this session measured, if any
        self._measured_cache_bytes = 0
        self.sandbox = sandbox if sandbox is not None else wanted()

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
                zygote = Zygote(list(preload), self.limits.cpu_threads, self.device.type, self.sandbox)
                if not zygote.ready.get("cuda_initialized"):
                    self.preload, self._zygote = list(preload), zygote
                    return zygote
                zygote.close()
            self._zygote = None
            raise RuntimeError(f"preloading {self.preload} initialises CUDA; set MKBSIM_VERIFIER_PRELOAD")
        return self._zygote

    @property
    def staged_arenas(self) -> bool:
        """Whether call memory travels staged (``mkbsim.verifier._arena``): CUDA IPC handles cannot be mapped by a
        sandboxed cuda worker; ``MKBSIM_VERIFIER_STAGED_ARENAS=1`` asks for it anywhere (how CI tests that path)."""
        if os.environ.get("MKBSIM_VERIFIER_STAGED_ARENAS") == "1":
            return True
        return self.device.type == "cuda" and self.zygote().box is not None

    def env(self) -> dict[str, Any]:
        """The machine and library versions; once the zygote runs, how its workers are confined (``sandbox``,
        ``worker_env``: the names of their environment variables)."""
        if self._env is None:
            self._env = capture(self.device)
        if self._zygote is not None:
            self._env.update(self._zygote.confinement())
        return self._env

    def problem(self, problem: str | Problem) -> Problem:
        if isinstance(problem, Problem):
            return problem
        if self._catalog is None:
            self._catalog = load_catalog()
        return self._catalog.get(problem)

    def speed_of_light(self, problem: Problem, axes: dict[str, int], runtime_ms: float | None = None) -> dict[str, Any]:
        """SOL of ``problem`` at ``axes`` on this session's device (peaks measured once per session; measured again
        while ``runtime_ms`` beats them, the fastest kept: ``_devices.best_profile``)."""
        cost = problem.cost(axes)
        if self._profile is None:
            name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
            documented = profile_for(name) if self.device.type == "cuda" else None
            if documented is not None:
                self._profile = documented
            else:
                cache_bytes = int(getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0)) if (
                    self.device.type == "cuda") else _cpu_llc_bytes()  # fmt: skip
                self._measured_cache_bytes = max(cache_bytes, 1 << 20)
                self._profile = (f"{name} (measured)", measure_profile(self.device, self._measured_cache_bytes))
                self._measured = self._profile
        if runtime_ms is not None and self._profile is self._measured:  # never a documented profile
            peaks = best_profile(
                self._profile[1],
                lambda: measure_profile(self.device, self._measured_cache_bytes),
                lambda profile: runtime_ms < speed_of_light(cost, profile)["sol_ms"],
            )
            self._profile = self._measured = (self._profile[0], peaks)
        sol = speed_of_light(cost, self._profile[1])
        sol.update(device_profile=self._profile[0], peaks=self._profile[1])
        return sol

    # --- workers -------------------------------------------------------------------------------------
    def start_worker(
        self, role: str, path: Path, dsl: str, protocol: Protocol, extra: dict[str, Any] | None = None
    ) -> tuple[WorkerHandle, ControlPage, dict[str, Any]]:
        """Fork a worker, send its setup and control page, and return them with its first answer (the import).

        In a sandbox the worker sees only its own folder of the host's files: the submission is copied there,
        and so is the ``problems`` package for a reference worker, deleted again once it has imported it."""
        zygote = self.zygote()
        worker = zygote.spawn()
        worker.memory_bytes = self.limits.memory_bytes
        control = ControlPage()
        sys_path: list[str] = []
        if zygote.box is not None:
            if role == "reference":
                root = _problems_dir()
                copy = Path(worker.workdir) / "reference"
                shutil.copytree(root, copy / root.name, ignore=shutil.ignore_patterns("__pycache__", "solutions"))
                zygote.box.hand_over(copy, worker.uid)
                path, sys_path = copy / root.name / path.relative_to(root), [str(copy)]
            else:
                shutil.copy(path, Path(worker.workdir) / path.name)
                path = Path(worker.workdir) / path.name
                zygote.box.hand_over(path, worker.uid)
        setup = {
            "role": role, "path": str(path), "sys_path": sys_path, "dsl": dsl, "device": str(self.device),
            "sync": protocol.sync,
            "cache_flush": protocol.cache_flush, "memory_bytes": self.limits.memory_bytes,
            "file_size_bytes": self.limits.file_size_bytes, "cpu_threads": self.limits.cpu_threads,
            "off_limits": [str(_problems_dir())], "workdir": worker.workdir, "inplace": [],
            "sample_positions": [], "output_numels": [], **(extra or {}),
            "answer_key": secrets.token_bytes(32),
        }  # fmt: skip
        worker.sign_answers(setup["answer_key"], lambda: control.nonce)
        try:
            worker.chan.send(setup, [control.take_fd()])
            control.release_fd()
            hello = worker.wait(self.limits.import_timeout_s)
        except WorkerFailed:
            worker.close()
            control.close()
            raise
        finally:
            if sys_path:
                shutil.rmtree(sys_path[0], ignore_errors=True)
        return worker, control, hello

    def eager_baseline(
        self, problem: Problem, workload: str, protocol: Protocol, fresh: bool = False
    ) -> tuple[EagerBaseline, bool]:
        """The reference's median end-to-end time under ``protocol`` (cached per session); ``fresh``: measured
        again now, and not cached (the session's speedups keep one baseline)."""
        key = (problem.id, workload, protocol.hash)
        if key in self._eager and not fresh:
            return self._eager[key], True
        t0 = time.perf_counter()
        shape = Shape(problem, workload, self.device, protocol.allowance_factor)
        # the harness copies the in-place inputs aside after each call as in the candidate's worker (``_mapped``): the
        # null calls calibrated here then cost what the candidate's cost
        worker, control, hello = self.start_worker(
            "reference", problem.path, "tirx", protocol, extra={"inplace": list(shape.inplace)}
        )  # fmt: skip
        timed: list[float] = []
        trips: list[float] = []
        nulls: list[float] = []
        null_trusted: list[Trusted] = []
        idle: list[float] = []
        # the same blocks as a verification's timing phase (``_blocks``), without evidence calls
        scored = sorted(["timed"] * protocol.timed_calls + ["null"] * protocol.null_calls, key=lambda _: rng.random())
        try:
            if not hello.get("ok"):
                raise RuntimeError(f"the reference of {problem.id} failed to import: {hello.get('error')}")
            distinct = protocol.unique_input_buffers
            limit, warmups = self.limits.memory_bytes, protocol.warmup_calls
            planned = _blocks.plan_for(shape, self.device, limit, warmups, scored, distinct)
            for kinds in (part for p in planned for part in _blocks.parts(p)):
                block = _blocks.Block(kinds, shape.draw, lambda: rng.getrandbits(63), shape.out_specs, self.device,
                                      self.staged_arenas, distinct)  # fmt: skip
                sent = _blocks.send(worker, control, block, protocol.cache_flush)
                _, wrong = _blocks.receive(worker, control, block, sent, self.limits.call_timeout_s)
                for call in block.calls:
                    if wrong or call.reply is None or not call.reply.get("ok") or not (call.page or {}).get("acked"):
                        error = wrong or (call.reply or {}).get("error")
                        raise RuntimeError(f"the reference of {problem.id} failed: {error}")
                    assert call.page is not None and call.trusted is not None
                    if call.kind != "warmup" and call.trusted.idle_cpu_ms is not None:
                        idle.append(call.trusted.idle_cpu_ms)
                    if call.kind == "null":
                        nulls.append(call.page["ms"])
                        null_trusted.append(call.trusted)
                    elif call.kind == "timed":
                        timed.append(call.page["ms"])
                        trips.append(call.trusted.round_trip_ms)
        finally:
            worker.close()
            control.close()
        baseline = EagerBaseline(median(timed), timed, trips, time.perf_counter() - t0, nulls, null_trusted, idle)
        self._eager.setdefault(key, baseline)
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
        prob = self.problem(problem)
        proto = resolve_protocol(protocol)
        shape = Shape(prob, workload, self.device, proto.allowance_factor)
        report = VerifierReport(
            problem=prob.id, problem_name=prob.name, dsl=dsl, backend=self.backend,
            protocol=proto.name, protocol_hash=proto.hash, workload=workload,
        )  # fmt: skip
        report.details.update(
            shape=dict(shape.axes), protocol_params=proto.params(), limits=dict(vars(self.limits)), draws=[]
        )
        verification = Verification(self, path, source, prob, dsl, proto, shape, report, enforce_static=static_scan)
        return verification.run(PHASES)


def _problems_dir() -> Path:
    from mkbsim.catalog import problems_root

    return problems_root()


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
