"""Every TIRx solution's host code passes the verifier's allow-list of what host code may reach outside itself
(``_dsl``: functions called by name, LLVM intrinsics by family, functions looked up by name), and the
allow-list refuses the FFI's call, lookup and creation entry points and the intrinsics that call code (red team
rt15b F4).

The solutions are built for the cuda target on the CPU (TVM writes the host module's LLVM IR without a GPU)
at their problems' SMOKE shapes, reusing ``test_dsl_solutions``'s build; an ordinary run checks one file of each
family × plan (MKBSIM_ALL_SOLUTIONS=1: every file; ``solution_sample``). The llvm target's honest host code is
checked where it is built: under the verifier's build hook, by test_honest.py and test_examples.py.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from solution_sample import sampled
from test_dsl_solutions import SOLUTIONS, tirx_smoke_build

from mkbsim.verifier import _dsl

TIRX = [p for p in SOLUTIONS if p.name.endswith("_tirx.py")]


def _allowed(name: str) -> bool:
    return _dsl._allowed_call(name, _symbols=_dsl.HOST_SYMBOLS, _intrinsics=_dsl.LLVM_INTRINSICS, _len=len)


def _modules(built: Any) -> list[Any]:
    """The host modules ``tvm.tirx.build`` made for a solution (what ``tvm.compile`` returned: its ``mod``)."""
    return [getattr(b, "mod", b) for b in (built if isinstance(built, tuple) else (built,))]


@pytest.mark.slow
@pytest.mark.parametrize("path", sampled(TIRX))
def test_tirx_solution_host_code_calls_and_looks_up_only_what_the_gate_allows(path: Path) -> None:
    pytest.importorskip("tvm")
    source = importlib.import_module("tvm_ffi").get_global_func("ffi.ModuleInspectSource")
    for host in _modules(tirx_smoke_build(path)):
        text = source(host, "ll")
        assert [name for name in _dsl._declared(text) if not _allowed(name)] == []
        kernels = [
            k for device in host.imports_ for k in _dsl._device_kernels(source(device, ""), _len=len, _range=range)
        ]
        looked_up = _dsl._looked_up(text, _len=len)
        assert looked_up and all(name == "__tvm_set_device" or name in kernels for name in looked_up), looked_up


@pytest.mark.parametrize(
    "name",
    [
        "TVMFFIErrorSetRaisedFromCStrParts", "sqrtf", "memset", "llvm.assume", "llvm.fabs.f16", "llvm.memset.p0.i64",
        "llvm.fmuladd.v4f32", "llvm.lifetime.start.p0", "llvm.smin.i32", "llvm.vector.reduce.fadd.v8f32",
        "llvm.sadd.with.overflow.i32", "llvm.exp10.f32", "llvm.fma.nxv4f32",
    ],
)  # fmt: skip
def test_honest_host_symbols_are_allowed(name: str) -> None:
    # those of every TIRx solution (cuda target) and honest llvm-target case, collected when the list was written
    assert _allowed(name)


@pytest.mark.parametrize(
    "name",
    [
        "TVMFFIFunctionCall", "TVMFFIFunctionGetGlobal", "TVMFFIFunctionCreate", "TVMFFIFunctionSetGlobal",
        "TVMFFIObjectDecRef", "TVMFFIEnvModLookupFromImports", "TVMBackendGetFuncFromEnv", "__TVMFFIFunctionCall",
        "__tvm_anything", "getpid", "dlopen", "llvm.experimental.patchpoint.i64", "llvm.experimental.gc.statepoint.p0",
        "llvm.coro.resume", "llvm.x86.int", "llvm.p0", "llvm.memcpy.p0i8.p0i8.i64",
    ],
)  # fmt: skip
def test_ffi_entry_points_and_intrinsics_that_call_code_are_refused(name: str) -> None:
    assert not _allowed(name)


def test_lookups_and_device_kernels_are_read_from_the_sources() -> None:
    host = (
        "@.tvm_func.__tvm_set_device = internal global ptr null, align 8\n"
        '@".tvm_func.a kernel" = internal global ptr null, align 8\n'
        "@.tvm_func.ffi.ModuleLoadFromFile = internal global ptr null, align 8\n"
        '@.str = private constant [2 x i8] c"x\\00", align 1\n'
    )
    assert _dsl._looked_up(host, _len=len) == ["__tvm_set_device", "a kernel", "ffi.ModuleLoadFromFile"]
    device = (
        'extern "C" __global__ void __launch_bounds__(384) prefill_kernel(float* __restrict__ K,\n'
        "__device__ float helper(float x) {\n"
        'extern "C" __global__ void rows(float* x) {\n'
    )
    assert _dsl._device_kernels(device, _len=len, _range=range) == ["prefill_kernel", "rows"]
