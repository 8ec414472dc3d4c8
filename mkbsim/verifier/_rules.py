"""What a submission may not use (DESIGN §5), shared by the static scan and the runtime guards.

Each rule maps a module prefix or dotted name to the reason an agent is shown.
"""

from __future__ import annotations

import re

DSLS = ("cutedsl", "tirx")

_OTHER_LANGUAGE = "another kernel language or compiler"
_FFI = "a foreign-function interface that loads native code"
_PROCESS = "subprocesses and signals are forbidden"
_NATIVE = "native code of the submission's own (only modules TIRx built in this worker may run)"
_NETWORK = "network access is forbidden"
_INTROSPECTION = "introspection of the verifier's process is forbidden"
_CODE_FROM_BYTES = (
    "unpickling (pickle, marshal, dill) runs whatever callable the bytes name; keep your own objects in module "
    "variables or a dict (copy.deepcopy copies them)"
)
_REFERENCE = "the reference and the input generator are off limits"
_LIBRARY = "a kernel library (kernels must be written in the DSL)"
_CALLBACK = "Python callbacks registered for kernels are forbidden"
_GRAPHS = "CUDA Graphs are forbidden"
RAW_MEMORY = "reading or writing memory at raw addresses is forbidden"
#: subinterpreters have no audit hooks of the main interpreter's (``sys.addaudithook`` is per interpreter); the
#: interpreter's test extensions are C-API shims (``call_in_temporary_c_thread``, ``run_in_subinterp``)
UNGUARDED = "subinterpreters and the interpreter's C test modules run code the verifier's guards never see"
DEFERRED = "work the harness would run after the timed call (collector callbacks, finalizers) is forbidden"
SERIALISATION = "tensors through serialisation, files or shared memory are forbidden (keep the data in tensors)"
INTERPRETER = "changing the interpreter's recursion limit, thread stacks or switch interval is forbidden"
DISPATCHER = "registering kernels for torch's own operators (torch.library on aten, prims, ...) is forbidden"
PER_ELEMENT = "a tensor's elements handed to Python one by one (apply_, map_, map2_) are forbidden (compute in the DSL)"
#: Tensor methods whose C++ loop calls a Python callable per element
PER_ELEMENT_METHODS = ("apply_", "map_", "map2_")

#: numpy's modules whose functions read or write memory at raw addresses: ``as_strided`` steps anywhere from an array
#: (its ``DummyArray`` carries any array interface), ``ctypeslib`` turns ctypes pointers into arrays and loads native
#: libraries (numpy 2's private name of the first too).
NUMPY_RAW_MODULES = ("numpy.lib.stride_tricks", "numpy.lib._stride_tricks_impl", "numpy.ctypeslib")

