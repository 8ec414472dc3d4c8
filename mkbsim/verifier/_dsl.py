"""Where the gate (``_provenance``) sits in each DSL, and the inline-CUDA recorders (DESIGN §5).

A launch is a call into code the DSL compiled in this worker. TIRx: every function taken from a module
``tvm.tirx.build`` returned here (``tvm.compile`` and ``tvm.build`` end there), at its call into the TVM
FFI (``tvm_ffi.Function.__call__``, a Cython call straight into native code); a function of any other
module is not counted. A built module is accepted only if its host code is LLVM and its device code
CUDA, and its host code calls no outside symbol but TVM's error report, LLVM's arithmetic intrinsics and math
functions, and looks up no function by name but its own device kernels (``T.call_extern`` of ``dlopen``,
``system`` or ``TVMFFIFunctionCall``, a ``call_packed`` are refused there, whoever built the IR and however).
Native code is loaded from no file: ``load_module`` of a library this worker exported from a built
module returns that module (an honest disk cache), and is refused for any other file; exporting
takes no compiler, options or object files of the submission's. The compilers TVM starts run only
inside a build or an export (the guards' process rule).
CuTe DSL: a launch is a call of a host function the DSL compiled in this worker, made by the gate itself
from the engine the DSL built (DESIGN §5): ``BaseDSL._lookup_jit_entry`` (what ``cute.compile`` and a
``@cute.jit`` function called directly end in) is answered with a ctypes function of the gate's own class
over the symbol the engine's native ``raw_lookup`` finds, and ``_create_tvm_ffi_function`` (the
``--enable-tvm-ffi`` classes) with a TVM FFI function of the gate's class that the gate builds from the
module's object code, the DSL's ``BinaryExecutionEngine`` and its symbol. The vault counts a call only of
such an object, registered by identity, whose native address or handle is unchanged, with nothing that
runs Python in the native call (ctypes: one array of pointers of the runtime's own type, no ``errcheck``,
its ``argtypes`` and a C ``restype``; TVM FFI: plain arguments). So a ``JitExecutor`` built around a Python
callable, a compiled object whose ``capi_func``, ``_kwargs_wrapper`` or handle was replaced, a copy of the
class or a function converted from Python is not counted: what it runs is not the DSL's. The calls above
it, where the arguments are still tensors, are watched on correctness draws without being counted:
``JitCompiledFunction.__call__`` (what ``cute.compile`` returns; the CUDA dialect's subclass ends in
``super().__call__``), ``JitExecutor.__call__`` and ``BaseDSL._func`` (a ``@cute.jit`` function called
directly). Only the outermost gate of a call watches. A call that avoids the gate is not counted and not
suppressed, so a submission can only lose by it: an uncounted kernel looks like no DSL at all
(``not_dsl``), and real work hidden from suppression leaves the outputs right with launches suppressed
(``decorative_dsl``).
"""

from __future__ import annotations

import importlib
import sys
import weakref
from typing import Any

from mkbsim.verifier import _tir_memory
from mkbsim.verifier._guards import Binding, Guards, binding
from mkbsim.verifier._provenance import ERASED_BYTE, gate
from mkbsim.verifier._tir_identity import printed_kernel, same_kernel
from mkbsim.verifier._vault import Registry, identity_key

# TVM's own helper functions, fetched from modules while exporting or linking: not kernels.
_TVM_INTERNAL_PREFIXES = ("__tvm", "_get_target_string")

