"""The harness inside a submission's process (DESIGN §5): it opens the vaults, installs the guards and
the DSL gates, loads the file, then runs calls on shared inputs and answers with plain data.

Nothing here is trusted by the verifier. What decides a verdict reaches the verifier without passing
through this code's Python objects: the outputs (copied into the shared arena, read by the verifier),
the launch count, the timer's measure and the provenance records (written by vaults into the control
page), and the worker's CPU time (read by the verifier from ``/proc``). The facts this code reports
(types, shapes, threads still running, violations) give precise feedback; forging them gains nothing
the verifier's own checks would not catch. It is forked from the zygote, so torch and the DSLs are
already imported.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import linecache
import os
import resource
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from types import ModuleType, TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mkbsim.verifier._arena import MappedArena, dtype_from_name, map_block
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._channel import CHANNEL_LOST, Channel, ChannelClosed, answer_signer, signer_lib
from mkbsim.verifier._control import BLOCK_NONCE, map_control
from mkbsim.verifier._dsl import DslGates
from mkbsim.verifier._eagerwork import to_python_hook
from mkbsim.verifier._guards import Guards
from mkbsim.verifier._operators import dispatch_hooks
from mkbsim.verifier._provenance import (
    dispatch,
    page_layout,
    provenance_lib,
    provenance_vault,
    report_end,
    report_inputs,
    report_result,
)
from mkbsim.verifier._threads import clocks, moved, working
from mkbsim.verifier._timing import (
    TIMER_ATTRIBUTES,
    CacheFlusher,
    _perf_counter,
    advance_block,
    end_block,
    timed_call,
    timer_layout,
    timer_lib,
    timer_vault,
)
from mkbsim.verifier._vault import Registry

HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))

# The harness inspects outputs through the C base class, which a submission cannot patch (a method it
# replaces on torch.Tensor, such as data_ptr, never runs here), and compares identities with `is`.
_Base = torch._C.TensorBase
_copy = _Base.copy_
_data_ptr = _Base.data_ptr
_size = _Base.size
_stride = _Base.stride
_numel = _Base.numel
_element_size = _Base.element_size
_zerotensor = _Base._is_zerotensor
_dtype = _Base.__dict__["dtype"].__get__
_device = _Base.__dict__["device"].__get__
_layout = _Base.__dict__["layout"].__get__
_is_functional = torch._is_functional_tensor
_Tensor = torch.Tensor
_type = type
_tuple_iter = tuple.__iter__
_mode_depth = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack)
_PYTHON_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | torch._C.DispatchKeySet(
    torch._C.DispatchKey.PythonTLSSnapshot
)


@contextlib.contextmanager
def _harness_ops() -> Iterator[None]:
    """The harness's own tensor operations, out of reach of any torch mode or tensor subclass: a mode a
    finalizer of the submission's pushes at any moment must not run its code inside them."""
    with torch._C.DisableTorchFunction(), torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEYS):
        yield


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No automatic garbage collection during a call and the harness's work on its result: a collection
    there would run the submission's finalizers or collector callbacks after the timer stopped (between
    calls a collection is the worker's CPU time between calls, which the verifier measures)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_push_mode = torch._C._push_on_torch_dispatch_stack
_pop_mode = torch._C._pop_torch_dispatch_stack
_top_mode = torch._C._get_dispatch_stack_at


def _tensor_facts(t: torch.Tensor) -> dict[str, Any]:
    return {
        "kind": "tensor",
        "dtype": str(_dtype(t)).removeprefix("torch."),
        "shape": list(_size(t)),
        "device": _device(t).type,
        "layout": str(_layout(t)).removeprefix("torch."),
    }


def _lazy_reason(t: torch.Tensor) -> str | None:
    if _layout(t) != torch.strided:
        return f"a {_layout(t)} tensor"
    if _is_functional(t):
        return "a functional (lazy) tensor"
    if _zerotensor(t):
        return "a lazy zero tensor"
    return None


