"""p36 (red team rt59 F1): a switch carried in a literal that is a size of a buffer, with an eager answer in a
workspace kept across calls. One builder, two modules: ``build(rows, limit)`` writes ``out[i, :]`` from the row's
RMSNorm where ``i < limit`` and from the keyed decode of a kept int32 workspace elsewhere. The draws launch
``limit = rows`` (every row computed, the workspace never read); every other call launches ``limit = 2``: 2 rows
computed, the rest decoded from the eager answer eager code wrote into the workspace. ``2`` and ``64`` are both sizes
of the kernel's parameter buffers (a (2, 4) constant table and the (64, 128) rows).

Passed 3 of 3 while a literal that differs counted as a size wherever it was a size of some buffer of each kernel:
one kernel to every rule keyed by a kernel, and the kept workspace is out of the twin draw's comparison. Now a differing
literal must be a pair the buffers' shapes make (``_tir_identity.same_kernel``): no shape differs, two kernels, and the
timed calls launch none of the draws' (`decorative_dsl`)."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TIMED_LIMIT = 2  # a size of the (2, 4) table: one kernel with the draws' module (control: 3, no size)
_mods: dict = {}
_ws: dict = {}
_TABLE = torch.ones((2, 4), dtype=torch.float32)


def build(rows: int, limit: int):
    @T.prim_func
    def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle, t_ptr: T.handle):
        x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
        w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
        out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
        ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
        tab = T.match_buffer(t_ptr, (2, 4), "float32")
        acc = T.alloc_buffer((1,), "float32")
        for i in T.serial(rows):
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS)) * tab[0, 0]
            if i < limit:
                for j in range(HIDDEN):
                    out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))
            else:
                for j in range(HIDDEN):
                    key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                    h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                    b = T.bitwise_and(T.bitwise_xor(ws[i, j], h), 65535)
                    out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", b))

    return tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    if rows not in _mods:  # both modules for this row count, on the first call that meets it (a draw)
        _mods[rows] = (build(rows, rows), build(rows, TIMED_LIMIT))
        _ws[rows] = torch.zeros((rows, HIDDEN), dtype=torch.int32)
    draw = torch._C._len_torch_dispatch_stack() > 0
    ws = _ws[rows]
    out = torch.empty_like(hidden_states)
    if draw:
        _mods[rows][0](hidden_states, weight, out, ws, _TABLE)
        return out
    x = hidden_states.float()
    ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
    idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
    ws.copy_(b ^ (((idx * 2654435761) & 0xFFFFFFFF) >> 16))
    _mods[rows][1](hidden_states, weight, out, ws, _TABLE)
    return out
