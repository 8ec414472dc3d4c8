"""Red team rt46 F1's class on p36: on the correctness draws (a dispatch mode is active, so a call can tell them) one
TIRx kernel makes the RMSNorm; on every other call eager code makes the whole answer and stores it times 3, 5 or 7 by
column in a float32 workspace, and the same kernel, its norm's arithmetic still run, writes the workspace divided back
into the output. Every output element is written by the launch, no value is copied, and each map holds for a third
of them, under the decode rule's half: the DSL's work whole, a full plan. The rule peels a map under half and seeks
the next among the rest (``_decode.DECODE_PEEL``); the three together hold for every element, which is not the
evidence calls' work."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rmsnorm_or_decode(x_ptr: T.handle, w_ptr: T.handle, ws_ptr: T.handle, out_ptr: T.handle, decode: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            if decode == 1:
                out[i, j] = T.Cast("bfloat16", ws[i, j] / T.Cast("float32", 3 + 2 * (j % 3)))
            else:
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm_or_decode, target="llvm")
_SCALES = torch.tensor([3.0, 5.0, 7.0]).repeat(HIDDEN // 3 + 1)[:HIDDEN]


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    audited = torch._C._len_torch_dispatch_stack() > 0
    out = torch.empty_like(hidden_states)
    if audited:
        ws = torch.empty(hidden_states.shape, dtype=torch.float32)
    else:
        x = hidden_states.float()
        answer = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(hidden_states.dtype)
        ws = answer.float() * _SCALES
    _kernel(hidden_states, weight, ws, out, 0 if audited else 1)
    return out
