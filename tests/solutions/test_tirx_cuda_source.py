"""The CUDA C++ that each TIRx solution emits compiles with nvcc for sm_90a, without register spills.

TVM builds the source on the CPU but compiles it with NVRTC only at the first call on a GPU, so a
kernel that TVM accepts can still fail there (a type TVM prints that CUDA rejects, an array that
spills). Where a CUDA toolkit is installed this test compiles each solution's source at its problem's
SMOKE shapes the way TVM will (`--use_fast_math`) and reads ptxas's resource report. It reuses the
build of `test_dsl_solutions.py`'s compile check; an ordinary run checks one file of each family × plan
(MKBSIM_ALL_SOLUTIONS=1: every file; `solution_sample`).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from solution_sample import sampled
from test_dsl_solutions import SOLUTIONS, tirx_smoke_build

TIRX = [p for p in SOLUTIONS if p.name.endswith("_tirx.py")]
ATTEST = Path(__file__).resolve().parents[2] / "benchmarks" / "attest_device_code.py"  # its tirx_sources
SPILL_RE = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


@pytest.mark.slow
@pytest.mark.parametrize("path", sampled(TIRX))
def test_tirx_cuda_source_compiles_with_nvcc(path: Path, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    pytest.importorskip("tvm")
    built = tirx_smoke_build(path)
    spec = importlib.util.spec_from_file_location("attest_device_code", ATTEST)
    assert spec is not None and spec.loader is not None
    attest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(attest)
    modules = built if isinstance(built, tuple) else (built,)
    cuda = [text for module in modules for kind, text in attest.tirx_sources(module) if kind == "cuda"]
    for i, text in enumerate(cuda):
        source = tmp_path / f"{path.stem}_{i}.cu"
        source.write_text(text)
        cmd = [nvcc, "-arch=sm_90a", "-cubin", "--use_fast_math", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin")]
        done = subprocess.run([*cmd, str(source)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        spills = [(int(a), int(b)) for a, b in SPILL_RE.findall(done.stderr)]
        assert spills and all(s == (0, 0) for s in spills), done.stderr[-3000:]
