"""The worker's timer (a vault: clocks captured before any candidate code exists, the measure written to
the control page) and the cache flush of the hardened protocol (DESIGN §5)."""

from __future__ import annotations

import _struct
import functools
import statistics
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from mkbsim.verifier import _control

# Captured when the harness is imported (in the zygote, long before a submission is loaded): a
# submission that replaces time.perf_counter or torch.cuda.Event changes nothing the harness uses.
_perf_counter = time.perf_counter
_process_time_ns = time.process_time_ns  # the process's CPU clock, the one the verifier reads from outside
_thread_time_ns = time.thread_time_ns  # the CPU clock of the thread asking (the one running the calls)

#: Attributes whose identity the harness checks after every call: replacing one is tampering.
TIMER_ATTRIBUTES: tuple[tuple[Any, str], ...] = (
    (time, "perf_counter"),
    (time, "perf_counter_ns"),
    (time, "monotonic"),
    (time, "monotonic_ns"),
    (time, "time"),
    (time, "time_ns"),
    (time, "process_time"),
    (torch.cuda, "Event"),
    (torch.cuda, "synchronize"),
    (torch.cuda, "current_stream"),
    (torch.cuda.Event, "record"),
    (torch.cuda.Event, "elapsed_time"),
    (torch.cuda.Event, "synchronize"),
    (torch.cuda.Event, "query"),
    (torch.cuda.Stream, "synchronize"),
)


START, STOP, END, ADVANCE = 1, 2, 3, 4


def cuda_clock(device_type: str) -> dict[str, Any]:
    """The CUDA events and streams the timer's and the gate's vaults use, as torch's C classes and functions (None
    on cpu): ``torch.cuda.Event``'s methods and ``torch.cuda.current_stream`` are Python over module globals (a device
    lookup, the lazy initialisation, ``Stream``), which the submission could rebind to run inside a vault. The current
    stream is asked of the worker's device by its index: asked of no device, torch finds the current one through ~10
    Python calls and an environment lookup, inside the measured window at STOP."""
    if device_type != "cuda":
        return dict.fromkeys(("Event", "record", "elapsed", "event_sync", "device_sync", "current_stream"))
    event = torch._C._CudaEventBase
    return {
        "Event": event, "record": event.record, "elapsed": event.elapsed_time, "event_sync": event.synchronize,
        "device_sync": torch._C._cuda_synchronize,
        "current_stream": functools.partial(
            current_stream, torch.cuda.current_device(), _streams=torch._C._cuda_getCurrentStream,
            _stream=torch._C._CudaStreamBase,
        ),
    }  # fmt: skip


def current_stream(index: int, *, _streams: Any, _stream: Any) -> Any:
    """The current stream of the device ``index``, as torch's C stream (``torch.cuda.current_stream``, less Python)."""
    found = _streams(index)
    return _stream(stream_id=found[0], device_index=found[1], device_type=found[2])


def timer_lib(device_type: str, sync: str) -> types.SimpleNamespace:
    """What the timer's vault calls: the clocks captured when the harness was imported (``cuda_clock``)."""
    return types.SimpleNamespace(
        cuda=device_type == "cuda", device_wide=sync == "device", perf_counter=_perf_counter,
        u64=_struct.Struct("<Q"), f64=_struct.Struct("<d"), cpu_ns=_process_time_ns, thread_cpu_ns=_thread_time_ns,
        BaseException=BaseException, float=float, type=type, tuple=tuple, len=len, max=max, min=min,
        **cuda_clock(device_type),
    )  # fmt: skip


