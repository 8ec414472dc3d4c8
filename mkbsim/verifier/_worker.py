"""The harness inside a submission's process: it loads the file behind the guards, runs calls on
shared inputs, times them with clocks captured before the file was loaded, and answers with plain
data only. It is forked from the zygote, so torch and the DSLs are already imported."""

from __future__ import annotations

import importlib.util
import linecache
import os
import resource
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any

import torch

from mkbsim.verifier._arena import MappedArena, dtype_from_name, map_arena
from mkbsim.verifier._channel import Channel
from mkbsim.verifier._dsl import DslHooks
from mkbsim.verifier._guards import Guard
from mkbsim.verifier._timing import TIMER_ATTRIBUTES, CacheFlusher, Clock

HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))

# The harness inspects outputs through the C base class, which a submission cannot patch, and
# compares identities with `is`; a Python-level change to torch.Tensor cannot mislead it.
_TensorBase = torch._C.TensorBase
_copy = _TensorBase.copy_
_Tensor = torch.Tensor
_type = type


def _tensor_facts(t: torch.Tensor) -> dict[str, Any]:
    return {
        "kind": "tensor",
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "device": t.device.type,
        "layout": str(t.layout).removeprefix("torch."),
    }


def _lazy_reason(t: torch.Tensor) -> str | None:
    if t.layout != torch.strided:
        return f"a {t.layout} tensor"
    if torch._is_functional_tensor(t):
        return "a functional (lazy) tensor"
    if t._is_zerotensor():
        return "a lazy zero tensor"
    return None


def describe(result: Any, n_outputs: int) -> tuple[dict[str, Any], list[Any]]:
    """Plain facts about what run() returned, and the returned items in output order."""
    if n_outputs == 1:
        items, container = [result], "single"
    elif _type(result) is tuple:
        items, container = list(result), "tuple"
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
    start = t.data_ptr()
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) if t.numel() else 0
    return start, start + extent * t.element_size()


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