#: What a built module's host code may call outside itself by name: the C library's memory primitives and the
#: math functions (TIRx lowers T.exp and friends to them; an honest T.call_extern/call_pure_extern names them),
#: TVM's runtime, and LLVM's intrinsics (``_allowed_call``). Device code (CUDA) has no host symbols to call.
_MATH = (
    "sqrt", "rsqrt", "cbrt", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "pow", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "fabs", "fmin", "fmax",
    "fmod", "floor", "ceil", "trunc", "round", "rint", "nearbyint", "nextafter", "erf", "erfc", "fma", "hypot",
    "copysign", "ldexp", "lgamma", "tgamma", "remainder",
)  # fmt: skip
#: TVM's runtime, by exact name: honest host code names only its error report (the argument checks, T.Assert),
#: for the llvm and the cuda target alike (every TIRx solution, example and honest test case: see
#: tests/solutions/test_tirx_host_symbols.py). The rest of the runtime it uses (workspaces, T.parallel, a CUDA
#: kernel's launch) it reaches through pointers the loader fills (``__TVMFFIFunctionCall``...), which IR cannot
#: name. So no FFI entry point that calls or looks up a function or makes an object (``TVMFFIFunctionCall``,
#: ``TVMFFIFunctionGetGlobal``, ``TVMFFIFunctionCreate``...) is reachable: host code cannot call back into
#: Python (red team rt15b F4: ``T.call_extern("int32", "TVMFFIFunctionCall", ...)`` passed the ``TVM`` prefix).
TVM_RUNTIME_SYMBOLS = ("TVMFFIErrorSetRaisedFromCStrParts",)
HOST_SYMBOLS = frozenset(
    (*_MATH, *(f"{name}f" for name in _MATH), "memcpy", "memset", "memmove", "__bzero", "__extendhfsf2",
     "__truncsfhf2", "__truncdfhf2", "__gnu_h2f_ieee", "__gnu_f2h_ieee", "__truncsfbf2", "__truncdfbf2",
     *TVM_RUNTIME_SYMBOLS)
)  # fmt: skip
#: LLVM intrinsics by family (``_intrinsic_family``): arithmetic, bit, memory, conversion and hint intrinsics,
#: none of which calls code. Not ``llvm.experimental.patchpoint``/``gc.statepoint`` (a call of any address),
#: ``llvm.coro.resume``/``destroy`` (a call through a pointer in memory), nor the CPUs' own (``llvm.x86.int``
#: is a software interrupt: a system call outside the guards).
LLVM_INTRINSICS = frozenset((
    "assume", "expect", "lifetime.start", "lifetime.end", "invariant.start", "invariant.end", "prefetch",
    "memcpy", "memmove", "memset", "memcpy.inline", "memset.inline",
    "fabs", "fmuladd", "fma", "sqrt", "exp", "exp2", "exp10", "log", "log2", "log10", "pow", "powi", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "floor", "ceil", "trunc", "round", "roundeven",
    "rint", "nearbyint", "lround", "llround", "lrint", "llrint", "minnum", "maxnum", "minimum", "maximum",
    "minimumnum", "maximumnum", "copysign", "ldexp", "frexp", "canonicalize", "is.fpclass",
    "convert.to.fp16", "convert.from.fp16", "fptosi.sat", "fptoui.sat",
    "smin", "smax", "umin", "umax", "abs", "ctpop", "ctlz", "cttz", "bswap", "bitreverse", "fshl", "fshr",
    "sadd.with.overflow", "uadd.with.overflow", "ssub.with.overflow", "usub.with.overflow",
    "smul.with.overflow", "umul.with.overflow", "sadd.sat", "uadd.sat", "ssub.sat", "usub.sat", "sshl.sat",
    "ushl.sat", "smul.fix", "umul.fix", "scmp", "ucmp",
    "vector.reduce.add", "vector.reduce.mul", "vector.reduce.and", "vector.reduce.or", "vector.reduce.xor",
    "vector.reduce.smax", "vector.reduce.smin", "vector.reduce.umax", "vector.reduce.umin",
    "vector.reduce.fadd", "vector.reduce.fmul", "vector.reduce.fmax", "vector.reduce.fmin",
    "vector.reduce.fmaximum", "vector.reduce.fminimum", "masked.load", "masked.store", "masked.gather",
    "masked.scatter", "masked.expandload", "masked.compressstore",
))  # fmt: skip
NOT_BUILT = "only modules TIRx built in this worker may run"
#: The kinds of module a TIRx build produces: LLVM host code, CUDA device code.
BUILT_KINDS = ("llvm", "cuda")


def _declared(source: str) -> list[str]:
    """The functions an LLVM module declares but does not define (``declare ... @name(``)."""
    found = []
    for line in source.splitlines():
        if line.startswith("declare "):
            at = line.find("@")
            if at >= 0:
                found.append(line[at + 1 : line.find("(", at)].strip('"'))
    return found