def timer_vault(page: Any, lib: Any, layout: Any) -> Any:
    """Times the call of each nonce end to end (synchronise, record, call, synchronise) and writes the
    measure to the control page.

    START (1) arms the nonce's call: on cuda it synchronises and records the start event; the vault notes
    its own clock. STOP ((2, t0, t1)) brings the host times the harness read right around the call, so
    that no request's own cost falls inside the measure; the vault clamps them to its own notes (t0 no
    earlier than START's, t1 no later than STOP's arrival) and keeps the widest interval of the nonce, and
    on cuda records the end event. Only the first START of a nonce counts: a request the submission forges
    can make its call longer, never shorter.

    In a block (``_control``: BLOCK_CALLS set) the harness sends, for every call, ADVANCE (4), START, STOP,
    and END (3) after the last. ADVANCE saves the finished call's per-call fields into its slot, loads the next
    slot's orders into the header (so every other vault reads the header as for a single call), stamps the slot
    with this vault's host and process CPU clocks (the verifier's per-call trusted measure) and answers the
    slot's flags (1: null call, 2: correctness draw); every STOP also saves into the current slot; END saves,
    stamps the block's end and closes it (also after a slot whose call the harness did not run: a mode left
    on). Any other order is no harness's (an ADVANCE while a call runs or before the loaded one started, a START
    or STOP of a slot not started, more calls than slots, END while a call runs): the vault marks the block
    (BLOCK_FAULT) and the verifier judges it. A forged STOP inside run() only ends the call early until the
    harness's STOP ends it later; followed by a forged ADVANCE it leaves the harness's STOP or START out of
    order."""
    started = -1
    stopped = fresh = False  # fresh: a block's slot loaded, its call not started yet
    mark = lo = hi = 0.0
    cpu_start = 0
    start_event: Any = None
    end_event: Any = None
    reply: Any = None

    def save(index: int) -> None:  # the header's per-call fields into the slot of call ``index``
        base = layout.SLOTS + index * layout.SLOT_BYTES
        for a, b in layout.PER_CALL:
            page[base + a : base + b] = page[a:b]

    while True:
        request = yield reply
        reply = None
        try:
            arrived = lib.perf_counter()
            stop = lib.type(request) is lib.tuple and lib.len(request) == 3 and request[0] == 2
            if stop and end_event is not None:  # first: the bookkeeping below stays outside the device's window (a
                # STOP out of order records over an event whose measure is written, or whose call's STOP comes later)
                lib.record(end_event, lib.current_stream())
            calls = lib.u64.unpack_from(page, layout.BLOCK_CALLS)[0]
            if calls:
                current = lib.u64.unpack_from(page, layout.NONCE)[0]
                running = current == started and not stopped
                loaded = lib.u64.unpack_from(page, layout.BLOCK_NEXT)[0]
                if request == 4 or request == 3:  # END may follow a slot the harness did not run (a mode left on)
                    page[layout.TIMED] = 0
                    if running or (request == 4 and (fresh or loaded >= calls)):
                        lib.u64.pack_into(page, layout.BLOCK_FAULT, 1)
                    elif loaded:
                        save(loaded - 1)
                    if request == 3:
                        lib.f64.pack_into(page, layout.END_T, arrived)
                        lib.u64.pack_into(page, layout.END_CPU, lib.cpu_ns())
                        lib.u64.pack_into(page, layout.END_THREAD_CPU, lib.thread_cpu_ns())
                        lib.u64.pack_into(page, layout.BLOCK_CALLS, 0)
                        fresh = False
                    elif not fresh and not running and loaded < calls:
                        base = layout.SLOTS + loaded * layout.SLOT_BYTES
                        for a, b in layout.PER_CALL:
                            page[a:b] = page[base + a : base + b]
                        lib.u64.pack_into(page, layout.BLOCK_NEXT, loaded + 1)
                        lib.f64.pack_into(page, base + layout.SLOT_START_T, arrived)
                        lib.u64.pack_into(page, base + layout.SLOT_START_CPU, lib.cpu_ns())
                        lib.u64.pack_into(page, base + layout.SLOT_START_THREAD_CPU, lib.thread_cpu_ns())
                        fresh = True
                        reply = page[base + layout.NULL] + 2 * page[base + layout.AUDIT]
                    request = None
                elif (request == 1 and not fresh) or (stop and fresh):
                    lib.u64.pack_into(page, layout.BLOCK_FAULT, 1)
                    request = None
                elif request == 1:
                    fresh = False
            nonce = lib.u64.unpack_from(page, layout.NONCE)[0]
            if request == 1 and nonce != started:
                started = nonce
                stream = None
                if lib.cuda and not lib.device_wide:  # made ahead: the window holds the start's record and nothing else
                    start_event, end_event = lib.Event(enable_timing=True), lib.Event(enable_timing=True)
                    stream = lib.current_stream()
                if lib.cuda:
                    lib.device_sync()
                page[layout.TIMED] = 1  # launches count from here (the gate's vault)
                mark = lo = hi = lib.perf_counter()
                cpu_start = lib.cpu_ns()
                stopped = False
                if stream is not None:  # the last step before the call
                    lib.record(start_event, stream)
                stream = None
            elif stop and nonce == started:
                page[layout.TIMED] = 0
                t0, t1 = request[1], request[2]
                if lib.type(t0) is not lib.float or lib.type(t1) is not lib.float:
                    t0 = t1 = arrived
                lo = lib.min(lo, lib.max(t0, mark)) if stopped else lib.max(t0, mark)
                hi = lib.max(hi, lib.min(t1, arrived))
                stopped = True
                pending = 0.0
                if not lib.cuda:
                    ms = (hi - lo) * 1e3
                elif lib.device_wide:
                    lib.device_sync()
                    hi = lib.max(hi, lib.perf_counter())
                    ms = (hi - lo) * 1e3
                else:  # recorded on arrival; a later STOP records it again: the latest counts, the widest window
                    lib.event_sync(end_event)
                    done = lib.perf_counter()
                    lib.device_sync()  # device work left once the timed stream is done: a side stream
                    pending = (lib.perf_counter() - done) * 1e3
                    ms = lib.float(lib.elapsed(start_event, end_event))
                lib.f64.pack_into(page, layout.CALL_MS, ms)
                lib.f64.pack_into(page, layout.HOST_MS, (hi - lo) * 1e3)
                lib.f64.pack_into(page, layout.CALL_CPU_MS, (lib.cpu_ns() - cpu_start) / 1e6)
                lib.f64.pack_into(page, layout.PENDING_MS, pending)
                lib.u64.pack_into(page, layout.ACK, nonce)
                if calls:
                    save(lib.u64.unpack_from(page, layout.BLOCK_NEXT)[0] - 1)
        except lib.BaseException as exc:  # a CUDA fault of the kernel: raised into the call, not our frame
            exc.__traceback__ = None
            exc.__context__ = None
            reply = exc
        request = None  # the caller holds its objects: dropping them here is never the last reference


