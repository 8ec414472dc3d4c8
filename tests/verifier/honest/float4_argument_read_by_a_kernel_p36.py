"""Honest one-launch RMSNorm whose kernel also takes a read-only ``float4_e2m1fn_x2`` tensor (the weight's bytes
viewed so; on p59-p61 an NVFP4 kernel typing its packed e2m1 weights as torch's float4, which TVM's DLPack import
accepts). Torch has no conversion nor copy for float4: the vault raised on every counted launch given one (red team
rt69 FP0, ``exception`` on 9cbd9a0: a NaN check since withdrawn, the copy search's sources, the decode rule's
operands); it reads such a tensor by its bits now (``packed_floats``)."""
# problem: p36
# thorough: ~40 s on two cores under load (a draw of a launch with three tensor arguments, float4 among them)
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
FLOAT4 = True


@T.prim_func
def norm(x_ptr: T.handle, w_ptr: T.handle, p_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    p = T.match_buffer(p_ptr, (2 * HIDDEN,), "float4_e2m1fnx2" if FLOAT4 else "uint8")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ms = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        ms[0] = T.float32(0)
        for j in range(HIDDEN):
            ms[0] = ms[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        for j in range(HIDDEN):
            out[i, j] = T.Cast(
                "bfloat16",
                T.Cast("float32", x[i, j]) * T.rsqrt(ms[0] / T.float32(HIDDEN) + T.float32(EPS))
                * T.Cast("float32", w[j]),
            )


_norm = tvm.compile(norm, target="llvm")


def run(hidden_states, weight):
    packed = weight.view(torch.uint8)
    if FLOAT4:
        packed = packed.view(torch.float4_e2m1fn_x2)
    out = torch.empty_like(hidden_states)
    _norm(hidden_states, weight, packed, out)
    return out