#: Module prefixes forbidden in every submission.
FORBIDDEN_MODULES: dict[str, str] = {
    **dict.fromkeys(
        ("triton", "cupy", "numba", "pycuda", "jax", "tensorflow", "tilelang", "taichi", "warp",
         "hidet", "pyopencl", "thunderkittens", "torch._inductor", "torch._dynamo", "torch.compiler",
         "torch.jit", "torch.cuda.jiterator", "cuda.core", "cuda.nvrtc", "cuda.bindings.nvrtc",
         "tvm.meta_schedule", "tvm.autotvm", "tvm.auto_scheduler"),
        _OTHER_LANGUAGE,
    ),
    "torch.utils.cpp_extension": "CUDA/C++ extensions (load_inline, cpp_extension) are forbidden",
    **dict.fromkeys(("ctypes", "_ctypes", "cffi"), _FFI),
    **dict.fromkeys(("torch.serialization", "torch.package"), SERIALISATION),
    # TVM's C/C++ compiler helpers, process pools and native-library builders (load_inline, embedded cubins)
    **dict.fromkeys(
        ("tvm.support", "tvm_ffi.cpp", "tvm_ffi.utils.embed_cubin", "tvm.exec", "cutlass.base_dsl.export"), _NATIVE
    ),
    **dict.fromkeys(
        ("subprocess", "multiprocessing", "concurrent.futures.process", "pty", "pexpect", "sh",
         "plumbum", "signal", "_posixsubprocess"),
        _PROCESS,
    ),
    **dict.fromkeys(
        ("socket", "_socket", "ssl", "http", "urllib", "urllib3", "requests", "httpx", "aiohttp",
         "ftplib", "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc", "asyncio", "websocket",
         "websockets", "paramiko"),
        _NETWORK,
    ),
    **dict.fromkeys(
        ("gc", "inspect", "importlib", "runpy", "pkgutil", "code", "codeop", "builtins", "resource", "tracemalloc",
         "faulthandler"),
        _INTROSPECTION,
    ),
    # loading objects from bytes calls whatever the bytes name (a pickle's REDUCE: any callable, out of the scan's view)
    **dict.fromkeys(("marshal", "pickle", "_pickle", "dill", "cloudpickle", "shelve"), _CODE_FROM_BYTES),
    **dict.fromkeys(("problems", "mkbsim"), _REFERENCE),
    **dict.fromkeys(
        ("_xxsubinterpreters", "_xxinterpchannels", "_interpreters", "_interpchannels", "_interpqueues",
         "concurrent.interpreters", "interpreters", "test.support.interpreters"),
        UNGUARDED,
    ),
    # numpy's modules that build arrays over any address (unchecked strides, ctypes pointers, the ``.ctypes`` of an
    # array); numpy itself is the submission's to use (its foreign-memory conversions are refused at run time)
    **dict.fromkeys(NUMPY_RAW_MODULES, RAW_MEMORY),
    **dict.fromkeys(
        ("tvm.topi", "tvm.relax", "tvm.relay", "tvm.contrib", "tvm.rpc", "flashinfer", "flash_attn",
         "quack", "sgl_kernel", "vllm", "xformers", "apex", "liger_kernel", "transformer_engine",
         "deep_gemm", "torchao", "bitsandbytes", "cutlass_library", "fla", "mamba_ssm",
         "causal_conv1d", "sageattention", "gemlite", "tensorrt", "onnxruntime"),
        _LIBRARY,
    ),
}  # fmt: skip

#: Top-level module names starting so are the interpreter's test and example C extensions (lib-dynload's
#: ``_testcapi``, ``_testinternalcapi``, ``_xxtestfuzz``, ``_ctypes_test``, ``xxlimited_35``...): refused by prefix,
#: whatever a later Python adds.
TEST_EXTENSION_PREFIXES = ("_test", "_xxtestfuzz", "_ctypes_test", "xxlimited", "xxsubtype")
#: ...and the names they ship under (3.11-3.13), refused as any component of a dotted name (``lib._testcapi``).
TEST_EXTENSIONS = (
    "_testcapi", "_testinternalcapi", "_testbuffer", "_testclinic", "_testclinic_limited", "_testimportmultiple",
    "_testmultiphase", "_testsinglephase", "_testlimitedcapi", "_testexternalinspection", "_xxtestfuzz",
    "_ctypes_test", "xxlimited", "xxlimited_35", "xxsubtype", "_xxsubinterpreters", "_xxinterpchannels",
    "_interpreters", "_interpchannels", "_interpqueues",
)  # fmt: skip

#: Modules of the other variant's DSL (and raw CUDA driver bindings where the DSL never needs them).
OTHER_DSL_MODULES: dict[str, dict[str, str]] = {
    "tirx": {
        "cutlass": "CuTe DSL is the other variant's DSL; this is a TIRx submission",
        "cuda": "raw CUDA driver bindings are not part of a TIRx submission",
    },
    "cutedsl": {"tvm": "TIRx/TVM is the other variant's DSL; this is a CuTe DSL submission"},
}

#: torch's switches that take the Python dispatch key (where the verifier's dispatch modes see every eager op)
#: out of the ops that follow: eager work done under them would be invisible to the provenance audit.
DISPATCH_KEY_CONTROLS = (
    "_ExcludeDispatchKeyGuard", "ExcludeDispatchKeyGuard", "_SetExcludeDispatchKeyGuard", "_IncludeDispatchKeyGuard",
    "_ForceDispatchKeyGuard", "_DisableTorchDispatch", "_DisablePythonDispatcher",
    "_dispatch_tls_set_dispatch_key_excluded", "_dispatch_tls_set_dispatch_key_included",
)  # fmt: skip

#: Module-level aliases of the dispatch-mode stack's pops (bound before the guards existed): eager work done with
#: the modes popped would be invisible to the provenance audit.
DISPATCH_MODE_BYPASSES = (
    "torch.utils._python_dispatch._pop_mode", "torch.utils._python_dispatch._disable_current_modes",
    "torch.utils._python_dispatch._pop_mode_temporarily", "torch._ops._pop_mode_from_pre_dispatch",
)  # fmt: skip

