"""The DSL time of a TIRx launch on cpu is the time beyond its fixed cost (DESIGN §5, "DSL time").

On an evidence call (and a correctness draw) the gate first calls a native no-op with the launch's own
arguments in a window like the launch's (PRE to MID), and the vault takes that window off the launch's: a
launch of the same kernel told to do no work keeps about nothing, where the raw time kept 0.4-0.9 of the
draws'. A scored call pays none of it."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from mkbsim.verifier import _control, _provenance
from mkbsim.verifier._provenance import gate, page_layout, provenance_lib, provenance_vault
from mkbsim.verifier._vault import Registry

tvm = pytest.importorskip("tvm")
tvm_ffi = pytest.importorskip("tvm_ffi")


@pytest.fixture(scope="module")
def kernel() -> Any:
    from tvm.script import tirx as T

    @T.prim_func
    def double(x_ptr: T.handle, out_ptr: T.handle, todo: T.int32):
        x = T.match_buffer(x_ptr, (64, 128), "float32")
        out = T.match_buffer(out_ptr, (64, 128), "float32")
        for i in T.serial(todo):
            for j in range(128):
                out[i, j] = x[i, j] * T.float32(2)

    return tvm.compile(double, target="llvm")["double"]


def _dsl_ms(kernel: Any, nop: Any, *, evidence: bool) -> float:
    """The DSL time the vault writes for a call of one launch of ``kernel`` (doing no rows)."""
    control = _control.ControlPage()
    registry = Registry()
    send = registry.open(provenance_vault, control.buf, provenance_lib(torch.device("cpu")), page_layout(), [], [], {})
    original = tvm_ffi.Function.__call__
    send((0, original, "function"))  # as _dsl registers TIRx's launch and the functions it takes from modules
    send((6, kernel, None, kernel, "double"))
    send((0, None, None))
    launch = registry.protect(gate, _send=send, _original=original, _count=True, _nop=nop)
    end = registry.protect(_provenance.report_end, _send=send)
    control.begin_call(suppress=False, audit=False, evidence=evidence)
    launch(kernel, torch.randn(64, 128), torch.empty(64, 128), 0)
    end()
    report = control.report()
    control.close()
    assert report["launches"] == 1
    return report["dsl_ms"]


def test_the_launch_s_fixed_cost_measured_with_its_arguments_is_taken_off_its_time(kernel: Any) -> None:
    calls: list[tuple[Any, ...]] = []

    def slow_nop(*args: Any) -> None:  # stands for a fixed cost 20 ms larger than the launch's
        calls.append(args)
        time.sleep(0.02)

    assert _dsl_ms(kernel, slow_nop, evidence=True) < -15.0
    assert len(calls) == 2 and calls[-1][2] == 0  # once to convert, once timed; the launch's own arguments
    native = tvm_ffi.get_global_func("testing.nop", allow_missing=True)
    if native is not None:  # the real no-op: a launch doing nothing keeps about nothing
        assert abs(_dsl_ms(kernel, native, evidence=True)) < 1.0


def test_a_scored_call_pays_no_floor(kernel: Any) -> None:
    calls: list[Any] = []
    assert _dsl_ms(kernel, lambda *args: calls.append(args), evidence=False) == 0.0
    assert not calls
