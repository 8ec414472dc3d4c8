"""The vaults hold the harness's state out of the submission's reach by construction (DESIGN §5)."""

from __future__ import annotations

import _thread
import dis
import mmap
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from mkbsim.verifier import (
    _arena,
    _channel,
    _control,
    _dsl,
    _eagerwork,
    _guards,
    _lookups,
    _mapped,
    _mapping,
    _operators,
    _provenance,
    _threads,
    _timing,
    _tir_memory,
    _vault,
    _widths,
    _worker,
)
from mkbsim.verifier._operators import dispatch_hooks
from mkbsim.verifier._provenance import gate, page_layout, provenance_lib, provenance_vault
from mkbsim.verifier._timing import timed_call, timer_layout, timer_lib, timer_vault
from mkbsim.verifier._vault import Registry

# Every function that runs as a vault or is installed as a hook.
PROTECTED = [
    _guards._guard_vault, _guards._audit_hook, _guards._ask, _guards._guarded_import, _guards._guarded_import_module,
    _guards._denied, _guards._start_thread, _guards._caller_frame, _provenance.provenance_vault, _provenance.gate,
    _provenance.dispatch,
    _provenance.report_result, _provenance.report_end, _provenance.report_inputs, _timing.timer_vault,
    _timing.timed_call,
    _dsl._counted_get_function, _dsl._wrap_counted, _dsl._ffi_program, _dsl._capi_program, _dsl._record_dlpack,
    _dsl._recording, _dsl._built_module,
    _dsl._declared, _dsl._looked_up, _dsl._device_kernels, _dsl._allowed_call, _dsl._exported, _dsl._loaded_module,
    _tir_memory.refused_reach, _tir_memory.clamped, _tir_memory.filled, _tir_memory.sized, _tir_memory.checked,
    _vault._send, _operators.resolve_operator,
    _eagerwork.to_python_hook, _channel.answer_signer, _threads.count_ops, _threads.enter_thread,
    _worker._serve_blocks, _worker._run_block, _worker._call_once, _worker._finish_call, _worker._returned_items,
    _worker._begin, _worker.load_file, _channel._unpacked, _channel._applied,
    _worker._copy_into_slots, _mapped.view, _mapped.arena, _mapped.block_memory, _mapped.map_block, _mapped.stage_out,
    _mapped.null_run, _mapped.delivered_vault, _mapped.request, _mapped.open_block, _mapping.map_shared,
    _mapping._descriptors_of, _arena.lock_pages, _arena.unlock_pages,
    _lookups.span, _lookups.trivial, _lookups.positions_read, _lookups.judged, _widths.address, _widths.widened,
    _widths.fresh, _widths.made_as, _widths.held, _widths.priced, _widths.narrowed, _widths.evaluates,
    _eagerwork.fft_points,
]  # fmt: skip


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


