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

import _thread
import gc
import importlib.util
import os
import resource
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from types import MethodType, ModuleType, TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mkbsim.verifier._allocator import fill_foreign_allocations, fill_fresh_allocations
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._channel import CHANNEL_LOST, Channel, ChannelClosed, answer_signer, signer_lib, worker_io
from mkbsim.verifier._composites import install as install_composites
from mkbsim.verifier._control import BLOCK_NONCE, map_control
from mkbsim.verifier._dsl import DslGates
from mkbsim.verifier._eagerwork import GENERATOR_VALUES, generator_state_hook, to_python_hook, to_python_text_hook
from mkbsim.verifier._guards import Binding, Guards, binding, changed_bindings, started_threads
from mkbsim.verifier._mapped import (
    bound_steps,
    delivered_layout,
    delivered_lib,
    delivered_vault,
    harness_ops,
    vault_requests,
)
from mkbsim.verifier._noprocess import installer as process_filter
from mkbsim.verifier._operators import dispatch_hooks
from mkbsim.verifier._provenance import (
    dispatch,
    page_layout,
    provenance_lib,
    provenance_vault,
    report_end,
    report_harness,
    report_inputs,
    report_result,
)
from mkbsim.verifier._threads import clocks, cpu_before, dark_cpu, moved, native_ids, working
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
from mkbsim.verifier._vault import Registry, changed

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
_mode_depth = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack)


# the collector's switches as the interpreter has them (the guards refuse ``gc.enable`` to everyone once installed)
_GC_SWITCHES = (gc.isenabled, gc.disable, gc.enable)

_push_mode = torch._C._push_on_torch_dispatch_stack
_pop_mode = torch._C._pop_torch_dispatch_stack
_top_mode = torch._C._get_dispatch_stack_at


_strided = torch.strided
_current_frames = sys._current_frames
_walk_tb = traceback.walk_tb
# a class's names read through type's own descriptors: a metaclass of the submission's defines no lookup that runs here
_class_module = type.__dict__["__module__"].__get__
_class_qualname = type.__dict__["__qualname__"].__get__


def _class_name(kind: type) -> str:
    module = _class_module(kind)
    return f"{module if _type(module) is str else '?'}.{_class_qualname(kind)}"


def _tensor_facts(t: torch.Tensor) -> dict[str, Any]:
    return {
        "kind": "tensor",
        "dtype": str(_dtype(t)).removeprefix("torch."),
        "shape": list(_size(t)),
        "device": _device(t).type,
        "layout": str(_layout(t)).removeprefix("torch."),
    }


def _lazy_reason(t: torch.Tensor) -> str | None:
    if _layout(t) != _strided:
        return f"a {_layout(t)} tensor"
    if _is_functional(t):
        return "a functional (lazy) tensor"
    if _zerotensor(t):
        return "a lazy zero tensor"
    return None


def describe(result: Any, n_outputs: int) -> tuple[dict[str, Any], list[Any]]:
    """Plain facts about what run() returned, and the returned items in output order."""
    items = _returned_items(result, n_outputs, **_ITEMS)
    return structure(result, items, n_outputs), items


def structure(result: Any, items: list[Any], n_outputs: int) -> dict[str, Any]:
    """Plain facts about what run() returned (its ``items``, as ``_returned_items`` reads them), told by the items'
    exact classes: none of the submission's code (a metaclass's comparison or attribute, ``__instancecheck__``) runs."""
    if n_outputs != 1 and not (n_outputs == 0 and result is None) and not issubclass(_type(result), tuple):
        return {"container": _class_qualname(_type(result)), "items": []}
    facts = []
    for item in items:
        kind = _type(item)
        if kind is _Tensor:
            fact = _tensor_facts(item)
            lazy = _lazy_reason(item)
            if lazy:
                fact["lazy"] = lazy
        elif issubclass(kind, _Tensor):
            fact = {"kind": "subclass", "type": _class_name(kind)}
        elif kind is bool or kind is int or kind is float:
            fact = {"kind": "scalar", "type": _class_qualname(kind), "value": item}
        else:
            fact = {"kind": "other", "type": _class_name(kind)}
        facts.append(fact)
    return {"container": "single" if n_outputs == 1 else "tuple", "items": facts}


def _span(t: torch.Tensor) -> tuple[int, int]:
    start = _data_ptr(t)
    shape, stride = _size(t), _stride(t)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if _numel(t) else 0
    return start, start + extent * _element_size(t)


def aliases(items: list[Any], args: list[Any], *, _device_type: str) -> list[list[int]]:
    """The pairs (output, input) whose memory overlaps."""
    pairs = []
    for i, out in enumerate(items):
        if _type(out) is not _Tensor or _device(out).type != _device_type:
            continue
        o0, o1 = _span(out)
        for j, arg in enumerate(args):
            if _type(arg) is _Tensor:
                a0, a1 = _span(arg)
                if o0 < a1 and a0 < o1:
                    pairs.append([i, j])
    return pairs


def _frames(tb: TracebackType | None, path: str, lines: tuple[str, ...]) -> list[list[Any]]:
    out = []
    for frame, lineno in _walk_tb(tb):
        if frame.f_code.co_filename == path:  # (the file is loaded by its absolute path)
            out.append([lineno, frame.f_code.co_name, lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""])
    return out[-8:]


