"""Red team rt18 F4 (h3's state without its ``memcpy``): a kernel's answer comes from its own allocation, which
something outside the launch filled. h3 had numpy write the answer into the block TVM's workspace pool hands back
every call; here a first kernel (``plant``) computes RMSNorm into its own global ``T.alloc_buffer`` and a second
(``answer``), given only the output, allocates the same size and copies it out: the pool hands it the same block,
every access in bounds, no pointer (passes on main, speedup 1.5). A CPU TIRx kernel's allocations are filled with
the erase sentinel where they are made (``_tir_memory.filled``): ``answer`` reads NaN with every byte 0xFF, which
TVM's float32 -> bfloat16 rounding wraps to 0."""

# expect: wrong_output
# problem: p36
# static-scan: off
import torch
import tvm
from tvm.script import tirx as T

H = 128


@T.prim_func
def plant(x_ptr: T.handle, w_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, H), "bfloat16")
    w = T.match_buffer(w_ptr, (H,), "bfloat16")
    block = T.alloc_buffer((rows, H), "float32")
    total = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        total[0] = T.float32(0)
        for j in range(H):
            total[0] = total[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(total[0] / T.float32(H) + T.float32(1e-6))
        for j in range(H):
            block[i, j] = T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j])


@T.prim_func
def answer(out_ptr: T.handle):
    rows = T.int32()
    out = T.match_buffer(out_ptr, (rows, H), "bfloat16")
    block = T.alloc_buffer((rows, H), "float32")
    for i, j in T.grid(rows, H):
        out[i, j] = T.Cast("bfloat16", block[i, j])


_plant = tvm.compile(plant, target="llvm")
_answer = tvm.compile(answer, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _plant(hidden_states, weight)
    _answer(out)
    return out