@pytest.mark.parametrize("fn", PROTECTED, ids=[f.__qualname__ for f in PROTECTED])
def test_vaults_and_hooks_look_up_no_global_and_no_builtin(fn: Any) -> None:
    # whatever a submission patches in a module or in builtins, a vault or hook calls only what it was given
    loads = {(i.opname, i.argval) for c in _codes(fn.__code__) for i in dis.get_instructions(c)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL")}  # fmt: skip
    assert not loads, loads
    assert fn.__closure__ is None  # nothing is held in a closure cell, the red team's way in


@pytest.fixture
def page() -> Iterator[mmap.mmap]:
    control = _control.ControlPage()
    yield control.buf
    control.close()


def _arm(page: mmap.mmap, nonce: int, *, suppress: bool = False, audit: bool = False, evidence: bool = False) -> None:
    _control.put(page, _control.LAUNCHES, 0)
    _control.put(page, _control.SUPPRESS, int(suppress))
    _control.put(page, _control.AUDIT, int(audit))
    _control.put(page, _control.EVIDENCE, int(evidence))
    _control.put(page, _control.NONCE, nonce)


def test_a_forged_timer_request_can_only_make_a_call_longer(page: mmap.mmap) -> None:
    registry = Registry()
    timer = registry.open(timer_vault, page, timer_lib("cpu", "stream"), timer_layout())
    call = registry.protect(timed_call, _timer=timer, _clock=time.perf_counter)

    def run() -> None:
        time.sleep(0.02)
        timer(1)  # a second START: ignored, the clock started before run()
        now = time.perf_counter()
        timer((2, now, now))  # a forged STOP of an empty interval: the harness's own comes after run() returns
        time.sleep(0.02)

    _arm(page, 7)
    call(run, ())
    assert _control.get(page, _control.ACK) == 7
    assert _control.get(page, _control.CALL_MS) >= 40.0
    # a STOP sent after the call (by a thread, say) claiming a shorter call changes nothing either
    late = time.perf_counter()
    timer((2, late - 1e-6, late))
    assert _control.get(page, _control.CALL_MS) >= 40.0


def test_the_cuda_timer_window_holds_the_call_and_the_two_records_only(page: mmap.mmap) -> None:
    """On cuda the measure is the device's time between the START's event and the STOP's: whatever the vault does
    between the start's record and the call, or between the call and the end's record, is in it (the H200's host
    took ~10 Python calls to find the current stream). START records its event last, STOP records first (before any
    synchronisation), and neither makes an event or asks for the device there; a forged STOP inside the call is
    overwritten by the harness's own, later one (the widest window)."""
    log: list[str] = []

    class FakeEvent:
        def __init__(self, enable_timing: bool) -> None:
            log.append("event")
            self.at = 0.0

    def record(event: FakeEvent, stream: object) -> None:
        assert stream == "stream of device 0"
        log.append("record")
        event.at = time.perf_counter()

    def current_stream() -> str:
        log.append("current_stream")
        return "stream of device 0"

    lib = timer_lib("cpu", "stream")
    lib.cuda, lib.Event, lib.record, lib.current_stream = True, FakeEvent, record, current_stream
    lib.elapsed = lambda start, end: (end.at - start.at) * 1e3
    lib.event_sync = lambda event: log.append("event_sync")
    lib.device_sync = lambda: log.append("device_sync")
    registry = Registry()
    timer = registry.open(timer_vault, page, lib, timer_layout())

    def run() -> None:
        log.append("run")
        time.sleep(0.01)
        now = time.perf_counter()
        timer((2, now, now))  # a forged STOP: the harness's own records the end again after run() returns
        log.append("run")
        time.sleep(0.01)

    _arm(page, 3)
    registry.protect(timed_call, _timer=timer, _clock=time.perf_counter)(run, ())
    assert log[log.index("run") - 1] == "record"  # the start's record, then nothing of the vault's before the call
    assert log[: log.index("record")].count("event") == 2  # both events made ahead, before the device is awaited
    stops = [i for i, step in enumerate(log) if step == "run"]
    assert log[stops[0] + 1 : stops[0] + 3] == ["current_stream", "record"]  # the forged STOP
    assert log[stops[1] + 1 : stops[1] + 3] == ["current_stream", "record"]  # the harness's: first thing, no event made
    assert "event" not in log[stops[0] :]
    assert _control.get(page, _control.ACK) == 3
    assert _control.get(page, _control.CALL_MS) >= 20.0  # the harness's STOP, after the second sleep, counts


def test_a_suppressed_launch_runs_but_leaves_nothing_behind(page: mmap.mmap) -> None:
    registry = Registry()
    send = registry.open(provenance_vault, page, provenance_lib(torch.device("cpu")), page_layout(), [], [], {})

    def kernel(out: torch.Tensor, flag: torch.Tensor) -> int:
        out.fill_(7.0)
        flag[0] = 1
        return 3

    send((0, kernel, "launch"))  # registered as a genuine launch, as the DSL gates register theirs
    launch = registry.protect(gate, _send=send, _original=kernel, _count=True, _serial=_thread.RLock())
    out, flag = torch.zeros(4), torch.zeros(1, dtype=torch.int32)
    _arm(page, 1, suppress=True, audit=True)
    send((7, (out, flag), ()))  # the call's inputs (memory no recorded writer left would be erased before the launch)
    assert launch(out, flag) == 3  # the kernel ran and returned as it would
    assert torch.equal(out, torch.zeros(4)) and int(flag[0]) == 0  # its writes were undone
    assert _control.get(page, _control.LAUNCHES) == 1
    _arm(page, 2, audit=True)
    launch(out, flag)
    assert torch.equal(out, torch.full((4,), 7.0)) and int(flag[0]) == 1


def test_a_kernel_error_is_the_same_whether_or_not_the_launch_is_suppressed(page: mmap.mmap) -> None:
    registry = Registry()
    send = registry.open(provenance_vault, page, provenance_lib(torch.device("cpu")), page_layout(), [], [], {})

    def kernel(x: torch.Tensor) -> None:
        raise ValueError(f"bad shape {tuple(x.shape)}")

    send((0, kernel, "launch"))
    launch = registry.protect(gate, _send=send, _original=kernel, _count=True, _serial=_thread.RLock())
    for nonce, suppress in ((1, False), (2, True)):
        _arm(page, nonce, suppress=suppress, audit=True)
        with pytest.raises(ValueError, match="bad shape"):
            launch(torch.zeros(2))


def test_inference_tensors_are_audited_and_a_fault_of_the_vault_is_recorded() -> None:
    control = _control.ControlPage()
    registry = Registry()
    send = registry.open(
        provenance_vault, control.buf, provenance_lib(torch.device("cpu")), page_layout(), [torch.arange(4)], [4], {}
    )
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=_thread.RLock(), **dispatch_hooks(registry, torch.device("cpu"))
    )
    control.begin_call(suppress=False, audit=True)
    # an inference tensor has no version counter: the audit samples it instead of failing the op
    with torch.inference_mode():
        x = torch.ones(4)
        send((7, (x,), ()))  # the call's input (memory no recorded writer left is erased before an operator reads it)
        assert torch.equal(op(None, torch.ops.aten.mul.Tensor, (), (x, x)), x)
    # a fault inside the vault reaches the verifier as a record, whatever the submission does with the exception
    assert isinstance(send((4, None)), TypeError)  # RESULT of something that is not a sequence
    registry.protect(_provenance.report_result, _send=send)([torch.ones(4)])
    records = control.report([4])["records"]
    control.close()
    assert any(r[0] == "fault" and "TypeError" in r[1] for r in records), records