def timer_layout() -> types.SimpleNamespace:
    return types.SimpleNamespace(
        NONCE=_control.NONCE[0], ACK=_control.ACK[0], CALL_MS=_control.CALL_MS[0], HOST_MS=_control.HOST_MS[0],
        CALL_CPU_MS=_control.CALL_CPU_MS[0],
        PENDING_MS=_control.PENDING_MS[0], BLOCK_CALLS=_control.BLOCK_CALLS[0], BLOCK_NEXT=_control.BLOCK_NEXT[0],
        BLOCK_FAULT=_control.BLOCK_FAULT[0], END_T=_control.END_T[0], END_CPU=_control.END_CPU[0],
        TIMED=_control.TIMED[0],
        END_THREAD_CPU=_control.END_THREAD_CPU[0],
        SLOTS=_control.BLOCK_SLOTS, SLOT_BYTES=_control.SLOT_BYTES, SLOT_START_T=_control.SLOT_START_T[0],
        SLOT_START_CPU=_control.SLOT_START_CPU[0],
        SLOT_START_THREAD_CPU=_control.SLOT_START_THREAD_CPU[0], NULL=_control.NULL[0], AUDIT=_control.AUDIT[0],
        PER_CALL=_control.PER_CALL,
    )  # fmt: skip


def timed_call(fn: Any, args: Any, *, _timer: Any, _clock: Any) -> Any:
    """The harness's call of run(): the timer's vault starts before it and stops after it, whatever
    happens; the host clock is read right around the call, outside the vault's requests."""
    failed = _timer(1)
    if failed is not None:
        raise failed
    t0 = _clock()
    try:
        return fn(*args)
    finally:
        t1 = _clock()
        failed = _timer((2, t0, t1))
        if failed is not None:
            raise failed


def advance_block(*, _timer: Any) -> Any:
    """The harness's first request for each call of a block: the call's flags (1 null, 2 audited), or the
    vault's exception (``timer_vault``)."""
    return _timer(4)


def end_block(*, _timer: Any) -> None:
    """The harness's last request of a block, after its last call's bookkeeping (``timer_vault``)."""
    failed = _timer(3)
    if failed is not None:
        raise failed


def _cpu_llc_bytes() -> int:
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KM")) * unit)
    return max(sizes, default=32 << 20)


class CacheFlusher:
    """Evicts the last-level cache between timed calls (hardened protocol): rewrites a buffer of
    twice its size, as `triton.testing.do_bench` does on GPUs."""

    def __init__(self, device: torch.device) -> None:
        if device.type == "cuda":
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20))
            size = max(256 << 20, 2 * l2)
        else:
            size = min(max(2 * _cpu_llc_bytes(), 8 << 20), 256 << 20)
        self.bytes = size
        self.buffer = torch.empty(size, dtype=torch.uint8, device=device)

    def flush(self) -> None:
        self.buffer.add_(1)


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))