class Worker:
    def __init__(self, chan: Channel, setup: dict[str, Any]) -> None:
        self.chan = chan
        self.setup = setup
        self.path = os.path.abspath(setup["path"])
        self.device = torch.device(setup["device"])
        self.candidate = setup["role"] == "candidate"
        self.clock = Clock(self.device.type, setup["sync"])
        self.timers = [(owner, attr, getattr(owner, attr)) for owner, attr in TIMER_ATTRIBUTES]
        self.guard: Guard | None = None
        self.hooks: DslHooks | None = None
        self.flusher: CacheFlusher | None = None
        self.kept: list[MappedArena] = []
        self.reusable: MappedArena | None = None
        self.fn: Callable[..., Any] | None = None
        self.reported_violations = 0
        self.reported_inline = 0

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

    def install_guards(self) -> None:
        self.guard = Guard(self.path, self.setup["dsl"], HARNESS_DIR, self.setup["off_limits"])
        self.hooks = DslHooks(self.setup["dsl"], self.guard.attribution)
        self.hooks.install()
        self.guard.install()
        # The verifier's own modules stay loaded (the harness runs on them) but out of reach by name.
        for name in [n for n in sys.modules if n == "mkbsim" or n.startswith(("mkbsim.", "problems"))]:
            del sys.modules[name]

    def import_file(self) -> ModuleType:
        name = "submission" if self.candidate else "_mkbsim_reference"
        spec = importlib.util.spec_from_file_location(name, self.path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {self.path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def start(self) -> None:
        """Apply the limits, install the guards, import the file, and answer with the outcome."""
        self.limit_resources()
        if self.setup["cache_flush"]:
            self.flusher = CacheFlusher(self.device)
        if self.candidate:
            self.install_guards()
        t0 = self.clock.now()
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
        self.chan.send({"ok": True, "import_s": self.clock.now() - t0, **self.news()})
        if self.guard is not None:
            self.guard.between_calls = True
        self.serve()

    # --- calls ---------------------------------------------------------------------------------------
    def news(self) -> dict[str, Any]:
        """Violations, inline CUDA and tampering found since the last answer."""
        out: dict[str, Any] = {"violations": [], "inline_cuda": [], "tampered": [], "timer_tampered": []}
        if self.guard is not None:
            out["violations"] = [v.text() for v in self.guard.violations[self.reported_violations :]]
            self.reported_violations = len(self.guard.violations)
            out["tampered"] = self.guard.tampered()
        if self.hooks is not None:
            out["inline_cuda"] = self.hooks.inline_cuda[self.reported_inline :]
            self.reported_inline = len(self.hooks.inline_cuda)
            out["tampered"] += [
                f"{attr}" for owner, attr, ours in self.hooks.patched if getattr(owner, attr, None) is not ours
            ]
        out["timer_tampered"] = [attr for owner, attr, orig in self.timers if getattr(owner, attr, None) is not orig]
        return out

    def serve(self) -> None:
        while True:
            msg, fds = self.chan.recv()
            if msg["op"] == "exit":
                return
            self.chan.send(self.call(msg, fds))

    def call(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        t_received = self.clock.now()
        arena = map_arena(msg["arena"], fds, self.reusable)
        _retired = self.reusable  # unmapped when this call returns, never inside the timed region
        if msg["keep"]:
            self.kept.append(arena)  # distinct buffers: no address recurs within the phase
        else:
            self.reusable = arena  # the verifier may refill it for the next call
        if self.flusher is not None and msg["flush"]:
            self.flusher.flush()
            if self.device.type == "cuda":
                torch.cuda.synchronize()
        counter = self.hooks.counter if self.hooks is not None else None
        if counter is not None:
            counter.launches = 0
            counter.suppress = bool(msg["suppress"])
        threads_before = set(sys._current_frames())
        assert self.fn is not None
        guard = self.guard
        if guard is not None:
            guard.between_calls = False
        t_ready = self.clock.now()
        try:
            m = self.clock.measure(self.fn, arena.args)
        except BaseException as exc:  # the submission's exception, reported as data
            if counter is not None:
                counter.suppress = False
            if guard is not None:
                guard.between_calls = True
            return {"ok": False, "error": error_facts(exc, self.path), **self.news()}
        if guard is not None:
            guard.between_calls = True
        if counter is not None:
            counter.suppress = False
        t_returned = self.clock.now()
        reply: dict[str, Any] = {
            "ok": True,
            "prep_ms": (t_ready - t_received) * 1e3,
            "ms": m.ms,
            "host_ms": m.host_ms,
            "pending_ms": m.pending_ms,
            "launches": counter.launches if counter is not None else None,
            "background": self.background(threads_before),
            "modes": torch._C._len_torch_function_stack() + torch._C._len_torch_dispatch_stack(),
        }
        if reply["modes"]:
            # A mode left active would run the submission's code inside the harness's own tensor
            # operations below: answer without touching the outputs.
            reply.update(structure={}, alias=[], copied=False, **self.news())
            return reply
        facts, items = describe(m.result, len(arena.outputs))
        reply["structure"] = facts
        reply["alias"] = self.aliases(items, arena.args)
        reply["copied"] = self.copy_outputs(facts, items, arena)
        reply.update(self.news())
        reply["post_ms"] = (self.clock.now() - t_returned) * 1e3
        return reply

    def background(self, before: set[int]) -> list[str]:
        """Threads still running the submission's work after run() returned."""
        frames = sys._current_frames()
        found = []
        if self.guard is not None:
            found += [f"thread {ident} started between calls" for ident in dict.fromkeys(self.guard.stray_threads)]
        for ident, frame in frames.items():
            started_by_candidate = self.guard is not None and ident in self.guard.candidate_threads
            new = ident not in before
            if started_by_candidate or (new and self.guard is not None and self.guard.attribution.anywhere(frame)):
                found.append(f"thread {ident} in {frame.f_code.co_name} (line {frame.f_lineno})")
        return found

    def aliases(self, items: list[Any], args: list[Any]) -> list[list[int]]:
        pairs = []
        for i, out in enumerate(items):
            if _type(out) is not _Tensor or out.device.type != self.device.type:
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
                or dtype_from_name(fact["dtype"]) != slot.dtype
                or tuple(fact["shape"]) != tuple(slot.shape)
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
    setup, _ = chan.recv()
    os.chdir(setup["workdir"])
    out_fd = os.open(os.path.join(setup["workdir"], ".output"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    Worker(chan, setup).start()