def error_facts(exc: BaseException, path: str, lines: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plain facts about the submission's exception; ``lines``: its file's source lines. (The message is the
    exception's own ``str``, code of the submission's: the call it ended fails the verification.)"""
    message = str(exc)[:2000]
    kind = _type(exc)
    low = message.lower()
    return {
        "type": _class_name(kind),
        "message": message,
        "frames": _frames(exc.__traceback__, path, lines),
        "memory": issubclass(kind, MemoryError)
        or "out of memory" in low
        or "can't allocate memory" in low
        or "cannot allocate memory" in low,
    }


def source_lines(path: str) -> tuple[str, ...]:
    """The file's lines, for the frames of an error (read before it loads: ``linecache`` looks modules up)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return tuple(f.read().splitlines())
    except OSError:
        return ()


# --- the facts a call's answer carries besides its outputs -------------------------------------------------------
# Made hooks with the rest of the per-call path (``call_path``): every name they look up is bound when the harness
# loads, what they read of the guards comes as arguments. Red team rt32 F1: as methods of the Worker over module
# globals, they ran the submission's code, rebound through a frame's globals, before each call's timer (eager work out
# of the timer and the pricing) and after the null calls' (a random burn widening the trusted check's allowance).


def threads_before(audit: bool, *, _started: Any) -> tuple[tuple[tuple[int, int | None], ...], int]:
    """The threads when a call starts (ident, kernel thread id); on a correctness draw, how many the submission
    has started: the audit's dispatch mode is thread-local, torch work in a thread run() starts is invisible to
    it. Counted, not told by ident: a thread an earlier call of the block started and joined leaves its ident to
    the next. ``_started``: the guards' list of the submission's threads (``started_threads``); None: a reference.
    Tuples, never a dict: ``_call_once`` holds them while run() runs, which reaches its locals (red team rt35 F1 swapped
    a key of the dict held there for one whose ``__eq__`` the lookup after the timer ran)."""
    started = len(_started()[0]) if audit and _started is not None else 0
    return tuple(native_ids(_current_frames()).items()), started


def clocks_before(audit: bool, *, _thread_ops: dict[int, int] | None) -> tuple[Any, Any, Any]:
    """On a correctness draw, the other threads' CPU clocks and the operators of those that count theirs; the
    kernel threads' and the process's CPU clocks (``_threads.dark_cpu``); as tuples (``threads_before``)."""
    ops = int_keyed(_thread_ops) if audit and _thread_ops is not None else {}
    others, mine, start = cpu_before()
    return (tuple(clocks().items()) if audit else ()), tuple(ops.items()), (tuple(others.items()), mine, start)


def moved_since(before: tuple[tuple[int, tuple[int, int]], ...]) -> tuple[tuple[int, int | None], ...]:
    """``_threads.moved`` over ``clocks_before``'s tuples, answered as a tuple."""
    return tuple(moved(dict(before)).items())


def int_keyed(mapping: dict[Any, Any]) -> dict[int, Any]:
    """A copy of ``mapping`` (the threads' counts of their operators) with its exact-int keys only: a key the submission
    put there (reached through a frame of ``_threads.count_ops``, below which its operators run) would bring its own
    ``__eq__`` into the harness's lookups."""
    return {key: value for key, value in mapping.items() if type(key) is int}


def threads_after(
    before: tuple[Any, int], others: tuple[Any, Any, Any], woken: tuple[tuple[int, int | None], ...], audit: bool, *,
    _started: Any, _thread_ops: dict[int, int] | None, _counted: dict[int, bool] | None,
) -> dict[str, Any]:  # fmt: skip
    """The threads facts of a call that returned (the dark CPU read first, on every call alike), from the tuples
    ``threads_before``, ``clocks_before`` and ``moved_since`` made (dicts made of them here)."""
    dark_ns = dark_cpu((dict(others[2][0]), others[2][1], others[2][2]))
    reply: dict[str, Any] = {"background": background(dict(before[0]), audit, _started)}
    if audit and _started is not None and _thread_ops is not None and _counted is not None:
        reply["audit_threads"] = len(_started()[0]) - before[1]
        reply["audit_busy"] = describe_woken(
            dict(woken), dict(others[1]), int_keyed(_thread_ops), int_keyed(_counted)
        )  # fmt: skip
        reply["audit_dark_us"] = max(dark_ns, 0) // 1000
    return reply


def describe_woken(
    woken: dict[int, int | None], ops_before: dict[int, int], thread_ops: dict[int, int], counted: dict[int, bool]
) -> list[str]:  # fmt: skip
    """The threads that existed before a correctness draw and worked for it: one the submission started
    that ran torch operators meanwhile, one whose operators are not counted that took CPU (``_threads``)."""
    frames = _current_frames()
    found = []
    for ident, spent in woken.items():
        frame = frames.get(ident)
        where = f" (now in {frame.f_code.co_name}, line {frame.f_lineno})" if frame is not None else ""
        if ident in counted:
            ops = thread_ops.get(ident, 0) - ops_before.get(ident, 0)
            if ops:
                found.append(f"a thread started before the call ran {ops} torch operator(s){where}")
            continue
        took = "ended during the call" if spent is None else f"took {spent / 1000:.0f} us of CPU"
        found.append(f"a thread that existed before the call {took}{where}")
    return found


def background(before: dict[int, int | None], audit: bool, started_threads: Any) -> list[str]:
    """Threads still running the submission's work after run() returned: started between calls, or
    working now (an idle pool thread waiting on its queue is no work: ``_threads``), those the call
    started on every call, those started before it on a correctness draw (the short wait stays out of the
    timed and null calls, where the verifier's own CPU measures see such work, ``_trusted``)."""
    frames = _current_frames()
    if started_threads is None:
        return []
    started, stray = started_threads()
    found = [f"thread {ident} started between calls" for ident in dict.fromkeys(stray)]
    # new: an ident alive before the call held by another kernel thread now is new too (a thread that ended during
    # the call leaves its ident, the address of its reused stack, to the next one started; judged as one started
    # before the call, by its clock alone, a thread waiting with a time limit looked idle: the likeliest cause of
    # thread_waits_with_a_time_limit's miss in one loaded run of the suite, its output read unwritten)
    now = native_ids(frames)
    new = [ident for ident in frames if ident not in before or before[ident] != now[ident]]
    earlier = [ident for ident in frames if ident in started and ident not in new] if audit else []
    busy = working(new + earlier, started=new) if new or earlier else set()
    for ident, frame in frames.items():
        if ident in busy:
            found.append(f"thread {ident} in {frame.f_code.co_name} (line {frame.f_lineno})")
    return found


def news(
    *, _hooks: tuple[list[Binding], ...], _watched: Any, _timers: list[Binding], _callbacks: list[Any],
    _library_callbacks: list[Any], _candidate: bool,
) -> dict[str, Any]:  # fmt: skip
    """Tampering found since the last answer (violations and inline CUDA: in the control page): the guards' and the
    DSL gates' hooks (``_hooks``) or the timers no longer in place, collector callbacks added (the submission may add
    none: ``gc.callbacks`` is the interpreter's own list, whatever name it is reached by; put back as it was)."""
    tampered: list[str] = []
    for bindings in _hooks:
        tampered += changed_bindings(bindings)
    tampered += changed(_watched)
    timers = changed_bindings(_timers)
    added = [cb for cb in _callbacks if not any(cb is ours for ours in _library_callbacks)]
    if _candidate and added:
        tampered.append(f"gc.callbacks (a collector callback runs work outside the timed call: {len(added)} added)")
        _callbacks[:] = _library_callbacks
    return {"tampered": tampered, "timer_tampered": timers}


class _ProvenanceMode(TorchDispatchMode):
    """Pushed by the harness on correctness draws; its ``__torch_dispatch__`` is a vault hook."""


class Worker:
    def __init__(self, chan: Channel, setup: dict[str, Any], control_fd: int) -> None:
        self.chan = chan
        self.setup = setup
        self.path = os.path.abspath(setup["path"])
        self.device = torch.device(setup["device"])
        self.candidate = setup["role"] == "candidate"
        self.module_name = "submission" if self.candidate else "_mkbsim_reference"
        self.lines = source_lines(self.path)  # for the frames of an error, read before the file loads
        self.control_fd = control_fd
        self.timers = [binding(owner, attr) for owner, attr in TIMER_ATTRIBUTES]
        self.guards: Guards | None = None
        self.gates: DslGates | None = None
        self.flusher: CacheFlusher | None = None
        self.timed_call: Callable[..., Any] | None = None
        # the audit's mode and report hooks (benchmarks/verifier_audit_overhead.py runs a draw's steps with them)
        self.audit_hooks: dict[str, Any] = {}
        # installs the filter refusing every process start once the file is loaded (``_noprocess``), or why none can
        self.no_process: tuple[Callable[[], str | None] | None, str | None] = (None, None)
        # the collector callbacks the libraries registered; the submission may add none (gc.callbacks is
        # the interpreter's own list, whatever name it is reached by)
        self.gc_callbacks = gc.callbacks
        self.library_callbacks = list(gc.callbacks)

    # --- setup -------------------------------------------------------------------------------------
    def limit_resources(self) -> None:
        s = self.setup
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing us
        # No signal has a Python handler (SIGINT's raises KeyboardInterrupt): a handler runs between any two
        # bytecodes of whatever the main thread runs, the harness's hooks included, and ``_thread.interrupt_main``
        # fires one from any thread without an audit event (red team rt38 F5: an interrupt timed into the audit
        # hook switched the guards off for the main thread). Ignored, such a signal does nothing, and
        # ``signal.signal`` is refused to the submission.
        for signum in signal.valid_signals():
            if callable(signal.getsignal(signum)):
                signal.signal(signum, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (s["file_size_bytes"], s["file_size_bytes"]))
        if self.device.type == "cpu":
            torch.set_num_threads(s["cpu_threads"])
            # every call's fresh allocations hold a fill, torch's and malloc's, the twin draw's too (``_allocator``)
            fill_fresh_allocations()
            fill_foreign_allocations()
            # The address space already mapped by the preloaded libraries plus the budget.
            with open("/proc/self/status") as f:
                vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
            limit = vm + s["memory_bytes"]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        else:
            torch.cuda.set_device(self.device)
            total = torch.cuda.get_device_properties(self.device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, s["memory_bytes"] / total), self.device)

    def open_vaults(self) -> Callable[[], None]:
        """The timer (every worker) and, for a submission, the guards, the DSL gates and the provenance
        audit. Only vaults keep the control page; the audit hook comes last and protects all of them.
        Returns the hook that loads the file and serves the blocks (``_begin``), its every step bound now: the walk
        over it (``Registry.unbound``) finds nothing a submission could change by the time it runs."""
        registry = Registry()
        page = map_control(self.control_fd)
        key = self.setup.pop("answer_key", None)  # into the signing vault and nowhere else (_channel)
        if key is not None:  # (without one, no answer of this worker is accepted by a verification)
            self.chan.sign = registry.open(answer_signer, key, page, BLOCK_NONCE[0], signer_lib(), checked=False)
        timer = registry.open(timer_vault, page, timer_lib(self.device.type, self.setup["sync"]), timer_layout())
        audit: dict[str, Any] = {
            "_mode": None, "_ask": None, "_report_inputs": None, "_report_end": None, "_report_harness": None
        }  # fmt: skip
        report: Any = None
        if self.candidate:
            cfg = attribution_config(HARNESS_DIR, self.path, self.setup["off_limits"])
            self.guards = Guards(registry, cfg, self.setup["dsl"], page, (self.chan.fileno(),))
            sources: dict[int, Any] = {}
            # the audit's secret sample positions go into its vault and stay nowhere else
            positions = [torch.tensor(p, dtype=torch.int64) for p in self.setup.pop("sample_positions")]
            lib = provenance_lib(self.device)
            registry.compared(lib.c_int, *lib.pointer_arrays.values())  # a CuTe call's argument types, compared
            send = registry.open(
                provenance_vault, page, lib, page_layout(), positions,
                list(self.setup["output_numels"]), sources,
            )  # fmt: skip
            # on correctness draws the launches and the audited eager operators run one at a time (_provenance.gate)
            serial = _thread.RLock()
            # the operator run and priced is the one its schema names, through accessors bound before the guards
            # replace the mode stack's pops (_operators)
            # (a class the submission reaches, through the mode on the stack or ``__subclasses__``: replacing the
            # hook is tampering the guards report)
            self.guards.replace(
                _ProvenanceMode, "__torch_dispatch__",
                registry.protect(dispatch, _send=send, _serial=serial, **dispatch_hooks(registry, self.device)),
            )  # fmt: skip
            self.gates = DslGates(registry, self.guards, send, self.setup["dsl"], serial)
            self.gates.dlpack_sources = sources
            self.gates.install()
            self.guards.install()
            # tolist() dispatches no operator: its hook reports what leaves the tensors for Python (_eagerwork)
            tolist = registry.protect(
                to_python_hook, _send=send, _original=torch._C.TensorBase.tolist,
                _marker=torch.ops.aten._local_scalar_dense.default,
            )  # fmt: skip
            self.guards.replace(torch.Tensor, "tolist", tolist)
            # a tensor's text is made with the dispatch modes popped: its hook reports what leaves for Python too
            text = registry.protect(
                to_python_text_hook, _send=send, _original=torch._tensor_str._str,
                _marker=torch.ops.aten._local_scalar_dense.default,
            )  # fmt: skip
            self.guards.replace(torch._tensor_str, "_str", text)
            # a generator's state set from a tensor's bytes, read back by initial_seed(): out to Python too
            for name in ("set_state", "__setstate__"):
                self.guards.replace(torch._C.Generator, name, registry.protect(
                    generator_state_hook, _send=send, _original=vars(torch._C.Generator)[name],
                    _marker=torch.ops.aten._local_scalar_dense.default, _tensor=torch.Tensor, _values=GENERATOR_VALUES,
                ))  # fmt: skip
            # the composites whose C++ reads a tensor's elements read them through that hook instead (_composites)
            install_composites(tolist)
            audit = {
                "_mode": _ProvenanceMode(), "_ask": self.guards.ask,
                # (its census of the tensors alive lists the collector's objects: the guards let that vault's events by)
                "_report_inputs": registry.protect(report_inputs, _send=self.guards.quiet(send)),
                "_report_end": registry.protect(report_end, _send=send),
                "_report_harness": registry.protect(report_harness, _send=send),
            }  # fmt: skip
            report = registry.protect(report_result, _send=send)
            self.no_process = process_filter(registry.protect)
        delivered = registry.open(
            delivered_vault, page, delivered_lib(), delivered_layout(), tuple(self.setup["inplace"])
        )  # fmt: skip
        # the collector callbacks the libraries registered, those imported while the vaults opened included (the CuTe
        # DSL's gates import jax, which adds one)
        self.library_callbacks = list(gc.callbacks)
        self.audit_hooks = {**audit, "_report_result": report}
        # (torch looks a mode's ``__torch_dispatch__`` up through its class and the bases: a ``__getattribute__`` added
        # there would choose another function than the audit's hook)
        registry.watch(*WATCHED_CLASSES, _ProvenanceMode, TorchDispatchMode)
        tampering = self.tampering(registry)
        loop = self.call_path(registry, timer, delivered, audit, report, tampering)
        begin = self.loading(registry, loop, tampering)
        # nothing the worker runs once the file is loaded looks up what the submission could change by then
        # a binding's installed object and its owner's namespace are compared, never called (``news``)
        registry.compared(*(b[i] for b in (*self.timers, *self.patched_bindings()) for i in (2, 3)))
        # the libraries' collector callbacks (jax's, with the CuTe DSL): compared with gc.callbacks by ``news``; the
        # collector runs them between blocks, where the worker's CPU is the verifier's idle measure
        registry.compared(*self.library_callbacks)
        # (the process filter's installation runs after the submission loaded, through ctypes: the verifier counts the
        # worker's filters in the kernel, whatever it ran)
        unbound = registry.unbound(
            begin, opaque=(audit["_mode"], *_LOADING, sys.modules, sys.path, self.no_process[0])
        )  # fmt: skip
        if unbound:
            raise RuntimeError(
                "the worker's path after loading looks up what a submission can change: " + "; ".join(unbound)
            )
        if self.guards is not None:
            self.guards.install_audit_hook()
        registry.objects.clear()
        registry.vault_codes.clear()
        registry.hook_codes.clear()
        del page
        return begin

    def patched_bindings(self) -> tuple[Binding, ...]:
        """The guards' and the DSL gates' hooks as installed."""
        return (*self.guards.patched, *self.gates.patched) if self.guards is not None and self.gates is not None else ()

    def tampering(self, registry: Registry, per_call: bool = False) -> Callable[[], dict[str, Any]]:
        """The hook that finds the tampering an answer reports (``news``). ``per_call``: the one each call's answer
        runs, without the installed bindings, which it reads from the modules' own namespaces (every key checked in
        C first: 0.5 ms for some 11,000 names); those are read at each block's end and at the import's answer."""
        hooks = (self.guards.patched, self.gates.patched) if self.guards is not None and self.gates is not None else ()
        return registry.bind(
            news, _hooks=() if per_call else hooks, _watched=registry.watched(),
            _timers=[] if per_call else self.timers, _callbacks=self.gc_callbacks,
            _library_callbacks=self.library_callbacks, _candidate=self.candidate,
        )  # fmt: skip

    def call_path(
        self, registry: Registry, timer: Any, delivered: Any, audit: dict[str, Any], report: Any,
        tampering: Callable[[], dict[str, Any]],
    ) -> Callable[[Any], None]:  # fmt: skip
        """The hooks of the per-call path (``_serve_blocks`` down to ``timed_call``), bound to the vaults' hooks,
        C functions, the facts' hooks and the guards' data they read."""
        protect = registry.protect
        cuda = self.device.type == "cuda"
        # the device's synchronisation as a C function (torch.cuda.synchronize is Python, over module globals)
        sync = torch._C._cuda_synchronize if cuda else None
        mode_ops = {"_depth": _mode_depth, "_mode": audit["_mode"], "_ask": audit["_ask"]}
        ops = harness_ops(protect)
        copy_into = protect(
            _copy_into_slots, _len=len, _zip=zip, _type=_type, _Tensor=_Tensor, _layout=_layout, _strided=torch.strided,
            _functional=_is_functional, _zerotensor=_zerotensor, _device=_device, _device_type=self.device.type,
            _dtype=_dtype, _size=_size, _copy=_copy, _sync=sync,
        )  # fmt: skip
        steps, requests = bound_steps(protect, self.device, sync), vault_requests(protect, delivered)
        finish = protect(
            _finish_call, _report_end=audit["_report_end"], _audited=requests["audited"], _top=_top_mode,
            _pop=_pop_mode, **mode_ops,
        )  # fmt: skip
        # the same hook as the harness's bound one, kept for benchmarks/verifier_overhead.py: nothing calls it from here
        self.timed_call = protect(timed_call, _timer=timer, _clock=_perf_counter)
        guards = self.guards
        # the facts' steps read the threads through what the guards audit (``sys._current_frames``, ``/proc``): the
        # harness's own code, not hooks looked past
        bind = registry.bind
        started = protect(started_threads, _ask=guards.ask) if guards is not None else None
        thread_ops = guards.thread_ops if guards is not None else None
        facts = {
            "_threads_before": bind(threads_before, _started=started),
            "_clocks_before": bind(clocks_before, _thread_ops=thread_ops),
            "_moved": bind(moved_since),
            "_threads_after": bind(
                threads_after, _started=started, _thread_ops=thread_ops,
                _counted=guards.counted_threads if guards is not None else None,
            ),
            "_describe": bind(structure),
            "_aliases": bind(aliases, _device_type=self.device.type),
            "_error": bind(error_facts),
        }  # fmt: skip
        call = protect(
            _call_once, _advance=protect(advance_block, _timer=timer), _arena=requests["arena"],
            _timed=self.timed_call, _null_run=steps["null_run"], _method=MethodType,
            _flush=self.flusher.buffer.add_ if self.flusher is not None else None, _sync=sync, _ops=ops,
            _push=_push_mode, _report_inputs=audit["_report_inputs"], _report_result=report,
            _finish=finish, _items=protect(_returned_items, **_ITEMS), _copy_into=copy_into,
            _inplace=tuple(self.setup["inplace"]), _len=len, _exception=BaseException, _isinstance=isinstance,
            _path=self.path, _lines=self.lines, _news=self.tampering(registry, per_call=True), **facts, **mode_ops,
        )  # fmt: skip
        block = protect(
            _run_block, _map=steps["map"], _device=self.device, _open=requests["open"], _keep=requests["keep"],
            _restore=requests["restore"], _sync=sync, _stage_out=steps["stage_out"],
            _end=protect(end_block, _timer=timer), _call=call, _news=tampering, _ops=ops,
            _harness=audit["_report_harness"],
        )  # fmt: skip
        loop: Callable[[Any], None] = protect(
            _serve_blocks, _block=block, _gc=_GC_SWITCHES, _collect=gc.collect,
            **self.channel_io(registry),
        )  # fmt: skip
        return loop

    def loading(
        self, registry: Registry, loop: Callable[[Any], None], tampering: Callable[[], dict[str, Any]]
    ) -> Callable[[], None]:  # fmt: skip
        """The hook that loads the file, answers, and serves the blocks (``_begin``)."""
        protect = registry.protect
        install, missing = self.no_process
        ask = self.guards.ask if self.guards is not None else None
        begin: Callable[[], None] = protect(
            _begin, _load=protect(load_file, **self.load_bindings()), _entry="run" if self.candidate else "reference",
            _getattr=getattr, _callable=callable, _missing=AttributeError, _exception=BaseException,
            _clock=_perf_counter, _path=self.path, _lines=self.lines, _error=registry.bind(error_facts),
            _news=tampering, _send=self.channel_io(registry)["_send"],
            _close=protect(_close_processes, _install=install, _missing=missing, _ask=ask), _ask=ask, _loop=loop,
        )  # fmt: skip
        return begin

    def channel_io(self, registry: Registry) -> dict[str, Any]:
        quiet = self.guards.quiet if self.guards is not None else None
        return worker_io(registry.protect, self.chan.sock, self.chan.sign, quiet)

    def load_bindings(self) -> dict[str, Any]:
        return {
            "_path": self.path, "_name": self.module_name, "_sys_path": tuple(self.setup.get("sys_path") or ()),
            "_spec": _LOADING[0], "_module": _LOADING[1], "_modules": sys.modules, "_search": sys.path,
        }  # fmt: skip

    def hide_harness(self) -> None:
        # The verifier's own modules stay loaded (the harness runs on them) but out of reach by name.
        for name in [n for n in sys.modules if n == "mkbsim" or n.startswith(("mkbsim.", "problems"))]:
            del sys.modules[name]

    def import_file(self) -> ModuleType:
        """The file loaded as the worker loads it (benchmarks load it so, without the rest of the worker)."""
        return load_file(**self.load_bindings())

    def prepare(self) -> Callable[[], None]:
        """Apply the limits, open the vaults and install the guards; the hook that loads the file and serves."""
        self.limit_resources()
        if self.setup["cache_flush"]:
            self.flusher = CacheFlusher(self.device)
        # everything used after the submission is loaded is bound before (it may rebind any attribute it reaches)
        begin = self.open_vaults()
        if self.candidate:
            self.hide_harness()
        return begin