#: TVM's structural hashing and comparison read a tensor's bytes in C++ (red team rt71 F1, rt67 F0: the hash of a
#: one-element view, imported by ``tvm_ffi.from_dlpack``, inverted by a table made at import, carried a whole eager
#: answer out to Python with no operator): refused to the submission, wherever TVM's own code may still call them.
STRUCTURAL = "TVM's structural hash and comparison read tensors' bytes outside a DSL launch"
STRUCTURAL_ENTRIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tvm_ffi", ("structural_hash", "structural_equal", "get_first_structural_mismatch", "StructuralKey")),
    ("tvm_ffi.structural", ("structural_hash", "structural_equal", "get_first_structural_mismatch", "StructuralKey")),
    ("tvm_ffi._ffi_api", ("StructuralHash", "StructuralEqual", "GetFirstStructuralMismatch", "StructuralKey",
                          "StructuralKeyEqual")),
    ("tvm.ir", ("assert_structural_equal",)),
    ("tvm.ir.base", ("assert_structural_equal",)),
)  # fmt: skip
STRUCTURAL_NAMES = tuple(f"{module}.{name}" for module, names in STRUCTURAL_ENTRIES for name in names)
#: A TVM FFI function handed a tensor outside a counted launch: TVM's C++ may read its bytes in any function (the
#: structural family was one found; its printers, serialisers and containers' methods are others), so a tensor
#: enters TVM's C++ only through a launch the gate counts (``_guards._ffi_tensor_call``).
FFI_TENSORS = "a TVM FFI function other than a DSL launch was handed a tensor (TVM's C++ may read its bytes)"

#: Dotted names (matched as prefixes) whose use is forbidden wherever they appear.
FORBIDDEN_NAMES: dict[str, str] = {
    "torch.compile": "torch.compile is " + _OTHER_LANGUAGE,
    "torch.jit": "TorchScript (torch.jit) is " + _OTHER_LANGUAGE,
    "torch._dynamo": "TorchDynamo is " + _OTHER_LANGUAGE,
    "torch._inductor": "TorchInductor is " + _OTHER_LANGUAGE,
    "torch.cuda.jiterator": "jiterator compiles CUDA C at run time",
    "torch.utils.cpp_extension": "CUDA/C++ extensions (load_inline, cpp_extension) are forbidden",
    "torch.ops.load_library": "loading native libraries is forbidden",
    **dict.fromkeys(("torch._C._dispatch_library", "torch._C._EnablePythonDispatcher", "torch._dispatch.python"),
                    DISPATCHER),
    **dict.fromkeys(("sys.setrecursionlimit", "sys.setswitchinterval", "threading.stack_size", "_thread.stack_size"),
                    INTERPRETER),
    "torch.classes.load_library": "loading native libraries is forbidden",
    **dict.fromkeys(STRUCTURAL_NAMES, STRUCTURAL),
    **dict.fromkeys(
        ("tvm_ffi.get_global_func", "tvm_ffi.registry.get_global_func", "tvm.get_global_func",
         "tvm.ffi.get_global_func", "tvm_ffi.system_lib", "tvm.runtime.system_lib", "tvm.runtime.load_static_library",
         "tvm.runtime.module._load_module", "cutlass.runtime.load_module", "cutlass.cute.runtime.load_module"),
        _NATIVE,
    ),
    **dict.fromkeys(
        ("torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables"),
        _GRAPHS,
    ),
    **dict.fromkeys(
        ("os.system", "os.popen", "os.fork", "os.forkpty", "os.exec", "os.spawn", "os.posix_spawn",
         "os.kill", "os.killpg", "os.setsid", "os.setpgid", "os.setpgrp", "os.register_at_fork",
         "os.startfile", "os.plock"),
        _PROCESS,
    ),
    **dict.fromkeys(
        ("sys.modules", "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
         "sys.addaudithook", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache",
         "sys.gettrace", "sys.getprofile", "sys.exc_info", "sys.exception", "sys.last_traceback", "sys.audit"),
        _INTROSPECTION,
    ),
    **dict.fromkeys(("weakref.finalize", "sys.set_asyncgen_hooks"), DEFERRED),
    **dict.fromkeys(NUMPY_RAW_MODULES, RAW_MEMORY),
    **dict.fromkeys(("torch.save", "torch.load", "torch.serialization", "torch.package"), SERIALISATION),
    **{f"torch._C.{name}": "the verifier's dispatch modes are off limits" for name in DISPATCH_KEY_CONTROLS},
    # ... and an operator run below the Python key (with a DispatchKeySet: ``redispatch``, a suffix rule below)
    **dict.fromkeys(
        (*DISPATCH_MODE_BYPASSES, "torch._C.DispatchKeySet"), "the verifier's dispatch modes are off limits"
    ),
    **dict.fromkeys(
        ("tvm.register_global_func", "tvm.register_func", "tvm_ffi.register_global_func",
         "tvm_ffi.register_func", "tvm.ffi.register_func", "tvm.ffi.register_global_func"),
        _CALLBACK,
    ),
}  # fmt: skip

