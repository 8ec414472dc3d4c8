"""Runtime guards installed in a submission's process before its file is imported (DESIGN §5).

The static scan cannot see names built at run time, so the worker also watches what the submission's
code does: every audited event (``sys.addaudithook``: imports, processes, signals, sockets, ctypes, file
access, ``gc`` introspection, frames that would lead into a vault), dynamic code called directly by the
submission (``exec``/``eval``/``compile``), other compilers (``torch.compile``, ``torch.jit``), CUDA graph
capture, Python callbacks registered for kernels and Python signal handlers.

A call is the submission's when the innermost frame outside the standard library belongs to the
submission (any file outside the installed libraries and this harness), or when that frame is a library's
whose own code does not name the forbidden operation: the library is calling a callable it was handed
(``tree_map(os.system, ...)``, ``tree_map(__import__, ...)``), which is the submission's (``handed`` in the vault;
an import also vouched for where C code imports under the library's frame, a ctypes event where the library's
module works with ctypes: verifier README). Which code a frame runs is
judged by the identity of its code object, never by its name alone (``co_filename`` is the
submission's to choose: ``code.replace``, ``types.CodeType``, ``marshal``): a file name is believed only
for code objects that existed before the submission was loaded (every function's, nested ones
included: ``remember_preloaded`` in the zygote, topped up in the worker), for a module the import
system executes later whose code compiles identically from its library file, and, never as a
library's own, for code a library compiles from a string and runs at once (``@dataclass``,
``namedtuple``). Any other code object is the submission's. Libraries may do what they need
(TVM runs compilers, CuTe DSL uses ctypes); the same call made by the submission is refused with
``PermissionError`` (``ImportError`` for imports) and recorded, even if the submission catches it.

Everything the guards decide with lives in a vault (``_vault``): their configuration, their cache, the
threads the submission started and the violations, which go straight to the control page. The hooks
installed in modules hold only the vault's ``send``. Some refusals hold for every caller, libraries
included, because nothing in the worker needs them once the submission is loaded and each would open a
vault: ``gc`` introspection, trace and profile functions, new audit hooks, reading a vault's code or
defaults, a frame whose callers include a running vault, and ``/proc`` files that expose the process's
memory map or memory.
"""

from __future__ import annotations

import _struct
import _thread
import atexit
import builtins
import copyreg
import ctypes
import dataclasses
import functools
import gc
import importlib
import importlib.util
import itertools
import marshal
import operator
import os
import posix
import sys
import threading
import types
import weakref
from typing import Any

from mkbsim.verifier import _control, _numpy_guards
from mkbsim.verifier._attribution import AttributionConfig
from mkbsim.verifier._rules import (
    DEFERRED,
    DISPATCH_KEY_CONTROLS,
    DISPATCH_MODE_BYPASSES,
    DISPATCHER,
    FFI_TENSORS,
    FORBIDDEN_MODULES,
    FORBIDDEN_NAMES,
    FORBIDDEN_SUFFIXES,
    INTERPRETER,
    OTHER_DSL_MODULES,
    PER_ELEMENT,
    PER_ELEMENT_METHODS,
    PICKLING,
    RAW_MEMORY,
    SERIALISATION,
    STRUCTURAL,
    STRUCTURAL_ENTRIES,
    TEST_EXTENSION_PREFIXES,
    TVM_SERIALISATION,
    UNGUARDED,
)
from mkbsim.verifier._vault import Registry, identity_key

CANDIDATE, LIBRARY, TRANSPARENT = 1, 2, 3

#: Events that start a process (the others of ``_PROCESS_EVENTS`` signal or inspect one).
_PROCESS_STARTS = frozenset(
    ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "pty.spawn",
     "os.startfile")
)  # fmt: skip
_PROCESS_EVENTS = frozenset(
    ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
     "os.kill", "os.killpg", "pty.spawn", "os.startfile", "resource.setrlimit", "resource.prlimit",
     "signal.pthread_kill", "sys._current_frames", "sys.monitoring.register_callback")
)  # fmt: skip
#: Refused whoever asks, once the submission is loaded: each would lead into a vault.
_ALWAYS_REFUSED = frozenset(
    ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
     "sys.addaudithook")
)  # fmt: skip
#: Refused whoever asks, once the submission is loaded: an async generator's finalizer runs when the generator dies,
#: wherever the harness drops what held it (red team rt25 F1: one parked on a returned output's ``__dict__``), as
#: ``weakref.finalize`` would (the static scan names ``sys.set_asyncgen_hooks``).
_DEFERRED_EVENTS = frozenset(("sys.set_asyncgen_hook_finalizer",))
#: Refused whoever asks: a new interpreter has none of this one's audit hooks (``sys.addaudithook`` is per
#: interpreter). Raised by ``Py_NewInterpreter`` where the creating thread holds a thread state (``_interpreters``,
#: an extension's own); ``_testcapi.run_in_subinterp`` drops it first (no event): its module is refused by name.
_INTERPRETER_EVENTS = frozenset(("cpython.PyInterpreterState_New",))
_FILE_CHANGE_EVENTS = frozenset(
    ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree", "shutil.move", "os.truncate", "os.chmod",
     "os.chown", "os.utime", "os.link", "os.symlink", "os.mkdir")
)  # fmt: skip
_SUBPROCESS = ("Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput", "popen", "system",
               "create_subprocess_exec", "create_subprocess_shell")  # fmt: skip
_TEMPORARY = ("TemporaryDirectory", "NamedTemporaryFile", "TemporaryFile", "mkdtemp", "cleanup", "close", "rmtree")
#: The names whose call raises each event (the C function, its standard-library wrappers): a library frame vouches
#: for an event only where its own code names one of them (see ``handed`` in the vault); any other event it
#: raises, it raises calling a callable it was handed. Events not listed: their last component.
_EVENT_CALLERS = {
    "subprocess.Popen": _SUBPROCESS, "os.posix_spawn": ("posix_spawn", "posix_spawnp", *_SUBPROCESS),
    "os.exec": ("execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe"),
    "os.spawn": ("spawnv", "spawnve", "spawnl", "spawnle", "spawnvp", "spawnvpe", "spawnlp", "spawnlpe"),
    "os.fork": ("fork", "Process", "start", *_SUBPROCESS), "os.forkpty": ("forkpty", "spawn"),
    "os.kill": ("kill", "terminate", "send_signal"), "pty.spawn": ("spawn",),
    "os.remove": ("remove", "unlink", *_TEMPORARY), "os.rmdir": ("rmdir", "removedirs", *_TEMPORARY),
    "shutil.rmtree": ("rmtree", *_TEMPORARY), "os.rename": ("rename", "replace", "renames", "move"),
    "os.chmod": ("chmod", "lchmod", "copymode", "copystat", "copy", "copy2", "copytree", "rmtree"),
    "os.chown": ("chown", "lchown"), "os.utime": ("utime", "touch", "copystat", "copy2", "copytree"),
    "os.link": ("link", "hardlink_to"), "os.symlink": ("symlink", "symlink_to", "copytree"),
    "os.mkdir": ("mkdir", "makedirs", "mkdtemp", "TemporaryDirectory", "copytree"),
    "socket.__new__": ("socket", "socketpair", "fromfd", "create_connection", "create_server", "urlopen"),
    "socket.connect": ("connect", "create_connection", "urlopen"), "socket.bind": ("bind", "create_server"),
    "socket.getaddrinfo": ("getaddrinfo", "create_connection", "create_server", "urlopen"),
    "os.putenv": ("putenv", "environ", "environb"), "os.unsetenv": ("unsetenv", "environ", "environb"),
}  # fmt: skip
_TWO_PATH_EVENTS = frozenset(("os.rename", "shutil.move", "os.link", "os.symlink"))
# where each file event carries its dir_fd arguments (CPython's audit events table)
_DIR_FD_ARGS = {
    "os.remove": (1,), "os.rmdir": (1,), "os.rename": (2, 3), "os.link": (2, 3), "os.symlink": (2,),
    "os.mkdir": (2,), "os.chmod": (2,), "os.chown": (3,), "os.utime": (3,), "shutil.rmtree": (1,),
}  # fmt: skip
_ATTRIBUTE_EVENTS = frozenset(("object.__getattr__", "object.__setattr__", "object.__delattr__"))
#: Changes to the process's environment, which the DSLs' builds read (the compiler, its search path, its flags).
_ENVIRONMENT_EVENTS = frozenset(("os.putenv", "os.unsetenv"))
_FRAME_ATTRIBUTES = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
#: Events that list a folder (their first argument): /proc's folders are judged as its files are opened.
_LISTING_EVENTS = frozenset(("os.listdir", "os.scandir"))
#: Events that change, duplicate or map a descriptor (their first argument), judged as the descriptor functions are.
_DESCRIPTOR_EVENTS = frozenset(("fcntl.fcntl", "fcntl.ioctl", "fcntl.flock", "fcntl.lockf", "mmap.__new__"))
#: How the harness's memfds (``_control``'s page, ``_arena``'s arenas) show in ``/proc/self/fd``.
_HARNESS_MEMFD = "/memfd:mkbsim-"
_WATCHED = frozenset(
    _PROCESS_EVENTS
    | _ALWAYS_REFUSED
    | _DEFERRED_EVENTS
    | _INTERPRETER_EVENTS
    | _FILE_CHANGE_EVENTS
    | _ATTRIBUTE_EVENTS
    | _ENVIRONMENT_EVENTS
    | _LISTING_EVENTS
    | _DESCRIPTOR_EVENTS
    | {"open", "import", "sys._getframe", "compile", "exec"}
)
#: /proc entries that show a process's memory or its map: nobody in the worker reads them.
_PROC_MEMORY = frozenset(("mem", "maps", "smaps", "smaps_rollup", "map_files", "pagemap", "numa_maps", "environ"))
#: The system's /proc entries the submission may read.
_PROC_SYSTEM = frozenset(("cpuinfo", "meminfo", "stat", "loadavg", "sys", "version"))
#: What the submission may read of its own process and its own threads (``task/<tid>/``, ``thread-self``): its
#: resource use and limits. Never its descriptors (``fd/N`` reopens the harness's channel or a memfd of its memory
#: while one is open), its links out (``root``, ``cwd``, ``exe``), nor any other process's entries.
_PROC_OWN = frozenset(("status", "statm", "stat", "limits", "io", "sched", "schedstat", "cgroup", "comm", "cmdline",
                       "oom_score", "wchan", "task"))  # fmt: skip
#: The functions that read, write, duplicate, replace or close a descriptor, with where each takes one (position,
#: keyword): none may touch the harness's channel to the verifier, whoever calls them (the harness itself uses its
#: socket object), nor, called by the submission, the harness's memfds. ``closerange`` is judged by its range (the
#: channel only). Looked up in ``os`` (``posix``'s same functions), ``_socket`` and ``signal``.
_FD = ((0, "fd"),)
_DESCRIPTOR_FUNCTIONS: dict[str, dict[str, tuple[tuple[int, str], ...]]] = {
    "posix": {
        "read": _FD, "readv": _FD, "pread": _FD, "preadv": _FD, "write": _FD, "writev": _FD, "pwrite": _FD,
        "pwritev": _FD, "sendfile": ((0, "out_fd"), (1, "in_fd")), "splice": ((0, "src"), (1, "dst")),
        "copy_file_range": ((0, "src"), (1, "dst")), "close": _FD, "closerange": ((0, "fd_low"), (1, "fd_high")),
        "dup": _FD, "dup2": ((0, "fd"), (1, "fd2")), "set_blocking": _FD, "eventfd_read": _FD, "eventfd_write": _FD,
        "login_tty": _FD,
    },
    "_socket": {"close": _FD, "dup": _FD},
    "_signal": {"set_wakeup_fd": _FD},
}  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: The modules whose users vouch for the ctypes events their own frames raise (``handed`` in the vault).
_FFI_MODULES = frozenset(("ctypes", "_ctypes"))
#: A storage's ways to and from files and shared memory (on the Python classes: torch's C base is immutable).
_STORAGE_FILE_METHODS = (
    "from_file", "_write_file", "_set_from_file", "_new_with_file", "share_memory_", "_share_memory_", "_new_shared",
    "_share_filename_cpu_", "_share_fd_cpu_", "_new_shared_filename_cpu", "_new_shared_fd_cpu",
    "_new_using_filename_cpu", "_new_using_fd_cpu",
)  # fmt: skip
#: The programs a DSL build may run (TVM's ``cc``/``nvcc`` helpers), looked up before any submission exists.
_COMPILER_NAMES = ("g++", "gcc", "clang++", "clang", "c++", "cc", "nvcc", "ar", "ld")
#: path (as found, and resolved) -> (device, inode) of each compiler; the search path it was found on
_COMPILERS: dict[str, tuple[int, int]] = {}
_EXEC_PATH: list[str] = []


