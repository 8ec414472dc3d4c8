"""Verifier actors for an LLM campaign on Ray (``run_campaign(store, LlmCampaign(...), executor="ray")``).

On ``cuda``, one actor per GPU (``num_gpus=1``: Ray gives each its own ``CUDA_VISIBLE_DEVICES``, so two
kernels are never timed on one GPU at once); where the cluster has no GPU (and in CI), ``[limits]
gpu_verifier_slots`` actors on the ``cpu`` backend. Each actor is a ``SlotServer``
(``mkbsim.verifier._slot``): a warm verifier session whose DSL imports were paid when it started and whose
eager baselines stay cached. One pool actor hands each verification to a free one, so attempts anywhere
on the cluster share them as the local run's attempts share its slots. The kernel's code travels with
the request: the attempt's sandbox is on another node than the verifier.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkbsim.agents._scoring import Scorer, SubmissionIndex, Verdict
from mkbsim.agents._slots import default_verifier_slots, verdict_of
from mkbsim.campaigns import connect_ray

if TYPE_CHECKING:
    from mkbsim.catalog import Problem
    from mkbsim.verifier import Protocol as VerifierProtocol


class _Pool:
    """Hands each verification to a free verifier actor and waits for it (an async actor: it holds many
    requests at once, each queued until an actor is free)."""

    def __init__(self, servers: list[Any]) -> None:
        self._servers = servers
        self._free: asyncio.Queue[int] = asyncio.Queue()
        for index in range(len(servers)):
            self._free.put_nowait(index)

    async def verify(self, request: dict[str, Any]) -> tuple[str, Any, str]:
        index = await self._free.get()
        try:
            reply: tuple[str, Any, str] = await self._servers[index].verify.remote(request)
            return reply
        finally:
            self._free.put_nowait(index)


class RayVerifiers:
    """A ``ScorerFactory`` whose scorers call the campaign's verifier actors; it ships to Ray tasks.

    Connects to Ray (``address``, or a private instance with ``cpus`` CPUs) and starts ``count``
    actors: ``slots`` or one per GPU of the cluster on ``cuda`` (never more than its GPUs), ``slots`` or
    half this machine's cores on ``cpu``; ``backend`` None picks cuda where the cluster has GPUs. An actor
    that crashes is restarted (the verification in flight fails as infrastructure). Close it when the
    campaign ends.
    """

    def __init__(
        self, backend: str | None, protocol: str | VerifierProtocol, slots: int | None = None, *,
        address: str | None = None, cpus: int = 1,
    ) -> None:  # fmt: skip
        from mkbsim.verifier._slot import SlotServer

        ray = connect_ray(address, cpus)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        self.backend = backend or ("cuda" if gpus else "cpu")
        if self.backend == "cuda":
            if not gpus:
                raise ValueError("the cuda backend needs GPUs; the Ray cluster has none")
            if slots is not None and slots > gpus:
                raise ValueError(f"gpu_verifier_slots = {slots}, but the Ray cluster has {gpus} GPUs "
                                 "(one verifier actor per GPU)")  # fmt: skip
            self.count, gpu = slots or gpus, 1
        elif self.backend == "cpu":
            self.count, gpu = slots or default_verifier_slots("cpu"), 0
        else:
            raise ValueError(f"unknown backend {self.backend!r}; use cuda or cpu")
        self.protocol = protocol
        # no CPUs reserved: the attempt whose kernel is verified holds its own while it waits, so reserving
        # more would leave them idle (and on a small machine keep attempts from starting at all)
        server = ray.remote(SlotServer).options(num_gpus=gpu, num_cpus=0, max_restarts=3)
        self._servers = [server.remote(self.backend) for _ in range(self.count)]
        self._pool = ray.remote(_Pool).options(num_cpus=0).remote(self._servers)

    def __call__(self, problem: Problem, dsl: str) -> Scorer:
        return _RayScorer(self._pool, self.protocol, problem.id, dsl)

    def close(self) -> None:
        import ray

        ray.kill(self._pool)
        # each session stops its zygote (a process of its own) cleanly before its actor is killed
        ray.wait([server.close.remote() for server in self._servers], num_returns=len(self._servers), timeout=30)
        for server in self._servers:
            ray.kill(server)

    def __enter__(self) -> RayVerifiers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class _RayScorer:
    pool: Any
    protocol: str | VerifierProtocol
    problem: str
    dsl: str

    def score(self, kernel_path: Path, *, attempt_id: str, submission: SubmissionIndex) -> Verdict:
        import ray

        request = {"code": kernel_path.read_text(), "problem": self.problem, "dsl": self.dsl,
                   "protocol": self.protocol, "attempt_id": attempt_id, "submission": submission}  # fmt: skip
        return verdict_of(ray.get(self.pool.verify.remote(request)), "verifier actor")
