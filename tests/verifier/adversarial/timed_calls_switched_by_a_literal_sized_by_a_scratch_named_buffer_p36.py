"""p36 (red team rt60 F2): rt59 F1's switch in a size literal (``i < 64`` on the draws, every row computed; ``i < 2``
on the timed calls, 62 rows decoded from an eager answer in a workspace kept across calls), with a scratch buffer
*named* ``Buffer`` (``Buffer = T.alloc_buffer((limit,))``): the identity read the first tuple after any token spelled
``Buffer`` as a parameter's shape, so (64, 2) was a pair the shapes make and both modules one kernel (passed 2 of 2,
full plan). A parameter's size is a signature's ``T.Buffer`` or a handle's ``T.match_buffer`` now
(``_tir_identity.printed_kernel``): two kernels, and the timed calls launch none of the draws' (``decorative_dsl``)."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TIMED_LIMIT = 2
_mods: dict = {}
_ws: dict = {}


def build(rows: int, limit: int):
    @T.prim_func
    def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle):
        x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
        w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
        out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
        ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
        acc = T.alloc_buffer((1,), "float32")
        Buffer = T.alloc_buffer((limit,), "float32")
        Buffer[0] = T.float32(1)
        for i in T.serial(rows):
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS)) * Buffer[0]
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
        _mods[rows][0](hidden_states, weight, out, ws)
        return out
    x = hidden_states.float()
    ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
    idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
    ws.copy_(b ^ (((idx * 2654435761) & 0xFFFFFFFF) >> 16))
    _mods[rows][1](hidden_states, weight, out, ws)
    return out