def _looked_up(source: str, *, _len: Any) -> list[str]:
    """The functions an LLVM host module looks up by name at run time (``@.tvm_func.NAME``: a kernel of its
    device module, a ``call_packed`` of a registered function), each through the runtime's lookup from the
    module's imports, which falls back to every function registered in the process."""
    found = []
    for line in source.splitlines():
        for start in ("@.tvm_func.", '@".tvm_func.'):
            if line.startswith(start):
                end = line.find(" = ")
                found.append(line[_len(start) : end].strip('"'))
    return found


def _device_kernels(source: str, *, _len: Any, _range: Any) -> list[str]:
    """The kernels a CUDA C source defines (``extern "C" __global__ void __launch_bounds__(n) NAME(...``)."""
    found = []
    for line in source.splitlines():
        if "__global__" in line:
            tokens = line.replace("(", " ( ").split()
            for i in _range(1, _len(tokens)):
                if tokens[i] == "(" and tokens[i - 1] != "__launch_bounds__":
                    found.append(tokens[i - 1])
                    break
    return found


def _allowed_call(name: str, *, _symbols: Any, _intrinsics: Any, _len: Any) -> bool:
    """Whether host code may call ``name`` outside itself: one of ``_symbols`` (by exact name), or an LLVM
    intrinsic of one of the ``_intrinsics`` families, its overload's type suffixes aside (``llvm.memset.p0.i64``:
    ``memset``; a suffix is an integer, float, bfloat or pointer type, or a fixed or scalable vector of one)."""
    if name in _symbols:
        return True
    if not name.startswith("llvm."):
        return False
    parts = name[5:].split(".")
    while _len(parts) > 1:
        last = parts[-1]
        element = last[3:] if last.startswith("nxv") else last[1:] if last.startswith("v") else last
        element = element.lstrip("0123456789")
        kind = element.rstrip("0123456789")
        if kind == element or kind not in ("i", "f", "bf", "p"):
            break
        parts.pop()
    return ".".join(parts) in _intrinsics


def _built_module(
    mod: Any, target: Any = None, pipeline: Any = "default", *, _original: Any, _ask: Any, _getframe: Any,
    _built: Any, _identities: Any, _printed: Any, _same: Any, _kernel_classes: Any, _declared: Any, _allowed: Any,
    _looked_up: Any, _kernels: Any,
    _kinds: Any, _kind: Any,
    _source: Any, _list: Any, _id: Any, _type: Any, _str: Any, _len: Any, _context: Any, _passes: str,
    _checked: Any, _PermissionError: Any, _Exception: Any
) -> Any:  # fmt: skip
    """``tvm.tirx.build``: the module, registered as the DSL's own (with its imports) once its kinds and
    its host code's outside calls are checked; TVM's compilers may run meanwhile (``("building", ...)``), so
    the pipeline is one TVM registered by name, and no pass or instrument of the submission's runs in it.
    What is built is the TIR checked and bounded by ``_tir_memory.checked`` (``_checked``): a kernel reaches
    only its buffers' memory. Its kernels are named by that TIR up to its buffers' sizes (``_identities``: the
    first module built of each, ``_kernel_classes``; ``_tir_identity``)."""
    context = _context()
    if (pipeline is not None and _type(pipeline) is not _str) or _len(context.instruments) or _passes in context.config:
        what = "a TIRx build with a pipeline object, pass instruments or added lower passes"
        reason = "name one of TVM's pipelines: 'default', 'tirx'"
        raise _ask(("asked", what, reason, _getframe(1))) or _PermissionError(f"mkbsim verifier: {what} ({reason})")
    mod, reach = _checked(mod, target)
    if reach:
        what = "a TIRx kernel with " + ", ".join(reach)
        reason = (
            "a TIRx kernel reaches only the memory of its tensor arguments and its own buffers, through buffer "
            "indices (on the CPU, an index outside its dimension is clamped into it)"
        )
        raise _ask(("asked", what, reason, _getframe(1))) or _PermissionError(f"mkbsim verifier: {what} ({reason})")
    _ask(("building", True))
    try:
        built = _original(mod, target, pipeline)
    finally:
        _ask(("building", False))
    pending, tree = [built], []
    while pending:
        module = pending.pop()
        tree.append(module)
        pending += _list(module.imports_)
    refused = [f"a {_kind(m)!r} module" for m in tree if _kind(m) not in _kinds]
    if not refused:
        host = _source(built, "ll")
        # by name, a host module may look up only its device code's kernels (and the runtime's device setter):
        # a lookup of anything else (``call_packed``, however its IR was made) reaches any registered function
        kernels = [name for m in tree[1:] for name in _kernels(_source(m, ""))]
        refused = [f"a call of {name!r}" for name in _declared(host) if not _allowed(name)] + [
            f"a lookup of the function {name!r}" for name in _looked_up(host)
            if name != "__tvm_set_device" and name not in kernels
        ]  # fmt: skip
    if refused:
        what = "a TIRx module with " + ", ".join({item: None for item in refused})  # each once, in order
        reason = (
            "a TIRx kernel runs LLVM host and CUDA device code and calls nothing outside itself but math "
            "functions, LLVM's arithmetic intrinsics and TVM's error report, and looks up no function but its own "
            "device kernels"
        )
        raise _ask(("asked", what, reason, _getframe(1))) or _PermissionError(f"mkbsim verifier: {what} ({reason})")
    try:
        printed = _printed(mod)
    except _Exception:  # TIR TVM's printer or Python's tokenizer does not take: the module names its kernels
        printed = None
    identity = None
    for known, named in _kernel_classes if printed is not None else ():
        if _same(known, printed):
            identity = named
            break
    if identity is None and printed is not None:
        identity = f"tirx kernel {_len(_kernel_classes)}"
        _kernel_classes.append((printed, identity))
    for module in tree:
        _built[_id(module)] = module  # held: its id is never reused
        if identity is not None:
            _identities[_id(module)] = identity
    return built


