"""benchmarks/attest_device_code.py: a rename builds the same device code; a changed constant does not."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

# A small TIRx solution: out = x * SCALE * s, one element a thread. {names} vary in the rename.
SMALL_TIRX = """
import torch
import tvm
from tvm.script import tirx as T

{THREADS} = 128
_{cache}: dict[int, object] = {{}}


def _{build}(n: int):
    @T.prim_func
    def {kernel}(x_ptr: T.handle, o_ptr: T.handle, s: T.float32):
        X = T.match_buffer(x_ptr, (n,), "float32")
        O = T.match_buffer(o_ptr, (n,), "float32")
        T.device_entry()
        bx = T.cta_id([n // {THREADS}])
        tx = T.thread_id([{THREADS}])
        O[bx * {THREADS} + tx] = X[bx * {THREADS} + tx] * T.float32({kernel_constant}) * s

    target = {{"kind": "cuda", "arch": "sm_90a"}}
    return tvm.compile(tvm.IRModule({{"main": {kernel}}}), target=target, tir_pipeline="tirx")


def run(x: torch.Tensor, s: float) -> torch.Tensor:
    kernel = _{cache}.get(x.shape[0])
    if kernel is None:
        kernel = _{cache}[x.shape[0]] = _{build}(x.shape[0])
    out = torch.empty_like(x)
    kernel(x, out, float(s) * {host_constant})
    return out
"""
NAMES = {"THREADS": "THREADS", "cache": "KERNELS", "build": "build", "kernel": "scale",
         "kernel_constant": "2.0", "host_constant": "0.5"}  # fmt: skip


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("attest_device_code", BENCH / "attest_device_code.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def attest() -> ModuleType:
    pytest.importorskip("tvm")
    return _load()


@pytest.fixture(scope="module")
def small(attest: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Capture of the small TIRx file with some of NAMES replaced."""
    import torch

    torch.set_num_threads(1)
    inputs = (torch.arange(256, dtype=torch.float32), 0.25)
    root = tmp_path_factory.mktemp("small")

    def capture(**changed: str) -> dict[str, Any]:
        path = root / f"{len(list(root.iterdir()))}_small_tirx.py"
        path.write_text(SMALL_TIRX.format(**{**NAMES, **changed}))
        return attest.capture(path, inputs, "tirx")  # type: ignore[no-any-return]

    return capture


def test_identical_files_are_equal(attest: ModuleType, small: Any) -> None:
    diffs, compared = attest.differences(small(), small())
    assert diffs == []
    assert [c.split(":")[0] for c in compared] == ["build 0 tir", "build 0 llvm", "build 0 cuda",
                                                   "launches", "returned", "inputs_after"]  # fmt: skip


def test_a_pure_rename_is_equal(attest: ModuleType, small: Any) -> None:
    renamed = small(THREADS="_SB_THREADS", cache="_SB_KERNELS", build="_SB_build", kernel="_SB_scale_kernel")
    base = small()
    # TVM writes the kernel's name into the host module's strings too: the capture names every kernel kernel0...
    assert not any("_SB_scale_kernel" in text for _, text in renamed["builds"][0]["artifacts"])
    assert attest.differences(base, renamed)[0] == []


def test_a_changed_kernel_constant_differs(attest: ModuleType, small: Any) -> None:
    diffs, _ = attest.differences(small(), small(kernel_constant="3.0"))
    assert {d.split(":")[0] for d in diffs} == {"build 0 tir", "build 0 cuda"}


def test_a_changed_host_constant_differs(attest: ModuleType, small: Any) -> None:
    diffs, _ = attest.differences(small(), small(host_constant="0.25"))
    assert [d.split(" ")[0] for d in diffs] == ["launches"]


def test_normalise_renames_only_what_the_artifact_defines(attest: ModuleType) -> None:
    ptx = ".visible .entry kern_A(\n.param .u64 kern_A_param_0\n)\n{\ncall.uni __nv_expf;\n}\n// .globl kern_A\n"
    text, renamed = attest.normalise("ptx", ptx)
    assert renamed == 1
    assert text == ".visible .entry sym0(\n.param .u64 sym0_param_0\n)\n{\ncall.uni __nv_expf;\n}\n// .globl sym0\n"


def test_a_row_attested_keeps_what_it_measured(attest: ModuleType, tmp_path: Path) -> None:
    measured, current = tmp_path / "m" / "04_x_tirx.py", tmp_path / "04_x_tirx.py"
    measured.parent.mkdir()
    measured.write_text("a = 1\n")
    current.write_text("b = 1\n")
    data = {"rows": [{"file": "04_x_tirx.py", "sha256": attest.sha256_of(measured)}]}
    pairs = attest._pairs([measured, current], data)
    attest.attest_rows(data, pairs, "2026-12-01")
    attest.attest_rows(data, pairs, "2026-12-01")  # twice: no duplicates
    row = data["rows"][0]
    assert row["sha256"] == attest.sha256_of(measured)
    assert row["same_device_code_sha256"] == [attest.sha256_of(current)]
    assert row["attested"] == [{"sha256": attest.sha256_of(current), "against": row["sha256"],
                                "tool": attest.TOOL, "date": "2026-12-01"}]  # fmt: skip
    with pytest.raises(ValueError, match="not the file the H200 row"):
        attest._pairs([current, current], data)


@pytest.mark.slow
@pytest.mark.thorough  # 16 s of the ordinary run's 15 minutes (898 s on a quiet clean-clone run, session 40)
def test_cutedsl_rename_is_equal_and_a_constant_differs(attest: ModuleType, tmp_path: Path) -> None:
    """p36's CuTe DSL file (a kernel that builds in seconds: the attention prefill file's take ~10 s each): its
    kernel function renamed (the kernel symbol changes) vs one constant."""
    pytest.importorskip("cutlass")
    source = BENCH.parent / "problems" / "mlp_norm" / "solutions" / "36_fused_cutedsl.py"
    text = source.read_text()
    assert "_rmsnorm_kernel" in text and "EPS = 1e-6" in text
    variants = {"same": text, "renamed": text.replace("_rmsnorm_kernel", "_renamed_kernel"),
                "constant": text.replace("EPS = 1e-6", "EPS = 2e-6")}  # fmt: skip
    got = {}
    for name, body in variants.items():
        (tmp_path / name).mkdir()
        path = tmp_path / name / source.name
        path.write_text(body)
        got[name] = attest.captured(path)
    shutil.rmtree(tmp_path)
    assert attest.differences(got["same"], got["renamed"])[0] == []
    diffs = attest.differences(got["same"], got["constant"])[0]
    assert {d.split(":")[0] for d in diffs} >= {"build 0 ptx"}
