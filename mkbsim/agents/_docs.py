"""The DSL documentation index written into each sandbox (the task names its path, DSLS[dsl].docs_index).

The wheels of both DSLs ship no HTML documentation or examples, and the sandbox has no network,
so the index is honest about that: it points at the installed sources, whose docstrings are the
documentation, and names the entry points the agent needs to build a kernel on this CPU machine.
Every path in it is resolved at run time from the installed packages.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mkbsim.catalog import DSLS


def package_dir(name: str) -> Path | None:
    """Where a top-level package is installed, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _tirx_index(root: Path | None) -> str:
    if root is None:
        return "# TIRx documentation index\n\nThe `tvm` package (apache-tvm) is not installed in this sandbox.\n"
    return f"""# TIRx documentation index

TIRx is the `tirx` dialect of TVMScript in apache-tvm, installed at `{root}`.
No HTML documentation or examples ship with the package and there is no network: the sources and
their docstrings are the documentation. Read them with `less`, `grep -rn`, or `python -m pydoc MODULE`.

## Where things are
- `{root}/tirx/script/builder/ir.py` — the `T.*` script functions (prim_func, Buffer, match_buffer,
  alloc_buffer, grid, serial, thread_binding, casts, math intrinsics).
- `{root}/tirx/script/builder/tirx.py` — the tile-level script operations (copy, fill, add, mul,
  cast, gemm, ...) and execution scopes.
- `{root}/tirx/operator/tile_primitive/` — how tile primitives are dispatched by storage layout.
- `{root}/tirx/layout.py`, `{root}/tirx/buffer.py` — layouts and buffers.
- `{root}/tirx/build.py`, `{root}/tirx/compilation_pipeline.py` — how a prim_func is compiled.
- `{root}/script/tirx.pyi` — generated stubs of the `T.ptx.*` instructions.
- `{root}/tirx/script/builder/triton.py` and `external_kernel.py` embed other kernel languages:
  the task's rules forbid them.

## Building on this machine
- `tvm.compile(func, target={{"kind": "cuda", "arch": "sm_90a"}}, tir_pipeline="tirx")` builds for the
  GPU here without one; `mod.mod.imports[0].inspect_source()` shows the generated CUDA source.
- `tvm.compile(func, target="llvm")` builds a CPU version you can run here to check numerics;
  tensors cross over with `tvm.runtime.from_dlpack(torch_tensor)`.
- The kernel source must live in `kernel.py` (TVMScript reads the source file).
"""


def _cutedsl_index(root: Path | None) -> str:
    if root is None:
        return "# CuTe DSL documentation index\n\nThe `cutlass` package (nvidia-cutlass-dsl) is not installed here.\n"
    return f"""# CuTe DSL documentation index

CuTe DSL is the Python DSL of nvidia-cutlass-dsl, installed at `{root}` (`import cutlass.cute as cute`).
No HTML documentation or examples ship with the package and there is no network: the sources and
their docstrings are the documentation. Read them with `less`, `grep -rn`, or `python -m pydoc MODULE`.

## Where things are
- `{root}/cute/__init__.py` — what `cute` exports (kernel, jit, compile, make_layout, ...).
- `{root}/cute/core.py`, `{root}/cute/tensor.py`, `{root}/cute/tuple.py` — layouts, tensors, layout algebra.
- `{root}/cute/algorithm.py` — copy, gemm and other partitioned algorithms.
- `{root}/cute/arch/` — thread/block indices, barriers, shared memory, numeric conversion.
- `{root}/cute/nvgpu/` — copy and MMA atoms (cpasync, warp, warpgroup, tcgen05).
- `{root}/cute/runtime.py` — `from_dlpack` to pass torch tensors to a jitted function.
- `{root}/utils/`, `{root}/pipeline/` — helpers for tiling, hardware facts and pipelining.

## Building on this machine
- `cute.compile(jit_function, *example_args)` compiles here without a GPU (the compiled kernel runs
  only on the GPU); `@cute.kernel` defines a kernel, `@cute.jit` the host function that launches it.
- The kernel source must live in `kernel.py` (the DSL reads the source file).
"""


def docs_index_text(dsl: str) -> str:
    if dsl == "tirx":
        return _tirx_index(package_dir("tvm"))
    if dsl == "cutedsl":
        return _cutedsl_index(package_dir("cutlass"))
    raise KeyError(f"unknown DSL {dsl!r}; use one of {', '.join(DSLS)}")


def write_docs_index(workdir: Path, dsl: str) -> Path:
    """Write the index of ``dsl`` at the path its task text names."""
    path = workdir / DSLS[dsl].docs_index
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(docs_index_text(dsl))
    return path