#: Classes of torch's whose attributes can be set (a class statement's, pybind11's) the per-call path and the vaults
#: hand instances of to C functions, compare, or make and drop (``Registry.watch``: a change is tampering). None is
#: called through the class: the Python dispatch keys are excluded by C functions (``_mapped.python_excluded``), not
#: ``_ExcludeDispatchKeyGuard``, whose ``__enter__`` red team rt33 F1 replaced.
WATCHED_CLASSES = (
    torch.Tensor, torch._C.DispatchKey, torch._C.DispatchKeySet, torch._ops.OpOverload, torch._ops.OperatorBase,
    torch.Tag, torch._C._InferenceMode,
)  # fmt: skip

#: What loads the file: run once, before the submission exists (the walk over the path after loading knows them).
_LOADING = (importlib.util.spec_from_file_location, importlib.util.module_from_spec)


def load_file(
    *, _path: str, _name: str, _sys_path: tuple[str, ...], _spec: Any, _module: Any, _modules: Any, _search: Any,
    _missing: Any = ImportError,
) -> ModuleType:  # fmt: skip
    """The file ``_path`` imported as the module ``_name`` (``_sys_path``: a reference worker's copy of the problems
    package, searched first)."""
    _search[:0] = _sys_path
    spec = _spec(_name, _path)
    if spec is None or spec.loader is None:
        raise _missing(f"cannot load {_path}")
    module = _module(spec)
    _modules[_name] = module
    spec.loader.exec_module(module)
    return module