def _counted_get_function(
    module: Any, name: str, query_imports: bool = False, *, _original: Any, _internal: Any, _wrap: Any, _cache: Any,
    _id: Any, _built: Any, _identities: Any, _ask: Any, _getframe: Any, _NOT_BUILT: Any
) -> Any:  # fmt: skip
    """``module.get_function``: a kernel as a counted function, made once per module and name (a TVM
    executable looks its entry up on every call). A function of a module the DSL did not build here is
    refused to the submission (TVM's own lookups get it, uncounted)."""
    key = (_id(module), name, query_imports)
    cached = _cache.get(key)
    if cached is not None and cached[0] is module:  # the module is held: its id is not reused
        return cached[1]
    if name.startswith(_internal):
        return _original(module, name, query_imports)  # TVM's helpers: not launches
    if _built.get(_id(module)) is not module:
        refused = _ask(
            ("asked", f"a function of a module TIRx did not build here ({name!r})", _NOT_BUILT, _getframe(1))
        )
        if refused is not None:
            raise refused
        return _original(module, name, query_imports)
    func = _original(module, name, query_imports)
    counted = _wrap(func, module, name, _identities.get(_id(module)))
    _cache[key] = (module, counted)
    return counted


def _wrap_counted(
    func: Any, module: Any, name: str, identity: str | None = None, *, _cls: Any, _send: Any, _keep: Any
) -> Any:  # fmt: skip
    """``func`` (``name`` in ``module``; None: a CuTe program, known by its own handle) as a function whose
    calls pass the gate, registered with the gate's vault (with its native handle, and a TVM FFI array
    holding the native function so that its address is never reused); ``identity``: the TIR it was built from, up
    to its buffers' sizes (None: the module's handle names it)."""
    counted = _cls.__new__(_cls)
    counted.__move_handle_from__(func)
    failed = _send((6, counted, _keep(counted), counted if module is None else module, name, identity))  # REGISTER
    if failed is not None:
        raise failed
    return counted


def _ffi_program(
    compiled: Any, *, _export: Any, _engine: Any, _lookup: Any, _libs: Any, _from_extern: Any, _wrap: Any,
    _type: Any, _module: Any, _str: Any, _ask: Any, _getframe: Any, _PermissionError: Any
) -> Any:  # fmt: skip
    """``TVMFFIJitCompiledFunctionBase._create_tvm_ffi_function``: the DSL's own steps, through C functions
    bound before the submission loaded (its module's object code, a ``BinaryExecutionEngine`` over it, the
    ``__tvm_ffi_`` symbol), ending in a counted function the vault registers; nothing read from the compiled
    object but its MLIR module and its name."""
    if compiled.engine is None:
        return None
    module, name = compiled.ir_module, compiled.function_name
    if _type(module) is not _module or _type(name) is not _str:
        what = "a CuTe DSL program made from an object that is no MLIR module"
        reason = "only what the CuTe DSL compiled may run"
        raise _ask(("asked", what, reason, _getframe(1))) or _PermissionError(f"mkbsim verifier: {what} ({reason})")
    engine = _engine(_export(module, format="o", opt_level=3, enable_pic=True), _libs, True)
    compiled.engine = engine
    return _wrap(_from_extern(_lookup(engine, "__tvm_ffi_" + name), keep_alive_object=engine), None, name)