def describe(result: Any, n_outputs: int) -> tuple[dict[str, Any], list[Any]]:
    """Plain facts about what run() returned, and the returned items in output order."""
    if n_outputs == 1:
        items, container = [result], "single"
    elif n_outputs == 0 and result is None:  # an in-place problem: "Nothing is returned" (p21-p25)
        items, container = [], "tuple"
    elif issubclass(_type(result), tuple):
        # a NamedTuple too: its items read through tuple's own iterator, never a method the subclass defines
        items, container = list(_tuple_iter(result)), "tuple"
    else:
        return {"container": _type(result).__qualname__, "items": []}, []
    facts = []
    for item in items:
        kind = _type(item)
        if kind is _Tensor:
            fact = _tensor_facts(item)
            lazy = _lazy_reason(item)
            if lazy:
                fact["lazy"] = lazy
        elif isinstance(item, torch.Tensor):
            fact = {"kind": "subclass", "type": f"{kind.__module__}.{kind.__qualname__}"}
        elif kind in (bool, int, float):
            fact = {"kind": "scalar", "type": kind.__name__, "value": item}
        else:
            fact = {"kind": "other", "type": f"{kind.__module__}.{kind.__qualname__}"}
        facts.append(fact)
    return {"container": container, "items": facts}, items


def _span(t: torch.Tensor) -> tuple[int, int]:
    start = _data_ptr(t)
    shape, stride = _size(t), _stride(t)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if _numel(t) else 0
    return start, start + extent * _element_size(t)


def _frames(tb: TracebackType | None, path: str) -> list[list[Any]]:
    out = []
    for frame, lineno in traceback.walk_tb(tb):
        if os.path.abspath(frame.f_code.co_filename) == path:
            out.append([lineno, frame.f_code.co_name, linecache.getline(path, lineno).strip()])
    return out[-8:]


def error_facts(exc: BaseException, path: str) -> dict[str, Any]:
    message = str(exc)[:2000]
    kind = _type(exc)
    low = message.lower()
    return {
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "message": message,
        "frames": _frames(exc.__traceback__, path),
        "memory": isinstance(exc, MemoryError)
        or "out of memory" in low
        or "can't allocate memory" in low
        or "cannot allocate memory" in low,
    }


class _ProvenanceMode(TorchDispatchMode):
    """Pushed by the harness on correctness draws; its ``__torch_dispatch__`` is a vault hook."""