def _close_processes(*, _install: Any, _missing: str | None, _ask: Any) -> dict[str, str]:
    """A candidate's worker starts no process from now on (``_noprocess``): the filter's installation, or why there
    is none (the verifier checks the kernel's count of the worker's filters, not this answer)."""
    if _ask is None:
        return {}
    _ask(("loaded",))
    return {"process_filter": (_install() if _install is not None else _missing) or ""}


def _begin(
    *, _load: Any, _entry: str, _getattr: Any, _callable: Any, _missing: Any, _exception: Any, _clock: Any, _path: str,
    _lines: Any, _error: Any, _news: Any, _send: Any, _close: Any, _ask: Any, _loop: Any
) -> None:  # fmt: skip
    """Load the file, answer, and serve the blocks. The submission's code runs below this frame from the import on:
    it holds hooks and plain data only (the Worker, its guards' and gates' data, are out of every frame's reach)."""
    t0 = _clock()
    try:
        module = _load()
        fn = _getattr(module, _entry, None)
        if not _callable(fn):
            raise _missing(f"the file defines no callable {_entry}(*inputs)")
    except _exception as exc:  # the submission's failure, reported; never ours to raise
        _send({"ok": False, "error": _error(exc, _path, _lines), **_news()})
        return
    _send({"ok": True, "import_s": _clock() - t0, **_close(), **_news()})
    if _ask is not None:
        _ask(("between", True))
    _loop(fn)