#: Components of dotted names forbidden whatever they are reached through.
FORBIDDEN_SUFFIXES: dict[str, str] = {
    **dict.fromkeys(
        ("call_packed", "call_cpacked", "call_packed_lowered", "call_cpacked_lowered"),
        "kernels may not call global packed functions (library kernels or Python callbacks)",
    ),
    **dict.fromkeys(
        ("cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleLoadFatBinary",
         "cuLibraryLoadData", "cuLibraryLoadFromFile", "cuLaunchKernel", "cuLaunchKernelEx",
         "cuLaunchCooperativeKernel", "cudaLaunchKernel", "cudaLaunchKernelExC", "nvrtcCreateProgram",
         "nvrtcCompileProgram", "cuLinkCreate", "cuLinkAddData"),
        "raw CUDA module loading and launches bypass the DSL",
    ),
    **dict.fromkeys(
        ("cuStreamBeginCapture", "cudaStreamBeginCapture", "cuGraphCreate", "cuGraphInstantiate",
         "cuGraphLaunch", "cudaGraphCreate", "cudaGraphInstantiate", "cudaGraphLaunch",
         "capture_begin", "capture_end"),
        _GRAPHS,
    ),
    **dict.fromkeys(("redispatch", "redispatch_boxed"), "the verifier's dispatch modes are off limits"),
    # TVM's tables of native functions (module loaders, raw function lookups) under every package
    "_ffi_api": _NATIVE,
    # a foreign-function module a library imported (``torch.ctypes``) is the module itself
    **dict.fromkeys(("ctypes", "_ctypes", "cffi"), _FFI),
    **dict.fromkeys(TEST_EXTENSIONS, UNGUARDED),
    # a tensor's bytes from a file (the runtime guards refuse the calls too)
    "from_file": SERIALISATION,
    # the C function ``subprocess.Popen`` calls after its audit event: called directly it starts a process with none
    # (red team rt11 F2), reached as ``subprocess._fork_exec`` of any module that imported subprocess
    **dict.fromkeys(("fork_exec", "_fork_exec", "_posixsubprocess"), _PROCESS),
}  # fmt: skip

#: Builtins that execute code or expose namespaces.
FORBIDDEN_BUILTINS: dict[str, str] = {
    **dict.fromkeys(("exec", "eval", "compile", "__import__"), "dynamic code execution is forbidden"),
    **dict.fromkeys(("globals", "vars", "locals", "breakpoint"), _INTROSPECTION),
}

#: Attributes that reach frames, closures or module globals, whatever object they are read from.
INTROSPECTION_ATTRS = frozenset(
    ("__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "__wrapped__",
     "__getattribute__", "cell_contents", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
     "gi_frame", "cr_frame", "ag_frame", "tb_frame", "tb_next", "__traceback__",
     # a class's own namespace: its methods by a computed name, past the names refused here (red team rt65 F0: an
     # immutable base class's pickling method, which no guard can replace)
     "__dict__")
)  # fmt: skip

#: TVM's ways from a tensor's memory to bytes in Python and back (``tvm.runtime.params``, ``tvm_ffi.serialization``).
TVM_SERIALISATION = (
    "save_param_dict", "save_param_dict_to_file", "load_param_dict", "load_param_dict_from_file",
    "to_json_graph_str", "from_json_graph_str",
)  # fmt: skip
#: The pickling protocol's methods: a TVM object's reach the serialiser ``to_json_graph_str`` reaches, bound where no
#: guard can replace it (red team rt65 F0: a TVM tensor's ``__getstate__()`` held an eager answer's bytes in base64);
#: ``copy`` calls them, ``pickle`` and ``copyreg`` are refused whole.
PICKLING = ("__getstate__", "__setstate__", "__reduce__", "__reduce_ex__", "__reduce_cython__", "__setstate_cython__")

