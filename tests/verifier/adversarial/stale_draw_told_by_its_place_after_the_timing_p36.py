"""p36 (red team rt56 F1): `timed_answer_in_a_workspace_the_draws_leave_fresh_p36` (the timed calls' whole answer
eager, keyed by position into a fresh workspace with a marker; the kernel decodes where the marker is) that tells the
stale draw by its place, the draw right after the draw that follows the timed calls, and writes its workspace there
alone (zeros), so that the stale draw has nothing to give; on the twin draw the workspace is left fresh.

Passed at 0% (2 runs of 2) while the twin draw left fresh memory out of its comparison and always came first. On the
cpu the twin draw compares the workspace as the timed call's fill held it (``_allocator``), and the two draws come in
an order drawn per verification: the stale draw first gives the fresh workspace the timed call's bytes."""
# expect: decorative_dsl
# or: wrong_output, the stale draw run first: its workspace left fresh, given the timed call's
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
MARK = 0x5A5A
_hist = []  # 't' timed (no dispatch mode), 'd' draw


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        if T.shift_right(ws[i, 0], 16) == MARK:
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                b = T.bitwise_and(T.bitwise_xor(ws[i, j], h), 65535)
                out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", b))
        else:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_rmsnorm_rows = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    ws = torch.empty(hidden_states.shape, dtype=torch.int32)
    if torch._C._len_torch_dispatch_stack() == 0:
        _hist.append("t")
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws.copy_(((b ^ h) & 0xFFFF) | (MARK << 16))
    else:
        if _hist[-2:] == ["t", "d"]:  # the second draw after the timed calls: the stale draw
            ws.zero_()
        _hist.append("d")
    _rmsnorm_rows(hidden_states, weight, out, ws)
    return out