def _capi_program(
    dsl: Any, engine: Any, function_name: Any, *, _original: Any, _engine: Any, _raw_lookup: Any, _cls: Any,
    _send: Any, _type: Any, _str: Any
) -> Any:  # fmt: skip
    """``BaseDSL._lookup_jit_entry``: the host function of an engine the DSL built, as a ctypes function of
    the gate's counted class over the address the engine's native ``raw_lookup`` gives, registered with
    the vault. Anything else (no such engine, no such symbol) gets the DSL's own answer, never counted."""
    address = 0
    if _type(engine) is _engine and _type(function_name) is _str:
        address = _raw_lookup(engine, "_mlir_ciface_" + function_name)
    if not address:
        return _original(dsl, engine, function_name)
    counted = _cls(address)
    failed = _send((8, counted))  # REGISTER a CuTe host function
    if failed is not None:
        raise failed
    return counted


def _exported(
    module: Any, file_name: Any, *, fcompile: Any = None, addons: Any = None, workspace_dir: Any = None,
    _original: Any, _ask: Any, _getframe: Any, _built: Any, _exports: Any, _realpath: Any, _id: Any, _type: Any,
    _str: Any, _PermissionError: Any, **options: Any
) -> Any:  # fmt: skip
    """``Module.export_library``: with TVM's own compiler and flags only (no ``fcompile``, ``cc``, options
    or object files of the submission's), remembered for ``load_module`` if the module is a built one."""
    given = (("fcompile", fcompile), ("addons", addons), *options.items())
    chosen = [name for name, value in given if value is not None]
    if chosen or _type(file_name) is not _str:
        what = "export_library with " + (", ".join(chosen) if chosen else "a file name that is no str")
        reason = "TVM's own compiler and flags only, to a file named by a str"
        raise _ask(("asked", what, reason, _getframe(1))) or _PermissionError(f"mkbsim verifier: {what} ({reason})")
    _ask(("building", True))
    try:
        result = _original(module, file_name, workspace_dir=workspace_dir)
    finally:
        _ask(("building", False))
    if _built.get(_id(module)) is module:
        _exports[_realpath(file_name)] = module
    return result


def _loaded_module(
    path: Any, *args: Any, _ask: Any, _getframe: Any, _exports: Any, _realpath: Any, _type: Any, _str: Any,
    _PermissionError: Any, **kwargs: Any
) -> Any:  # fmt: skip
    """``load_module``: the built module this worker exported to ``path`` (not the file, whatever it holds
    now); any other library is refused."""
    module = _exports.get(_realpath(path)) if _type(path) is _str else None
    if module is not None:
        return module
    what = f"loading the native library {path!r}" if _type(path) is _str else "loading a native library"
    reason = "only modules TIRx built in this worker (or exported here and loaded back) may run"
    raise _ask(("asked", what, reason, _getframe(1))) or _PermissionError(f"mkbsim verifier: {what} ({reason})")


def _record_dlpack(
    made: Any, source: Any, *args: Any, _original: Any, _sources: Any, _ref: Any, _key: Any, _TypeError: Any,
    **kwargs: Any
) -> None:  # fmt: skip
    """CuTe DSL's DLPack tensor constructor (``cute.runtime._Tensor.__init__``, behind every
    ``from_dlpack`` name): remember which torch tensor a CuTe tensor views (weakly), so that the gate can
    copy and restore its memory."""
    _original(made, source, *args, **kwargs)
    try:
        _sources[_key(made)] = (_ref(made), _ref(source))
    except _TypeError:  # not a tensor that takes weak references: nothing to restore through it
        return


def _recording(*args: Any, _ask: Any, _original: Any, _getframe: Any, _what: str, **kwargs: Any) -> Any:
    _ask(("inline", _what, _getframe(1)))
    return _original(*args, **kwargs)


