"""The CUDA C++ that each TIRx solution emits compiles with nvcc for sm_90a, without register spills.

TVM builds the source on the CPU but compiles it with NVRTC only at the first call on a GPU, so a
kernel that TVM accepts can still fail there (a type TVM prints that CUDA rejects, an array that
spills). Where a CUDA toolkit is installed this test compiles each solution's source at its problem's
SMOKE shapes the way TVM will (`--use_fast_math`) and reads ptxas's resource report.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kernel_emulation import problem
from test_dsl_solutions import SOLUTION_RE, SOLUTIONS, _load

TIRX = [p for p in SOLUTIONS if p.name.endswith("_tirx.py")]
SPILL_RE = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


@pytest.mark.slow
@pytest.mark.parametrize("path", TIRX, ids=lambda p: p.stem)
def test_tirx_cuda_source_compiles_with_nvcc(path: Path, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    pytest.importorskip("tvm")
    mod = _load(path)
    prob = problem(int(SOLUTION_RE.match(path.name).group(1)))  # type: ignore[union-attr]
    built = mod._build(*mod._shape_key(*prob.make_inputs(prob.smoke, seed=0)))
    modules = built if isinstance(built, tuple) else (built,)
    for i, module in enumerate(modules):
        source = tmp_path / f"{path.stem}_{i}.cu"
        source.write_text(module.mod.imports[0].inspect_source())
        cmd = [nvcc, "-arch=sm_90a", "-cubin", "--use_fast_math", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin")]
        done = subprocess.run([*cmd, str(source)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        spills = [(int(a), int(b)) for a, b in SPILL_RE.findall(done.stderr)]
        assert spills and all(s == (0, 0) for s in spills), done.stderr[-3000:]
