"""Where the gate (``_provenance``) sits in each DSL, and the inline-CUDA recorders (DESIGN §5).

A launch is a call into code the DSL compiled. TIRx: every function taken from a TVM runtime module,
at its call into the TVM FFI (``tvm_ffi.Function.__call__``, a Cython call straight into native code).
CuTe DSL: every run of a JIT-compiled program (``JitExecutor.run_compiled_program``, which calls the
host function into native code with arguments that already are C pointers) and every call of a TVM-FFI
compiled function. The calls above it, where the arguments are still tensors, are watched on correctness
draws without being counted: ``JitCompiledFunction.__call__`` (what ``cute.compile`` returns; the CUDA
dialect's subclass ends in ``super().__call__`` and reaches its executor's ``run_compiled_program``
directly, never the executor's ``__call__``), ``JitExecutor.__call__`` and ``BaseDSL._func`` (a
``@cute.jit`` function called directly). Only the outermost gate of a call watches. A call that
avoids the gate is not counted and not suppressed, so a submission can only lose by it: an uncounted
kernel looks like no DSL at all (``not_dsl``), and real work hidden from suppression leaves the outputs
right with launches suppressed (``decorative_dsl``).
"""

from __future__ import annotations

import importlib
import sys
import weakref
from typing import Any

from mkbsim.verifier._guards import Guards
from mkbsim.verifier._provenance import gate
from mkbsim.verifier._vault import Registry

# TVM's own helper functions, fetched from modules while exporting or linking: not kernels.
_TVM_INTERNAL_PREFIXES = ("__tvm", "_get_target_string")


def _counted_get_function(
    module: Any, name: str, query_imports: bool = False, *, _original: Any, _internal: Any, _wrap: Any, _cache: Any,
    _id: Any
) -> Any:  # fmt: skip
    """``module.get_function``: a kernel as a counted function, made once per module and name (a TVM
    executable looks its entry up on every call)."""
    key = (_id(module), name, query_imports)
    cached = _cache.get(key)
    if cached is not None and cached[0] is module:  # the module is held: its id is not reused
        return cached[1]
    func = _original(module, name, query_imports)
    if name.startswith(_internal):
        return func
    counted = _wrap(func, module, name)
    _cache[key] = (module, counted)
    return counted


def _wrap_counted(func: Any, module: Any, name: str, *, _cls: Any, _send: Any, _keep: Any) -> Any:
    """``func`` (``name`` in ``module``) as a function whose calls pass the gate, registered with the gate's
    vault (with its native handle, and a TVM FFI array holding the native function so that its address is
    never reused)."""
    counted = _cls.__new__(_cls)
    counted.__move_handle_from__(func)
    failed = _send((6, counted, _keep(counted), module, name))  # REGISTER a function
    if failed is not None:
        raise failed
    return counted


def _record_dlpack(
    made: Any, source: Any, *args: Any, _original: Any, _sources: Any, _ref: Any, _id: Any, _TypeError: Any,
    **kwargs: Any
) -> None:  # fmt: skip
    """CuTe DSL's DLPack tensor constructor (``cute.runtime._Tensor.__init__``, behind every
    ``from_dlpack`` name): remember which torch tensor a CuTe tensor views (weakly), so that the gate can
    copy and restore its memory."""
    _original(made, source, *args, **kwargs)
    try:
        _sources[_id(made)] = (_ref(made), _ref(source))
    except _TypeError:  # not a tensor that takes weak references: nothing to restore through it
        return


def _recording(*args: Any, _ask: Any, _original: Any, _getframe: Any, _what: str, **kwargs: Any) -> Any:
    _ask(("inline", _what, _getframe(1)))
    return _original(*args, **kwargs)


