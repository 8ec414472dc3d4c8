"""The CuTe DSL gate counts what the DSL compiled in this worker, where it crosses into native code (DESIGN §5).

A CuTe host function with no kernel launch runs on the CPU: these tests compile real ones (``cute.compile``
through its ctypes executor, ``--enable-tvm-ffi``, a ``@cute.jit`` function called directly) with the gates
installed on the real CuTe DSL classes, so counting and suppression are checked on the native code the runtime
calls. Forged launches (a ``JitExecutor`` around a Python callable, a replaced function pointer, handle or
wrapper, a TVM FFI function converted from Python) run their Python and are not counted.
"""

from __future__ import annotations

import _thread
import contextlib
import importlib
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
cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")


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

    from cutlass.base_dsl.cache_helpers import JitCacheDict
    from cutlass.cutlass_dsl import CuTeDSL

    dsl = CuTeDSL._get_dsl()
    monkeypatch.setattr(dsl.envar, "arch", "sm_90a")  # no GPU to query here
    monkeypatch.setattr(dsl, "jit_cache", JitCacheDict())  # as in a fresh worker: nothing compiled before the gates
    monkeypatch.setattr(_dsl.DslGates, "_set", set_undoably)
    registry = Registry()
    sources: dict[int, Any] = {}
    send = registry.open(provenance_vault, page, provenance_lib(torch.device("cpu")), page_layout(), [], [], sources)
    installed = _dsl.DslGates(
        registry, types.SimpleNamespace(ask=lambda request: None), send, "cutedsl", _thread.RLock()
    )
    installed.dlpack_sources = sources
    installed.install()
    return installed


def _arm(page: mmap.mmap, nonce: int, *, suppress: bool = False, audit: bool = False) -> None:
    _control.put(page, _control.LAUNCHES, 0)
    _control.put(page, _control.SUPPRESS, int(suppress))
    _control.put(page, _control.AUDIT, int(audit))
    _control.put(page, _control.NONCE, nonce)


def _doubling() -> Any:
    """A ``@cute.jit`` host function writing ``2 * a`` into ``b`` (no kernel: it runs on the CPU)."""

    @cute.jit
    def doubling(a: cute.Tensor, b: cute.Tensor) -> None:
        for i in cutlass.range(cute.size(a)):
            b[i] = a[i] * 2.0

    return doubling


def _draw(gates: _dsl.DslGates, page: mmap.mmap, nonce: int, *inputs: torch.Tensor, suppress: bool = False) -> None:
    """A correctness draw whose inputs are ``inputs`` (memory no recorded writer left is erased before a launch)."""
    _arm(page, nonce, suppress=suppress, audit=True)
    gates.send((7, inputs, ()))  # INPUTS, as the harness reports them


def _launches(gates: _dsl.DslGates, page: mmap.mmap, nonce: int, call: Any, *args: Any) -> int:
    """How many launches the gate counts for ``call(*args)`` on a correctness draw (what it raises aside)."""
    _draw(gates, page, nonce, *(arg for arg in args if isinstance(arg, torch.Tensor)))
    with contextlib.suppress(Exception):  # a forged program may fail after its launch was (or was not) counted
        call(*args)
    return _control.get(page, _control.LAUNCHES)


@pytest.mark.parametrize("wrap", ["runtime.from_dlpack", "taken before the gates", "cutlass.torch.from_dlpack"])
def test_a_compiled_cute_call_is_counted_once_and_suppressed_whatever_from_dlpack_name(
    gates: _dsl.DslGates, page: mmap.mmap, wrap: str
) -> None:
    import cutlass.torch
    from cutlass.cute import runtime

    from_dlpack = {"runtime.from_dlpack": runtime.from_dlpack, "taken before the gates": _EARLY_FROM_DLPACK,
                   "cutlass.torch.from_dlpack": cutlass.torch.from_dlpack}[wrap]  # fmt: skip
    x, out = torch.arange(8.0), torch.zeros(8)
    args = (from_dlpack(x), from_dlpack(out))
    compiled = cute.compile(_doubling(), *args)
    _draw(gates, page, 1, x, out, suppress=True)
    compiled(*args)
    assert _control.get(page, _control.LAUNCHES) == 1  # the call of the native host function, not its wrappers
    assert torch.equal(out, torch.zeros(8))  # the suppressed launch's write was undone
    _draw(gates, page, 2, x, out)
    compiled(*args)
    assert torch.equal(out, 2 * x)
    _arm(page, 3)  # a timed call: counted, not watched
    out.zero_()
    compiled(*args)
    assert _control.get(page, _control.LAUNCHES) == 1 and torch.equal(out, 2 * x)


