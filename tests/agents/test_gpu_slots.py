"""Verifier slots on a machine with several GPUs (run with MKBSIM_GPU_TESTS=1; CI skips these).

Both ways an LLM campaign verifies on cuda — local slot processes (``VerifierSlots`` behind
``limit_scoring``) and Ray verifier actors (``RayVerifiers``, one per GPU) — are given real solution
kernels from several threads at once: every verdict passes, the GPUs measured are all the machine's
(each slot or actor sees only its own: ``env.gpu_uuid`` in the payload), and no GPU measures two
kernels at once (the verdicts' wall-clock spans on one GPU never overlap).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mkbsim.agents import RayVerifiers, ScoringSlots, VerifierSlots, limit_scoring
from mkbsim.agents._scoring import ScorerFactory
from mkbsim.catalog import load_catalog

pytestmark = pytest.mark.gpu

SOLUTIONS = Path(__file__).resolve().parents[2] / "problems"
KERNELS = [
    ("mlp_norm/solutions/36_fused_cutedsl.py", "p36", "cutedsl"),
    ("mlp_norm/solutions/36_fused_tirx.py", "p36", "tirx"),
    ("mlp_norm/solutions/28_fused_cutedsl.py", "p28", "cutedsl"),
    ("kv_cache/solutions/21_fused_tirx.py", "p21", "tirx"),
]


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.fixture(scope="module")
def gpus() -> int:
    count = gpu_count()
    if count < 2:
        pytest.skip(f"needs at least 2 GPUs, this machine has {count}")
    return count


@pytest.fixture(params=["local", "ray"])
def factory(request: pytest.FixtureRequest, gpus: int) -> Iterator[ScorerFactory]:
    if request.param == "local":
        with VerifierSlots("cuda", "paper") as slots:
            assert slots.count == gpus
            yield limit_scoring(slots, ScoringSlots(slots.count))
        return
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with RayVerifiers(None, "paper", cpus=4) as actors:
            assert actors.backend == "cuda" and actors.count == gpus
            yield actors
    finally:
        ray.shutdown()


def test_each_gpu_measures_one_kernel_at_a_time(factory: ScorerFactory, gpus: int) -> None:
    catalog = load_catalog()
    spans: list[tuple[str, float, float]] = []  # (GPU, start, end) of each verification, on the host's clock
    lock = threading.Lock()

    def score(index: int) -> None:
        file, problem, dsl = KERNELS[index % len(KERNELS)]
        verdict = factory(catalog.get(problem), dsl).score(
            SOLUTIONS / file, attempt_id=f"gpu-slots-{index}", submission="final"
        )
        assert verdict.passed, verdict.feedback
        details = verdict.payload["details"]
        start = details["started_at"]
        with lock:
            spans.append((verdict.payload["env"]["gpu_uuid"], start, start + details["overhead"]["total_s"]))

    with ThreadPoolExecutor(3 * gpus) as pool:
        for future in [pool.submit(score, i) for i in range(3 * gpus)]:
            future.result()
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    for uuid, start, end in spans:
        by_gpu.setdefault(uuid, []).append((start, end))
    assert len(by_gpu) == gpus, spans  # every GPU measured, and each verifier saw only its own
    for uuid, runs in by_gpu.items():
        runs.sort()
        for (_, end), (start, _) in itertools.pairwise(runs):
            assert start >= end, f"two verifications overlapped on GPU {uuid}: {runs}"
    # and the GPUs worked at the same time: some verification on one overlaps one on another
    overlaps = [
        (a, b) for a in by_gpu for b in by_gpu if a < b
        for sa, ea in by_gpu[a] for sb, eb in by_gpu[b] if sa < eb and sb < ea
    ]  # fmt: skip
    assert overlaps, spans
