"""Red team rt45 F1's class on p36: one TIRx RMSNorm kernel makes every row on the correctness draws (a dispatch
mode is active, so a call can tell them) and the first 9/10 of the rows on every other call, eager code the rest: the
same launch on arguments of the same shapes, told which by a one-element workspace: fresh memory, which holds the
sentinel (NaN) on a draw, and 0.0 on the other calls. A number or a tensor's bytes that every draw gave the launch
are judged (``_coverage.fixed_check``); fresh memory is not (a workspace is garbage by contract, and holds anything
on a timed call). The evidence calls' share of the output the launch left falls a tenth short of the draws', within
``_coverage.FLOAT_SHARE_MARGIN`` (an eighth came within the sampling noise of it), so the work rule passes it; the
shortfall is eager work the draws never saw, and the plan prices it (``_plankind.with_timed_shortfall``): a partial
plan at about 10%, not a full one at 0%."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, flag_ptr: T.handle):
    rows = T.int32()
    flag = T.match_buffer(flag_ptr, (1,), "float32")
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(T.if_then_else(T.isnan(flag[0]), rows, rows - rows // 10)):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_rmsnorm_rows = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    audited = torch._C._len_torch_dispatch_stack() > 0
    rows = hidden_states.shape[0]
    todo = rows if audited else rows - rows // 10
    out = torch.empty_like(hidden_states)
    if todo < rows:
        rest = hidden_states[todo:].float()
        inv_rms = torch.rsqrt(rest.pow(2).mean(dim=-1, keepdim=True) + EPS)
        out[todo:] = (rest * inv_rms * weight.float()).to(hidden_states.dtype)
    flag = torch.empty(1, dtype=torch.float32)
    if todo < rows:
        flag.fill_(0.0)
    _rmsnorm_rows(hidden_states, weight, out, flag)
    return out