def test_a_tvm_ffi_compiled_call_and_a_jit_function_called_directly_are_counted(
    gates: _dsl.DslGates, page: mmap.mmap
) -> None:
    from cutlass.cute import runtime

    x, out = torch.arange(8.0), torch.zeros(8)
    compiled = cute.compile(_doubling(), runtime.from_dlpack(x), runtime.from_dlpack(out), options="--enable-tvm-ffi")
    _draw(gates, page, 1, x, out, suppress=True)
    compiled(x, out)  # torch tensors straight into the TVM FFI function
    assert _control.get(page, _control.LAUNCHES) == 1 and torch.equal(out, torch.zeros(8))
    assert _launches(gates, page, 2, compiled, x, out) == 1 and torch.equal(out, 2 * x)
    out.zero_()
    _draw(gates, page, 3, x, out)
    _doubling()(runtime.from_dlpack(x), runtime.from_dlpack(out))  # JIT on call
    assert _control.get(page, _control.LAUNCHES) == 1
    assert torch.equal(out, 2 * x)


def test_launches_the_dsl_did_not_compile_here_are_not_counted(gates: _dsl.DslGates, page: mmap.mmap) -> None:
    import tvm_ffi
    from cutlass.base_dsl.jit_executor import JitExecutor
    from cutlass.cute import runtime

    x, out = torch.arange(8.0), torch.zeros(8)
    args = (runtime.from_dlpack(x), runtime.from_dlpack(out))
    eager: list[int] = []

    def answer(*_: Any) -> int:  # the eager "kernel" a forged launch runs
        out.copy_(2 * x)
        eager.append(1)
        return 0

    answer.restype = None  # type: ignore[attr-defined]  # what a JitExecutor reads of its host function
    compiled = cute.compile(_doubling(), *args)
    genuine = compiled.to(None)
    counted_program = type(genuine.capi_func)
    # a JitExecutor built by hand around a Python callable, and a real one whose function pointer was replaced
    by_hand = JitExecutor(types.SimpleNamespace(capi_func=answer), None, False)
    assert _launches(gates, page, 1, by_hand.run_compiled_program, []) == 0
    swapped = compiled.to(None)
    swapped.capi_func = answer
    assert _launches(gates, page, 2, swapped.run_compiled_program, []) == 0
    # the gate's own class around a Python callback: not a function the DSL compiled
    genuine.capi_func = counted_program(answer)
    assert _launches(gates, page, 3, genuine.run_compiled_program, []) == 0
    # a registered function whose settings would run Python in the native call, or whose address was rewritten
    exe_args, _kept = compiled.generate_execution_args(*args)  # the C pointers of a real call (kept: their owners)
    capi = compiled.capi_func

    class Converter:  # an argument type whose conversion runs Python inside the native call
        @classmethod
        def from_param(cls, value: Any) -> Any:
            answer()
            return value

    settings = {"restype": capi.restype, "argtypes": capi.argtypes}
    for setting, value in (("errcheck", lambda result, *_: result), ("restype", answer), ("argtypes", (Converter,))):
        program = compiled.to(None)
        setattr(capi, setting, value)
        assert _launches(gates, page, 4, program.run_compiled_program, exe_args) == 0, setting
        if setting in settings:
            setattr(capi, setting, settings[setting])
        else:
            delattr(capi, setting)
    assert _launches(gates, page, 4, compiled.to(None).run_compiled_program, exe_args) == 1  # settings as they were
    program = compiled.to(None)
    callback = counted_program(answer)
    memoryview(program.capi_func).cast("B")[:] = memoryview(callback).cast("B")
    assert _launches(gates, page, 5, program.run_compiled_program, []) == 0
    assert (
        _launches(gates, page, 6, compiled.capi_func, [0]) == 0
    )  # called with no array of pointers (ctypes refuses it)
    assert eager, "the forged launches ran"
    # TVM FFI: the kwargs wrapper replaced, a handle of a converted Python function moved into a registered
    # function or into a fresh object of the gate's class
    ffi = cute.compile(_doubling(), *args, options="--enable-tvm-ffi")
    counted = ffi._tvm_ffi_function
    assert _launches(gates, page, 7, ffi, x, out) == 1
    ffi._kwargs_wrapper = answer
    assert _launches(gates, page, 8, ffi, x, out) == 0
    fresh = type(counted).__new__(type(counted))
    fresh.__move_handle_from__(tvm_ffi.convert(answer))
    assert _launches(gates, page, 9, fresh, x, out) == 0
    counted.__move_handle_from__(tvm_ffi.convert(answer))
    assert _launches(gates, page, 10, counted, x, out) == 0


