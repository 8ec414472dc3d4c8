"""Runtime guards installed in a submission's process before its file is imported.

Static scanning cannot see names built at run time, so the worker also watches what the
submission's own code does: every import (`builtins.__import__`, `importlib.import_module`), every
audited event (`sys.addaudithook`: processes, sockets, ctypes, frame and gc introspection, file
access outside the temporary directory), dynamic code (`exec`/`eval`/`compile`), other compilers
(`torch.compile`, `torch.jit`), CUDA graph capture and the registration of Python callbacks.

A call is the submission's when the innermost frame outside the standard library belongs to the
submission (any file outside the installed libraries and this harness). Libraries may do what they
need (TVM runs compilers, CuTe DSL uses ctypes); the same call made directly by the submission is
refused with `ForbiddenError` and recorded, even if the submission catches the error.
"""

from __future__ import annotations

import _thread
import builtins
import csv
import functools
import glob
import importlib
import importlib.util
import os
import site
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any

from mkbsim.verifier._rules import module_rule, name_rule

CANDIDATE, LIBRARY, TRANSPARENT = "candidate", "library", "transparent"


class ForbiddenError(PermissionError):
    """Raised into the submission when it uses a forbidden API."""


class ForbiddenImport(ImportError):
    """Raised into the submission for a forbidden import (an ImportError, as import failures are)."""


@dataclass(frozen=True)
class Violation:
    what: str
    reason: str
    line: int | None  # in the submission's file
    elsewhere: str | None = None  # or the file and line blamed outside it (a module it wrote, or an untrusted path)

    def text(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.what} ({self.reason})" + (f" in {self.elsewhere}" if self.elsewhere else "")


