"""Red team rt48 F4's class on p36, under the work rule's margin: the kernel makes every row on the correctness draws
(a dispatch mode is active, so a call can tell them) and seven eighths of them on every other call, where eager code
stores the last eighth of the answer as its exponential (float32) in a workspace the kernel takes the logarithm of.
The switch is a float32 tensor of 2 KiB made from an input (``x * 0 + rows_done``), which the fixed-arguments rule
does not judge. On the evidence calls the decode rule's maps under half hold an eighth of the launch's changed
elements, on the draws none (``_decode.DECODE_CONTRAST``): that eighth is not the launch's work, within
``_coverage.FLOAT_SHARE_MARGIN`` of the draws' share, and the plan prices it (``_plankind.with_timed_shortfall``): a
partial plan at about 12%, not a full one at 0% (red team rt48's h03 passed full at PRODUCTION)."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
SWITCH = 512  # float32 elements: 2 KiB


@T.prim_func
def rows_or_logs(x_ptr: T.handle, w_ptr: T.handle, exps_ptr: T.handle, sw_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    exps = T.match_buffer(exps_ptr, (rows, HIDDEN), "float32")
    sw = T.match_buffer(sw_ptr, (SWITCH,), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        if T.Cast("float32", i) < sw[0]:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))
        else:
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.log(exps[i, j]))


_kernel = tvm.compile(rows_or_logs, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    done = rows if torch._C._len_torch_dispatch_stack() > 0 else rows - rows // 8
    exps = torch.empty(hidden_states.shape, dtype=torch.float32)
    if done < rows:
        rest = hidden_states[done:].float()
        answer = (rest * torch.rsqrt(rest.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).bfloat16().float()
        exps[done:] = answer.exp()
    switch = hidden_states.flatten()[-SWITCH:].float() * 0.0 + float(done)
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, exps, switch, out)
    return out