class DslGates:
    """Installs the gate for one DSL; ``patched`` lists the hooks (replacing one is tampering)."""

    def __init__(self, registry: Registry, guards: Guards, send: Any, dsl: str) -> None:
        self.registry = registry
        self.guards = guards
        self.send = send
        self.dsl = dsl
        self.dlpack_sources: dict[int, Any] = {}
        self.patched: list[tuple[Any, str, Any]] = []

    def gate_hook(self, original: Any, count: bool, functions: bool = False) -> Any:
        """The gate over ``original``, registered with the vault as genuine: a counted launch (``functions``:
        a call of a function the gate took from a module, see ``_wrap_counted``) or a call above one."""
        self.send((0, original, "function" if functions else "launch" if count else "outer"))  # REGISTER
        return self.registry.protect(gate, _send=self.send, _original=original, _count=count)

    def _set(self, owner: Any, attr: str, value: Any) -> None:
        setattr(owner, attr, value)
        self.patched.append((owner, attr, value))

    def install(self) -> None:
        if self.dsl == "tirx":
            self._install_tirx()
        else:
            self._install_cutedsl()
        self.send((0, None, None))  # SEAL: no original is registered after this

    def _install_tirx(self) -> None:
        import tvm_ffi

        base_call = tvm_ffi.Function.__call__

        class CountedFunction(tvm_ffi.Function):
            """A compiled TVM function whose calls pass the gate."""

        CountedFunction.__call__ = self.gate_hook(base_call, count=True, functions=True)  # type: ignore[method-assign]
        keep = tvm_ffi.get_global_func("ffi.Array")  # a native constructor: the array holds a reference
        wrap = self.registry.protect(_wrap_counted, _cls=CountedFunction, _send=self.send, _keep=keep)
        get_function = self.registry.protect(
            _counted_get_function, _original=tvm_ffi.Module.get_function, _internal=_TVM_INTERNAL_PREFIXES, _wrap=wrap,
            _cache={}, _id=id,
        )  # fmt: skip
        self._set(tvm_ffi.Module, "get_function", get_function)
        external = importlib.import_module("tvm.tirx.script.builder.external_kernel")
        self._record(external.SourceKernel, "__init__", "T.call_kernel with a CUDA source string")

    def _install_cutedsl(self) -> None:
        jit_executor = importlib.import_module("cutlass.base_dsl.jit_executor")
        executor = jit_executor.JitExecutor
        self._set(executor, "run_compiled_program", self.gate_hook(executor.run_compiled_program, count=True))
        # where the arguments are still CuTe/torch tensors: the compiled function a submission calls (its
        # CUDA-dialect subclass ends in super().__call__), an executor, and a @cute.jit function run directly
        compiled = jit_executor.JitCompiledFunction
        base_dsl = importlib.import_module("cutlass.base_dsl.dsl").BaseDSL
        for owner, attr in ((compiled, "__call__"), (executor, "__call__"), (base_dsl, "_func")):
            self._set(owner, attr, self.gate_hook(getattr(owner, attr), count=False))
        provider = importlib.import_module("cutlass.cutlass_dsl.tvm_ffi_provider")
        for cls_name in ("TVMFFIJitCompiledFunction", "TVMFFIJitCompiledFunctionWithKwargs"):
            cls = getattr(provider, cls_name)
            self._set(cls, "__call__", self.gate_hook(cls.__call__, count=True))
        # the constructor, not one of the names it is imported under (cute.from_dlpack, cutlass.torch, ...)
        dlpack_tensor = importlib.import_module("cutlass.cute.runtime")._Tensor
        record = self.registry.protect(
            _record_dlpack,
            _original=dlpack_tensor.__init__,
            _sources=self.dlpack_sources,
            _ref=weakref.ref,
            _id=id,
            _TypeError=TypeError,
        )
        self._set(dlpack_tensor, "__init__", record)
        llvm = importlib.import_module("cutlass._mlir.dialects.llvm")
        self._record(llvm, "inline_asm", "llvm.inline_asm (inline PTX)")

    def _record(self, owner: Any, attr: str, what: str) -> None:
        hook = self.registry.protect(
            _recording, _ask=self.guards.ask, _original=getattr(owner, attr), _getframe=sys._getframe, _what=what
        )
        self._set(owner, attr, hook)