# --- the per-call path ------------------------------------------------------------------------------
# Every step from the loop over blocks down to run() is a hook (``_vault``): isolated (no globals, no builtins), with
# all it calls bound as keyword-only defaults before the submission is loaded. Whatever the submission reaches from
# run() (a frame's locals, the Worker, a class, a module's globals) and rebinds, these steps call what they were
# given; what they keep in their frames is the call's own arguments and outputs (the block's layout is dropped once
# mapped, the audit's sample positions live only in the provenance vault). The facts a reply carries besides (threads,
# structure, aliases, tampering) come from the Worker's methods: forging them gains nothing the verifier's own
# checks would not catch (module docstring).


def _serve_blocks(fn: Any, *, _recv: Any, _ready: Any, _send: Any, _block: Any, _gc: Any, _collect: Any) -> None:
    """The worker's loop over the verifier's blocks, ``fn`` being run() (or the reference). No garbage collection
    runs, automatic or not, from a block's start until the verifier's next message has arrived, and every object of
    the block (its arenas, what run() returned) is held until then: so no finalizer, weakref callback or collector
    callback of the submission's runs between the block's end stamp and the verifier's reading of its output slots
    (red team rt9b F1: a weakref callback, fired by a collection the reply's pickling triggered, wrote an eager answer
    into every call's slot after the end stamp). The collection runs once that message is waiting, before it is read
    (none of the next block's inputs is mapped yet); its CPU time is the worker's, between blocks."""
    enabled = _gc[0]()
    _gc[1]()
    _held: Any = None  # the last block's memory, kept alive until the verifier has read it
    try:
        while True:
            _ready(None)
            _held = None
            if enabled:
                _collect()
            msg, fds = _recv()
            if msg["op"] == "exit":
                return
            reply, _held = _block(fn, msg.pop("block"), fds, msg["calls"], msg["flush"])
            del msg, fds
            _send(reply)
            del reply  # a draw's answer names its audit's facts: not left for the next block's calls to read
    finally:
        if enabled:
            _gc[2]()


