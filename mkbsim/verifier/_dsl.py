"""Counting, and on demand suppressing, the launches of a submission's DSL kernels.

A launch is a call into code the DSL compiled: for TIRx a function taken from a TVM runtime
module; for CuTe DSL a run of a JIT-compiled program (directly or through its TVM-FFI wrapper).
The hooks sit where every such call passes. A call that avoids them is simply not counted, so a
submission can only lose by it: an uncounted kernel looks like no DSL at all (`not_dsl`), and
real work hidden from suppression makes a counted kernel look decorative.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from mkbsim.verifier._guards import CANDIDATE, Attribution

# TVM's own helper functions, fetched from modules while exporting or linking: not kernels.
_TVM_INTERNAL_PREFIXES = ("__tvm", "_get_target_string")


class LaunchCounter:
    def __init__(self) -> None:
        self.launches = 0
        self.suppress = False

    def admit(self) -> bool:
        """Count one launch; False when it must be skipped (the bypass test)."""
        self.launches += 1
        return not self.suppress


class DslHooks:
    """The launch hooks and inline-CUDA detectors of one worker."""

    def __init__(self, dsl: str, attribution: Attribution) -> None:
        self.dsl = dsl
        self.attribution = attribution
        self.counter = LaunchCounter()
        self.inline_cuda: list[str] = []
        self.patched: list[tuple[Any, str, Any]] = []

    def _set(self, owner: Any, attr: str, value: Any) -> None:
        setattr(owner, attr, value)
        self.patched.append((owner, attr, value))

    def install(self) -> None:
        if self.dsl == "tirx":
            self._install_tirx()
        else:
            self._install_cutedsl()

    def _install_tirx(self) -> None:
        import tvm_ffi

        counter = self.counter
        base_call = tvm_ffi.Function.__call__
        original_get = tvm_ffi.Module.get_function

        class CountedFunction(tvm_ffi.Function):
            """A compiled TVM function whose calls pass the launch counter."""

            def __call__(self, *args: Any) -> Any:
                # counter.admit() inlined: one Python frame per launch, not two.
                counter.launches += 1
                if counter.suppress:
                    return None
                return base_call(self, *args)

        def get_function(module: Any, name: str, query_imports: bool = False) -> Any:
            func = original_get(module, name, query_imports)
            if name.startswith(_TVM_INTERNAL_PREFIXES):
                return func
            counted = CountedFunction.__new__(CountedFunction)
            counted.__move_handle_from__(func)
            return counted

        self._set(tvm_ffi.Module, "get_function", get_function)

        external = importlib.import_module("tvm.tirx.script.builder.external_kernel")
        source_init = external.SourceKernel.__init__

        def recording_init(kernel: Any, source_code: str) -> None:
            if self.attribution.anywhere(sys._getframe(1)):
                self.inline_cuda.append("T.call_kernel with a CUDA source string")
            source_init(kernel, source_code)

        self._set(external.SourceKernel, "__init__", recording_init)

    def _install_cutedsl(self) -> None:
        counter = self.counter
        jit_executor = importlib.import_module("cutlass.base_dsl.jit_executor")
        original_run = jit_executor.JitExecutor.run_compiled_program

        def run_compiled_program(executor: Any, exe_args: list[Any]) -> Any:
            counter.launches += 1
            if counter.suppress:
                return None
            return original_run(executor, exe_args)

        self._set(jit_executor.JitExecutor, "run_compiled_program", run_compiled_program)

        provider = importlib.import_module("cutlass.cutlass_dsl.tvm_ffi_provider")
        for cls_name in ("TVMFFIJitCompiledFunction", "TVMFFIJitCompiledFunctionWithKwargs"):
            cls = getattr(provider, cls_name)
            self._set(cls, "__call__", self._gated(cls.__call__))

        llvm = importlib.import_module("cutlass._mlir.dialects.llvm")
        original_asm = llvm.inline_asm

        def inline_asm(*args: Any, **kwargs: Any) -> Any:
            kind, _ = self.attribution.culprit(sys._getframe(1))
            if kind == CANDIDATE:
                self.inline_cuda.append("llvm.inline_asm (inline PTX)")
            return original_asm(*args, **kwargs)

        self._set(llvm, "inline_asm", inline_asm)

    def _gated(self, original: Callable[..., Any]) -> Callable[..., Any]:
        counter = self.counter

        def gated(*args: Any, **kwargs: Any) -> Any:
            counter.launches += 1
            if counter.suppress:
                return None
            return original(*args, **kwargs)

        return gated
