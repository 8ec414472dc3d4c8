"""The CuTe DSL gate sits where a compiled CuTe program really crosses into native code (DESIGN §5).

On a GPU, ``cute.compile`` returns a ``CudaDialectJitCompiledFunction`` whose ``__call__`` ends in its
default executor's ``run_compiled_program``, which hands C pointers to the host function (``capi_func``).
These tests drive that exact path on the CPU with only ``capi_func`` (the native call) replaced by a
Python stand-in that writes the output, so the gate's counting and suppression are checked where the
runtime calls it, not where a test would.
"""

from __future__ import annotations

import inspect
import mmap
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from mkbsim.verifier import _control, _dsl
from mkbsim.verifier._provenance import page_layout, provenance_lib, provenance_vault
from mkbsim.verifier._vault import Registry

_EARLY_FROM_DLPACK = pytest.importorskip("cutlass.cute.runtime").from_dlpack  # as a module imported early holds it


@pytest.fixture
def page() -> Iterator[mmap.mmap]:
    control = _control.ControlPage()
    yield control.buf
    control.close()


@pytest.fixture
def gates(page: mmap.mmap, monkeypatch: pytest.MonkeyPatch) -> _dsl.DslGates:
    """The cutedsl gates installed on the real CuTe DSL classes, undone after the test."""

    def set_undoably(self: _dsl.DslGates, owner: Any, attr: str, value: Any) -> None:
        monkeypatch.setattr(owner, attr, value)
        self.patched.append((owner, attr, value))

    monkeypatch.setattr(_dsl.DslGates, "_set", set_undoably)
    registry = Registry()
    sources: dict[int, Any] = {}
    send = registry.open(provenance_vault, page, provenance_lib(torch.device("cpu")), page_layout(), [], [], sources)
    installed = _dsl.DslGates(registry, types.SimpleNamespace(ask=lambda request: None), send, "cutedsl")
    installed.dlpack_sources = sources
    installed.install()
    return installed


def _arm(page: mmap.mmap, nonce: int, *, suppress: bool = False, audit: bool = False) -> None:
    _control.put(page, _control.LAUNCHES, 0)
    _control.put(page, _control.SUPPRESS, int(suppress))
    _control.put(page, _control.AUDIT, int(audit))
    _control.put(page, _control.NONCE, nonce)


def _compiled(out: torch.Tensor) -> Any:
    """A real CUDA-dialect compiled function of ``kernel(x, out)`` whose native host function writes 7s."""
    import cutlass.cute as cute
    from cutlass.base_dsl.jit_executor import ExecutionArgs, JitExecutor
    from cutlass.cutlass_dsl.cuda_jit_executor import CudaDialectJitCompiledFunction

    def kernel(x: cute.Tensor, out: cute.Tensor) -> None: ...

    def capi_func(packed_args: Any) -> None:  # stands in for the call into the compiled host code
        out.fill_(7.0)

    capi_func.restype = None  # type: ignore[attr-defined]
    compiled = object.__new__(CudaDialectJitCompiledFunction)
    compiled.execution_args = ExecutionArgs(inspect.signature(kernel), "kernel")
    compiled.total_added_arguments = 0
    compiled._pyir_spec = None
    compiled._default_executor = JitExecutor(types.SimpleNamespace(capi_func=capi_func), None, False)
    return compiled


@pytest.mark.parametrize("wrap", ["runtime.from_dlpack", "taken before the gates", "cutlass.torch.from_dlpack"])
def test_a_compiled_cute_call_is_counted_once_and_suppressed_whatever_from_dlpack_name(
    gates: _dsl.DslGates, page: mmap.mmap, wrap: str
) -> None:
    import cutlass.torch
    from cutlass.cute import runtime

    from_dlpack = {"runtime.from_dlpack": runtime.from_dlpack, "taken before the gates": _EARLY_FROM_DLPACK,
                   "cutlass.torch.from_dlpack": cutlass.torch.from_dlpack}[wrap]  # fmt: skip
    x, out = torch.ones(8), torch.zeros(8)
    compiled = _compiled(out)
    args = (from_dlpack(x), from_dlpack(out))
    _arm(page, 1, suppress=True, audit=True)
    compiled(*args)
    assert _control.get(page, _control.LAUNCHES) == 1  # the run of the compiled program, not its wrappers
    assert torch.equal(out, torch.zeros(8))  # the suppressed launch's write was undone
    _arm(page, 2, audit=True)
    compiled(*args)
    assert torch.equal(out, torch.full((8,), 7.0))
    _arm(page, 3)  # a timed call: counted, not watched
    out.zero_()
    compiled(*args)
    assert _control.get(page, _control.LAUNCHES) == 1 and torch.equal(out, torch.full((8,), 7.0))


def test_the_gates_sit_on_the_methods_the_cute_runtime_calls(gates: _dsl.DslGates) -> None:
    from cutlass.base_dsl.dsl import BaseDSL
    from cutlass.base_dsl.jit_executor import JitCompiledFunction, JitExecutor
    from cutlass.cute.runtime import _Tensor
    from cutlass.cutlass_dsl import CuTeDSL
    from cutlass.cutlass_dsl.cuda_jit_executor import CudaDialectJitCompiledFunction

    hooks = {(owner, attr): hook for owner, attr, hook in gates.patched}
    # cute.compile's result: its own __call__ checks workspace arguments, then super() reaches the gate
    assert "super().__call__" in inspect.getsource(CudaDialectJitCompiledFunction.__call__)
    assert JitCompiledFunction.__call__ is hooks[(JitCompiledFunction, "__call__")]
    assert JitExecutor.run_compiled_program is hooks[(JitExecutor, "run_compiled_program")]
    # a @cute.jit function called directly runs getattr(dsl, "_func"): CuTeDSL does not override it
    assert CuTeDSL._func is hooks[(BaseDSL, "_func")]
    assert _Tensor.__init__ is hooks[(_Tensor, "__init__")]
