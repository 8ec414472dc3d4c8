"""How much of a thread's CPU a DSL build for a new shape takes outside ``tirx.build`` (DESIGN §5, work in other
threads): the TVMScript parse of the kernel of ``tests/verifier/honest/idle_compile_pool.py`` (an RMSNorm over
``rows`` x 128), then ``tvm.compile``, each on the calling thread's CPU clock, for a few row counts. The verifier
marks only ``tirx.build`` as a build; a rule on the CPU a submission's thread takes during a correctness draw would
have to tell this parse from a plain-Python answer (p36 at SMOKE: about 10 ms).

    python benchmarks/thread_build_cpu.py [--rows 64 65 66]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def _build(rows: int) -> dict[str, float]:
    import tvm
    from tvm import tirx
    from tvm.script import tirx as T

    original = tirx.build
    in_build = [0]

    def timed_build(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time_ns()
        try:
            return original(*args, **kwargs)
        finally:
            in_build[0] += time.thread_time_ns() - start

    tirx.build = timed_build
    try:
        start = time.thread_time_ns()

        @T.prim_func
        def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
            x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
            w = T.match_buffer(w_ptr, (128,), "bfloat16")
            out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
            acc = T.alloc_buffer((1,), "float32")
            for i in range(rows):
                acc[0] = T.float32(0)
                for j in range(128):
                    acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
                scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
                for j in range(128):
                    out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))

        parsed = time.thread_time_ns()
        tvm.compile(rmsnorm, target="llvm")
        compiled = time.thread_time_ns()
    finally:
        tirx.build = original
    return {
        "rows": rows,
        "parse_ms": (parsed - start) / 1e6,
        "compile_ms": (compiled - parsed) / 1e6,
        "tirx_build_ms": in_build[0] / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[64, 65, 66])
    args = parser.parse_args()
    print(json.dumps([_build(rows) for rows in args.rows], indent=1))


if __name__ == "__main__":
    main()
