"""A TIRx kernel is named by its TIR up to its buffers' sizes (``_tir_identity``): a builder's modules for other row
counts are one kernel, TIR that differs anywhere else is another."""

from __future__ import annotations

import io
import tokenize
from typing import Any

import pytest

from mkbsim.verifier._tir_identity import Printed, printed_kernel, same_kernel

tvm = pytest.importorskip("tvm")
T = pytest.importorskip("tvm.script.tirx")

HIDDEN = 64


def printed(func: Any) -> Printed:
    return printed_kernel(
        func, _script=tvm.runtime.Scriptable.script, _tokens=tokenize.generate_tokens, _reader=io.StringIO,
        _NUMBER=tokenize.NUMBER, _NAME=tokenize.NAME, _OP=tokenize.OP, _int=int, _len=len, _enumerate=enumerate,
        _tuple=tuple,
    )  # fmt: skip


def same(a: Any, b: Any) -> bool:
    return same_kernel(printed(a), printed(b), _len=len, _zip=zip, _int=int)


def rows_kernel(rows: int, scale: float = 2.0, mode: int = 0) -> Any:
    @T.prim_func
    def scaled(x_ptr: T.handle, y_ptr: T.handle):
        x = T.match_buffer(x_ptr, (rows, HIDDEN), "float32")
        y = T.match_buffer(y_ptr, (rows, HIDDEN), "float32")
        for i, j in T.grid(rows, HIDDEN):
            if T.int32(mode) == T.int32(0):
                y[i, j] = x[i, j] * T.float32(scale) + T.Cast("float32", 2 * j + 1)

    return scaled


@pytest.mark.parametrize("rows", [2, 3, 7, 31, HIDDEN, 65, 200])
def test_a_kernel_built_for_another_row_count_is_the_same_kernel(rows: int) -> None:
    # 2 also stands in the body (``2 * j``), 64 is the hidden size too: a literal the same in both constrains nothing
    assert same(rows_kernel(5), rows_kernel(rows))
    assert same(rows_kernel(rows), rows_kernel(5))


def test_a_kernel_built_again_is_the_same_kernel() -> None:
    assert same(rows_kernel(5), rows_kernel(5))


@pytest.mark.parametrize("other", [lambda: rows_kernel(5, scale=3.0), lambda: rows_kernel(5, mode=1)],
                         ids=["another float constant", "another integer constant"])  # fmt: skip
def test_a_constant_that_is_no_size_makes_another_kernel(other: Any) -> None:
    assert not same(rows_kernel(5), other())


def switched(limit: int) -> Any:
    @T.prim_func
    def rows_up_to(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, pair_ptr: T.handle):
        x = T.match_buffer(x_ptr, (HIDDEN, 128), "float32")
        w = T.match_buffer(w_ptr, (128,), "float32")
        out = T.match_buffer(out_ptr, (HIDDEN, 128), "float32")
        pair = T.match_buffer(pair_ptr, (2,), "float32")
        for i, j in T.grid(HIDDEN, 128):
            if i < limit:
                out[i, j] = x[i, j] * w[j] + pair[0]

    return rows_up_to


def test_a_switch_in_a_literal_that_is_a_size_elsewhere_makes_another_kernel() -> None:
    """Red team rt59 F1: ``i < 64`` (every row) on the draws, ``i < 2`` on the timed calls, 64 and 2 both sizes of a
    buffer of each kernel, and no shape differs: two kernels."""
    assert same(switched(HIDDEN), switched(HIDDEN))
    assert not same(switched(HIDDEN), switched(2))
    assert not same(switched(HIDDEN), switched(128))



def scratch_named_buffer(limit: int) -> Any:
    @T.prim_func
    def switched_by_scratch(x_ptr: T.handle, out_ptr: T.handle):
        x = T.match_buffer(x_ptr, (HIDDEN, HIDDEN), "float32")
        out = T.match_buffer(out_ptr, (HIDDEN, HIDDEN), "float32")
        Buffer = T.alloc_buffer((limit,), "float32")
        Buffer[0] = x[0, 0]
        for i, j in T.grid(HIDDEN, HIDDEN):
            if i < limit:
                out[i, j] = x[i, j] * Buffer[0]

    return switched_by_scratch


def test_a_scratch_buffer_named_buffer_gives_no_parameter_size() -> None:
    """Red team rt60 F2: a body buffer named ``Buffer`` (``T.alloc_buffer``) made its size a parameter's, and
    ``i < 64`` / ``i < 2`` one kernel: only a signature's ``T.Buffer`` or a handle's ``T.match_buffer`` is one."""
    assert printed(scratch_named_buffer(2))[1] == (HIDDEN, HIDDEN, HIDDEN, HIDDEN)
    assert not same(scratch_named_buffer(HIDDEN), scratch_named_buffer(2))
