"""A tensor enters TVM's C++ only through a counted launch (``_guards._ffi_tensor_call``): what the hook counts as a
tensor (``_holds_tensor``), and that a hook set on TVM FFI's immutable ``Function`` type runs on a call ``f(x)``
(``set_on_immutable_type``: an entry put in the type's dict alone left the call's slot as it was)."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from typing import Any

import numpy
import pytest
import torch

from mkbsim.verifier import _guards

tvm_ffi = pytest.importorskip("tvm_ffi")


def _holds() -> Any:
    core = tvm_ffi.core
    kind = functools.partial(
        _guards._tensor_kind, _mro=vars(type)["__mro__"].__get__, _namespace=vars(type)["__dict__"].__get__,
        _protocols=("__dlpack__", "__tvm_ffi_opaque_ptr__", "__tvm_ffi_value__", "asobject"),
        _objects=(core.CObject, core.PyNativeObject), _tensors=(core.Tensor,), _containers=(list, tuple, dict),
    )  # fmt: skip
    return functools.partial(
        _guards._holds_tensor, _type=type, _kinds={}, _kind=kind, _id=id, _list=list, _tuple=tuple, _dict=dict,
        _items=dict.items, _plain=frozenset((type(None), bool, int, float, str, bytes)),
    )  # fmt: skip


class _Pointer:
    def __tvm_ffi_opaque_ptr__(self) -> int:
        return 0


class _Rows(list):  # type: ignore[type-arg]
    """A list whose iteration (what TVM FFI converts it by) is its own code."""


def test_what_holds_a_tensor() -> None:
    holds = _holds()
    t = torch.zeros(2)
    held = [t, tvm_ffi.from_dlpack(t), numpy.zeros(2), _Pointer(), [[1, {"k": t}]], {"k": (2, t)}, _Rows()]
    for value in held:
        assert holds((value,)), value
    free = [None, 3, 2.5, "name", b"raw", [1, [2, (3,)]], {"a": 1}, tvm_ffi.Shape((2, 3)), tvm_ffi.dtype("float32"),
            tvm_ffi.convert([1, 2])]  # fmt: skip
    for value in free:
        assert not holds((value,)), value


def test_a_hook_on_an_immutable_types_call_runs_on_every_call() -> None:
    probe = textwrap.dedent(
        """
        import tvm_ffi
        from mkbsim.verifier import _guards
        f = tvm_ffi.convert(lambda x: x + 1)
        original, seen = vars(tvm_ffi.Function)["__call__"], []
        def hook(self, *args):
            seen.append(args)
            return original(self, *args)
        _guards.set_on_immutable_type(tvm_ffi.Function, "__call__", hook)
        assert f(1) == 2 and seen == [(1,)], seen
        assert tvm_ffi.Function.__flags__ & (1 << 8)  # immutable again
        try:
            tvm_ffi.Function.__call__ = original
        except TypeError:
            pass
        else:
            raise AssertionError("the type took an assignment from Python code")
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
