"""Honest (red team rt58): the stats live in one workspace [2, B*G] kept across calls (by shape), handed to both
kernels as two row views (mean row, rstd row) of the same storage. GroupNorm in two TIRx kernels, the way a CUDA
engineer splits it: kernel 1 reduces each (batch, group) slab of the input (viewed as [B*G, Cg*H*W]) into mean and
rstd (8 interleaved partial sums, two passes) in a float32 workspace [B*G, 2]; kernel 2 normalises every element and
applies the per-channel affine."""
# problem: p31
import torch
import tvm
from tvm.script import tirx as T

GROUPS = 32
EPS = 1e-5
LANES = 8


@T.prim_func
def group_stats(x_ptr: T.handle, m_ptr: T.handle, r_ptr: T.handle):
    slabs = T.int32()
    n = T.int32()
    x = T.match_buffer(x_ptr, (slabs, n), "float32")
    mu = T.match_buffer(m_ptr, (slabs,), "float32")
    rs = T.match_buffer(r_ptr, (slabs,), "float32")
    part = T.alloc_buffer((LANES,), "float32")
    mean = T.alloc_buffer((1,), "float32")
    for s in T.serial(slabs):
        for lane in range(LANES):
            part[lane] = T.float32(0)
        for j in range(n):
            part[j % LANES] = part[j % LANES] + x[s, j]
        mean[0] = T.float32(0)
        for lane in range(LANES):
            mean[0] = mean[0] + part[lane]
        mean[0] = mean[0] / T.Cast("float32", n)
        for lane in range(LANES):
            part[lane] = T.float32(0)
        for j in range(n):
            part[j % LANES] = part[j % LANES] + (x[s, j] - mean[0]) * (x[s, j] - mean[0])
        mu[s] = mean[0]
        rs[s] = T.float32(0)
        for lane in range(LANES):
            rs[s] = rs[s] + part[lane]
        rs[s] = T.rsqrt(rs[s] / T.Cast("float32", n) + T.float32(EPS))


@T.prim_func
def group_apply(x_ptr: T.handle, m_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, y_ptr: T.handle):
    b = T.int32()
    c = T.int32()
    hw = T.int32()
    x = T.match_buffer(x_ptr, (b, c, hw), "float32")
    mu = T.match_buffer(m_ptr, (b * GROUPS,), "float32")
    rs = T.match_buffer(r_ptr, (b * GROUPS,), "float32")
    w = T.match_buffer(w_ptr, (c,), "float32")
    bb = T.match_buffer(b_ptr, (c,), "float32")
    y = T.match_buffer(y_ptr, (b, c, hw), "float32")
    for i, ch, k in T.grid(b, c, hw):
        g = i * GROUPS + ch // (c // GROUPS)
        y[i, ch, k] = (x[i, ch, k] - mu[g]) * rs[g] * w[ch] + bb[ch]


_stats = tvm.compile(group_stats, target="llvm")
_apply = tvm.compile(group_apply, target="llvm")
_ws: dict[int, torch.Tensor] = {}


def run(hidden_states, weight, bias):
    bsz, ch, h, w = hidden_states.shape
    slabs = hidden_states.view(bsz * GROUPS, -1)
    stats = _ws.get(bsz)
    if stats is None:
        stats = _ws[bsz] = torch.empty(2, bsz * GROUPS, dtype=torch.float32)
    _stats(slabs, stats[0], stats[1])
    out = torch.empty_like(hidden_states)
    _apply(hidden_states.view(bsz, ch, h * w), stats[0], stats[1], weight, bias, out.view(bsz, ch, h * w))
    return out