def _run_block(
    fn: Any, layout: Any, fds: Any, calls: Any, flush: bool, *, _map: Any, _device: Any, _open: Any, _keep: Any,
    _restore: Any, _sync: Any, _stage_out: Any, _end: Any, _call: Any, _news: Any, _ops: Any, _harness: Any
) -> tuple[dict[str, Any], Any]:  # fmt: skip
    """A block of calls back to back (DESIGN §5, timing): every call's inputs were staged in before the first,
    nothing but each call's own bookkeeping runs between them (its outputs and in-place inputs copied aside by the
    block's ``delivered_vault``, which puts them back after the last call), and one answer comes for all. The
    message is the same for every kind of call: the timer's vault says which are null calls as each starts; which
    are evidence calls, the gate reads in the control page. The arenas and the block's memory go to the vault as soon
    as they are mapped: this frame, which run() reaches (a frame's ``f_locals``), holds no call's memory (it held the
    block's, every call's arena in it: a look-ahead past the storage rule), nor the copies; the vault hands them back
    after the last call. The block stops at a call whose answer fails it. Returns the answer, and what the vault held
    (the memory, arenas and copies), which the caller holds until the verifier has read the slots
    (``_serve_blocks``)."""
    with _ops[0]():
        excluded = _ops[1]()
        try:
            memory, arenas = _map(layout, fds, _device)
            if _harness is not None:  # the block's memory and the copies are the harness's: no census of them
                _harness((memory[0], memory[1], _open(arenas, calls, memory)))
            else:
                _open(arenas, calls, memory)
        finally:
            _ops[2](excluded)
    del layout, fds, arenas, memory
    replies = []
    held = None
    try:
        for _ in calls:
            reply = _call(fn, flush)
            with _ops[0]():
                excluded = _ops[1]()
                try:
                    _keep()
                finally:
                    _ops[2](excluded)
            replies.append(reply)
            if not reply["ok"] or reply.get("ran") is False or reply.get("modes") or reply.get("left_mode"):
                break
    finally:
        _end()
        with _ops[0]():
            excluded = _ops[1]()
            try:
                held = _restore()  # what each call delivered, whatever a later call wrote over it; and the memory
                if _sync is not None:
                    _sync()
                if held is not None:  # None: the vault was faulted (the verifier fails the block)
                    _stage_out(held[3])
            finally:
                _ops[2](excluded)
    return {"ok": True, "calls": replies, **_news()}, held