def test_a_program_is_made_only_from_the_dsls_own_engine_and_module(gates: _dsl.DslGates, page: mmap.mmap) -> None:
    from cutlass.base_dsl.dsl import BaseDSL
    from cutlass.base_dsl.jit_executor import JitExecutor
    from cutlass.cutlass_dsl import CuTeDSL
    from cutlass.cutlass_dsl.tvm_ffi_provider import TVMFFIJitCompiledFunctionBase

    class Engine:  # an engine of the submission's, handing out a Python function as the host function
        def lookup(self, name: str) -> Any:
            return lambda packed: 0

    made = BaseDSL._lookup_jit_entry(CuTeDSL._get_dsl(), Engine(), "doubling")
    made.restype = None
    assert (
        _launches(
            gates, page, 1, JitExecutor(types.SimpleNamespace(capi_func=made), None, False).run_compiled_program, []
        )
        == 0
    )
    forged = types.SimpleNamespace(engine=object(), ir_module="module", function_name="doubling")
    with pytest.raises(PermissionError, match="no MLIR module"):
        TVMFFIJitCompiledFunctionBase._create_tvm_ffi_function(forged)


def test_the_gates_sit_on_the_methods_the_cute_runtime_calls(gates: _dsl.DslGates) -> None:
    from cutlass.base_dsl.dsl import BaseDSL
    from cutlass.base_dsl.jit_executor import JitCompiledFunction, JitExecutor
    from cutlass.cute.runtime import _Tensor
    from cutlass.cutlass_dsl import CuTeDSL
    from cutlass.cutlass_dsl.cuda_jit_executor import CudaDialectJitCompiledFunction
    from cutlass.cutlass_dsl.tvm_ffi_provider import (
        TVMFFIJitCompiledFunctionBase,
        TVMFFIJitCompiledFunctionWithKwargs,
    )

    hooks = {(owner, attr): hook for owner, attr, hook in gates.patched}
    # cute.compile's result: its own __call__ checks workspace arguments, then super() reaches the gate
    assert "super().__call__" in inspect.getsource(CudaDialectJitCompiledFunction.__call__)
    assert JitCompiledFunction.__call__ is hooks[(JitCompiledFunction, "__call__")]
    assert JitExecutor.__call__ is hooks[(JitExecutor, "__call__")]
    # where the DSL turns an engine into a host function: cute.compile, a @cute.jit call and the TVM FFI classes
    assert BaseDSL._lookup_jit_entry is hooks[(BaseDSL, "_lookup_jit_entry")]
    assert "_lookup_jit_entry(engine" in inspect.getsource(importlib.import_module("cutlass.base_dsl.compile_backend"))
    assert "self._create_tvm_ffi_function()" in inspect.getsource(TVMFFIJitCompiledFunctionWithKwargs.__init__)
    assert (
        TVMFFIJitCompiledFunctionBase._create_tvm_ffi_function
        is hooks[(TVMFFIJitCompiledFunctionBase, "_create_tvm_ffi_function")]
    )
    # a @cute.jit function called directly runs getattr(dsl, "_func"): CuTeDSL does not override it
    assert CuTeDSL._func is hooks[(BaseDSL, "_func")]
    assert _Tensor.__init__ is hooks[(_Tensor, "__init__")]
