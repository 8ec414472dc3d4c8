"""The cuda backend on an NVIDIA GPU (run with MKBSIM_GPU_TESTS=1; CI skips these).

Real CuTe DSL and TIRx kernels for p28 and p36 at their production shapes, the adversarial cases
that need a GPU (side streams, CUDA graphs, CUDA events), and the hardened protocol.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mkbsim.verifier import HARDENED, Limits, VerifierSession

pytestmark = pytest.mark.gpu

CUDA_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "cuda"
ADVERSARIAL_CUDA = Path(__file__).with_name("adversarial_cuda")
CASES = sorted(ADVERSARIAL_CUDA.glob("*.py"))
EXAMPLES = [
    ("p36_rmsnorm_cutedsl.py", "p36", "cutedsl"),
    ("p28_fused_add_rmsnorm_cutedsl.py", "p28", "cutedsl"),
    ("p36_rmsnorm_tirx_cuda.py", "p36", "tirx"),
    ("p28_fused_add_rmsnorm_tirx_cuda.py", "p28", "tirx"),
]


@pytest.fixture(scope="module")
def cuda_session() -> Iterator[VerifierSession]:
    with VerifierSession("cuda", limits=Limits.for_backend("cuda").with_(call_timeout_s=30.0)) as session:
        yield session


@pytest.mark.parametrize(("file", "problem", "dsl"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_real_kernels_pass_at_production_shape(
    cuda_session: VerifierSession, file: str, problem: str, dsl: str
) -> None:
    report = cuda_session.verify(CUDA_EXAMPLES / file, problem, dsl, workload="production")
    assert report.passed, report.feedback
    assert report.backend == "cuda" and report.workload == "production"
    assert report.env["device"] and report.env["driver"]
    assert report.runtime_ms is not None and report.runtime_ms > 0 and report.speedup is not None
    assert report.details["sol"]["device_profile"] == "h200" or "H200" not in report.env["device"]
    assert min(report.details["timing"]["launches_per_call"]) >= 1
    # built and run (TIRx: NVRTC at the first call; CuTe DSL: ptxas as a library) with no process allowed (_noprocess)
    assert report.env["process_filter"].startswith("seccomp"), report.env.get("process_filter")


def _header(path: Path) -> tuple[str, str, bool]:
    text = path.read_text()
    expect = re.search(r"^# expect: (\w+)$", text, re.M)
    problem = re.search(r"^# problem: (\w+)$", text, re.M)
    assert expect and problem
    return expect.group(1), problem.group(1), "# static-scan: off" in text


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_cuda_adversarial_cases(cuda_session: VerifierSession, path: Path) -> None:
    expect, problem, runtime_only = _header(path)
    report = cuda_session.verify(path, problem, "cutedsl", workload="production", static_scan=not runtime_only)
    assert report.failure == expect, report.feedback


def test_hardened_protocol_times_side_stream_work_instead_of_missing_it(cuda_session: VerifierSession) -> None:
    honest = cuda_session.verify(CUDA_EXAMPLES / "p36_rmsnorm_cutedsl.py", "p36", "cutedsl", protocol="hardened")
    assert honest.passed, honest.feedback
    assert honest.protocol_hash == HARDENED.hash
    sneaky = cuda_session.verify(ADVERSARIAL_CUDA / "side_stream.py", "p36", "cutedsl", protocol="hardened")
    assert sneaky.passed, sneaky.feedback
    # Its 20M-cycle sleep on the side stream is inside every hardened measurement.
    assert sneaky.runtime_ms is not None and honest.runtime_ms is not None
    assert sneaky.runtime_ms > honest.runtime_ms + 1.0


def test_a_short_side_stream_kernel_is_caught_or_timed_in_full(cuda_session: VerifierSession) -> None:
    honest = cuda_session.verify(CUDA_EXAMPLES / "p36_rmsnorm_cutedsl.py", "p36", "cutedsl", workload="production")
    assert honest.passed, honest.feedback
    case = Path(__file__).with_name("gpu_timed_cases") / "side_stream_short.py"
    sneaky = cuda_session.verify(case, "p36", "cutedsl", workload="production")
    if sneaky.failure == "background_work":
        return
    assert sneaky.passed, sneaky.feedback
    # the same kernel, so the same time: the side stream hid none of it (medians of 50 calls: 10% of noise)
    assert sneaky.runtime_ms is not None and honest.runtime_ms is not None
    assert sneaky.runtime_ms >= 0.9 * honest.runtime_ms


def test_a_fast_honest_kernel_verified_again_in_a_session_still_passes(cuda_session: VerifierSession) -> None:
    # a 12 us kernel: from a session's second verification of it on, a few calls overran the end of the
    # measured region on the host clock, which the background-work rule (3 calls then) took for a side stream
    solution = Path(__file__).resolve().parents[2] / "problems" / "mlp_norm" / "solutions" / "36_fused_cutedsl.py"
    for _ in range(3):
        report = cuda_session.verify(solution, "p36", "cutedsl", workload="production")
        assert report.passed, report.feedback


def test_cute_launches_are_counted_through_both_of_the_dsls_host_paths(cuda_session: VerifierSession) -> None:
    # the gate counts host functions it made from the DSL's engine (_dsl): the ctypes executor of cute.compile
    # (the example) and the --enable-tvm-ffi function (the solution); the adversarial_cuda cases forge the rest
    solution = Path(__file__).resolve().parents[2] / "problems" / "mlp_norm" / "solutions" / "36_fused_cutedsl.py"
    for path in (CUDA_EXAMPLES / "p36_rmsnorm_cutedsl.py", solution):
        report = cuda_session.verify(path, "p36", "cutedsl", workload="production")
        assert report.passed, report.feedback
        assert min(report.details["timing"]["launches_per_call"]) >= 1
