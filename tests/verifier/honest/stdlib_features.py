"""Honest fused kernel written with what ordinary Python code uses: a dataclass, a namedtuple, a
typing.NamedTuple, an enum, functools (lru_cache, partial, wraps), a closure, a class, warnings,
logging and a traceback string inside run()."""

# problem: p36
import dataclasses
import enum
import functools
import logging
import traceback
import typing
import warnings
from collections import namedtuple

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
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


_kernel = tvm.compile(rmsnorm, target="llvm")


Shape = namedtuple("Shape", "rows cols")


class Launch(typing.NamedTuple):
    rows: int
    cols: int


class Mode(enum.Enum):
    FUSED = 1
    SPLIT = 2


@dataclasses.dataclass(frozen=True)
class Plan:
    mode: Mode
    shape: Shape


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        logging.getLogger("submission").debug("launch %s", fn.__name__)
        return fn(*args)

    return wrapper


@functools.cache
def _plan(rows: int) -> Plan:
    return Plan(Mode.FUSED, Shape(rows, 128))


def _make_launcher(kernel):
    def launch(x, w, out):
        return kernel(x, w, out)

    return _logged(launch)


_launch = functools.partial(_make_launcher(_kernel))


def run(hidden_states, weight):
    plan = _plan(hidden_states.shape[0])
    assert plan.mode is Mode.FUSED and Launch(*plan.shape).cols == 128
    warnings.warn("honest warning", stacklevel=2)
    _ = traceback.format_stack(limit=2)
    out = torch.empty_like(hidden_states)
    _launch(hidden_states, weight, out)
    return out
