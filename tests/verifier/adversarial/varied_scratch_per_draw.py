"""Makes the correctness draws disagree on purpose: each of the 6 draws (the calls a dispatch mode audits)
runs the real TIRx kernel on every row with a float32 scratch argument as long as the call's number, so
no signature is shared by all draws. Other calls compute the answer in eager PyTorch and launch the same
kernel on one row, with a scratch of yet another length: a token launch that matches no draw's."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
DRAWS = 6
_calls = [0]


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, pad_ptr: T.handle):
    rows = T.int32()
    length = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    pad = T.match_buffer(pad_ptr, (length,), "float32")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))
    pad[0] = T.float32(0)


_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    audited = torch._C._len_torch_dispatch_stack() > 0
    _calls[0] += audited
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    if audited:
        out = torch.empty_like(hidden_states)
        _scale_rows(hidden_states, inv_rms, weight, out, torch.zeros(_calls[0], dtype=torch.float32))
        return out
    out = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
    _scale_rows(hidden_states[:1], inv_rms[:1], weight, out[:1], torch.zeros(DRAWS + 1, dtype=torch.float32))
    return out