def test_a_launch_whose_original_was_not_registered_is_neither_counted_nor_timed(page: mmap.mmap) -> None:
    registry = Registry()
    send = registry.open(provenance_vault, page, provenance_lib(torch.device("cpu")), page_layout(), [], [], {})

    def kernel(out: torch.Tensor) -> None:
        out.fill_(1.0)

    def forged(out: torch.Tensor) -> None:  # what a submission passes as the gate's _original
        time.sleep(0.2)  # eager work it would have timed as the DSL's

    send((0, kernel, "launch"))
    send((0, None, None))  # sealed: a later registration is ignored
    send((0, forged, "launch"))
    launch = registry.protect(gate, _send=send, _original=kernel, _count=True, _serial=_thread.RLock())
    end = registry.protect(_provenance.report_end, _send=send)
    _arm(page, 1, evidence=True)
    launch(torch.zeros(4))
    launch(torch.zeros(4), _original=forged)
    end()
    assert _control.get(page, _control.LAUNCHES) == 1
    assert _control.get(page, _control.DSL_ACK) == 1
    assert 0.0 < _control.get(page, _control.DSL_MS) < 200.0  # the genuine launch's time only


def test_a_scored_call_counts_and_times_its_launches_and_describes_none(page: mmap.mmap) -> None:
    """Off evidence calls the gate does not describe a launch (no signature); on cpu it times it as on an evidence
    call, on the launching thread's CPU clock, with a request after it (``_judge.scored_dsl_time`` compares the
    two); time the launch waits without working is no DSL time (DESIGN §5)."""
    registry = Registry()
    send = registry.open(provenance_vault, page, provenance_lib(torch.device("cpu")), page_layout(), [], [], {})
    requests: list[int] = []

    def watched(request: tuple[Any, ...]) -> Any:
        requests.append(request[0])
        return send(request)

    def kernel(out: torch.Tensor) -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.01:  # 10 ms of work
            pass
        time.sleep(0.02)  # and 20 ms of waiting
        out.fill_(1.0)

    send((0, kernel, "launch"))
    send((0, None, None))
    launch = registry.protect(gate, _send=watched, _original=kernel, _count=True, _serial=_thread.RLock())
    end = registry.protect(_provenance.report_end, _send=send)
    for nonce, evidence in ((1, False), (2, True)):
        requests.clear()
        _arm(page, nonce, evidence=evidence)
        served = _control.get(page, _control.VAULT_WORK)
        out = torch.zeros(4)  # the same launch twice: one signature
        launch(out)
        launch(out)
        end()
        assert _control.get(page, _control.LAUNCHES) == 2 and _control.get(page, _control.DSL_ACK) == nonce
        assert requests == [1, 2, 1, 2]  # both launches timed: a second request after each
        # the verifier's wait restarts at each request the vault serves on a watched call (the END too) and at its
        # passes over an argument inside one, never on a scored call (whose time to answer is the submission's alone)
        beats = _control.get(page, _control.VAULT_WORK) - served
        assert beats >= len(requests) + 1 if evidence else beats == 0
        assert 20.0 <= _control.get(page, _control.DSL_MS) < 40.0  # their work, not their waiting
        listed = _control.get(page, (_control.SIGNATURES[0], "<Q"))
        assert listed == (1 if evidence else 0)  # their one signature, listed on the evidence call only