def freeze_compilers() -> None:
    """Fix the compilers a DSL build may run, in the zygote before any submission (DESIGN §5): a process a
    build starts must be one of them by path and identity, found on this very search path."""
    if _EXEC_PATH:
        return
    import shutil

    search = os.environ.get("PATH", os.defpath)
    cuda = [os.path.join(os.environ[v], "bin", "nvcc") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for found in [*(shutil.which(name, path=search) for name in _COMPILER_NAMES), *cuda]:
        if not found or not os.path.isabs(found) or not os.access(found, os.X_OK):
            continue
        for path in (found, os.path.realpath(found)):
            info = os.stat(path)
            _COMPILERS[path] = (info.st_dev, info.st_ino)
    _EXEC_PATH.append(search)


def _lib() -> types.SimpleNamespace:
    """The C functions and types the guards' vault calls, bound before the submission exists."""
    return types.SimpleNamespace(
        getframe=sys._getframe, ident=_thread.get_ident, stat=posix.stat, lstat=posix.lstat,
        readlink=posix.readlink, fstat=posix.fstat, getpid=posix.getpid, type=type, len=len, id=id, key=identity_key,
        str=str,
        bytes=bytes, int=int, tuple=tuple, list=list, isinstance=isinstance, sorted=sorted, min=min,
        PermissionError=PermissionError, ImportError=ImportError, OSError=OSError, OverflowError=OverflowError,
        BaseException=BaseException, range=range, any=any, all=all, pack_into=_struct.pack_into, dumps=_control.dumps,
        compile=builtins.compile, open=posix.open,
        read=posix.read, close=posix.close, O_RDONLY=os.O_RDONLY, CodeType=types.CodeType, frozenset=frozenset,
        FrameType=types.FrameType, TracebackType=types.TracebackType,
        loads=marshal.loads, magic=importlib.util.MAGIC_NUMBER, cache_tag=sys.implementation.cache_tag,
        opt_suffix=f".opt-{sys.flags.optimize}" if sys.flags.optimize else "",
        plain=frozenset(id(t) for t in (str, bytes, int, float, complex, bool, type(None), type(...), tuple,
                                        frozenset, types.CodeType)),
        dict=dict, lookups=_lookup_bindings(), environ=vars(os.environ)["_data"],
        environ_items=tuple(vars(os.environ)["_data"].items()),
    )  # fmt: skip


def _lookup_bindings() -> tuple[tuple[dict[Any, Any], Any, Any], ...]:
    """(namespace, key, value) of what ``subprocess`` reads to find a program by name (``os.get_exec_path`` over
    ``os.environ``'s PATH, joined by ``os.path.join``), bound before the submission exists: while each still
    holds, the PATH the frozen compilers were found on is the one a build's process is found on."""
    import posixpath

    environ = os.environ
    attrs = vars(environ)
    return (
        (vars(os), "environ", environ), (vars(os), "get_exec_path", os.get_exec_path),
        (vars(os), "fsencode", os.fsencode), (vars(os), "path", posixpath), (vars(posixpath), "join", posixpath.join),
        (vars(posixpath), "dirname", posixpath.dirname), (attrs, "_data", attrs["_data"]),
        (attrs, "encodekey", attrs["encodekey"]), (attrs, "decodevalue", attrs["decodevalue"]),
        (attrs["_data"], b"PATH", attrs["_data"].get(b"PATH")),
    )  # fmt: skip


def _constants() -> types.SimpleNamespace:
    """The event sets and layout the guards' vault needs (it has no globals of its own)."""
    return types.SimpleNamespace(
        CANDIDATE=CANDIDATE, LIBRARY=LIBRARY, TRANSPARENT=TRANSPARENT, PROCESS=_PROCESS_EVENTS,
        PROCESS_START=_PROCESS_STARTS,
        ALWAYS=_ALWAYS_REFUSED, DEFERRED=_DEFERRED_EVENTS, DEFERRED_REASON=DEFERRED, INTERPRETER=_INTERPRETER_EVENTS,
        UNGUARDED=UNGUARDED, FILE_CHANGE=_FILE_CHANGE_EVENTS, TWO_PATH=_TWO_PATH_EVENTS,
        DIR_FD=dict(_DIR_FD_ARGS), ATTRIBUTE=_ATTRIBUTE_EVENTS, FRAME=_FRAME_ATTRIBUTES, PROC_MEMORY=_PROC_MEMORY,
        PROC_SYSTEM=_PROC_SYSTEM, PROC_OWN=_PROC_OWN, LISTING=_LISTING_EVENTS, DESCRIPTOR=_DESCRIPTOR_EVENTS,
        HARNESS_MEMFD=_HARNESS_MEMFD,
        WRITE_FLAGS=_WRITE_FLAGS, VIOLATIONS=_control.VIOLATIONS,
        VIOLATION_COUNT=_control.VIOLATION_COUNT[0], CALLERS=dict(_EVENT_CALLERS), FFI=_FFI_MODULES,
        ENVIRONMENT=_ENVIRONMENT_EVENTS, COMPILERS=dict(_COMPILERS),
        EXEC_DIRS=tuple((_EXEC_PATH or [""])[0].split(":")), LIBRARY_LOOKUPS=_library_lookup_codes(),
    )  # fmt: skip


def _library_lookup_codes() -> frozenset[int]:
    """The code objects of ``ctypes.util``, whose ``find_library`` probes ldconfig, gcc, ld and objdump as
    processes (catching the OSError when one cannot run): a library's lookup of a shared library that way
    (cuda.pathfinder's of libdl, loaded inside a TIRx build for cuda) is declined, not blamed."""
    import ctypes.util

    functions = [f for f in vars(ctypes.util).values() if type(f) is types.FunctionType]
    pending, found = [f.__code__ for f in functions], set()
    while pending:
        code = pending.pop()
        found.add(id(code))
        pending += [c for c in code.co_consts if type(c) is types.CodeType]
    return frozenset(found)


def _rule_tables(dsl: str) -> tuple[dict[str, str], dict[str, str], dict[str, str], tuple[str, ...]]:
    """Private copies of the rule tables (module prefixes, dotted names, last components, top-level name starts)."""
    modules = {**FORBIDDEN_MODULES, **OTHER_DSL_MODULES.get(dsl, {})}
    return dict(modules), dict(FORBIDDEN_NAMES), dict(FORBIDDEN_SUFFIXES), tuple(TEST_EXTENSION_PREFIXES)


def _guard_vault(
    cfg: Any, rules: tuple[Any, ...], page: Any, protected_codes: Any, vault_codes: Any, genuine: Any,
    ctypes_codes: Any, lib: Any, k: Any
) -> Any:  # fmt: skip
    """The guards' vault. Requests (each answered with None, or an exception for the hook to raise): ("event", name,
    args); ("import", name, fromlist, frame); ("direct", what, reason, frame, names); ("culprit", what, reason,
    frame, names); ("asked", what, reason, frame): refused if the submission's code is anywhere on the stack;
    ("descriptor", what, descriptors, span, frame): refused if one is the harness's channel or, to the submission,
    one of its memfds (``span``: a range of them, low and high); ("building", flag): a DSL build starts or ends on
    this thread; ("thread", ident, frame); ("inline", what, frame); ("between", flag); ("threads",); ("loaded",):
    the file is loaded, no process starts from now on; ("seal",): from now on only known code objects are judged by
    their file name. Violations and inline CUDA go to the control page."""
    modules, names, suffixes, test_prefixes = rules
    cache: dict[str, int] = {}
    generated: dict[int, Any] = {}  # id -> a code object a library compiled from a string and ran at once
    compiling: dict[int, Any] = {}  # thread -> (frame, file name) of a library's compile() just audited
    violations: list[str] = []
    inline: list[str] = []
    candidate_threads: list[int] = []
    building: dict[int, int] = {}  # thread -> depth of the DSL builds and exports it is inside
    stray_threads: list[int] = []
    # sealed: the code objects alive are known (see "seal"); loaded: the file is, no process starts any more
    state = {"between": False, "sealed": False, "loaded": False}

    def resolve(path: str, through: list[str] | None = None) -> str:
        # a symbolic link changes nothing: walk the path one component at a time (os.path.realpath,
        # being Python, could be patched by the submission). ``through`` gets the links of /proc walked, which lead
        # out of it (``/proc/self/fd/N``, ``/proc/self/map_files/...`` name what they open by its own name)
        if not path.startswith("/"):
            path = cfg.cwd + "/" + path
        parts: list[str] = []
        pending = path.split("/")
        hops = 0
        while pending:
            part = pending.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            here = "/" + "/".join([*parts, part])
            try:
                target = lib.readlink(here)
            except lib.OSError:
                parts.append(part)
                continue
            hops += 1
            if hops > 40:
                return here
            if through is not None and here.startswith("/proc/"):
                through.append(here)
            if target.startswith("/"):
                parts = []
            pending = target.split("/") + pending
        return "/" + "/".join(parts)

    def is_library_path(real: str) -> bool:
        return real in cfg.trusted_files or (real + "/").startswith(cfg.trusted)

    def is_file(real: str) -> bool:
        try:
            return (lib.stat(real).st_mode & 0o170000) == 0o100000
        except lib.OSError:
            return False

    def classify(filename: str) -> int:
        kind = cache.get(filename)
        if kind is None:
            if lib.type(filename) is not lib.str or filename.startswith("<"):
                kind = k.TRANSPARENT  # frozen importlib, code compiled from strings by libraries
            else:
                real = resolve(filename)
                if filename in cfg.candidate or real in cfg.candidate:
                    kind = k.CANDIDATE
                elif is_library_path(real) and is_file(real):
                    kind = k.LIBRARY
                elif real.startswith(cfg.stdlib) or not real.endswith(".py"):
                    # the standard library, and frames a library synthesises from native backtraces
                    kind = k.TRANSPARENT
                else:
                    kind = k.CANDIDATE  # a .py name that is no library file: the submission's
            cache[filename] = kind
        return kind

    def classify_code(code: Any) -> int:
        """A frame's code: by its file name if the code object is genuine (see the module docstring)."""
        ident = lib.id(code)
        if ident in protected_codes:
            return k.TRANSPARENT  # the hooks: looked past, to whoever called them
        if ident in genuine or not state["sealed"]:  # before the seal, nothing of the submission exists
            return classify(code.co_filename)
        if ident in generated:  # compiled from a string by a library: never the library's own code
            kind = classify(code.co_filename)
            return k.TRANSPARENT if kind == k.LIBRARY else kind
        return k.CANDIDATE

    def remember(code: Any, table: dict[int, Any], ffi: bool = False) -> None:
        """``code`` and its nested code objects into ``table`` (and, ``ffi``: its module works with ctypes)."""
        pending = [code]
        while pending:
            code = pending.pop()
            if lib.id(code) not in table:
                table[lib.id(code)] = code  # held: its id is never reused
                if ffi:
                    ctypes_codes[lib.id(code)] = code
                pending += [c for c in code.co_consts if lib.type(c) is lib.CodeType]

    def plain_constants(code: Any) -> bool:
        """Whether every constant (nested ones included) is of a built-in constant type, so that
        comparing two code objects runs no code of the submission's."""
        pending = [code]
        while pending:
            item = pending.pop()
            if lib.id(lib.type(item)) not in lib.plain:
                return False
            if lib.type(item) is lib.CodeType:
                pending += lib.list(item.co_consts)
            elif lib.type(item) is lib.tuple or lib.type(item) is lib.frozenset:
                pending += lib.list(item)
        return True

    def read(path: str) -> bytes:
        fd = lib.open(path, lib.O_RDONLY)
        try:
            chunks = []
            while True:
                chunk = lib.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            lib.close(fd)
        return b"".join(chunks)

    def cached_code(source: str) -> Any:
        """The code in ``source``'s bytecode cache where the cache is current (what the import system
        loaded it from, read-only here), else None. Unmarshalling costs a tenth of compiling."""
        folder, name = source.rsplit("/", 1)
        try:
            data = read(f"{folder}/__pycache__/{name[:-3]}.{lib.cache_tag}{lib.opt_suffix}.pyc")
            info = lib.stat(source)
        except lib.OSError:
            return None
        stamp = (info.st_mtime_ns // 1_000_000_000 & 0xFFFFFFFF).to_bytes(4, "little")
        size = (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        if data[:4] != lib.magic or data[4:8] != b"\0\0\0\0" or data[8:12] != stamp or data[12:16] != size:
            return None  # another version's, hash-based or stale: compiled instead
        return lib.loads(data[16:])

    def library_module(code: Any) -> bool:
        """Whether ``code`` is a module of the libraries or the standard library, as its file holds it."""
        filename = code.co_filename
        if lib.type(filename) is not lib.str or not filename.endswith(".py") or not filename.startswith("/"):
            return False
        real = resolve(filename)
        if filename in cfg.candidate or real in cfg.candidate:
            return False
        if not ((is_library_path(real) or real.startswith(cfg.stdlib)) and is_file(real)):
            return False
        if not plain_constants(code):
            return False
        genuine_code = cached_code(filename)
        if genuine_code is None:
            genuine_code = lib.compile(read(real), filename, "exec", 0, True)
        return genuine_code == code

    def compiled(event: str, args: Any, frame: Any) -> None:
        """compile() by a library, then exec of that very code in the same frame: a generated code
        object; exec of a module's code: a genuine library module (see the module docstring)."""
        witnessed = compiling.pop(lib.ident(), None)
        if event == "compile":
            if lib.len(args) > 1 and lib.type(args[1]) is lib.str and culprit(frame)[0] != k.CANDIDATE:
                compiling[lib.ident()] = (frame, args[1])
            return
        code: Any = args[0] if lib.len(args) else None
        if lib.type(code) is not lib.CodeType or lib.id(code) in genuine or lib.id(code) in generated:
            return
        if witnessed is not None and witnessed[0] is frame and witnessed[1] == code.co_filename:
            remember(code, generated)
            return
        try:
            if library_module(code):
                remember(code, genuine, lib.any(name.split(".")[0] in k.FFI for name in code.co_names))
        except lib.BaseException:  # unreadable or not compilable here: not known to be the library's
            return

    def culprit(frame: Any, writing: bool = False) -> tuple[int, Any]:
        if (
            writing and frame is not None and lib.id(frame.f_code) in genuine
            and frame.f_code.co_filename == "<frozen importlib._bootstrap_external>"
        ):  # fmt: skip
            return k.LIBRARY, frame  # the import machinery writing its bytecode cache, next to a module's source
        while frame is not None:
            kind = classify_code(frame.f_code)
            if kind != k.TRANSPARENT:
                return kind, frame
            frame = frame.f_back
        # a thread the submission started runs its code even with no frame of its files on the stack
        if lib.ident() in candidate_threads:
            return k.CANDIDATE, None
        return k.TRANSPARENT, None

    def handed(kind: int, who: Any, operations: Any) -> tuple[int, Any]:
        """A forbidden operation whose caller was judged a library's (``culprit``): the library vouches for it
        only where the calling frame's own code names the operation (``operations``; ``None`` for a ctypes event:
        where its module works with ctypes itself, since the DSL runtimes call their foreign functions by every
        name); otherwise that frame calls a callable it was handed (``tree_map(os.system, ...)``, ``sorted(key=...)``
        inside a library, a callback, a foreign function or ``__import__``), which is the submission's, whoever
        runs it (blamed on its nearest frame on the stack)."""
        if kind != k.LIBRARY or not state["sealed"]:
            return kind, who
        if operations is None:
            if lib.id(who.f_code) in ctypes_codes:
                return kind, who
        elif lib.any(name in who.f_code.co_names for name in operations):
            return kind, who
        frame = who.f_back
        while frame is not None and classify_code(frame.f_code) != k.CANDIDATE:
            frame = frame.f_back
        return k.CANDIDATE, who if frame is None else frame

    def callers(event: str) -> Any:
        if event.startswith("ctypes."):
            return None
        return k.CALLERS.get(event) or (event.rsplit(".", 1)[-1],)

    def importers(dotted: str) -> Any:
        """The names an import of ``dotted`` is written with: an import statement names the module, a package
        of it (``from tvm.contrib import nvcc``, ``import tvm.contrib.nvcc``) or, relative, a part of its name."""
        parts = dotted.split(".")
        prefixes = [".".join(parts[: i + 1]) for i in lib.range(lib.len(parts))]
        return (*prefixes, *parts, "import_module", "__import__")

    def imported_by_c(frame: Any, form: Any) -> bool:
        """Whether ``__import__`` was called the way C code calls it (``PyImport_Import``: the globals of the
        innermost Python frame as both globals and locals, an empty list, level 0), as numpy's C code imports its
        lazy submodules under whatever library frame called it. A library calling a handed ``__import__`` calls
        it its own way (``tree_map``: the name alone)."""
        if frame is None or lib.type(form) is not lib.tuple or lib.len(form) != 4:
            return False
        globals_, locals_, fromlist, level = form
        return (
            globals_ is frame.f_globals and locals_ is globals_ and lib.type(fromlist) is lib.list
            and lib.len(fromlist) == 0 and lib.type(level) is lib.int and level == 0
        )  # fmt: skip

    def claims_library(path: Any) -> bool:
        """Whether a file name would be trusted if the code were genuine: a library's, the standard
        library's, or no file at all (``<...>``)."""
        if lib.type(path) is not lib.str or not path.startswith("/"):
            return True
        try:
            real = resolve(path)
        except lib.BaseException:
            return True
        return is_library_path(real) or real.startswith(cfg.stdlib)

    def refuse(what: str, reason: str, frame: Any, exc: Any = None) -> Any:
        where = ""
        if frame is not None:
            path = frame.f_code.co_filename
            if path in cfg.candidate:
                where = f"line {frame.f_lineno}: "
                suffix = ""
            elif lib.id(frame.f_code) in genuine or lib.id(frame.f_code) in generated or not claims_library(path):
                suffix = f" in {path}:{frame.f_lineno}"
            else:  # a code object the submission made, calling itself a library's or transparent
                suffix = f" in code made at run time that names itself {path!r}"
        else:
            suffix = ""
        violations.append(f"{where}{what} ({reason}){suffix}")
        publish()
        return (exc or lib.PermissionError)(f"mkbsim verifier: {what} is forbidden ({reason})")

    def publish() -> None:
        blob = lib.dumps({"violations": violations[-200:], "inline": inline[-50:]})
        offset, capacity = k.VIOLATIONS
        if lib.len(blob) + 8 <= capacity:
            page[offset + 8 : offset + 8 + lib.len(blob)] = blob
            lib.pack_into("<Q", page, offset, lib.len(blob))
        lib.pack_into("<Q", page, k.VIOLATION_COUNT, lib.len(violations))

    def library_lookup(frame: Any) -> bool:
        """Whether a process start comes from ``ctypes.util``'s probes, called by a library's own code that names
        ``find_library`` (one handed it, as ``tree_map`` is, calls the submission's lookup: ``handed``)."""
        probing = False
        while frame is not None and classify_code(frame.f_code) == k.TRANSPARENT:
            probing = probing or lib.id(frame.f_code) in k.LIBRARY_LOOKUPS
            frame = frame.f_back
        return (
            probing and frame is not None and classify_code(frame.f_code) == k.LIBRARY
            and "find_library" in frame.f_code.co_names
        )  # fmt: skip

    def anywhere(frame: Any) -> bool:
        while frame is not None:
            if classify_code(frame.f_code) == k.CANDIDATE:
                return True
            frame = frame.f_back
        return False

    def lookup(table: dict[str, str], dotted: str) -> str | None:
        parts = dotted.split(".")
        for i in lib.range(lib.len(parts), 0, -1):
            reason = table.get(".".join(parts[:i]))
            if reason is not None:
                return reason
        return None

    def module_reason(dotted: str) -> str | None:
        reason = lookup(modules, dotted)
        if reason is None and dotted.split(".", 1)[0].startswith(test_prefixes):
            return k.UNGUARDED
        return reason

    def name_reason(dotted: str) -> str | None:
        return lookup(names, dotted) or suffixes.get(dotted.rsplit(".", 1)[-1])

    def forged(event: str, frame: Any) -> Any:
        """An event the interpreter raises with a frame or traceback, raised with something else: ``sys.audit`` called
        by hand, whose argument's attributes (a property named ``f_code``) would run its caller's code in here."""
        return refuse(f"{event} raised by hand", "the verifier's audit events are the interpreter's", culprit(frame)[1])

    def opens_vault(frame: Any) -> bool:
        while frame is not None:
            if lib.key(frame.f_code) in vault_codes:  # (not id(): an audited event a frame, on every sys._getframe)
                return True
            frame = frame.f_back
        return False

    def as_path(raw: Any, through: list[str] | None = None) -> str | None:
        if lib.type(raw) is lib.bytes:
            raw = raw.decode("utf-8", "surrogateescape")
        if lib.type(raw) is not lib.str:
            return None
        return resolve(raw, through)

    def writable(raw: Any) -> bool:
        real = as_path(raw)
        if real is None:
            return lib.type(raw) is lib.int or raw is None  # a descriptor: judged where it was opened
        return (real + "/").startswith(cfg.writable) and not is_library_path(real)

    def harness_descriptor(fd: Any) -> bool:
        """Whether ``fd`` is the harness's channel to the verifier: by number, or by the open file it names (a
        duplicate made by a route no guard sees, ``_socket.dup``)."""
        if lib.type(fd) is not lib.int:
            return False
        if fd in cfg.harness_fds:
            return True
        try:
            info = lib.fstat(fd)
        except (lib.OSError, lib.OverflowError):
            return False
        return (info.st_dev, info.st_ino) in cfg.harness_files

    def harness_memory(fd: Any) -> bool:
        """Whether ``fd`` is one of the harness's memfds: the control page's until mapped, a block's arenas from the
        block's message until mapped (the submission makes none: ``os.memfd_create`` is refused)."""
        if lib.type(fd) is not lib.int or fd < 0:
            return False
        try:
            return lib.readlink(f"/proc/self/fd/{fd}").startswith(k.HARNESS_MEMFD)
        except lib.OSError:
            return False

    def judge_descriptors(what: str, fds: Any, span: bool, frame: Any) -> Any:
        """Descriptors handed to a call: the harness's channel is refused to every caller (nothing but the harness's
        socket object uses it), its memfds to the submission (the harness maps them)."""
        if touches_harness(fds, span):
            return refuse(what, "the verifier's channel is the harness's", culprit(frame)[1])
        if span or not lib.any(harness_memory(fd) for fd in fds):
            return None
        kind, who = culprit(frame)
        return refuse(what, "the harness's memory is off limits", who) if kind == k.CANDIDATE else None

    def touches_harness(fds: Any, span: bool) -> bool:
        if not span:
            return lib.any(harness_descriptor(fd) for fd in fds)
        low, high = fds  # closerange(low, high)
        return lib.type(low) is lib.int and lib.type(high) is lib.int and lib.any(
            low <= fd < high for fd in cfg.harness_fds
        )  # fmt: skip

    def proc_refusal(walked: Any, candidate: bool) -> tuple[str, str] | None:
        """Why reading a path is refused for where it leads in /proc (``walked``: the /proc links walked to it,
        then the path resolved), and the path refused: its memory and memory map to anybody; to the submission
        (``candidate``), anything but the system's entries it may read and its own process's resource use
        (``_PROC_OWN``)."""
        for path in walked:
            if not (path + "/").startswith("/proc/"):
                continue
            parts = path.split("/")[2:]  # /proc/4/maps, /proc/4/task/7/maps, /proc/4/map_files/...
            if lib.any(part in k.PROC_MEMORY for part in parts):  # nobody reads these here
                return "the process's memory is off limits", path
            if not candidate or not parts or parts[0] in k.PROC_SYSTEM:
                continue
            if parts[0] != "self" and parts[0] != "thread-self" and parts[0] != lib.str(lib.getpid()):
                return "reading other processes is forbidden", path
            entry = parts[1:]
            if entry[:1] == ["task"] and lib.len(entry) > 1:
                entry = entry[2:]  # one of its own threads (no other process's thread is listed there)
            if entry and entry[0] not in k.PROC_OWN:
                return "of its own process, only its resource use and limits are readable", path
        return None

    def judge_proc(verb: str, walked: Any, frame: Any) -> Any:
        """The /proc rule for a path opened or listed (``proc_refusal``), blamed on the submission's frame."""
        if not lib.any((path + "/").startswith("/proc/") for path in walked):
            return None
        refused, who = proc_refusal(walked, False), None
        if refused is None:
            kind, who = culprit(frame)
            refused = proc_refusal(walked, True) if kind == k.CANDIDATE else None
        if refused is None:
            return None
        reason, path = refused
        return refuse(f"{verb}({path!r})", reason, who)

    def judge_listing(event: str, args: Any, frame: Any) -> Any:
        through: list[str] = []
        real = as_path(args[0], through) if lib.len(args) else None
        if real is None:  # a descriptor (opened where it was judged) or the working directory
            return None
        return judge_proc(event, (*through, real), frame)

    def judge_open(args: Any, frame: Any) -> Any:
        raw, mode, flags = (*args, None, None, None)[:3]
        if lib.type(raw) is lib.int:  # a descriptor: judged where it was opened, but for the harness's
            return judge_descriptors(f"open({raw})", (raw,), False, frame)
        through: list[str] = []
        real = as_path(raw, through)
        if real is None:
            kind, who = culprit(frame)
            if kind == k.CANDIDATE:
                return refuse("open() of a path object", "pass file names as str", who)
            return None
        refused = judge_proc("open", (*through, real), frame)
        if refused is not None:
            return refused
        writing = (lib.type(mode) is lib.str and lib.any(c in mode for c in "wax+")) or (
            lib.type(flags) is lib.int and (flags & k.WRITE_FLAGS) != 0
        )
        if not writing and (real + "/").startswith(cfg.trusted) and not (real + "/").startswith(cfg.off_limits):
            return None  # the libraries reading their own files
        kind, who = culprit(frame, writing)
        if kind != k.CANDIDATE:
            return None
        # the event carries no dir_fd: a relative path was judged against the working directory, which a descriptor
        # of another directory escapes (rt9b F2: /proc opened as a directory, then "self/maps" relative to it). So
        # the submission opens directories as descriptors only in its temporary directory, and no relative path
        # climbs out of the one it is relative to
        given = text(raw)
        if given is not None and not given.startswith("/") and ".." in given.split("/"):
            return refuse(f"open({raw!r})", "a relative path may not climb out of its directory", who)
        if is_directory(real) and not (real + "/").startswith(cfg.writable):
            return refuse(f"open({real!r})", "a directory outside the temporary directory is not opened", who)
        if real.startswith(("/dev/mem", "/dev/kmem", "/dev/port")) or (real + "/").startswith(cfg.off_limits):
            return refuse(f"open({real!r})", "the reference and the verifier are off limits", who)
        if writing and not (raw_is_absolute(raw) and writable(raw)):
            return refuse(f"open({real!r}) for writing", "writing outside the temporary directory is forbidden", who)
        return None

    def is_directory(path: str) -> bool:
        try:
            return (lib.stat(path).st_mode & 0o170000) == 0o040000
        except lib.OSError:
            return False

    def raw_is_absolute(raw: Any) -> bool:
        text = raw.decode("utf-8", "surrogateescape") if lib.type(raw) is lib.bytes else raw
        return lib.type(text) is lib.str and text.startswith("/")  # relative: maybe to a dir_fd

    def plain_get(table: Any, key: Any) -> Any:
        """``table[key]`` (None if absent) compared by exact type, so that no key's own ``__eq__`` runs here."""
        if lib.type(table) is not lib.dict:
            return table  # never one of the bound values: the binding no longer holds
        for item, value in lib.list(table.items()):
            if lib.type(item) is lib.type(key) and item == key:
                return value
        return None

    def text(raw: Any) -> str | None:
        if lib.type(raw) is lib.bytes:
            return raw.decode("utf-8", "surrogateescape")
        return raw if lib.type(raw) is lib.str else None

    def executable(path: str) -> bool:
        try:
            mode = lib.stat(path).st_mode
        except lib.OSError:
            return False
        return (mode & 0o170000) == 0o100000 and (mode & 0o111) != 0

    def environment_unchanged() -> bool:
        """Whether ``os.environ``'s dict (what the DSLs read their settings and compilers from) still holds what
        it held before the submission loaded, compared by exact type (no key's own ``__eq__`` runs here)."""
        if not lib.all(plain_get(table, key) is value for table, key, value in lib.lookups):
            return False
        now = lib.tuple(lib.environ.items())
        plain = lib.all(lib.type(key) is lib.bytes and lib.type(value) is lib.bytes for key, value in now)
        return plain and now == lib.environ_items

    def compiler_refusal(event: str, args: Any) -> str | None:
        """Why a process a DSL build starts is not a compiler the harness fixed before the submission loaded (by
        path and identity, found on the frozen search path, in the inherited environment), or None. Its arguments
        are the DSL's own: a build or export with options of the submission's is refused (``_dsl``)."""
        if event == "subprocess.Popen" and lib.len(args) == 4:
            program, argv, env = args[0], args[1], args[3]
        elif event in ("os.posix_spawn", "os.exec") and lib.len(args) == 3:
            program, argv, env = args
        else:
            return "a DSL build may only run a compiler"
        if env is not None:
            return "a compiler must run in the inherited environment"
        name = text(program)
        items = [argv] if lib.type(argv) is lib.str or lib.type(argv) is lib.bytes else argv
        if name is None or (lib.type(items) is not lib.list and lib.type(items) is not lib.tuple):
            return "a program named by a str"
        if lib.any(text(item) is None for item in items):
            return "compiler arguments must be str"
        if "/" not in name:
            if not lib.all(plain_get(table, key) is value for table, key, value in lib.lookups):
                return "the environment a compiler is found by was changed"
            found = [d + "/" + name for d in k.EXEC_DIRS if d and executable(d + "/" + name)]
            name = found[0] if found else name
        identity = k.COMPILERS.get(name)
        try:
            info = lib.stat(name)
        except lib.OSError:
            info = None
        if identity is None or info is None or (info.st_dev, info.st_ino) != identity:
            return f"a DSL build may only run the compilers fixed before the submission loaded, not {name[:200]!r}"
        return None

    def judge_event(event: str, args: Any, frame: Any, protected: bool) -> Any:
        if event == "compile" or event == "exec":
            compiled(event, args, frame)
            return None
        compiling.pop(lib.ident(), None)
        if event in k.INTERPRETER:
            return refuse("creating an interpreter", k.UNGUARDED, culprit(frame)[1])
        if event in k.ALWAYS:
            return refuse(event, "introspection of the verifier's process is forbidden", culprit(frame)[1])
        if event in k.DEFERRED:
            return refuse(event, k.DEFERRED_REASON, culprit(frame)[1])
        if event in k.ATTRIBUTE:
            name = args[1] if lib.len(args) > 1 and lib.type(args[1]) is lib.str else ""
            if protected:
                return refuse(
                    f"{event} {name} of a verifier object", "the verifier's objects are off limits", culprit(frame)[1]
                )
            if name in k.FRAME and event == "object.__getattr__":
                target = args[0]
                if name == "tb_frame" and lib.type(target) is not lib.TracebackType:
                    return forged(event, frame)
                inner = target.tb_frame if name == "tb_frame" else None
                if inner is not None and opens_vault(inner):
                    return refuse(f"{name} of a harness frame", "the verifier's frames are off limits", None)
            return None
        if event == "sys._getframe":
            if lib.len(args) != 1 or lib.type(args[0]) is not lib.FrameType:
                return forged(event, frame)
            if opens_vault(args[0]):
                return refuse("sys._getframe", "the verifier's frames are off limits", None)
            return None
        if event == "open":
            return judge_open(args, frame)
        if event in k.LISTING:
            return judge_listing(event, args, frame)
        if event in k.DESCRIPTOR:
            return judge_descriptors(event, args[:1], False, frame)
        if event == "import":
            if not lib.len(args) or lib.type(args[0]) is not lib.str:
                return refuse("import of a module named by something else than a str", "module names are plain str",
                              culprit(frame)[1], lib.ImportError)  # fmt: skip
            name = args[0]
            reason = module_reason(name)
            if reason is None:
                return None
            kind, who = culprit(frame)
            return refuse(f"import of {name}", reason, who, lib.ImportError) if kind == k.CANDIDATE else None
        if event in k.PROCESS_START and library_lookup(frame):
            return lib.PermissionError("mkbsim verifier: a library's search for a shared library runs no process")
        kind, who = handed(*culprit(frame, event in k.FILE_CHANGE), callers(event))
        if event in k.PROCESS_START and state["loaded"]:
            # the worker's process filter refuses it below Python anyway (``_noprocess``): said here, and blamed
            return refuse(event, "no process may start once the file is loaded (a DSL build's compiler neither)", who)
        if event.startswith("socket."):
            return (
                refuse(f"network access ({event})", "network access is forbidden", who) if kind != k.LIBRARY else None
            )
        if event in k.ENVIRONMENT:
            if kind == k.CANDIDATE:
                return refuse(event, "the environment the DSLs' builds read is the harness's", who)
            return None
        if event.startswith("ctypes.") or event in k.PROCESS:
            # a library asked by the submission (a compiler helper, a process pool) is the submission starting
            # a process; TVM's compilers run inside a build or an export (``_dsl``), and only those
            if event in k.PROCESS_START and kind == k.LIBRARY and lib.ident() in building:
                refusal = compiler_refusal(event, args)
                if refusal is not None:
                    return refuse(event, refusal, who)
            started = event in k.PROCESS_START and kind == k.LIBRARY and lib.ident() not in building
            if started and (anywhere(frame) or lib.ident() in candidate_threads):
                return refuse(event, "only the DSL's own compile may start processes", who)
            if kind == k.LIBRARY:
                return None
            if event.startswith("ctypes."):
                return refuse(event, "ctypes loads native code", who)
            return refuse(event, "subprocesses, signals and other threads' frames are forbidden", who)
        if event in k.FILE_CHANGE and kind == k.CANDIDATE:
            changed = lib.list(args[:2] if event in k.TWO_PATH else args[:1])
            link = as_path(changed[1]) if event == "os.symlink" and lib.len(changed) == 2 else None
            if link is not None:
                # a relative target is relative to the link's folder, not to the working directory
                target = as_path(changed[0]) if lib.type(changed[0]) is lib.str and changed[0].startswith("/") else None
                relative = changed[0] if lib.type(changed[0]) is lib.str else ""
                changed[0] = target or link.rsplit("/", 1)[0] + "/" + relative
            # (no comparison that runs an argument's own ``__eq__``: ``sys.audit`` takes any object)
            relative_to_fd = lib.any(
                i < lib.len(args) and args[i] is not None and not (lib.type(args[i]) is lib.int and args[i] == -1)
                for i in k.DIR_FD.get(event, ())
            )  # fmt: skip
            if relative_to_fd or not lib.all(writable(path) for path in changed):
                return refuse(event, "changing files outside the temporary directory is forbidden", who)
        return None

    reply: Any = None
    while True:
        request = yield reply
        reply = None
        try:
            kind = request[0]
            if kind == "event":
                reply = judge_event(request[1], request[2], request[3], request[4] is True)
            elif kind == "import":
                name, fromlist, frame, form = request[1], request[2], request[3], request[4]
                if lib.type(name) is not lib.str or (
                    lib.type(fromlist) is not lib.tuple and lib.type(fromlist) is not lib.list
                ):
                    # a str subclass's methods would run the submission's code here, and the import machinery calls
                    # them too (its hash finds the module in ``sys.modules``, its ``rpartition`` names the package):
                    # no name but a str's is judged, so none other is imported, whoever asks
                    reply = refuse("import of a module named by something else than a str",
                                   "module names are plain str", culprit(frame)[1], lib.ImportError)  # fmt: skip
                    name, fromlist = "", ()
                elif lib.any(lib.type(item) is not lib.str for item in fromlist):
                    reply = refuse(f"import from {name} of a name that is not a str", "module names are plain str",
                                   culprit(frame)[1], lib.ImportError)  # fmt: skip
                full = [name] + [f"{name}.{item}" for item in fromlist if lib.type(item) is lib.str and item != "*"]
                for dotted in full:
                    reason = module_reason(dotted) or (name_reason(dotted) if dotted != name else None)
                    if reason is not None:
                        who_kind, who = culprit(frame)
                        if not imported_by_c(frame, form):
                            who_kind, who = handed(who_kind, who, importers(dotted))
                        if who_kind == k.CANDIDATE:
                            reply = refuse(f"import of {dotted}", reason, who, lib.ImportError)
                        break
            elif kind == "direct":
                # only the submission's own call site counts: the standard library's dataclasses,
                # namedtuple and enum run exec on its behalf, and what that code does is guarded anyway; a
                # library calling it without naming it calls what it was handed
                frame = request[3]
                if frame is not None:
                    who_kind, who = handed(classify_code(frame.f_code), frame, request[4])
                    if who_kind == k.CANDIDATE:
                        reply = refuse(request[1], request[2], who)
            elif kind == "asked":  # refused if the submission's code is anywhere on the stack (named: the innermost)
                who = request[3]
                while who is not None and classify_code(who.f_code) != k.CANDIDATE:
                    who = who.f_back
                if who is not None or lib.ident() in candidate_threads:
                    reply = refuse(request[1], request[2], who)
            elif kind == "culprit":
                who_kind, who = handed(*culprit(request[3]), request[4])
                if who_kind == k.CANDIDATE:
                    reply = refuse(request[1], request[2], who)
            elif kind == "descriptor":
                reply = judge_descriptors(request[1], request[2], request[3] is True, request[4])
            elif kind == "thread":
                who_kind, _ = culprit(request[2])
                if who_kind == k.CANDIDATE:
                    candidate_threads.append(request[1])
                    if state["between"]:
                        stray_threads.append(request[1])
            elif kind == "inline":
                if anywhere(request[2]) and request[1] not in inline:
                    inline.append(request[1])
                    publish()
            elif kind == "building":  # a DSL build or export starts or ends on this thread (nested: counted)
                depth = building.get(lib.ident(), 0) + (1 if request[1] is True else -1)
                if depth == 1 and request[1] is True and not environment_unchanged():
                    refuse("a DSL build after a change to os.environ", "the environment the builds read is the "
                           "harness's", None)  # fmt: skip
                if depth > 0:
                    building[lib.ident()] = depth
                else:
                    building.pop(lib.ident(), None)
            elif kind == "seal":
                state["sealed"] = True
            elif kind == "loaded":
                state["loaded"] = True
            elif kind == "between":
                state["between"] = request[1] is True
            elif kind == "threads":
                reply = (lib.tuple(candidate_threads), lib.tuple(stray_threads))
        except lib.BaseException as exc:  # a fault of ours fails closed, without a traceback into the vault
            exc.__traceback__ = None
            exc.__context__ = None
            reply = exc
        request = None  # the caller holds its objects: dropping them here is never the last reference
        # nor a frame kept in this generator's locals until the next request: it held the stack it was asked from
        # alive, every local of it (the provenance vault's tensors of a whole draw: 25 GiB on p43 on the H200)
        frame = who = None


def _audit_hook(
    event: str, args: tuple[Any, ...], *, _send: Any, _watched: Any, _prefixes: Any, _attributes: Any,
    _frame_names: Any, _protected: Any, _id: Any, _ident: Any, _busy: Any, _lock: Any, _getframe: Any, _gc: Any,
    _type: Any = type, _str: Any = str, _keep: Any = ()
) -> None:  # fmt: skip
    """Called by the interpreter for every audited event; most are turned away at once."""
    if _type(event) is not _str:
        return  # sys.audit called with a str subclass (whose methods would run in the vault): no real event
    if event not in _watched and not event.startswith(_prefixes):
        return
    # (a name of another type, whose hashing would run its class's code here, goes to the vault)
    if (
        event in _attributes
        and _id(args[0]) not in _protected
        and _type(args[1]) is _str
        and (args[1] not in _frame_names)
    ):
        return
    me = _ident()
    if me in _busy:
        return  # events the vault itself raises while it works
    protected = event in _attributes and _id(args[0]) in _protected
    with _lock:
        # the thread leaves ``_busy`` first thing in ``finally``, whatever was raised after it entered (an exception
        # between the add and the ``try`` left it there for good, every later event of its unjudged: red team rt38
        # F5, a KeyboardInterrupt from ``_thread.interrupt_main`` timed to the add's call)
        enabled = _gc[0]()
        try:
            _busy.add(me)
            _gc[1]()  # no collection (and no finalizer of the submission's) while the vault runs
            answer = _send(("event", event, args, _getframe(1), protected))
        finally:
            _busy.discard(me)
            if enabled:
                _gc[2]()
    if answer is not None:
        raise answer


def _ask(request: Any, *, _send: Any, _busy: Any, _lock: Any, _ident: Any, _gc: Any) -> Any:
    """One request to the guards' vault from a hook (with the audit hook's exclusion of nested events)."""
    me = _ident()
    if me in _busy:
        return None
    with _lock:
        enabled = _gc[0]()
        try:  # (as the audit hook's)
            _busy.add(me)
            _gc[1]()
            return _send(request)
        finally:
            _busy.discard(me)
            if enabled:
                _gc[2]()


def _caller_frame(*, _busy: Any, _ident: Any, _getframe: Any) -> Any:
    """The frame of whoever called the hook that calls this, looked up with the audit hook's exclusion of the
    guards' own events: C code running inside a vault calls hooks too (an operator importing torch the first
    time it parses a Python scalar calls ``__import__``), and the hook's look at its caller, the vault's frame,
    must not be judged as someone reaching into a vault."""
    me = _ident()
    if me in _busy:
        return _getframe(2)
    try:  # (as the audit hook's)
        _busy.add(me)
        return _getframe(2)
    finally:
        _busy.discard(me)


def _guarded_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0, *, _ask: Any,
    _original: Any, _caller: Any
) -> Any:  # fmt: skip
    if level == 0:
        refused = _ask(("import", name, fromlist or (), _caller(), (globals, locals, fromlist, level)))
        if refused is not None:
            raise refused
    return _original(name, globals, locals, fromlist, level)


def _guarded_import_module(name: str, package: str | None = None, *, _ask: Any, _original: Any, _caller: Any) -> Any:
    if not name.startswith("."):
        refused = _ask(("import", name, (), _caller(), None))
        if refused is not None:
            raise refused
    return _original(name, package)


def _first_mutable_classes(base: type) -> list[type]:
    """The classes below ``base`` (an immutable extension type) whose attributes can be set and whose bases below it
    cannot: a hook set on each reaches every instance of a class that can take one."""
    found: list[type] = []
    seen: set[type] = set()
    pending = [base]
    while pending:
        subclasses: list[type] = type.__subclasses__(pending.pop())
        for cls in subclasses:
            if cls in seen:
                continue
            seen.add(cls)
            pending.append(cls)
            mutable = not cls.__flags__ & _IMMUTABLE_TYPE
            if mutable and not any(b is not cls and issubclass(b, base) and not b.__flags__ & _IMMUTABLE_TYPE
                                   for b in cls.__mro__):  # fmt: skip
                found.append(cls)
    return found


_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def _flags_word() -> int:
    """Where a type object holds its flags (``tp_flags``), in machine words from its start: found by looking, on types
    whose flags differ (word 21 on CPython 3.11-3.13, x86-64)."""
    probes = (int, str, functools.partial, type)
    found = [k for k in range(64) if all((ctypes.c_ulong * 64).from_address(id(t))[k] == t.__flags__ for t in probes)]
    if len(found) != 1:
        raise RuntimeError(f"mkbsim verifier: no one word holds a type's flags ({found})")
    return found[0]


_FLAGS_WORD = _flags_word()


def _denied(
    *args: Any, _ask: Any, _original: Any, _caller: Any, _what: str, _reason: str, _how: str, _names: Any,
    **kwargs: Any
) -> Any:  # fmt: skip
    refused = _ask((_how, _what, _reason, _caller(), _names))
    if refused is not None:
        raise refused
    return _original(*args, **kwargs)


def _ffi_tensor_call(
    *args: Any, _ask: Any, _original: Any, _caller: Any, _what: str, _names: Any, _holds: Any, _skip: int,
    **kwargs: Any
) -> Any:  # fmt: skip
    """``tvm_ffi.Function.__call__`` (and a TVM object's constructor call): refused while the submission's code is on
    the stack where its arguments (past the first ``_skip``: the function, the object) hold a tensor or anything TVM
    FFI turns into one (``_holds_tensor``). A counted launch's class has a call of its own, the gate's."""
    if _holds(args[_skip:]):
        refused = _ask(("asked", _what, FFI_TENSORS, _caller(), _names))
        if refused is not None:
            raise refused
    return _original(*args, **kwargs)


def _holds_tensor(
    values: Any, *, _type: Any, _kinds: dict[int, tuple[Any, bool]], _kind: Any, _id: Any, _plain: Any,
    _list: Any, _tuple: Any, _dict: Any, _items: Any, _depth: int = 8
) -> bool:  # fmt: skip
    """Whether ``values`` (a tuple) hold, at any depth TVM FFI converts (lists, tuples and dicts of exactly those
    types), an object TVM FFI passes as a tensor or as what a method of the object's class gives (``_kind``). A
    container of another class holds one: TVM FFI converts it by iterating it, which runs its class's code."""
    pending = [(v, 0) for v in values]
    while pending:
        value, depth = pending.pop()
        kind = _type(value)
        if kind in _plain:
            continue
        if kind is _list or kind is _tuple:
            if depth >= _depth:
                return True
            pending.extend((v, depth + 1) for v in value)
            continue
        if kind is _dict:
            if depth >= _depth:
                return True
            pending.extend((v, depth + 1) for pair in _items(value) for v in pair)
            continue
        known = _kinds.get(_id(kind))
        if known is None:
            known = _kinds[_id(kind)] = (kind, _kind(kind))  # (the class kept: its id is never reused)
        if known[1]:
            return True
    return False


def _tensor_kind(
    kind: type, *, _mro: Any, _namespace: Any, _protocols: Any, _objects: Any, _tensors: Any, _containers: Any
) -> bool:
    """Whether TVM FFI passes an object of class ``kind`` as a tensor, or as what a method of the class gives (the
    DLPack and TVM FFI protocols, ``asobject``), or converts it by iterating it (a subclass of list, tuple or dict).
    A TVM object other than a tensor passes as itself, as does a Python object backed by one (``Shape``, a tuple).
    Read from the classes' namespaces (no lookup runs a metaclass's code)."""
    line = _mro(kind)
    if any(c in _tensors for c in line):
        return True
    if any(c in _objects for c in line):
        return False
    return any(c in _containers for c in line) or any(name in _namespace(c) for c in line for name in _protocols)


def _dispatch_library(
    *args: Any, _ask: Any, _original: Any, _caller: Any, _what: str, _reason: str, _names: Any, _namespaces: Any,
    _type: Any, _str: Any, _len: Any, **kwargs: Any
) -> Any:  # fmt: skip
    """``torch._C._dispatch_library``, behind every ``torch.library`` registration: a library on an operator
    namespace that existed when the guards were installed (``aten``, ``prims``, ...), or on the catch-all ``_``,
    replaces those operators' kernels process-wide (the verifier's own operators included) and is refused while the
    submission's code is on the stack; a namespace of its own (``torch.library.custom_op``) is not."""
    namespace = args[1] if _len(args) > 1 else kwargs.get("name")
    if _type(namespace) is not _str or namespace in _namespaces:  # a str subclass's __eq__ would run its code
        refused = _ask(("asked", _what, _reason, _caller(), _names))
        if refused is not None:
            raise refused
    return _original(*args, **kwargs)


def _dlpack_import(
    *args: Any, _ask: Any, _original: Any, _caller: Any, _what: str, _reason: str, _names: Any, _producers: Any,
    _type: Any, _id: Any, **kwargs: Any
) -> Any:  # fmt: skip
    """A DLPack import (``torch.from_dlpack``, ``tvm.runtime.from_dlpack``, ``tvm_ffi.from_dlpack``) makes a tensor over
    another object's memory with no operator. Of a torch tensor (or, into torch, a TVM tensor: memory TVM allocated or
    took from torch) it is a view of memory the audit watches; of anything else (a numpy array, a capsule, an object
    with ``__dlpack__``) it is a channel both ways that nothing counts: torch operators or kernels write the inputs
    into numpy's memory, numpy computes, and its answer enters a kernel through the same door (red team rt17 F2-F3).
    Refused while the submission's code is on the stack; the producer's class by identity (no ``isinstance``, whose
    ``__class__`` could be the submission's)."""
    source = args[0] if args else next(iter(kwargs.values()), None)
    if _id(_type(source)) not in _producers:
        refused = _ask(("asked", _what, _reason, _caller(), _names))
        if refused is not None:
            raise refused
    return _original(*args, **kwargs)


def _descriptor_call(
    *args: Any, _ask: Any, _original: Any, _caller: Any, _what: str, _at: Any, _span: bool, _len: Any, **kwargs: Any
) -> Any:  # fmt: skip
    """A function taking descriptors (``_DESCRIPTOR_FUNCTIONS``), refused where one is the harness's channel."""
    fds = tuple(args[i] if i < _len(args) else kwargs.get(name) for i, name in _at)
    refused = _ask(("descriptor", _what, fds, _span, _caller()))
    if refused is not None:
        raise refused
    return _original(*args, **kwargs)


def _start_thread(
    function: Any, args: Any, kwargs: Any = None, *, _ask: Any, _original: Any, _caller: Any, _lock: Any,
    _enter: Any
) -> Any:  # fmt: skip
    # the guards' lock is held until the thread is recorded: its first audited call waits for that; the thread
    # starts under the mode that counts its operators (``_threads.enter_thread``)
    with _lock:
        ident = _original(_enter, (function, args, kwargs or {}))
        _ask(("thread", ident, _caller()))
    return ident


class Guards:
    """The installed guards of one worker: ``ask`` talks to their vault; ``patched`` lists the hooks put
    into modules (replacing one is tampering)."""

    def __init__(
        self, registry: Registry, cfg: AttributionConfig, dsl: str, page: Any, harness_fds: tuple[int, ...] = ()
    ) -> None:  # fmt: skip
        """``harness_fds``: the harness's channel to the verifier (refused to every descriptor function)."""
        self.registry = registry
        self.dsl = dsl
        freeze_compilers()  # done in the zygote already, before any submission existed
        self.patched: list[Binding] = []
        self._busy: set[int] = set()
        self._lock = _thread.RLock()
        self.thread_ops: dict[int, int] = {}  # thread -> torch operators it ran (``_threads.count_ops``)
        self.counted_threads: dict[int, bool] = {}  # the threads whose operators are counted
        self._gc = (gc.isenabled, gc.disable, gc.enable)
        # the vault learns the protected code objects when the audit hook is installed (all exist then)
        self._codes: set[int] = set()  # every vault's and hook's code object (hooks are looked past)
        self._vault_codes: set[int] = set()
        # the code objects alive when the audit hook (which sees later imports) is installed
        self._genuine: dict[int, types.CodeType] = dict(_PRELOADED)
        self._ctypes_codes: dict[int, types.CodeType] = dict(_PRELOADED_FFI)  # of modules working with ctypes
        # a SimpleNamespace, not the dataclass: a property added to a Python class would run inside the vault
        config = types.SimpleNamespace(**dataclasses.asdict(cfg))
        config.harness_fds = tuple(harness_fds)
        config.harness_files = frozenset((info.st_dev, info.st_ino) for info in map(os.fstat, harness_fds))
        lib = _lib()
        registry.compared(*(part for binding in lib.lookups for part in binding))  # (compared, never called)
        send = registry.open(
            _guard_vault, config, _rule_tables(dsl), page, self._codes, self._vault_codes, self._genuine,
            self._ctypes_codes, lib, _constants(),
        )  # fmt: skip
        send = (send.__kwdefaults__ or {})[
            "_send"
        ]  # the audit hook and _ask switch gc off themselves, under their lock
        self.ask = registry.protect(
            _ask, _send=send, _busy=self._busy, _lock=self._lock, _ident=_thread.get_ident, _gc=self._gc
        )
        # what the hooks look their caller's frame up with (``_caller_frame``)
        self.caller = registry.protect(
            _caller_frame, _busy=self._busy, _ident=_thread.get_ident, _getframe=sys._getframe
        )
        self._send = send

    def replace(self, owner: Any, attr: str, hook: Any) -> None:
        """``owner.attr = hook``; on a class, in the class of its line that defines ``attr`` (``torch.Tensor.tolist``
        is torch._C.TensorBase's: a hook on ``torch.Tensor`` left the base class's reachable, red team rt70 F0 through
        ``string.Formatter().get_field("0.__base__.tolist", ...)``, whose string the static scan does not read)."""
        if getattr(owner, attr, None) is None:
            return
        if isinstance(owner, type) and attr not in vars(owner):  # (within its library: never ``object``'s)
            package = owner.__module__.split(".")[0]
            owner = next((c for c in owner.__mro__ if attr in vars(c) and c.__module__.split(".")[0] == package), owner)
        if isinstance(owner, type) and owner.__flags__ & _IMMUTABLE_TYPE:
            set_on_immutable_type(owner, attr, hook)
        else:
            setattr(owner, attr, hook)
        self.patched.append(binding(owner, attr))

    def quiet(self, send: Any) -> Any:
        """A hook sending requests to another vault (``send``) as ``ask`` does to the guards': the events that vault
        raises meanwhile are its own, not judged (the provenance vault's census lists the collector's objects)."""
        return self.registry.protect(
            _ask, _send=send, _busy=self._busy, _lock=self._lock, _ident=_thread.get_ident, _gc=self._gc
        )

    def deny(
        self, owner: Any, attr: str, what: str, reason: str, how: str = "culprit", callers: tuple[str, ...] = ()
    ) -> None:  # fmt: skip
        """Replace ``owner.attr`` by a hook that refuses calls the submission makes (``how="direct"``:
        only calls written in the submission's own code; ``callers``: more names a library calls it by)."""
        original = getattr(owner, attr, None)
        if original is None:
            return
        # the names a library's code calls it by (vouching for the call: ``handed`` in the vault)
        names = (attr, what.rsplit(".", 1)[-1].removesuffix("()"), *callers)
        hook = self.registry.protect(_denied, _ask=self.ask, _original=original, _caller=self.caller,
                                     _what=what, _reason=reason, _how=how, _names=names)  # fmt: skip
        self.replace(owner, attr, hook)

    def install(self) -> None:
        protect = self.registry.protect
        for owner, attr, body in (
            (builtins, "__import__", _guarded_import),
            (importlib, "import_module", _guarded_import_module),
        ):
            hook = protect(body, _ask=self.ask, _original=getattr(owner, attr), _caller=self.caller)
            self.replace(owner, attr, hook)
        for name in ("exec", "eval", "compile"):
            self.deny(builtins, name, f"{name}()", "dynamic code execution is forbidden", how="direct")
        # every name a thread can be started by (start_new: the old alias of the same function)
        enter = self._thread_entry()
        for owner, attr in ((threading, "_start_new_thread"), (_thread, "start_new_thread"), (_thread, "start_new")):
            original = getattr(owner, attr, None)
            if original is not None:
                hook = protect(
                    _start_thread, _ask=self.ask, _original=original, _caller=self.caller, _lock=self._lock,
                    _enter=enter,
                )  # fmt: skip
                self.replace(owner, attr, hook)
        for module_name in ("signal", "_signal"):
            signal_module = sys.modules.get(module_name)
            if signal_module is not None:
                self.deny(signal_module, "signal", "signal.signal", "Python signal handlers are forbidden")
        for name in ("enable", "set_threshold", "freeze", "unfreeze"):
            self.deny(gc, name, f"gc.{name}", DEFERRED)
        self.deny(weakref, "finalize", "weakref.finalize", DEFERRED)
        # callables the interpreter runs with no frame of the submission's on the stack (at exit) or the harness
        # runs for it (a reducer when an object of its type is copied or pickled)
        self.deny(atexit, "register", "atexit.register", DEFERRED)
        self.deny(copyreg, "pickle", "copyreg.pickle", DEFERRED)
        # ctypes's raw-memory functions raise no audit event, and torch holds the module (``torch.ctypes``): refused
        # to the submission's calls and to a library handed one (a DSL runtime naming them vouches)
        ffi = sys.modules.get("ctypes")
        for name in ("memmove", "memset", "string_at", "wstring_at"):
            self.deny(ffi, name, f"ctypes.{name}", "ctypes loads native code and reads raw memory")
        # anonymous files live in no mapping and no resident set until mapped: outside the worker's memory limit
        # (RLIMIT_AS, the watchdog's VmRSS), and a bounded tmpfs holds the worker's other files
        for module in (os, posix):
            self.deny(module, "memfd_create", "os.memfd_create", "memory outside the worker's limit is forbidden")
        self._install_bound_functions()
        self._install_torch()
        self._install_python_data()
        self._install_numpy()
        self._install_dsl_callbacks()

    def _install_bound_functions(self) -> None:
        """Functions refused by identity wherever a loaded module binds them (``from os import read``), in one pass
        over every module's every value (guards install in ~85 ms instead of ~35, dev machine):

        * ``_posixsubprocess.fork_exec`` starts a process raising no audit event (``subprocess.Popen`` raises its
          own in Python before calling it), and every module that imported ``subprocess`` holds it
          (``subprocess._fork_exec``): refused to the submission's calls and to a library handed it (red team rt11
          F2). Belt and braces: the worker's process filter (``_noprocess``) refuses every process start below Python
          once the file is loaded. The standard library's frames are looked past, so a library vouches where it
          names ``Popen`` (TVM's compiler helpers, whose Popen raised its own event), not where it merely names
          ``run`` or ``call`` (a callable it was handed).
        * the descriptor functions (``_DESCRIPTOR_FUNCTIONS``: ``os.read``, ``os.write``, ``os.close``, ``dup2``...)
          raise none either: refused to every caller on the harness's channel to the verifier, which a thread could
          otherwise read the verifier's next message from (the harness then waits for it until the call's time
          limit), write a forged length on, or close and replace (red team rt12's leads)."""
        protect = self.registry.protect
        refused: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, its hook for a holder's name)
        starter = getattr(sys.modules.get("_posixsubprocess"), "fork_exec", None)
        if starter is not None:
            refused[id(starter)] = (starter, lambda what: protect(
                _denied, _ask=self.ask, _original=starter, _caller=self.caller, _what=what,
                _reason="subprocesses and signals are forbidden", _how="culprit",
                _names=(what.rsplit(".", 1)[-1], "Popen"),
            ))  # fmt: skip
        for module_name, functions in _DESCRIPTOR_FUNCTIONS.items():
            for name, at in functions.items():
                original = getattr(sys.modules.get(module_name), name, None)
                if original is not None:
                    refused[id(original)] = (original, functools.partial(
                        self._descriptor_hook, original, at, name == "closerange"
                    ))  # fmt: skip

        def hook_for(value: Any, what: str) -> Any:
            """The hook replacing ``value`` where it is one of the refused functions, else None."""
            found = refused.get(id(value))
            return found[1](what) if found is not None and found[0] is value else None

        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if type(namespace) is not dict:
                continue
            # the holder's name made only for a hit: the pass reads ~110k values, made for each it cost ~2x its time
            for name in [name for name, value in list(namespace.items()) if id(value) in refused]:
                hook = hook_for(namespace[name], f"{getattr(module, '__name__', '?')}.{name}")
                if hook is not None:
                    self.replace(module, name, hook)
        # classes are not scanned (~130 ms more): the one class of the libraries' modules that binds them, as its
        # attributes and as its methods' defaults (``Connection(fd).recv_bytes()`` reads any descriptor)
        connection = getattr(sys.modules.get("multiprocessing.connection"), "Connection", None)
        for name, value in list(vars(connection).items()) if connection is not None else ():
            what = f"multiprocessing.connection.Connection.{name}"
            hook = hook_for(value, what)
            if hook is not None:
                setattr(connection, name, staticmethod(hook))  # a function would bind the connection as its first
                self.patched.append(binding(connection, name))
            defaults = getattr(value, "__defaults__", None) or ()
            hooked = tuple(hook_for(default, what) or default for default in defaults)
            if any(new is not old for new, old in zip(hooked, defaults, strict=True)):
                self.replace(value, "__defaults__", hooked)

    def _descriptor_hook(self, original: Any, at: tuple[tuple[int, str], ...], span: bool, what: str) -> Any:
        return self.registry.protect(
            _descriptor_call, _ask=self.ask, _original=original, _caller=self.caller, _what=what, _at=at, _span=span,
            _len=len,
        )  # fmt: skip

    def _install_python_data(self) -> None:
        """Tensors made whole from Python data (a buffer, a list into DSL memory): the values were computed in
        plain Python, which no operator shows. The eager-work audit counts what crosses element by element
        (``_eagerwork``); these cross in bulk, so they are refused to the submission's calls."""
        import torch

        python = "tensors made from Python data in bulk are forbidden (keep the data in tensors)"
        self.deny(torch, "frombuffer", "torch.frombuffer", python)
        for storage in (torch.UntypedStorage, torch.TypedStorage):
            self.deny(storage, "from_buffer", f"torch.{storage.__name__}.from_buffer", python)
        # a storage made from a list or bytes dispatches nothing (a typed one lifts a tensor, which is counted)
        self.deny(torch.UntypedStorage, "__new__", "torch.UntypedStorage", python + "; allocate with torch.empty")
        # a tensor's bytes through serialisation, a file or shared memory (``torch.save`` to a BytesIO, a storage
        # written to a file, ``torch.load``, ``torch.from_file``): no kernel plan needs them, and what crosses there
        # is no operator. Refused while the submission's code is anywhere on the stack, since torch's own code
        # calls them on its behalf (a storage's ``__reduce__`` runs ``torch.save``)
        for module, names in (
            (torch, ("save", "load", "from_file")),
            (torch.serialization, ("save", "load", "_save", "_legacy_save", "_load", "_legacy_load")),
        ):
            for name in names:
                self.deny(module, name, f"{module.__name__}.{name}", SERIALISATION, how="asked")
        for cls in (torch.UntypedStorage, torch.TypedStorage, torch.Tensor):
            for name in _STORAGE_FILE_METHODS:
                self.deny(cls, name, f"torch.{cls.__name__}.{name}", SERIALISATION, how="asked")
        # a numpy view of a tensor reads and writes its memory with no operator (``view[:] = list``): numpy gets a
        # tensor's values as Python does, through ``tolist()`` (counted), and gives them back through
        # ``torch.from_numpy`` (lifted, counted)
        for name in ("numpy", "__array__"):
            self.deny(torch.Tensor, name, f"torch.Tensor.{name}", RAW_MEMORY)
        # a storage resized under its views (``x.untyped_storage().resize_(16)``) leaves them sizes past its memory:
        # torch checks a view against its storage only when it is made, and a TIRx kernel's index clamp trusts a
        # tensor's sizes (red team rt19 F1's class)
        # and the storage's memory swapped or re-pointed under them (red team rt22 F3: two ``_swap_data_ptr_`` left an
        # nn.Parameter of 192 x 128 over 2 bytes); the launch gate checks every argument's span all the same
        for storage in (torch.UntypedStorage, torch.TypedStorage):
            for name in ("resize_", "_resize_with_addr_", "_swap_data_ptr_", "_set_cdata"):
                self.deny(storage, name, f"torch.{storage.__name__}.{name}", RAW_MEMORY)
        self._install_dlpack_imports(torch)
        runtime = sys.modules.get("tvm.runtime")
        if runtime is None:
            return
        self.deny(runtime.Tensor, "copyfrom", "tvm.runtime.Tensor.copyfrom", python)
        # a memcpy between DSL tensors outside any launch, no operator either (one over numpy's memory took the inputs
        # to numpy: red team rt17 F2)
        copies = "copies between DSL tensors outside a kernel are forbidden (copy with a torch operator or a kernel)"
        for name in ("copyto", "_copyto"):
            self.deny(runtime.Tensor, name, f"tvm.runtime.Tensor.{name}", copies, how="asked")
        # ... and out of them: a TVM tensor's numpy copy (of a torch tensor through DLPack: no operator, no tolist
        # hook), in any thread of the submission's and under its str()/repr()
        out = "a DSL tensor's values read into Python in bulk are forbidden (keep the data in tensors)"
        self.deny(runtime.Tensor, "numpy", "tvm.runtime.Tensor.numpy", out, how="asked")
        # a parameter dict's or an object graph's bytes: a tensor's memory to Python in C++, no operator (red team rt64)
        for name, module in list(sys.modules.items()):
            if name.startswith(("tvm.", "tvm_ffi")) or name == "tvm":
                for attr in TVM_SERIALISATION:
                    if callable(getattr(module, attr, None)):
                        self.deny(module, attr, f"{name}.{attr}", SERIALISATION, how="asked")
        # ... and the same serialiser through the pickling protocol (``copy.deepcopy`` hands its memo the state):
        # refused on the first class of every line below tvm_ffi's immutable base that can take a hook (its
        # ``Object``, TVM's ``Tensor``: classes registered later derive from them), calls by ``copy`` included
        for line in _first_mutable_classes(sys.modules["tvm_ffi"].core.CObject):
            for attr in PICKLING:
                self.deny(line, attr, f"{line.__module__}.{line.__qualname__}.{attr}", SERIALISATION, how="asked")
        made = runtime.tensor  # and every module that bound the same function
        for name, module in list(sys.modules.items()):
            if name.startswith("tvm") and getattr(module, "tensor", None) is made:
                self.deny(module, "tensor", "tvm.runtime.tensor", python)

    def _install_numpy(self) -> None:
        """numpy's conversions of foreign objects and its raw-address functions (``_numpy_guards``)."""
        _numpy_guards.install(self)

    def _install_torch(self) -> None:
        import torch

        other = "another kernel language or compiler"
        self.deny(torch, "compile", "torch.compile", "torch.compile is " + other)
        for name in ("script", "trace", "trace_module", "load", "freeze", "fork", "optimize_for_inference"):
            self.deny(torch.jit, name, f"torch.jit.{name}", "TorchScript is " + other)
        graphs = "CUDA Graphs are forbidden"
        for name in ("__new__", "capture_begin"):
            self.deny(torch.cuda.graphs.CUDAGraph, name, "torch.cuda.CUDAGraph", graphs)
        self.deny(torch.cuda.graphs.graph, "__init__", "torch.cuda.graph", graphs)
        for owner in (torch.cuda, torch.cuda.graphs):
            self.deny(owner, "make_graphed_callables", "torch.cuda.make_graphed_callables", graphs)
        for name in ("_create_jit_fn", "_create_multi_output_jit_fn"):
            self.deny(torch.cuda.jiterator, name, "torch.cuda.jiterator", "jiterator compiles CUDA C")
        native = "loading native libraries is forbidden"
        self.deny(type(torch.ops), "load_library", "torch.ops.load_library", native)
        self.deny(type(torch.classes), "load_library", "torch.classes.load_library", native)
        # raw storage at an address, and the dispatch-mode stack (the provenance audit's mode lives there)
        raw = "reading memory at raw addresses is forbidden"
        self.deny(
            torch._C, "_construct_storage_from_data_pointer", "torch._C._construct_storage_from_data_pointer", raw
        )
        modes = "the verifier's dispatch modes are off limits"
        for name in ("_pop_torch_dispatch_stack", "_set_dispatch_mode", "_unset_dispatch_mode", *DISPATCH_KEY_CONTROLS):
            self.deny(torch._C, name, f"torch._C.{name}", modes)
        # running an operator below the Python key, and the pops' module-level aliases (torch's own code uses
        # them: refused to the submission's own calls only)
        bypasses: list[tuple[Any, str, str]] = [
            (torch._ops.OpOverload, "redispatch", "OpOverload.redispatch"),
            (torch._C._DispatchOperatorHandle, "redispatch_boxed", "redispatch_boxed"),
        ]
        for dotted in DISPATCH_MODE_BYPASSES:
            module, name = dotted.rsplit(".", 1)
            bypasses.append((sys.modules.get(module), name, dotted))
        for owner, name, what in bypasses:
            if owner is not None:
                self.deny(owner, name, what, modes, how="direct")
        self._install_dispatcher(torch)
        # the interpreter's stack and scheduling are the harness's too: its checks run deeper in the stack than run()
        for owner, name in ((sys, "setrecursionlimit"), (sys, "setswitchinterval"), (threading, "stack_size"),
                            (_thread, "stack_size")):  # fmt: skip
            self.deny(owner, name, f"{owner.__name__}.{name}", INTERPRETER, how="direct")
        # C++ loops that hand a tensor's elements to a Python callable one by one: no operator runs and no value
        # crosses where the audit counts it (red team rt15b F5/F6)
        for name in PER_ELEMENT_METHODS:
            self.deny(torch.Tensor, name, f"torch.Tensor.{name}", PER_ELEMENT)

    def _install_dlpack_imports(self, torch: Any) -> None:
        """DLPack imports of memory the audit does not watch (``_dlpack_import``), in every module bound to them."""
        tensors = [torch.Tensor, torch.nn.Parameter]
        dsl = [sys.modules[name].Tensor for name in ("tvm.runtime", "tvm_ffi.core") if name in sys.modules]
        reason = (
            "a tensor over memory torch or a DSL did not allocate is forbidden (numpy's arrays cross into torch "
            "through torch.from_numpy or torch.as_tensor, which count the values; a DSL tensor takes a torch tensor's "
            "memory)"
        )
        for importer, producers in (
            ("torch", [*tensors, *dsl]),  # a TVM tensor's memory into torch (an output TVM allocated)
            ("tvm_ffi", tensors),
            ("tvm.runtime", tensors),
        ):  # fmt: skip
            module = sys.modules.get(importer)
            original = getattr(module, "from_dlpack", None)
            if original is None:
                continue
            ids = frozenset(id(kind) for kind in producers)
            what = f"{importer}.from_dlpack of another library's memory"
            names = ("from_dlpack",)
            hook = self.registry.protect(
                _dlpack_import, _ask=self.ask, _original=original, _caller=self.caller, _what=what, _reason=reason,
                _names=names, _producers=ids, _type=type, _id=id,
            )  # fmt: skip
            for bound in list(sys.modules.values()):
                if bound is not None and getattr(bound, "from_dlpack", None) is original:
                    self.replace(bound, "from_dlpack", hook)

    def _install_dispatcher(self, torch: Any) -> None:
        """The dispatcher's kernels are the verifier's too: its modes run torch's operators below the Python key and
        its vaults compute with them. A kernel the submission registers for an existing operator (``torch.library``)
        would run its Python unseen, priced as that operator, and could answer the vaults' own searches and fits
        (red team rt15b F1-F3); the Python dispatcher would run Python kernels keyed by dispatch key the same way."""
        namespaces = frozenset({name.split("::", 1)[0] for name in torch._C._dispatch_get_all_op_names()} | {"_"})
        original = torch._C._dispatch_library
        hook = self.registry.protect(
            _dispatch_library, _ask=self.ask, _original=original, _caller=self.caller,
            _what="torch.library registration on torch's own operators", _reason=DISPATCHER,
            _names=("_dispatch_library", "Library", "impl", "fallback", "define", "register_kernel", "register_fake",
                    "register_autograd", "register_torch_dispatch", "_register_torch_dispatch_rule"),
            _namespaces=namespaces, _type=type, _str=str, _len=len,
        )  # fmt: skip
        self.replace(torch._C, "_dispatch_library", hook)
        self.deny(torch._C, "_EnablePythonDispatcher", "torch._C._EnablePythonDispatcher", DISPATCHER)

    def _install_ffi_tensors(self, tvm_ffi: Any) -> None:
        """A tensor enters TVM's C++ only through a counted launch (``_ffi_tensor_call``): a call of any other TVM FFI
        function, or a TVM object's constructor, handed one is refused to the submission. The CuTe DSL's compiled
        class keeps the function call of TVM FFI as it was at import (``TVMFFIJitCompiledFunctionBase.__call__``):
        it takes the hook too."""
        core = tvm_ffi.core
        kind = self.registry.protect(
            _tensor_kind, _mro=vars(type)["__mro__"].__get__, _namespace=vars(type)["__dict__"].__get__,
            _protocols=("__dlpack__", "__dlpack_c_exchange_api__", "__tvm_ffi_object__", "__tvm_ffi_value__",
                        "__tvm_ffi_opaque_ptr__", "__array_interface__", "__cuda_array_interface__", "asobject"),
            _objects=(core.CObject, core.PyNativeObject), _tensors=(core.Tensor,), _containers=(list, tuple, dict),
        )  # fmt: skip
        holds = self.registry.protect(
            _holds_tensor, _type=type, _kinds={}, _kind=kind, _id=id, _list=list, _tuple=tuple, _dict=dict,
            _items=dict.items,
            _plain=frozenset((type(None), bool, int, float, complex, str, bytes, core.String, core.Bytes)),
        )  # fmt: skip
        owners: list[tuple[Any, str, int]] = [(core.Function, "__call__", 1)]
        classes, pending = [], [core.CObject]  # (every class defining a constructor call: ``Object``'s is its own)
        while pending:
            cls = pending.pop()
            classes.append(cls)
            pending.extend(type.__subclasses__(cls))
        owners += [(cls, "__init_handle_by_constructor__", 2) for cls in classes
                   if "__init_handle_by_constructor__" in vars(cls)]  # fmt: skip
        provider = sys.modules.get("cutlass.cutlass_dsl.tvm_ffi_provider")
        if provider is not None:
            owners.append((provider.TVMFFIJitCompiledFunctionBase, "__call__", 1))
        original_call = vars(core.Function)["__call__"]
        for owner, attr, skip in owners:
            original = vars(owner)[attr]
            if attr == "__call__" and original is not original_call:
                continue  # (a class of its own: not TVM FFI's call)
            hook = self.registry.protect(
                _ffi_tensor_call, _ask=self.ask, _original=original, _caller=self.caller,
                _what=f"{owner.__name__}.{attr}", _names=(attr,), _holds=holds, _skip=skip,
            )  # fmt: skip
            self.replace(owner, attr, hook)

    def _install_dsl_callbacks(self) -> None:
        reason = "Python callbacks registered for kernels are forbidden"
        for modname in ("tvm_ffi", "tvm", "tvm.ffi", "tvm_ffi.registry"):
            mod = sys.modules.get(modname)
            for name in ("register_global_func", "register_func"):
                if mod is not None and hasattr(mod, name):
                    self.deny(mod, name, f"{modname}.{name}", reason)
        # native code reached by name or from the process's own symbols, and modules grafted onto a built one
        # (the TIRx gate counts only what ``tvm.tirx.build`` returned, ``_dsl``)
        native = "only modules TIRx built in this worker may run"
        for modname, names in (
            ("tvm_ffi", ("get_global_func", "system_lib")), ("tvm_ffi.registry", ("get_global_func",)),
            ("tvm_ffi.module", ("system_lib",)), ("tvm", ("get_global_func",)), ("tvm.ffi", ("get_global_func",)),
            ("tvm.runtime", ("system_lib", "load_static_library")),
            ("tvm.runtime.module", ("system_lib", "load_static_library")),
        ):  # fmt: skip
            mod = sys.modules.get(modname)
            for name in names if mod is not None else ():
                self.deny(mod, name, f"{modname}.{name}", native)
        for structural_module, structural_names in STRUCTURAL_ENTRIES:
            mod = sys.modules.get(structural_module)
            for name in structural_names if mod is not None else ():
                self.deny(mod, name, f"{structural_module}.{name}", STRUCTURAL)
        tvm_ffi = sys.modules.get("tvm_ffi")
        if tvm_ffi is not None:
            for name in ("import_module", "clear_imports"):
                self.deny(tvm_ffi.Module, name, f"Module.{name}", native)
            self._install_ffi_tensors(tvm_ffi)
        # loading a library: in TIRx only a module exported here loads back (``_dsl``); CuTe DSL runs only what
        # cute.compile returned, never an external binary (an object file of any origin, counted as a launch)
        loaders: list[tuple[str, str | None, str]] = [
            ("cutlass.base_dsl.export.external_binary_module", "ExternalBinaryModule", "__init__"),
            ("tvm_ffi._ffi_api", None, "ModuleLoadFromFile"),
            ("tvm.runtime._ffi_api", None, "ModuleLoadStaticLibrary"),
        ]
        if self.dsl == "cutedsl":
            loaders += [("tvm_ffi", None, "load_module"), ("tvm_ffi.module", None, "load_module")]
        for modname, cls, name in loaders:
            mod = sys.modules.get(modname)
            owner = getattr(mod, cls, None) if cls is not None else mod
            if owner is not None:
                self.deny(owner, name, f"{modname}.{cls or name}", "native code of the submission's own", "asked")
        for modname in ("cuda.bindings.driver", "cuda.bindings.runtime", "cuda.bindings.nvrtc"):
            mod = sys.modules.get(modname)
            if mod is None:
                continue
            for name in dir(mod):
                dotted = f"{modname}.{name}"
                hit = _name_reason(dotted)
                if hit:
                    self.deny(mod, name, dotted, hit)

    def install_audit_hook(self) -> None:
        """Last: the audit hook, which from now on refuses reading any vault or hook made so far."""
        # identities of objects that stay alive (held below, in the hook's own defaults): an id is never reused
        keep = tuple(self.registry.objects)
        protected = frozenset(id(obj) for obj in keep)
        self._vault_codes.update(identity_key(code) for code in self.registry.vault_codes)
        self._codes.update(id(code) for code in (*self.registry.vault_codes, *self.registry.hook_codes))
        hook = self.registry.protect(
            _audit_hook, _send=self._send, _watched=_WATCHED, _prefixes=("socket.", "ctypes."),
            _attributes=_ATTRIBUTE_EVENTS,
            _frame_names=_FRAME_ATTRIBUTES, _protected=protected | {id(self._codes)}, _id=id,
            _ident=_thread.get_ident, _busy=self._busy, _lock=self._lock, _getframe=sys._getframe, _gc=self._gc,
        )  # fmt: skip
        # the protected set must cover the audit hook itself, which exists only now
        hook.__kwdefaults__ = {
            **hook.__kwdefaults__, "_protected": protected | {id(hook), id(self._codes)}, "_keep": keep,
        }  # fmt: skip
        self._codes.add(id(hook.__code__))
        self._genuine.update(_live_codes(self._genuine, self._ctypes_codes))
        sys.addaudithook(hook)
        self.ask(("seal",))
        del self._send, self._codes, self._vault_codes, self._genuine, self._ctypes_codes

    def _thread_entry(self) -> Any:
        """The entry every thread the submission starts runs first: it pushes the mode that counts the thread's
        operators into ``thread_ops`` (``_threads``; the mode stack's pops are refused to the submission)."""
        import torch

        from mkbsim.verifier._threads import count_ops, enter_thread

        class _ThreadMode(torch.utils._python_dispatch.TorchDispatchMode):
            pass

        # replacing the hook on the class (reached through the mode stack) is tampering, like any other hook
        self.replace(
            _ThreadMode, "__torch_dispatch__",
            self.registry.protect(count_ops, _counts=self.thread_ops, _ident=_thread.get_ident),
        )  # fmt: skip
        # torch looks the hook up on the mode, through its class: a ``__getattribute__`` added there would pick another
        self.registry.watch(_ThreadMode)
        return self.registry.protect(
            enter_thread, _push=torch._C._push_on_torch_dispatch_stack, _mode=_ThreadMode(),
            _ident=_thread.get_ident, _counted=self.counted_threads,
        )  # fmt: skip


def started_threads(*, _ask: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(threads the submission started, those it started between calls), as the guards' vault has them (a hook:
    ``_ask`` is ``Guards.ask``)."""
    answer = _ask(("threads",))
    return answer if type(answer) is tuple else ((), ())


#: A binding as installed: the owner's name, the attribute, what it was bound to, and the owner's own namespace.
Binding = tuple[str, str, Any, Any]


def set_on_immutable_type(owner: type, attr: str, hook: Any) -> None:
    """``owner.attr = hook`` on a type Python code may not change (an extension's static type: ``torch.Generator``,
    TVM FFI's ``Function``), before the submission loads: its immutable flag is lifted for the assignment, which
    takes Python's own path, so a special method's slot follows it (``Function.__call__``: a call ``f(x)`` runs the
    hook; an entry set in the type's dict alone changed ``Function.__call__`` and left ``f(x)`` as it was)."""
    words = (ctypes.c_ulong * (_FLAGS_WORD + 1)).from_address(id(owner))
    if words[_FLAGS_WORD] != owner.__flags__:
        raise RuntimeError(f"mkbsim verifier: {owner.__qualname__}'s flags are not where a type's are")
    words[_FLAGS_WORD] &= ~_IMMUTABLE_TYPE
    try:
        type.__setattr__(owner, attr, hook)
    finally:
        words[_FLAGS_WORD] |= _IMMUTABLE_TYPE


def binding(owner: Any, attr: str) -> Binding:
    """``owner.attr`` as it is bound now, with the owner's namespace (a module's dict, a class's mapping): taken before
    the submission loads, so that checking it later looks nothing up on the owner."""
    namespace = vars(owner)
    return (getattr(owner, "__name__", type(owner).__name__), attr, namespace.get(attr), namespace)


def changed_bindings(bindings: list[Binding]) -> list[str]:
    """The bindings no longer holding what was installed, read from each owner's namespace itself: an attribute lookup
    on the owner would run a module's ``__getattr__`` (the binding deleted) or a swapped class's, the submission's code,
    inside the harness's per-call path after the timer (red team rt16 F3). A missing key is a moved binding. A module's
    namespace is a dict the submission can put any key in: one whose key is not an exact str (whose ``__eq__``, called
    by the lookup on a hash match, is the submission's: red team rt34 F1 ran eager work there after every timer) is
    named as tampering and not looked up (``plain_keys``; a class's namespace stores every name as an exact str)."""
    found: list[str] = []
    judged: dict[int, bool] = {}  # the namespace (identity) -> whether its keys are all exact str
    for name, attr, ours, namespace in bindings:
        key = identity_key(namespace)
        plain = judged.get(key)
        if plain is None:
            plain = judged[key] = type(namespace) is not dict or plain_keys(namespace, str)
        if not plain or namespace.get(attr) is not ours:
            found.append(f"{name}.{attr}")
    return found


def plain_keys(mapping: dict[Any, Any], kind: type) -> bool:
    """Whether every key of ``mapping`` is exactly of class ``kind``, found in C: no key's ``__eq__`` or ``__hash__``,
    no class's metaclass, runs."""
    return all(map(_is, map(type, mapping), _repeat(kind)))


_is, _repeat = operator.is_, itertools.repeat  # (bound: ``plain_keys`` runs in the worker's bound path)


#: The code objects of the zygote's libraries (``remember_preloaded``), which every worker inherits, and those of
#: them whose module works with ctypes.
_PRELOADED: dict[int, types.CodeType] = {}
_PRELOADED_FFI: dict[int, types.CodeType] = {}


def _live_codes(known: dict[int, types.CodeType], ffi: dict[int, types.CodeType]) -> dict[int, types.CodeType]:
    """The code objects of every function the collector lists, nested ones included, less ``known``; those of
    modules that work with ctypes also go into ``ffi``."""
    found: dict[int, types.CodeType] = {}
    binds: dict[int, bool] = {}  # id(module globals) -> whether they bind ctypes
    for function in gc.get_objects():
        if type(function) is not types.FunctionType:
            continue
        namespace = function.__globals__
        if id(namespace) not in binds:
            binds[id(namespace)] = _binds_ctypes(namespace)
        pending = [function.__code__]
        while pending:
            code = pending.pop()
            if id(code) not in known and id(code) not in found:
                found[id(code)] = code
                if binds[id(namespace)]:
                    ffi[id(code)] = code
                pending += [c for c in code.co_consts if type(c) is types.CodeType]
    return found


def _binds_ctypes(namespace: dict[str, Any]) -> bool:
    """Whether a module's globals hold ctypes, or a class or function of it (``from ctypes import cast``): its
    code calls foreign functions itself. Read before the submission exists."""
    for value in list(namespace.values()):
        kind = type(value)  # never isinstance or getattr: a lazy object's __class__ or attributes run its code
        if kind is types.ModuleType:
            owner = vars(value).get("__name__")
        elif kind is types.FunctionType or kind is types.BuiltinFunctionType:
            owner = value.__module__
        elif issubclass(kind, type):
            owner = vars(value).get("__module__")
        else:
            continue
        if type(owner) is str and owner.split(".")[0] in _FFI_MODULES:
            return True
    return False


def remember_preloaded() -> None:
    """In the zygote, once its libraries are imported: remember their code objects (the genuine ones a
    worker trusts by file name, see the module docstring), then move every object out of the collector's
    generations (``gc.freeze``) so that a worker's own scan lists only what it made since the fork."""
    _PRELOADED.update(_live_codes(_PRELOADED, _PRELOADED_FFI))
    freeze_compilers()
    gc.freeze()


def _name_reason(dotted: str) -> str | None:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        reason = FORBIDDEN_NAMES.get(".".join(parts[:i]))
        if reason is not None:
            return reason
    return FORBIDDEN_SUFFIXES.get(parts[-1])
