"""What the guards' hook on TVM FFI's function call costs a TIRx compile (``_guards._ffi_tensor_call``).

Compiles an honest TIRx kernel (tests/verifier/honest/tvm_tensor_arguments.py, target llvm) best of N, without the
hook and with it (the hook's own predicate, its request to the guards answered at once), and counts the FFI calls
a compile makes from Python.

    python benchmarks/ffi_call_overhead.py [--repeat N]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import time
from pathlib import Path
from typing import Any

import tvm
import tvm_ffi

from mkbsim.verifier import _guards

KERNEL = Path(__file__).resolve().parents[1] / "tests/verifier/honest/tvm_tensor_arguments.py"


def _best(kernel: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        tvm.compile(kernel, target="llvm")
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("kernel", KERNEL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plain = _best(module.rmsnorm, args.repeat)
    core = tvm_ffi.core
    kind = functools.partial(
        _guards._tensor_kind, _mro=vars(type)["__mro__"].__get__, _namespace=vars(type)["__dict__"].__get__,
        _protocols=("__dlpack__", "__dlpack_c_exchange_api__", "__tvm_ffi_object__", "__tvm_ffi_value__",
                    "__tvm_ffi_opaque_ptr__", "__array_interface__", "__cuda_array_interface__", "asobject"),
        _objects=(core.CObject, core.PyNativeObject), _tensors=(core.Tensor,), _containers=(list, tuple, dict),
    )  # fmt: skip
    holds = functools.partial(
        _guards._holds_tensor, _type=type, _kinds={}, _kind=kind, _id=id, _list=list, _tuple=tuple, _dict=dict,
        _items=dict.items, _plain=frozenset((type(None), bool, int, float, complex, str, bytes)),
    )  # fmt: skip
    calls = [0]

    def answered(request: Any) -> None:
        return None

    hook = functools.partial(
        _guards._ffi_tensor_call, _ask=answered, _original=vars(core.Function)["__call__"], _caller=lambda: None,
        _what="Function.__call__", _names=(), _holds=holds, _skip=1,
    )  # fmt: skip

    def counted(*call: Any) -> Any:
        calls[0] += 1
        return hook(*call)

    _guards.set_on_immutable_type(core.Function, "__call__", counted)
    hooked = _best(module.rmsnorm, args.repeat)
    print(f"tvm.compile, best of {args.repeat}: {plain * 1e3:.1f} ms without the hook, {hooked * 1e3:.1f} ms with it; "
          f"{calls[0] / args.repeat:.0f} FFI calls from Python a compile")  # fmt: skip


if __name__ == "__main__":
    main()
