"""One-element kernels, one per DSL, called as the reference solutions call theirs (benchmarks/gpu_launch_floor.py).

`run(dsl, x, launches)` allocates its output with `torch.empty_like` and launches a one-CTA,
one-warp kernel `launches` times, each writing y[0] = x[0] + 1 (int32): the per-call cost of a
solution that does no work. TIRx: `tvm.compile(..., tir_pipeline="tirx")` for sm_90a, called through
TVM FFI with torch tensors (as problems/*/solutions/*_tirx.py); CuTe DSL: `cute.compile(...,
options="--enable-tvm-ffi")` with a symbolic fake tensor, called with torch tensors (as
problems/*/solutions/*_cutedsl.py). Both DSLs read the kernel source from this real file.
"""

from typing import Any

import cutlass
import cutlass.cute as cute
import torch
import tvm
from cutlass.cute.runtime import make_fake_compact_tensor
from tvm.script import tirx as T

THREADS = 32  # one warp: the smallest CTA a real kernel launches

_COMPILED: dict[str, Any] = {}


def build_tirx() -> Any:
    """The TIRx one-element kernel, compiled for sm_90a."""

    @T.prim_func
    def one_element(x_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (1,), "int32")
        Y = T.match_buffer(y_ptr, (1,), "int32")
        T.device_entry()
        T.cta_id([1])
        tx = T.thread_id([THREADS])
        if tx == 0:
            Y[0] = X[0] + 1

    target = {"kind": "cuda", "arch": "sm_90a"}
    return tvm.compile(tvm.IRModule({"main": one_element}), target=target, tir_pipeline="tirx")


@cute.kernel
def _one_element_kernel(mX: cute.Tensor, mY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        mY[0] = mX[0] + cutlass.Int32(1)


@cute.jit
def _one_element(mX: cute.Tensor, mY: cute.Tensor):
    _one_element_kernel(mX, mY).launch(grid=[1, 1, 1], block=[THREADS, 1, 1])


def build_cutedsl() -> Any:
    """The CuTe DSL one-element kernel, compiled for the arch the DSL is set to (sm_90a on the H200)."""
    x = make_fake_compact_tensor(cutlass.Int32, (cute.sym_int(),), assumed_align=4)
    return cute.compile(_one_element, x, x, options="--enable-tvm-ffi")


BUILDERS = {"tirx": build_tirx, "cutedsl": build_cutedsl}


def run(dsl: str, x: torch.Tensor, launches: int = 1) -> torch.Tensor:
    """One call: allocate the output, launch the ``dsl`` kernel ``launches`` times (compiled once, cached)."""
    kernel = _COMPILED.get(dsl)
    if kernel is None:
        kernel = _COMPILED[dsl] = BUILDERS[dsl]()
    y = torch.empty_like(x)
    for _ in range(launches):
        kernel(x, y)
    return y