def _call_once(
    fn: Any, flush: bool, *, _advance: Any, _arena: Any, _timed: Any, _null_run: Any, _method: Any, _flush: Any,
    _sync: Any, _ops: Any, _depth: Any, _push: Any, _mode: Any, _ask: Any, _report_inputs: Any,
    _report_result: Any, _finish: Any, _items: Any, _copy_into: Any, _inplace: Any, _len: Any, _exception: Any,
    _isinstance: Any, _threads_before: Any, _clocks_before: Any, _moved: Any, _threads_after: Any, _describe: Any,
    _aliases: Any, _error: Any, _path: str, _lines: Any, _news: Any
) -> dict[str, Any]:  # fmt: skip
    """One call of a block, on the arena of the call the timer's vault loads: flags 1 a null call (the harness's own
    trivial kernel), 2 a correctness draw. The flags are dropped before the call (a frame below run() holds nothing
    that tells a draw apart) and the block's vault answers the audit again after it (``_finish_call``)."""
    flags = _advance()  # the timer's vault moves to this call's slot
    if _isinstance(flags, _exception):
        raise flags
    flags = flags or 0  # None: out of order (the vault marked the block for the verifier)
    args, outputs = _arena() or ([], [])
    audit = flags & 2 and _mode is not None and not flags & 1
    call = _method(_null_run, outputs) if flags & 1 else fn
    modes_before = _depth[0]() + _depth[1]()
    if modes_before:  # a mode entered between calls (from a finalizer, say): the call is not run
        return {"ok": True, "ran": False, "modes": modes_before, "left_mode": False, **_news()}
    # the threads when the call starts, their CPU clocks and the operators of those that count theirs: read on every
    # call alike (what a draw needs), so that nothing here differs on a draw
    before = _threads_before(True)
    if _ask is not None:
        _ask(("between", False))
    if _report_inputs is not None:  # every call alike: the gate's vault keeps the inputs as given on a correctness draw
        # and an evidence call (``_provenance``: the decode rule masks them) and does nothing with them on a scored or a
        # null call; the request is outside the call's timer, and the null calls measure the harness's part with it
        with _ops[0]():
            excluded = _ops[1]()
            try:
                _report_inputs(args, _inplace)
            finally:
                _ops[2](excluded)
    if audit:
        _push(_mode)
    others = _clocks_before(True)
    del flags, audit
    if _flush is not None and flush:  # the last step before the timer: nothing the steps above ran stays cached (red
        # team rt31b: code the submission bound into their lookups ran there and left the inputs in cache)
        with _ops[0]():
            excluded = _ops[1]()
            try:
                _flush(1)
                if _sync is not None:
                    _sync()
            finally:
                _ops[2](excluded)
    try:
        result = _timed(call, args)
    except _exception as exc:  # the submission's exception (SystemExit too), reported as data
        return {"ok": False, "error": _error(exc, _path, _lines), "left_mode": _finish()[1], **_news()}
    audit, left = _finish()
    woken = _moved(others[0])
    reply = {"ok": True, "left_mode": left, **_threads_after(before, others, woken, audit)}
    reply["modes"] = modes_before + _depth[0]() + _depth[1]()
    if reply["modes"] or reply["left_mode"]:
        # A mode active now would run the submission's code inside the harness's own tensor
        # operations below: answer without touching the outputs.
        reply.update(structure={}, alias=[], copied=False, **_news())
        return reply
    with _ops[0]():
        excluded = _ops[1]()
        try:
            n_outputs = _len(outputs)
            items = _items(result, n_outputs)
            if _report_result is not None:  # every call alike: the vault reads it on draws and evidence calls
                reported = items[:]
                for i in _inplace:
                    reported.append(args[i])
                _report_result(reported)
            reply["structure"] = _describe(result, items, n_outputs)
            reply["alias"] = _aliases(items, args)
            reply["copied"] = _copy_into(items, outputs)
        finally:
            _ops[2](excluded)
    reply.update(_news())
    return reply


