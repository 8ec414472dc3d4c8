"""The workers' environment (DESIGN §4, §5): exact names only, never a credential, whatever ``mkbsim run``
loaded into the verifier's own environment (a campaign's ``.env``), and the names recorded in the result."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.verifier import Limits, VerifierSession, _process
from mkbsim.verifier._allocator import MALLOC_TUNABLES
from mkbsim.verifier._process import worker_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
SECRET = "nvapi-verifier-test-SECRET-0000"
#: what a campaign's .env and a GPU machine put in the environment of ``mkbsim run``
LOADED = {
    "NVIDIA_API_KEY": SECRET, "NVIDIA_NIM_API_KEY": SECRET, "CUDA_API_TOKEN": SECRET, "TVM_TRACKER_KEY": SECRET,
    "OPENAI_API_KEY": SECRET, "HF_TOKEN": SECRET, "NVIDIA_VISIBLE_DEVICES": "all", "CUTE_DSL_CACHE_DIR": "/x",
    "CUDA_VISIBLE_DEVICES": "3", "CUDA_PATH": "/usr/local/cuda", "PATH": "/usr/bin",
}  # fmt: skip


def test_only_allow_listed_names_reach_a_worker() -> None:
    env = worker_env(2, LOADED)
    assert SECRET not in env.values()
    assert {"CUDA_VISIBLE_DEVICES", "CUDA_PATH", "PATH"} <= set(env)
    # no prefix is enough: NVIDIA_/CUDA_/TVM_/CUTE_DSL_ names outside the list stay behind
    assert not {"NVIDIA_VISIBLE_DEVICES", "CUTE_DSL_CACHE_DIR", "CUDA_API_TOKEN", "TVM_TRACKER_KEY"} & set(env)
    own = {"PYTHONPATH", "PYTHONNOUSERSITE", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"}
    # a cpu worker's malloc fills every block it hands out (``_allocator``); a cuda worker's is glibc's default
    assert set(env) - set(LOADED) == own | {"GLIBC_TUNABLES"}
    assert env["GLIBC_TUNABLES"] == MALLOC_TUNABLES
    assert set(worker_env(2, LOADED, device_type="cuda")) - set(LOADED) == own


def test_a_credential_name_is_dropped_even_when_allow_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_process, "WORKER_ENV_NAMES", _process.WORKER_ENV_NAMES | {"NVIDIA_API_KEY", "CUDA_AUTH"})
    env = worker_env(1, {**LOADED, "CUDA_AUTH": SECRET})
    assert not {"NVIDIA_API_KEY", "CUDA_AUTH"} & set(env)


def test_a_submission_sees_no_key_loaded_into_the_verifiers_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in LOADED.items():
        if value == SECRET:
            monkeypatch.setenv(name, value)
    probe = tmp_path / "probe.py"
    probe.write_text(
        EXAMPLE.read_text() + "\n\nimport os\n_kernel_run = run\n\n\ndef run(*inputs):\n"
        f"    leaked = sorted(k for k, v in os.environ.items() if v == {SECRET!r})\n"
        "    if leaked:\n        raise RuntimeError(f'LEAKED {leaked}')\n    return _kernel_run(*inputs)\n"
    )
    # a fresh zygote, started with the keys set
    with VerifierSession("cpu", limits=Limits(import_timeout_s=120.0)) as session:
        report = session.verify(probe, "p36", "tirx")
    assert report.passed, report.feedback
    names = report.env["worker_env"]
    assert "PYTHONPATH" in names and not any(_process.looks_like_credential(n) for n in names)
    assert SECRET not in repr(report.to_payload(None, 0))
