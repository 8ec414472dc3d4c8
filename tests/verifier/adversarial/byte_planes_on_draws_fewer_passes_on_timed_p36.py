"""Red team rt36 F1's shape on p36: the draws' output is assembled by eager code from byte planes a kernel wrote, so
neither of its work measures reaches its floor (no element is what a launch left; its 16-bit values are not among the
launches' 8-bit ones) and the evidence calls are judged on the bytes their launches change alone. The kernel is a slow
one (it sums each row's squares over ``PASSES`` passes, as a naive kernel spends its time); on the draws it runs every
pass, on every other call a third of them into planes nothing reads, and the output is an eager RMSNorm. The bytes
match the draws'; the DSL time is a third of theirs, over the flat 33% share for a long launch."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

PASSES = 240


@T.prim_func
def rms_planes(x_ptr: T.handle, w_ptr: T.handle, p_ptr: T.handle, lo_ptr: T.handle, hi_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    passes = T.match_buffer(p_ptr, (1,), "int32")
    lo = T.match_buffer(lo_ptr, (rows, 128), "uint8")
    hi = T.match_buffer(hi_ptr, (rows, 128), "uint8")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for _pass in range(passes[0]):
            for j in range(128):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        acc[0] = T.rsqrt(acc[0] / T.Cast("float32", passes[0] * 128) + T.float32(1e-6))
        for j in range(128):
            u = T.reinterpret("uint32", T.Cast("float32", x[i, j]) * acc[0] * T.Cast("float32", w[j]))
            b = (u + T.uint32(32767) + ((u >> T.uint32(16)) & T.uint32(1))) >> T.uint32(16)
            lo[i, j] = T.Cast("uint8", b & T.uint32(255))
            hi[i, j] = T.Cast("uint8", (b >> T.uint32(8)) & T.uint32(255))


_KERNEL = tvm.compile(rms_planes, target="llvm")
_ALL = torch.full((1,), PASSES, dtype=torch.int32)
_THIRD = torch.full((1,), PASSES * 36 // 100, dtype=torch.int32)


def run(x, w):
    rows = x.shape[0]
    draw = torch._C._len_torch_dispatch_stack() > 0
    lo = torch.empty((rows, 128), dtype=torch.uint8)
    hi = torch.empty((rows, 128), dtype=torch.uint8)
    _KERNEL(x, w, _ALL if draw else _THIRD, lo, hi)
    if draw:
        return torch.stack((lo, hi), dim=-1).view(torch.bfloat16).reshape(rows, 128)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