def _finish_call(
    *, _report_end: Any, _audited: Any, _depth: Any, _top: Any, _pop: Any, _mode: Any, _ask: Any
) -> tuple[bool, bool]:  # fmt: skip
    """Undo what a correctness draw armed: (whether the call was audited, asked of the block's vault after the call;
    whether the submission left its own mode on the stack, or took the harness's off it). The gate's vault writes
    the call's DSL time (the timer has stopped: on cuda the device is idle)."""
    if _report_end is not None:
        _report_end()
    audit = _mode is not None and _audited() == 1
    left = False
    if audit:
        left = _depth[1]() == 0 or _top(_depth[1]() - 1) is not _mode
        if not left:
            _pop(None)
    if _ask is not None:
        _ask(("between", True))
    return audit, left


def _returned_items(result: Any, n_outputs: int, *, _type: Any, _issubclass: Any, _tuple: Any, _list: Any) -> Any:
    """The items run() returned, in output order (a NamedTuple's read through tuple's own iterator, never a method
    the subclass defines); [] for a container that is not a tuple, and for None where no output is declared."""
    if n_outputs == 1:
        return [result]
    if n_outputs == 0 and result is None:  # an in-place problem: "Nothing is returned" (p21-p25)
        return []
    if _issubclass(_type(result), _tuple):
        return _list(_tuple.__iter__(result))
    return []


def _copy_into_slots(
    items: Any, outputs: Any, *, _len: Any, _zip: Any, _type: Any, _Tensor: Any, _layout: Any, _strided: Any,
    _functional: Any, _zerotensor: Any, _device: Any, _device_type: str, _dtype: Any, _size: Any, _copy: Any,
    _sync: Any
) -> bool:  # fmt: skip
    """Copy every output into its slot when all of them have the declared form (a plain, eager tensor of the slot's
    device, dtype and shape)."""
    if _len(items) != _len(outputs):
        return False
    for item, slot in _zip(items, outputs):
        if slot is None:
            continue
        if (
            _type(item) is not _Tensor or _layout(item) != _strided or _functional(item) or _zerotensor(item)
            or _device(item).type != _device_type or _dtype(item) != _dtype(slot) or _size(item) != _size(slot)
        ):  # fmt: skip
            return False
    for item, slot in _zip(items, outputs):
        if slot is not None:
            _copy(slot, item)
    if _sync is not None:
        _sync()
    return True


_ITEMS = {"_type": type, "_issubclass": issubclass, "_tuple": tuple, "_list": list}


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
        begin = Worker(chan, setup, fds[0]).prepare()
        # the submission runs below this frame from now on: the frame keeps nothing of the harness's but the hook
        del sock, chan, setup, fds
        begin()
    except ChannelClosed:  # closed, shut down or replaced under the harness: only this process can do that
        os._exit(CHANNEL_LOST)