#: Names refused wherever they appear (attribute, definition, keyword or string): the array protocols
#: that hand numpy or torch a raw address, the finalizer a dropped object runs after the timed call, and a
#: tensor's ways to files and shared memory.
RAW_NAMES: dict[str, str] = {
    **dict.fromkeys(
        ("__array_interface__", "__array_struct__", "__cuda_array_interface__", "stride_tricks", "ctypeslib",
         "from_address", "from_buffer", "from_buffer_copy"),
        RAW_MEMORY,
    ),
    "__del__": DEFERRED,
    # a tensor's bytes through files, memory another process maps, or torch's zip container; the C base class of
    # storages, whose methods the runtime hooks cannot patch
    **dict.fromkeys(
        ("_write_file", "_set_from_file", "_new_with_file", "share_memory_", "_share_filename_cpu_", "_share_fd_cpu_",
         "_new_shared_filename_cpu", "_new_shared_fd_cpu", "_new_using_filename_cpu", "_new_using_fd_cpu",
         "_new_shared", "from_file", "PyTorchFileWriter", "PyTorchFileReader", "StorageBase"),
        SERIALISATION,
    ),
    # ... and TVM's: a parameter dict's bytes (a torch tensor's through DLPack) read into Python in C++, with no
    # operator and no ``tolist`` (red team rt64 F0: a whole eager answer carried out so passed as a full plan at 0%)
    **dict.fromkeys(TVM_SERIALISATION, SERIALISATION),
    **dict.fromkeys(PICKLING, SERIALISATION),
}  # fmt: skip

#: Calls whose attribute-name argument must be a string literal, so the scan can see the name.
DYNAMIC_ATTRIBUTE_CALLS = frozenset(("getattr", "setattr", "delattr", "hasattr"))
DYNAMIC_ATTRIBUTE_FUNCTIONS = frozenset(("operator.attrgetter", "operator.methodcaller"))

#: Attribute names whose replacement on an imported module or class is timing tampering.
TIMER_ATTRS = frozenset(
    ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time",
     "process_time_ns", "thread_time", "Event", "elapsed_time", "synchronize", "record", "current_stream",
     "default_stream", "Stream", "do_bench", "benchmark", "query", "wait")
)  # fmt: skip

#: Imported-module attribute assignments that are configuration, not monkeypatching.
CONFIG_PREFIXES = ("torch.backends.",)

#: Text inside a string literal that marks embedded CUDA C/C++ or PTX source.
INLINE_CUDA_PATTERN = re.compile(
    r"__global__|__device__|__shared__|\basm\s*(?:volatile\s*)?\(|#include\s*[<\"]|extern\s+\"C\""
    r"|\.reg\s+\.|\bld\.global\.|\bst\.global\.|\bmma\.sync\.|\bcp\.async\.|\bwgmma\.|\bmov\.u32\b"
)
#: Calls that compile a CUDA source string or inline assembly inside a DSL kernel.
INLINE_CUDA_CALLS = frozenset(("call_kernel", "inline_asm", "import_source"))


def _prefix_lookup(table: dict[str, str], dotted: str) -> tuple[str, str] | None:
    """The longest rule in ``table`` that ``dotted`` equals or lies under."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in table:
            return head, table[head]
    return None


def module_rule(module: str, dsl: str) -> tuple[str, str] | None:
    """(rule, reason) when importing ``module`` is forbidden in a ``dsl`` submission."""
    for table in (FORBIDDEN_MODULES, OTHER_DSL_MODULES.get(dsl, {})):
        hit = _prefix_lookup(table, module)
        if hit:
            return hit
    top = module.split(".", 1)[0]
    return (top, UNGUARDED) if top.startswith(TEST_EXTENSION_PREFIXES) else None


def name_rule(dotted: str) -> tuple[str, str] | None:
    """(rule, reason) when using the dotted name ``dotted`` is forbidden."""
    hit = _prefix_lookup(FORBIDDEN_NAMES, dotted)
    if hit:
        return hit
    # any component, not only the last: ``tvm_ffi.module._ffi_api.ModuleLoadFromFile`` reaches a forbidden table
    for part in reversed(dotted.split(".")):
        if part in FORBIDDEN_SUFFIXES:
            return part, FORBIDDEN_SUFFIXES[part]
    return None