def _package_roots(names: Iterable[str]) -> list[str]:
    """The directories holding these top-level packages, found without importing them.

    A package not preloaded (e.g. a DSL left out of the zygote because it initialises CUDA) must
    still count as library code when the submission imports it later.
    """
    roots = []
    for name in names:
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None)
        if not path:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            path = spec.origin if spec is not None and spec.origin not in (None, "namespace") else None
        if path:
            roots.append(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    return roots


def _writable_prefixes() -> tuple[str, ...]:
    """The folders a submission may write in (resolved, each ending in a separator)."""
    return tuple({os.path.realpath(p) + os.sep for p in (tempfile.gettempdir(), "/tmp", "/dev/shm")})


def _loaded_modules(outside: str) -> tuple[list[str], list[str]]:
    """Where the top-level modules already imported live, as real paths: (package folders, single-file
    modules), leaving out any in the folder ``outside`` or holding it."""
    folders, files = [], []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if "." not in name and name != "__main__" else None
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        real = os.path.realpath(path)
        if os.path.basename(real) == "__init__.py":
            folder = os.path.dirname(real) + os.sep
            if not (outside.startswith(folder) or folder.startswith(outside)):
                folders.append(folder)
        elif not real.startswith(outside):
            files.append(real)
    return folders, files


def _installed_files(folder: str) -> list[str]:
    """The Python files installed into ``folder`` by pip (each distribution's RECORD), as real paths; only
    entries inside the folder count (a RECORD naming files elsewhere is not pip's)."""
    files = []
    for record in glob.glob(os.path.join(glob.escape(folder), "*.dist-info", "RECORD")):
        with open(record, newline="") as rows:
            for row in csv.reader(rows):
                real = os.path.realpath(os.path.join(folder, row[0])) if row and row[0].endswith(".py") else ""
                if real.startswith(folder) and not os.path.isabs(row[0]):
                    files.append(real)
    return files


class Attribution:
    """Decides whose code a frame stack is running on behalf of.

    Library code: site-packages, the harness, the DSLs' and torch's installation folders, the files pip
    installed into any other folder on the import path (a ``--target`` folder on PYTHONPATH, which may shadow
    site-packages), and every module imported before the submission (this is created before it is loaded).
    Anything else the submission imports, or loads from its own folder, is its own.
    Paths are compared once resolved, so a symbolic link into a library folder changes nothing.
    """

    def __init__(self, harness_dir: str, candidate_file: str) -> None:
        trusted = [*site.getsitepackages(), site.getusersitepackages()]
        paths = sysconfig.get_paths()
        trusted += [paths["purelib"], paths["platlib"], harness_dir]
        # Where the DSLs and torch really live (e.g. a --target directory on PYTHONPATH).
        trusted += _package_roots(("torch", "numpy", "tvm", "tvm_ffi", "cutlass", "cuda", "nvidia_cutlass_dsl"))
        # the standard library stays transparent: its frames are looked past, to whoever called it
        self.stdlib = tuple({os.path.realpath(p) + os.sep for p in (paths["stdlib"], paths["platstdlib"]) if p})
        candidate = os.path.realpath(candidate_file)
        folders, files = _loaded_modules(os.path.dirname(candidate) + os.sep)
        trusted += [folder for folder in folders if not folder.startswith(self.stdlib)]
        self.trusted = tuple(sorted({os.path.realpath(p) + os.sep for p in trusted if p}, key=len, reverse=True))
        # other installation folders (pip --target): exactly the files pip put there; never a folder the
        # submission could have written a RECORD into (its own, or one under the temporary directory)
        untrusted = (os.path.dirname(candidate) + os.sep, *_writable_prefixes())
        for entry in sys.path:
            folder = os.path.realpath(entry or os.curdir) + os.sep
            skip = folder.startswith((*self.trusted, *self.stdlib, *untrusted)) or untrusted[0].startswith(folder)
            if os.path.isdir(folder) and not skip:
                files += _installed_files(folder)
        self.trusted_files = frozenset(f for f in files if not f.startswith(self.stdlib))
        self._cache = dict.fromkeys((candidate_file, os.path.abspath(candidate_file), candidate), CANDIDATE)

    def is_library_path(self, real: str) -> bool:
        """Whether this resolved path is library code (or a library's folder)."""
        return real in self.trusted_files or (real + os.sep).startswith(self.trusted)

    def is_library_code(self, real: str) -> bool:
        """Whether a frame's resolved file is library code: a library path that exists (a loader may name
        its code after a file that is not there)."""
        return self.is_library_path(real) and os.path.isfile(real)

    def classify(self, filename: str) -> str:
        kind = self._cache.get(filename)
        if kind is None:
            if filename.startswith("<"):
                kind = TRANSPARENT  # frozen importlib, exec'd snippets of libraries
            else:
                path = os.path.realpath(filename)
                if self._cache.get(path) == CANDIDATE:
                    kind = CANDIDATE
                elif self.is_library_code(path):
                    kind = LIBRARY
                elif path.startswith(self.stdlib):
                    kind = TRANSPARENT
                elif not path.endswith(".py"):
                    # frames a library synthesises from a native backtrace (tvm_ffi names them after C/C++
                    # sources, e.g. Objects/descrobject.c): look past them to whoever called that library.
                    # A .py name that is no file (a zip import, a custom loader) stays the submission's.
                    kind = TRANSPARENT
                else:
                    kind = CANDIDATE
            self._cache[filename] = kind
        return kind

    def culprit(self, frame: FrameType | None) -> tuple[str, FrameType | None]:
        """(CANDIDATE | LIBRARY | TRANSPARENT, the deciding frame) for the innermost non-stdlib frame."""
        while frame is not None:
            kind = self.classify(frame.f_code.co_filename)
            if kind != TRANSPARENT:
                return kind, frame
            frame = frame.f_back
        return TRANSPARENT, None

    def anywhere(self, frame: FrameType | None) -> bool:
        """Whether any frame of the stack is the submission's."""
        while frame is not None:
            if self.classify(frame.f_code.co_filename) == CANDIDATE:
                return True
            frame = frame.f_back
        return False


_PROCESS_EVENTS = frozenset(
    ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
     "os.kill", "os.killpg", "pty.spawn", "os.startfile", "resource.setrlimit", "resource.prlimit",
     "sys.addaudithook", "signal.pthread_kill")
)  # fmt: skip
_INTROSPECTION_EVENTS = frozenset(
    ("sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
     "code.__new__", "function.__new__", "marshal.loads", "marshal.load", "sys.setprofile", "sys.settrace")
)  # fmt: skip
_FILE_CHANGE_EVENTS = frozenset(
    ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree", "shutil.move", "os.truncate", "os.chmod",
     "os.chown", "os.utime", "os.link", "os.symlink", "os.mkdir")
)  # fmt: skip
_TWO_PATH_EVENTS = frozenset(("os.rename", "shutil.move", "os.link", "os.symlink"))
# where each file event carries its dir_fd arguments (CPython's audit events table)
_DIR_FD_ARGS = {
    "os.remove": (1,), "os.rmdir": (1,), "os.rename": (2, 3), "os.link": (2, 3), "os.symlink": (2,),
    "os.mkdir": (2,), "os.chmod": (2,), "os.chown": (3,), "os.utime": (3,), "shutil.rmtree": (1,),
}  # fmt: skip
_FRAME_ATTRS = frozenset(
    ("f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame")
)
_FUNCTION_ATTRS = frozenset(("__code__", "__defaults__", "__kwdefaults__", "__globals__", "__bases__", "__class__"))
_WATCHED = _PROCESS_EVENTS | _INTROSPECTION_EVENTS | _FILE_CHANGE_EVENTS | {
    "open", "object.__getattr__", "object.__setattr__", "object.__delattr__",
}  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Guard:
    """The guards of one worker; `violations` lists what the submission was refused."""

    def __init__(self, candidate_file: str, dsl: str, harness_dir: str, off_limits: Iterable[str]) -> None:
        self.candidate_file = os.path.abspath(candidate_file)
        self.dsl = dsl
        self.attribution = Attribution(harness_dir, self.candidate_file)
        self.violations: list[Violation] = []
        self.candidate_threads: set[int] = set()
        # Threads the submission starts while no call runs (from a finalizer, say): they could watch
        # the shared arena, which the verifier refills with the next call's inputs before it sends the
        # call, and do that call's work untimed. Any such thread is background work.
        self.between_calls = False
        self.stray_threads: list[int] = []
        self.off_limits = tuple(os.path.abspath(p) + os.sep for p in off_limits)
        self.writable = (*_writable_prefixes(), "/dev/null")
        self._local = threading.local()
        self.patched: list[tuple[Any, str, Any]] = []  # (owner, attribute, our replacement)
        self._pid = str(os.getpid())

    # --- recording -----------------------------------------------------------------------------
    def refuse(self, what: str, reason: str, frame: FrameType | None, exc: type[Exception] = ForbiddenError) -> None:
        line, elsewhere = None, None
        if frame is not None:
            path = os.path.abspath(frame.f_code.co_filename)
            if path == self.candidate_file:
                line = frame.f_lineno
            else:
                elsewhere = f"{path}:{frame.f_lineno}"
        self.violations.append(Violation(what, reason, line, elsewhere))
        raise exc(f"mkbsim verifier: {what} is forbidden ({reason})")

    def culprit(self, frame: FrameType | None) -> tuple[str, FrameType | None]:
        """``Attribution.culprit``, except that a stack with nothing but stdlib and synthetic frames in a thread
        the submission started is the submission's (``Thread(target=exec, args=(code,))`` runs its code with
        no frame of its file)."""
        kind, culprit = self.attribution.culprit(frame)
        if kind == TRANSPARENT and threading.get_ident() in self.candidate_threads:
            return CANDIDATE, culprit
        return kind, culprit

    def is_candidate(self, frame: FrameType | None) -> tuple[bool, FrameType | None]:
        kind, culprit = self.culprit(frame)
        return kind == CANDIDATE, culprit

    # --- installation ------------------------------------------------------------------------------
    def install(self) -> None:
        self._install_imports()
        self._install_builtins()
        self._install_threads()
        self._install_torch()
        self._install_dsl_callbacks()
        sys.addaudithook(self._audit_hook())

    def replace(self, owner: Any, attr: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, attr, None)
        if original is None:
            return
        replacement = make(original)
        setattr(owner, attr, replacement)
        self.patched.append((owner, attr, replacement))

    def deny_for_candidate(self, owner: Any, attr: str, what: str, reason: str) -> None:
        """Replace ``owner.attr`` by a wrapper that refuses calls made by the submission."""

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                mine, frame = self.is_candidate(sys._getframe(1))
                if mine:
                    self.refuse(what, reason, frame)
                return original(*args, **kwargs)

            del guarded.__wrapped__  # functools.wraps would hand out the unguarded original
            return guarded

        self.replace(owner, attr, make)

    def _check_import(self, name: str, fromlist: Iterable[str], frame: FrameType | None) -> None:
        candidates = [name] + [f"{name}.{item}" for item in fromlist if isinstance(item, str) and item != "*"]
        for full in candidates:
            hit = module_rule(full, self.dsl) or (name_rule(full) if full != name else None)
            if hit:
                mine, culprit = self.is_candidate(frame)
                if mine:
                    self.refuse(f"import of {full}", hit[1], culprit, ForbiddenImport)
                return

    def _install_imports(self) -> None:
        def make_import(original: Callable[..., Any]) -> Callable[..., Any]:
            def guarded_import(
                name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
            ) -> Any:
                if level == 0:
                    self._check_import(name, fromlist or (), sys._getframe(1))
                return original(name, globals, locals, fromlist, level)

            return guarded_import

        def make_import_module(original: Callable[..., ModuleType]) -> Callable[..., ModuleType]:
            @functools.wraps(original)
            def guarded_import_module(name: str, package: str | None = None) -> ModuleType:
                if not name.startswith("."):
                    self._check_import(name, (), sys._getframe(1))
                return original(name, package)

            del guarded_import_module.__wrapped__
            return guarded_import_module

        self.replace(builtins, "__import__", make_import)
        self.replace(importlib, "import_module", make_import_module)

    def _install_builtins(self) -> None:
        for name in ("exec", "eval", "compile"):
            self.deny_for_candidate(builtins, name, f"{name}()", "dynamic code execution is forbidden")

    def _install_threads(self) -> None:
        def make(original: Callable[..., int]) -> Callable[..., int]:
            def start_new_thread(function: Callable[..., Any], args: tuple[Any, ...], kwargs: Any = None) -> int:
                mine, _ = self.is_candidate(sys._getframe(1))
                ident = original(function, args, kwargs or {})
                if mine:
                    self.candidate_threads.add(ident)
                    if self.between_calls:
                        self.stray_threads.append(ident)
                return ident

            return start_new_thread

        self.replace(threading, "_start_new_thread", make)
        self.replace(_thread, "start_new_thread", make)

    def _install_torch(self) -> None:
        import torch

        other = "another kernel language or compiler"
        self.deny_for_candidate(torch, "compile", "torch.compile", "torch.compile is " + other)
        for name in ("script", "trace", "trace_module", "load", "freeze", "fork", "optimize_for_inference"):
            self.deny_for_candidate(torch.jit, name, f"torch.jit.{name}", "TorchScript is " + other)
        graphs = "CUDA Graphs are forbidden"
        for name in ("__new__", "capture_begin"):
            self.deny_for_candidate(torch.cuda.graphs.CUDAGraph, name, "torch.cuda.CUDAGraph", graphs)
        self.deny_for_candidate(torch.cuda.graphs.graph, "__init__", "torch.cuda.graph", graphs)
        for owner in (torch.cuda, torch.cuda.graphs):
            self.deny_for_candidate(owner, "make_graphed_callables", "torch.cuda.make_graphed_callables", graphs)
        for name in ("_create_jit_fn", "_create_multi_output_jit_fn"):
            self.deny_for_candidate(torch.cuda.jiterator, name, "torch.cuda.jiterator", "jiterator compiles CUDA C")
        native = "loading native libraries is forbidden"
        self.deny_for_candidate(type(torch.ops), "load_library", "torch.ops.load_library", native)
        self.deny_for_candidate(type(torch.classes), "load_library", "torch.classes.load_library", native)

    def _install_dsl_callbacks(self) -> None:
        reason = "Python callbacks registered for kernels are forbidden"
        for modname in ("tvm_ffi", "tvm", "tvm.ffi", "tvm_ffi.registry"):
            mod = sys.modules.get(modname)
            for name in ("register_global_func", "register_func"):
                if mod is not None and hasattr(mod, name):
                    self.deny_for_candidate(mod, name, f"{modname}.{name}", reason)
        for modname in ("cuda.bindings.driver", "cuda.bindings.runtime", "cuda.bindings.nvrtc"):
            mod = sys.modules.get(modname)
            if mod is None:
                continue
            for name in dir(mod):
                hit = name_rule(f"{modname}.{name}")
                if hit:
                    self.deny_for_candidate(mod, name, f"{modname}.{name}", hit[1])

    # --- the audit hook ----------------------------------------------------------------------------
    def _audit_hook(self) -> Callable[[str, tuple[Any, ...]], None]:
        """The hook: every audited event of the process passes it, so the events it ignores (most of
        them) and attribute events on harmless names are turned away with local lookups only,
        before any per-thread state or frame is touched; the rest go to `_judge`."""
        watched, prefixes = _WATCHED, ("socket.", "ctypes.")
        frame_attrs, function_attrs = _FRAME_ATTRS, _FUNCTION_ATTRS
        local, judge = self._local, self._judge

        def audit(event: str, args: tuple[Any, ...]) -> None:
            if event not in watched and not event.startswith(prefixes):
                return
            if event == "object.__getattr__" or event == "object.__delattr__":
                if len(args) < 2 or args[1] not in frame_attrs:
                    return
            elif event == "object.__setattr__" and (len(args) < 2 or args[1] not in function_attrs):
                return
            if getattr(local, "busy", False):
                return  # our own sys._getframe in _judge raises an event too
            local.busy = True
            try:
                judge(event, args)
            finally:
                local.busy = False

        return audit

    def _judge(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            self._judge_open(args)
            return
        if event in ("object.__getattr__", "object.__delattr__"):
            if len(args) < 2 or args[1] not in _FRAME_ATTRS:
                return
        elif event == "object.__setattr__" and (len(args) < 2 or args[1] not in _FUNCTION_ATTRS):
            return
        kind, frame = self.culprit(sys._getframe(2))
        if event.startswith("socket."):
            if kind != LIBRARY:
                self.refuse(f"network access ({event})", "network access is forbidden", frame)
        elif event.startswith("ctypes.") or event in _PROCESS_EVENTS:
            if kind != LIBRARY:
                reason = (
                    "ctypes loads native code"
                    if event.startswith("ctypes.")
                    else "subprocesses and signals are forbidden"
                )
                self.refuse(event, reason, frame)
        elif event in _FILE_CHANGE_EVENTS:
            # a rename, move or link changes its destination too (for a symlink: where the link is made)
            changed = list(args[:2] if event in _TWO_PATH_EVENTS else args[:1])
            if event == "os.symlink" and len(changed) == 2 and self._path(changed[1]) is not None:
                # a relative target is relative to the link's folder, not to the working directory
                changed[0] = os.path.join(os.path.dirname(str(self._path(changed[1]))), os.fsdecode(changed[0]))
            # a path relative to a directory descriptor cannot be judged from its name
            relative_to_fd = any(i < len(args) and args[i] not in (None, -1) for i in _DIR_FD_ARGS.get(event, ()))
            if kind == CANDIDATE and (relative_to_fd or not all(self._writable(path) for path in changed)):
                self.refuse(event, "changing files outside the temporary directory is forbidden", frame)
        elif kind == CANDIDATE:
            what = f"{event} {args[1]}" if event.startswith("object.") else event
            self.refuse(what, "introspection of the verifier's process is forbidden", frame)

    def _path(self, raw: Any) -> str | None:
        if isinstance(raw, int) or raw is None:
            return None
        try:
            path = os.fsdecode(os.fspath(raw))
        except TypeError:
            return None
        return os.path.abspath(path)

    def _writable(self, raw: Any) -> bool:
        """Whether the submission may create or change this path: under the temporary directory, and not
        inside library code (a virtual environment may live there too) where it would be trusted."""
        path = self._path(raw)
        if path is None:
            return True
        real = os.path.realpath(path)
        return real.startswith(self.writable) and not self.attribution.is_library_path(real)

    def _judge_open(self, args: tuple[Any, ...]) -> None:
        raw, mode, flags = (*args, None, None, None)[:3]
        path = self._path(raw)
        if path is None:
            return
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        )
        if not writing and path.startswith(self.attribution.trusted) and not path.startswith(self.off_limits):
            return  # the libraries reading their own files
        kind, frame = self.culprit(sys._getframe(3))
        if kind != CANDIDATE:
            return
        real = os.path.realpath(path)
        if real.startswith("/proc/"):
            head = real.split("/")[2]
            if head not in ("self", "thread-self", self._pid, "cpuinfo", "meminfo"):
                self.refuse(f"open({path!r})", "reading other processes is forbidden", frame)
        if real.startswith(("/dev/mem", "/dev/kmem", "/dev/port")) or (real + os.sep).startswith(self.off_limits):
            self.refuse(f"open({path!r})", "the reference and the verifier are off limits", frame)
        if writing and not (os.path.isabs(os.fsdecode(raw)) and self._writable(path)):  # relative: maybe to a dir_fd
            self.refuse(f"open({path!r}) for writing", "writing outside the temporary directory is forbidden", frame)

    # --- after each call -------------------------------------------------------------------------
    def tampered(self) -> list[str]:
        """The guards and hooks that are no longer in place."""
        return [
            f"{getattr(owner, '__name__', owner)}.{attr}"
            for owner, attr, ours in self.patched
            if getattr(owner, attr, None) is not ours
        ]