def tir_memory_check(protect: Any) -> Any:
    """``_tir_memory.checked`` over TVM's classes and functions as they are now (before the submission loads),
    each part made a hook by ``protect`` (``Registry.protect``)."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    refused = protect(
        _tir_memory.refused_reach, _walk=tvm_ffi.structural_walk, _type=type, _getattr=getattr, _Call=tvm.ir.Call,
        _Cast=tirx.Cast, _Pointer=tvm.ir.PointerType, _DeclBuffer=tirx.DeclBuffer,
        _vector=(tirx.Ramp, tirx.Broadcast, tirx.Shuffle), _regions=(tirx.TilePrimitiveCall, tvm.ir.TensorRegion),
        _String=tvm.ir.StringImm,
        _memory=_tir_memory.MEMORY_FUNCTIONS, _extern=_tir_memory.EXTERN_OPS, _intrinsic=_tir_memory.INTRINSIC_OPS,
        _Alloc=tirx.AllocBuffer, _SBlock=s_tir.SBlock, _IntImm=tirx.IntImm, _len=len,
    )  # fmt: skip
    clamped = protect(
        _tir_memory.clamped, _mutate=tvm_ffi.structural_mutate, _equal=tvm_ffi.structural_equal, _type=type,
        _For=tirx.For, _Load=tvm.ir.TensorLoad, _Store=tirx.BufferStore, _IntImm=tirx.IntImm, _Var=tirx.Var,
        _load=tirx.BufferLoad, _store=tirx.BufferStore, _min=tirx.Min, _max=tirx.Max, _cast=tirx.Cast,
        _const=tirx.const, _zip=zip, _GT=tirx.GT, _And=tirx.And,
        _if_then_else=tirx.if_then_else, _IfThenElse=tirx.IfThenElse,
    )  # fmt: skip
    filled = protect(
        _tir_memory.filled, _mutate=tvm_ffi.structural_mutate, _type=type, _Seq=tirx.SeqStmt, _Alloc=tirx.AllocBuffer,
        _SBlock=s_tir.SBlock, _seq=tirx.SeqStmt, _block=s_tir.SBlock, _for=tirx.For,
        _serial=tirx.ForKind.SERIAL, _var=tirx.Var, _store=tirx.BufferStore, _const=tirx.const,
        _reinterpret=tirx.reinterpret, _broadcast=tirx.Broadcast, _zip=zip,
        _IntImm=tirx.IntImm, _Store=tirx.BufferStore, _Load=tvm.ir.TensorLoad, _walk=tvm_ffi.structural_walk,
        _byte=ERASED_BYTE,
    )  # fmt: skip
    sized = protect(
        _tir_memory.sized, _mutate=tvm_ffi.structural_mutate, _type=type, _Seq=tirx.SeqStmt, _Alloc=tirx.AllocBuffer,
        _SBlock=s_tir.SBlock, _seq=tirx.SeqStmt, _block=s_tir.SBlock, _BufferType=tirx.BufferType, _IntImm=tirx.IntImm,
        _assert=tirx.AssertStmt, _String=tvm.ir.StringImm, _const=tirx.const, _cast=tirx.Cast, _Max=tirx.Max,
        _LE=tirx.LE, _floordiv=tirx.floordiv, _mul=tirx.Mul, _max=max, _min=min, _limit=_tir_memory.ADDRESS_SPACE,
        _add=tirx.Add, _sub=tirx.Sub, _GE=tirx.GE, _zip=zip,
    )  # fmt: skip
    return protect(
        _tir_memory.checked, _refused=refused, _clamped=clamped, _filled=filled, _sized=sized,
        _mutate=tvm_ffi.structural_mutate,
        _type=type, _PrimFunc=tirx.PrimFunc, _Target=tvm.target.Target, _current=tvm.target.Target.current,
        _cpu=_tir_memory.CPU_KINDS,
    )  # fmt: skip


class DslGates:
    """Installs the gate for one DSL; ``patched`` lists the hooks (replacing one is tampering)."""

    def __init__(self, registry: Registry, guards: Guards, send: Any, dsl: str, serial: Any) -> None:
        self.registry = registry
        self.guards = guards
        self.send = send
        self.dsl = dsl
        self.serial = serial  # the worker's launch lock, shared with the provenance mode (``_provenance.gate``)
        self.dlpack_sources: dict[int, Any] = {}
        self.patched: list[Binding] = []

    def gate_hook(self, original: Any, role: str) -> Any:
        """The gate over ``original``, registered with the vault as genuine: ``role`` "function" (a counted
        call of a TVM FFI function the gate made, see ``_wrap_counted``), "program" (a counted call of a CuTe
        host function the gate made, ``_capi_program``) or "outer" (a call above one, watched, not counted)."""
        self.send((0, original, role))  # REGISTER
        return self.registry.protect(
            gate, _send=self.send, _original=original, _count=role != "outer", _serial=self.serial
        )

    def counted_functions(self) -> Any:
        """The TVM FFI function class whose calls the gate counts, and the hook that makes a registered one."""
        import tvm_ffi

        class CountedFunction(tvm_ffi.Function):
            """A compiled TVM function whose calls pass the gate."""

        CountedFunction.__call__ = self.gate_hook(tvm_ffi.Function.__call__, "function")  # type: ignore[method-assign]
        keep = tvm_ffi.get_global_func("ffi.Array")  # a native constructor: the array holds a reference
        return self.registry.protect(_wrap_counted, _cls=CountedFunction, _send=self.send, _keep=keep)

    def _set(self, owner: Any, attr: str, value: Any) -> None:
        setattr(owner, attr, value)
        self.patched.append(binding(owner, attr))

    def install(self) -> None:
        if self.dsl == "tirx":
            self._install_tirx()
        else:
            self._install_cutedsl()
        self.send((0, None, None))  # SEAL: no original is registered after this

    def _install_tirx(self) -> None:
        import tvm_ffi

        wrap = self.counted_functions()
        built: dict[int, Any] = {}
        identities: dict[int, str] = {}  # a built module's id -> its TIR's identity up to sizes (``_tir_identity``)
        get_function = self.registry.protect(
            _counted_get_function, _original=tvm_ffi.Module.get_function, _internal=_TVM_INTERNAL_PREFIXES, _wrap=wrap,
            _cache={}, _id=id, _built=built, _identities=identities, _ask=self.guards.ask, _getframe=sys._getframe,
            _NOT_BUILT=NOT_BUILT,
        )  # fmt: skip
        self._set(tvm_ffi.Module, "get_function", get_function)
        self._install_tirx_modules(built, identities)
        external = importlib.import_module("tvm.tirx.script.builder.external_kernel")
        self._record(external.SourceKernel, "__init__", "T.call_kernel with a CUDA source string")

    def _install_tirx_modules(self, built: dict[int, Any], identities: dict[int, str]) -> None:
        """Where TIRx modules come from: ``tvm.tirx.build`` (registered in ``built``, its TIR's identity in
        ``identities``), an export of one and loading it back; every other way to a module of native code is
        refused."""
        import io
        import os
        import tokenize

        import tvm
        import tvm_ffi

        common = {"_ask": self.guards.ask, "_getframe": sys._getframe, "_PermissionError": PermissionError,
                  "_type": type, "_str": str}  # fmt: skip
        paths = {"_realpath": os.path.realpath}
        build = self.registry.protect(
            _built_module, _original=tvm.tirx.build, _built=built, _identities=identities,
            _printed=self.registry.protect(
                printed_kernel, _script=tvm.runtime.Scriptable.script, _tokens=tokenize.generate_tokens,
                _reader=io.StringIO, _NUMBER=tokenize.NUMBER, _NAME=tokenize.NAME, _OP=tokenize.OP, _int=int,
                _len=len, _enumerate=enumerate, _tuple=tuple,
            ),
            _same=self.registry.protect(same_kernel, _len=len, _zip=zip, _int=int), _kernel_classes=[],
            _Exception=Exception,
            _declared=self.registry.protect(_declared),
            _allowed=self.registry.protect(_allowed_call, _symbols=HOST_SYMBOLS, _intrinsics=LLVM_INTRINSICS, _len=len),
            _looked_up=self.registry.protect(_looked_up, _len=len),
            _kernels=self.registry.protect(_device_kernels, _len=len, _range=range),
            _kinds=BUILT_KINDS,
            _kind=tvm_ffi.get_global_func("ffi.ModuleGetKind"),
            _source=tvm_ffi.get_global_func("ffi.ModuleInspectSource"), _list=list, _len=len,
            _context=tvm_ffi.get_global_func("transform.GetCurrentPassContext"), _passes="tir.add_lower_pass", _id=id,
            _checked=tir_memory_check(self.registry.protect), **common,
        )  # fmt: skip
        for owner in (tvm.tirx, sys.modules["tvm.tirx.build"]):
            self._set(owner, "build", build)
        exports: dict[str, Any] = {}
        export = self.registry.protect(
            _exported, _original=tvm.runtime.Module.export_library, _built=built, _exports=exports, _id=id,
            **common, **paths,
        )  # fmt: skip
        self._set(tvm.runtime.Module, "export_library", export)
        load = self.registry.protect(_loaded_module, _exports=exports, **common, **paths)
        for owner, attr in ((tvm.runtime, "load_module"), (sys.modules["tvm.runtime.module"], "load_module"),
                            (sys.modules["tvm.runtime.module"], "_load_module"), (tvm_ffi, "load_module"),
                            (sys.modules["tvm_ffi.module"], "load_module")):  # fmt: skip
            self._set(owner, attr, load)

    def _install_cutedsl(self) -> None:
        import ctypes
        import os

        import tvm_ffi

        jit_executor = importlib.import_module("cutlass.base_dsl.jit_executor")
        base_dsl = importlib.import_module("cutlass.base_dsl.dsl").BaseDSL
        # where the arguments are still CuTe/torch tensors: the compiled function a submission calls (its
        # CUDA-dialect subclass ends in super().__call__), an executor, and a @cute.jit function run directly
        for owner, attr in ((jit_executor.JitCompiledFunction, "__call__"), (jit_executor.JitExecutor, "__call__"),
                            (base_dsl, "_func")):  # fmt: skip
            self._set(owner, attr, self.gate_hook(getattr(owner, attr), "outer"))

        class CountedProgram(ctypes._CFuncPtr):  # type: ignore[name-defined]
            """A CuTe host function the DSL compiled here, whose calls pass the gate (the prototype of the
            MLIR engine's ``lookup``: ``void (void *)``, C calling convention)."""

            _flags_ = ctypes._FUNCFLAG_CDECL  # type: ignore[attr-defined]
            _argtypes_ = (ctypes.c_void_p,)
            _restype_ = None

        CountedProgram.__call__ = self.gate_hook(ctypes._CFuncPtr.__call__, "program")  # type: ignore[attr-defined]
        engines = importlib.import_module("cutlass._mlir.execution_engine").ExecutionEngine
        capi = self.registry.protect(
            _capi_program, _original=base_dsl._lookup_jit_entry, _engine=engines,
            _raw_lookup=engines.__mro__[1].raw_lookup, _cls=CountedProgram, _send=self.send, _type=type, _str=str,
        )  # fmt: skip
        self._set(base_dsl, "_lookup_jit_entry", capi)
        ir = importlib.import_module("cutlass._mlir._mlir_libs._cutlass_ir")
        binary_engine = importlib.import_module(ir.__name__ + "._execution_engine").BinaryExecutionEngine
        libs = importlib.import_module("cutlass.base_dsl.env_manager").get_prefix_dsl_libs("CUTE_DSL")
        ffi = self.registry.protect(
            _ffi_program, _export=ir._aot_support.export_module_to_bytes, _engine=binary_engine,
            _lookup=binary_engine.lookup, _libs=libs.split(os.pathsep) if libs else [],
            _from_extern=tvm_ffi.Function.__from_extern_c__, _wrap=self.counted_functions(),
            _type=type, _module=importlib.import_module("cutlass._mlir.ir").Module, _str=str, _ask=self.guards.ask,
            _getframe=sys._getframe, _PermissionError=PermissionError,
        )  # fmt: skip
        provider = importlib.import_module("cutlass.cutlass_dsl.tvm_ffi_provider")
        self._set(provider.TVMFFIJitCompiledFunctionBase, "_create_tvm_ffi_function", ffi)
        # the constructor, not one of the names it is imported under (cute.from_dlpack, cutlass.torch, ...)
        dlpack_tensor = importlib.import_module("cutlass.cute.runtime")._Tensor
        record = self.registry.protect(
            _record_dlpack,
            _original=dlpack_tensor.__init__,
            _sources=self.dlpack_sources,
            _ref=weakref.ref,
            _key=identity_key,
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