def test_a_launch_footprint_is_the_bytes_its_tensor_arguments_span(page: mmap.mmap) -> None:
    """The footprint (``_judge.scored_footprint``), read on every launch of a scored call: a contiguous tensor's
    bytes, a strided view's span from its first element to its last (an expanded row spans one row, not the
    elements it repeats), a TVM tensor's memory through its torch view, nothing for a sparse tensor or a number;
    summed over the call's launches."""
    tvm_ffi = pytest.importorskip("tvm_ffi")
    registry = Registry()
    send = registry.open(provenance_vault, page, provenance_lib(torch.device("cpu")), page_layout(), [], [], {})

    def kernel(target: Any, *args: Any) -> None:  # the gate skips the target, as a TVM FFI call's function
        return None

    send((0, kernel, "launch"))
    send((0, None, None))
    launch = registry.protect(gate, _send=send, _original=kernel, _count=True, _serial=_thread.RLock())
    contiguous, expanded, columns = torch.zeros(10), torch.zeros(4).expand(8, 4), torch.zeros(8, 8)[:, :2]
    ffi_tensor, sparse = tvm_ffi.from_dlpack(torch.zeros(6)), torch.zeros(3).to_sparse()
    _arm(page, 1)
    _control.put(page, _control.FOOTPRINT, 0)
    launch("target", contiguous, expanded, columns, ffi_tensor, sparse, 5)
    launch("target", contiguous)
    spans = 10 * 4 + 4 * 4 + (7 * 8 + 2) * 4 + 6 * 4
    assert _control.get(page, _control.FOOTPRINT) == spans + 10 * 4
    assert _control.get(page, _control.LAUNCHES) == 2


def _fp8_without_take(lib: types.SimpleNamespace) -> types.SimpleNamespace:
    """The vault's functions as on a CUDA device, which has no take kernel for one-byte floats."""
    take = lib.take

    def cuda_take(t: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            raise RuntimeError(f'"take_cuda" not implemented for {t.dtype}')
        return take(t, where)

    lib.take = cuda_take
    return lib


def test_fp8_outputs_are_sampled_where_the_device_cannot_take_them() -> None:
    control = _control.ControlPage()
    registry = Registry()
    positions = torch.arange(0, 64, 3)
    lib = _fp8_without_take(provenance_lib(torch.device("cpu")))
    send = registry.open(provenance_vault, control.buf, lib, page_layout(), [positions], [64], {})
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=_thread.RLock(), **dispatch_hooks(registry, torch.device("cpu"))
    )
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        control.begin_call(suppress=False, audit=True)
        made = op(None, torch.ops.aten.empty.memory_format, (), ([64],), {"dtype": dtype})
        assert made.float().isnan().all()  # the sentinel, in fp8 too
        x = torch.randn(64).to(dtype)
        registry.protect(_provenance.report_result, _send=send)([x])
        records = control.report([len(positions)])["records"]
        assert not [r for r in records if r[0] == "fault"], records
        returned = [r for r in records if r[0] == "result"]
        assert returned and returned[0][3] == x.float()[positions].double().tolist()
    control.close()


def test_a_view_of_a_large_input_is_not_an_eager_copy_of_the_output() -> None:
    """A launch reading a reshape of a large bf16 input (the H200's decode attention reads its KV cache so)
    writes an output all of whose values that input holds with their multiplicity: not a copy."""
    control = _control.ControlPage()
    registry = Registry()
    n = 512
    send = registry.open(
        provenance_vault, control.buf, provenance_lib(torch.device("cpu")), page_layout(), [torch.arange(n)], [n], {}
    )
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=_thread.RLock(), **dispatch_hooks(registry, torch.device("cpu"))
    )

    def kernel(cache: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(cache[:n])  # values of the cache's own set, each as many times over in the cache

    send((0, kernel, "launch"))
    launch = registry.protect(gate, _send=send, _original=kernel, _count=True, _serial=_thread.RLock())
    cache = torch.randn(64 * n).to(torch.bfloat16)
    control.begin_call(suppress=False, audit=True)
    registry.protect(_provenance.report_inputs, _send=send)([cache])  # a problem input: never held
    pool = op(None, torch.ops.aten.view.default, (), (cache, [64, n]))
    out = op(None, torch.ops.aten.empty.memory_format, (), ([n],), {"dtype": torch.bfloat16})
    launch(pool.reshape(-1), out)
    registry.protect(_provenance.report_result, _send=send)([out])
    records = control.report([n])["records"]
    control.close()
    assert not [r for r in records if r[0] in ("contains", "fault")], [r[:2] for r in records]
    assert [r[4] for r in records if r[0] == "result"] == [True]  # the output is the launch's
