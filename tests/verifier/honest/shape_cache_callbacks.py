"""Honest fused kernel whose plumbing hands callables to builtins and libraries: kernels built on first use and
kept in a dict keyed by shape (the build runs TVM's compiler under the submission's call), a
``functools.lru_cache``, ``sorted``/``map``/``functools.reduce``/``operator.methodcaller`` over shapes, torch's
pytree ``tree_map`` over a dataclass config, all inside run(): the callables handed over are its own."""

# problem: p36
import dataclasses
import functools
import operator

import torch
import torch.utils._pytree as pytree
import tvm
from tvm.script import tirx as T


def _rmsnorm(cols: int):
    @T.prim_func
    def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
        rows = T.int32()
        x = T.match_buffer(x_ptr, (rows, cols), "bfloat16")
        w = T.match_buffer(w_ptr, (cols,), "bfloat16")
        out = T.match_buffer(out_ptr, (rows, cols), "bfloat16")
        acc = T.alloc_buffer((1,), "float32")
        for i in range(rows):
            acc[0] = T.float32(0)
            for j in range(cols):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(cols) + T.float32(1e-6))
            for j in range(cols):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))

    return rmsnorm


@dataclasses.dataclass(frozen=True)
class Config:
    cols: int
    target: str = "llvm"


_KERNELS: dict[tuple[int, str], object] = {}


def _kernel(config: Config):
    key = (config.cols, config.target)
    if key not in _KERNELS:  # built on the first call of each shape, inside run()
        _KERNELS[key] = tvm.compile(_rmsnorm(config.cols), target=config.target)
    return _KERNELS[key]


@functools.lru_cache(maxsize=8)
def _config(cols: int) -> Config:
    return Config(cols=cols)


def run(hidden_states, weight):
    shapes = sorted([hidden_states.shape, weight.shape], key=len, reverse=True)
    cols = functools.reduce(operator.mul, map(int, shapes[1]), 1)
    assert operator.methodcaller("dim")(hidden_states) == len(shapes[0])
    config = pytree.tree_map(lambda leaf: leaf, _config(cols))
    out = torch.empty_like(hidden_states)
    _kernel(config)(hidden_states, weight, out)
    return out
