"""The PTX the attention CuTe DSL solutions compile to assembles for sm_90a without register spills.

CuTe DSL lowers to PTX on the CPU (`CUTE_DSL_KEEP=ptx` keeps it); ptxas, where a CUDA toolkit is installed,
reports what the GPU will run: registers a thread and spill traffic (`test_tirx_cuda_source.py` does the
same for the TIRx solutions' CUDA source). A spill in a flash-attention inner loop costs local-memory
traffic on every KV tile. An ordinary run assembles one file of each plan, MKBSIM_ALL_SOLUTIONS=1 all
(`solution_sample`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from solution_sample import sampled

from mkbsim.catalog import problems_root

ROOT = Path(__file__).resolve().parents[2]
ATTEST = ROOT / "benchmarks" / "attest_device_code.py"  # its cute_env: how CuTe DSL keeps what it compiles
FILES = sorted((problems_root() / "attention" / "solutions").glob("[0-9]*_cutedsl.py"))
SPILL_RE = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
# p09 keeps a 16 x 256 fp32 O tile a warp (128 registers a thread): CuTe DSL's code for it needs a few more
# registers than the 255 there are (60 bytes spill; the TIRx kernel of the same plan fits)
KNOWN_SPILLS = {
    "09_fused_cutedsl": "O is 128 fp32 registers a thread at head dim 256 on mma.sync",
    # the round-one decode kernels, measured as they are (passing on the H200 at SOL 0.34-0.41): ptxas
    # spills at their register caps; not re-tuned yet
    "01_ctaperseqhead_cutedsl": "decode kernel capped at 128 registers: 104 bytes spill stores",
    "01_pageprefetch_cutedsl": "the same kernel plus its next step's 4 page indices: 140 bytes spill stores",
    "01_splitkvprefetch_cutedsl": "plan pageprefetch's kernel over a slice of the tokens: 140 bytes spill stores",
    "02_splitkv_cutedsl": "partial kernel at 168 registers: 24 bytes spill stores",
    "02_splitkvprefetch_cutedsl": "the same partial kernel plus its next step's 4 page indices: 28 bytes spill stores",
    "03_ctaperseqhead_cutedsl": "decode kernel capped at 128 registers: 92 bytes spill stores",
    "03_pageprefetch_cutedsl": "the same kernel plus its next page's entry: 116 bytes spill stores",
    "03_splitkvprefetch_cutedsl": "plan pageprefetch's kernel over a slice of the pages: 116 bytes spill stores",
}
COMPILE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("solution", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module._compiled()
"""


def _known_spill(path: Path) -> list[pytest.MarkDecorator]:
    """A known spill is expected (strict: one gone fails the test until its entry goes); confirming it again is a
    compile of ~7 s that tells nothing new: run with MKBSIM_THOROUGH=1."""
    if path.stem not in KNOWN_SPILLS:
        return []
    return [pytest.mark.xfail(reason=KNOWN_SPILLS[path.stem], strict=True), pytest.mark.thorough]


@pytest.mark.slow
@pytest.mark.parametrize("path", sampled(FILES, _known_spill))
def test_cutedsl_ptx_assembles_without_spills(path: Path, tmp_path: Path) -> None:
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("no CUDA toolkit (ptxas) on this machine")
    pytest.importorskip("cutlass")
    spec = importlib.util.spec_from_file_location("attest_device_code", ATTEST)
    assert spec is not None and spec.loader is not None
    attest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(attest)
    env = {**os.environ, **attest.cute_env(tmp_path, keep="ptx")}
    done = subprocess.run([sys.executable, "-c", COMPILE, str(path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    ptx = sorted(tmp_path.glob("*.ptx"))
    assert ptx, "CuTe DSL kept no PTX"
    for kernel in ptx:
        out = subprocess.run([ptxas, "-arch=sm_90a", "-v", "-o", str(tmp_path / "k.cubin"), str(kernel)],
                             capture_output=True, text=True, timeout=900)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        spills = [(int(a), int(b)) for a, b in SPILL_RE.findall(out.stderr)]
        assert spills and all(s == (0, 0) for s in spills), out.stderr[-2000:]
