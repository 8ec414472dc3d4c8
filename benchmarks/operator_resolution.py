"""What naming and running an operator by its schema costs the provenance mode (DESIGN §5; verifier README,
"Eager work": what an operator is): ``_operators.resolve_operator`` on first use (a native lookup per distinct
operator) and cached, against the ``OpOverload.__str__`` it replaced, and the native call against
``OpOverload.__call__``.

    python benchmarks/operator_resolution.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import json
import time


def measure(calls: int) -> dict[str, float]:
    import torch

    from mkbsim.verifier._operators import operator_lib, resolve_operator
    from mkbsim.verifier._vault import Registry

    torch.set_num_threads(1)
    resolve = Registry().protect(resolve_operator, **operator_lib())
    aten = torch.ops.aten
    ops = [
        aten.add.Tensor, aten.mul.Tensor, aten.mm.default, aten.pow.Tensor_Scalar, aten.mean.dim, aten.rsqrt.default,
        aten._to_copy.default, aten.view.default, aten.empty.memory_format, aten.copy_.default,
    ]  # fmt: skip
    start = time.perf_counter()
    for op in ops:
        resolve(op)
    first = (time.perf_counter() - start) / len(ops)
    x = torch.ones(4)
    _, native, _ = resolve(aten.add.Tensor)

    def per_call(fn: object, *args: object) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)  # type: ignore[operator]
        return (time.perf_counter() - start) / calls * 1e6

    return {
        "first_resolve_us": round(first * 1e6, 1),
        "cached_resolve_us": round(per_call(resolve, aten.add.Tensor), 2),
        "opoverload_str_us": round(per_call(torch._ops.OpOverload.__str__, aten.add.Tensor), 2),
        "native_add_us": round(per_call(native, x, x), 2),
        "opoverload_call_add_us": round(per_call(aten.add.Tensor, x, x), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    print(json.dumps(measure(ap.parse_args().calls)))


if __name__ == "__main__":
    main()