class Worker:
    def __init__(self, chan: Channel, setup: dict[str, Any], control_fd: int) -> None:
        self.chan = chan
        self.setup = setup
        self.path = os.path.abspath(setup["path"])
        self.device = torch.device(setup["device"])
        self.candidate = setup["role"] == "candidate"
        self.control_fd = control_fd
        self.timers = [(owner, attr, getattr(owner, attr)) for owner, attr in TIMER_ATTRIBUTES]
        self.guards: Guards | None = None
        self.gates: DslGates | None = None
        self.mode: _ProvenanceMode | None = None
        self.report_result: Callable[[Any], None] | None = None
        self.report_inputs: Callable[[Any], None] | None = None
        self.report_end: Callable[[], None] | None = None
        self.flusher: CacheFlusher | None = None
        self.fn: Callable[..., Any] | None = None
        self.timed_call: Callable[..., Any] = timed_call  # replaced by the vault's hooks in open_vaults
        self.advance_block: Callable[..., Any] = advance_block
        self.end_block: Callable[..., None] = end_block
        # the collector callbacks the libraries registered; the submission may add none (gc.callbacks is
        # the interpreter's own list, whatever name it is reached by)
        self.gc_callbacks = gc.callbacks
        self.library_callbacks = list(gc.callbacks)

    # --- setup -------------------------------------------------------------------------------------
    def limit_resources(self) -> None:
        s = self.setup
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (s["file_size_bytes"], s["file_size_bytes"]))
        if self.device.type == "cpu":
            torch.set_num_threads(s["cpu_threads"])
            # The address space already mapped by the preloaded libraries plus the budget.
            with open("/proc/self/status") as f:
                vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
            limit = vm + s["memory_bytes"]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        else:
            torch.cuda.set_device(self.device)
            total = torch.cuda.get_device_properties(self.device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, s["memory_bytes"] / total), self.device)

    def open_vaults(self) -> None:
        """The timer (every worker) and, for a submission, the guards, the DSL gates and the provenance
        audit. Only vaults keep the control page; the audit hook comes last and protects all of them."""
        registry = Registry()
        page = map_control(self.control_fd)
        key = self.setup.pop("answer_key", None)  # into the signing vault and nowhere else (_channel)
        if key is not None:  # (without one, no answer of this worker is accepted by a verification)
            self.chan.sign = registry.open(answer_signer, key, page, BLOCK_NONCE[0], signer_lib())
        timer = registry.open(timer_vault, page, timer_lib(self.device.type, self.setup["sync"]), timer_layout())
        self.timed_call = registry.protect(timed_call, _timer=timer, _clock=_perf_counter)
        self.advance_block = registry.protect(advance_block, _timer=timer)
        self.end_block = registry.protect(end_block, _timer=timer)
        if self.candidate:
            cfg = attribution_config(HARNESS_DIR, self.path, self.setup["off_limits"])
            self.guards = Guards(registry, cfg, self.setup["dsl"], page)
            sources: dict[int, Any] = {}
            positions = [torch.tensor(p, dtype=torch.int64) for p in self.setup["sample_positions"]]
            send = registry.open(
                provenance_vault, page, provenance_lib(self.device), page_layout(), positions,
                list(self.setup["output_numels"]), sources,
            )  # fmt: skip
            # the operator run and priced is the one its schema names, through accessors bound before the guards
            # replace the mode stack's pops (_operators)
            _ProvenanceMode.__torch_dispatch__ = registry.protect(  # type: ignore[method-assign]
                dispatch, _send=send, **dispatch_hooks(registry, self.device)
            )
            self.gates = DslGates(registry, self.guards, send, self.setup["dsl"])
            self.gates.dlpack_sources = sources
            self.gates.install()
            self.guards.install()
            # tolist() dispatches no operator: its hook reports what leaves the tensors for Python (_eagerwork)
            tolist = registry.protect(
                to_python_hook, _send=send, _original=torch._C.TensorBase.tolist,
                _marker=torch.ops.aten._local_scalar_dense.default,
            )  # fmt: skip
            self.guards.replace(torch.Tensor, "tolist", tolist)
            self.mode = _ProvenanceMode()
            self.report_result = registry.protect(report_result, _send=send)
            self.report_inputs = registry.protect(report_inputs, _send=send)
            self.report_end = registry.protect(report_end, _send=send)
            self.guards.install_audit_hook()
        registry.objects.clear()
        registry.vault_codes.clear()
        registry.hook_codes.clear()
        del page

    def hide_harness(self) -> None:
        # The verifier's own modules stay loaded (the harness runs on them) but out of reach by name.
        for name in [n for n in sys.modules if n == "mkbsim" or n.startswith(("mkbsim.", "problems"))]:
            del sys.modules[name]

    def import_file(self) -> ModuleType:
        sys.path[:0] = self.setup.get("sys_path") or []  # a reference worker's copy of the problems package
        name = "submission" if self.candidate else "_mkbsim_reference"
        spec = importlib.util.spec_from_file_location(name, self.path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {self.path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def start(self) -> None:
        """Apply the limits, open the vaults, install the guards, import the file, and answer."""
        self.limit_resources()
        if self.setup["cache_flush"]:
            self.flusher = CacheFlusher(self.device)
        self.open_vaults()
        if self.candidate:
            self.hide_harness()
        t0 = time.perf_counter()
        try:
            module = self.import_file()
            entry = "run" if self.candidate else "reference"
            fn = getattr(module, entry, None)
            if not callable(fn):
                raise AttributeError(f"the file defines no callable {entry}(*inputs)")
            self.fn = fn
        except BaseException as exc:  # the submission's failure, reported; never ours to raise
            self.chan.send({"ok": False, "error": error_facts(exc, self.path), **self.news()})
            return
        self.chan.send({"ok": True, "import_s": time.perf_counter() - t0, **self.news()})
        if self.guards is not None:
            self.guards.between_calls(True)
        self.serve()

    # --- calls ---------------------------------------------------------------------------------------
    def news(self) -> dict[str, Any]:
        """Tampering found since the last answer (violations and inline CUDA: in the control page)."""
        tampered: list[str] = []
        if self.guards is not None:
            tampered += self.guards.tampered()
        if self.gates is not None:
            tampered += [attr for owner, attr, ours in self.gates.patched if getattr(owner, attr, None) is not ours]
        timers = [attr for owner, attr, orig in self.timers if getattr(owner, attr, None) is not orig]
        added = [cb for cb in self.gc_callbacks if not any(cb is ours for ours in self.library_callbacks)]
        if self.candidate and added:
            tampered.append(f"gc.callbacks (a collector callback runs work outside the timed call: {len(added)} added)")
            self.gc_callbacks[:] = self.library_callbacks
        return {"tampered": tampered, "timer_tampered": timers}

    def serve(self) -> None:
        while True:
            msg, fds = self.chan.recv()
            if msg["op"] == "exit":
                return
            with _collector_paused():
                reply = self.block(msg, fds)
            self.chan.send(reply)

    def block(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """A block of calls back to back (DESIGN §5, timing): every call's inputs were staged in before the
        first, nothing but each call's own bookkeeping runs between them (its outputs copied into its slots,
        where they stay), and one answer comes for all. The message is the same for every kind of call: the
        timer's vault says which are null calls as each starts; which are evidence calls, the gate reads in
        the control page. The block stops at a call whose answer fails it."""
        with _harness_ops():
            memory, arenas = map_block(msg["block"], fds, self.device)
        replies: list[dict[str, Any]] = []
        try:
            for index in msg["calls"]:
                flags = self.advance_block()  # the timer's vault moves to this call's slot
                if isinstance(flags, BaseException):
                    raise flags
                flags = flags or 0  # None: out of order (the vault marked the block for the verifier)
                reply = self.call_on(arenas[index], msg["flush"], audit=bool(flags & 2), null=bool(flags & 1))
                with _harness_ops():
                    arenas[index].keep()
                replies.append(reply)
                if not reply["ok"] or reply.get("ran") is False or reply.get("modes") or reply.get("left_mode"):
                    break
        finally:
            self.end_block()
            with _harness_ops():
                for arena in arenas:  # what each call delivered, whatever a later call wrote over it
                    arena.restore()
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
                memory.stage_out()
        return {"ok": True, "calls": replies, **self.news()}

    def call_on(self, arena: MappedArena, flush: bool, audit: bool, null: bool = False) -> dict[str, Any]:
        with _harness_ops():
            if self.flusher is not None and flush:
                self.flusher.flush()
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
        modes_before = _mode_depth[0]() + _mode_depth[1]()
        if modes_before:  # a mode entered between calls (from a finalizer, say): the call is not run
            return {"ok": True, "ran": False, "modes": modes_before, "left_mode": False, **self.news()}
        fn: Callable[..., Any] = arena.null_run if null else self.fn  # type: ignore[assignment]
        audit = audit and self.mode is not None and not null
        threads_before = set(sys._current_frames())
        # the audit's dispatch mode is thread-local: torch work in a thread run() starts is invisible to it. Counted,
        # not told by ident: a thread an earlier call of the block started and joined leaves its ident to the next
        started_before = len(self.guards.threads()[0]) if audit and self.guards is not None else 0
        if self.guards is not None:
            self.guards.between_calls(False)
        if audit:
            assert self.mode is not None and self.report_inputs is not None
            with _harness_ops():
                self.report_inputs(arena.args)
            _push_mode(self.mode)
        # the other threads when the call starts, their CPU clocks and the operators of those that count theirs
        others = clocks() if audit else {}
        ops_before = dict(self.guards.thread_ops) if audit and self.guards is not None else {}
        try:
            result = self.timed_call(fn, arena.args)
        except BaseException as exc:  # the submission's exception (SystemExit too), reported as data
            return {"ok": False, "error": error_facts(exc, self.path), **self.after_call(audit), **self.news()}
        woken = moved(others)
        reply: dict[str, Any] = {"ok": True, **self.after_call(audit)}
        reply["background"] = self.background(threads_before, audit)
        if audit and self.guards is not None:
            reply["audit_threads"] = len(self.guards.threads()[0]) - started_before
            reply["audit_busy"] = self.describe_woken(woken, ops_before)
        reply["modes"] = modes_before + _mode_depth[0]() + _mode_depth[1]()
        if reply["modes"] or reply["left_mode"]:
            # A mode active now would run the submission's code inside the harness's own tensor
            # operations below: answer without touching the outputs.
            reply.update(structure={}, alias=[], copied=False, **self.news())
            return reply
        with _harness_ops():
            facts, items = describe(result, len(arena.outputs))
            if self.report_result is not None:  # every call alike: the vault reads it on draws and evidence calls
                self.report_result(items + [arena.args[i] for i in self.setup["inplace"]])
            reply["structure"] = facts
            reply["alias"] = self.aliases(items, arena.args)
            reply["copied"] = self.copy_outputs(facts, items, arena)
        reply.update(self.news())
        return reply

    def after_call(self, audit: bool) -> dict[str, Any]:
        """Undo what a correctness draw armed; whether the submission left its own mode on the stack. The
        gate's vault writes the call's DSL time (the timer has stopped: on cuda the device is idle)."""
        if self.report_end is not None:
            self.report_end()
        left = False
        if audit:
            left = _mode_depth[1]() == 0 or _top_mode(_mode_depth[1]() - 1) is not self.mode
            if not left:
                _pop_mode(None)
        if self.guards is not None:
            self.guards.between_calls(True)
        return {"left_mode": left}

    def describe_woken(self, woken: dict[int, int | None], ops_before: dict[int, int]) -> list[str]:
        """The threads that existed before a correctness draw and worked for it: one the submission started
        that ran torch operators meanwhile, one whose operators are not counted that took CPU (``_threads``)."""
        assert self.guards is not None
        frames = sys._current_frames()
        found = []
        for ident, spent in woken.items():
            frame = frames.get(ident)
            where = f" (now in {frame.f_code.co_name}, line {frame.f_lineno})" if frame is not None else ""
            if ident in self.guards.counted_threads:
                ops = self.guards.thread_ops.get(ident, 0) - ops_before.get(ident, 0)
                if ops:
                    found.append(f"a thread started before the call ran {ops} torch operator(s){where}")
                continue
            took = "ended during the call" if spent is None else f"took {spent / 1000:.0f} us of CPU"
            found.append(f"a thread that existed before the call {took}{where}")
        return found

    def background(self, before: set[int], audit: bool) -> list[str]:
        """Threads still running the submission's work after run() returned: started between calls, or
        working now (an idle pool thread waiting on its queue is no work: ``_threads``), those the call
        started on every call, those started before it on a correctness draw (the short wait stays out of the
        timed and null calls, where the verifier's own CPU measures see such work, ``_trusted``)."""
        frames = sys._current_frames()
        if self.guards is None:
            return []
        started, stray = self.guards.threads()
        found = [f"thread {ident} started between calls" for ident in dict.fromkeys(stray)]
        new = [ident for ident in frames if ident not in before]
        earlier = [ident for ident in frames if ident in started and ident in before] if audit else []
        busy = working(new + earlier, started=new) if new or earlier else set()
        for ident, frame in frames.items():
            if ident in busy:
                found.append(f"thread {ident} in {frame.f_code.co_name} (line {frame.f_lineno})")
        return found

    def aliases(self, items: list[Any], args: list[Any]) -> list[list[int]]:
        pairs = []
        for i, out in enumerate(items):
            if _type(out) is not _Tensor or _device(out).type != self.device.type:
                continue
            o0, o1 = _span(out)
            for j, arg in enumerate(args):
                if _type(arg) is _Tensor:
                    a0, a1 = _span(arg)
                    if o0 < a1 and a0 < o1:
                        pairs.append([i, j])
        return pairs

    def copy_outputs(self, facts: dict[str, Any], items: list[Any], arena: MappedArena) -> bool:
        """Copy every output into its slot when all of them have the declared form."""
        if len(items) != len(arena.outputs):
            return False
        for fact, slot in zip(facts["items"], arena.outputs, strict=True):
            if slot is None:
                continue
            if (
                fact.get("kind") != "tensor"
                or "lazy" in fact
                or fact["device"] != self.device.type
                or dtype_from_name(fact["dtype"]) != _dtype(slot)
                or tuple(fact["shape"]) != tuple(_size(slot))
            ):
                return False
        for item, slot in zip(items, arena.outputs, strict=True):
            if slot is not None:
                _copy(slot, item)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return True


def serve(sock_fd: int) -> None:
    """Entry point of a freshly forked worker process."""
    os.setpgid(0, 0)  # its own process group, so a timeout kills everything it started
    sock = socket.socket(fileno=sock_fd)
    chan = Channel(sock)
    chan.send_credentials()  # the verifier learns this process's pid in its own PID namespace
    setup, fds = chan.recv()
    os.chdir(setup["workdir"])
    out_fd = os.open(os.path.join(setup["workdir"], ".output"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    try:
        Worker(chan, setup, fds[0]).start()
    except ChannelClosed:  # closed, shut down or replaced under the harness: only this process can do that
        os._exit(CHANNEL_LOST)
