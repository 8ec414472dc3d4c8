"""A split-K partial plan (p52, block-FP8 GEMM): eager PyTorch quantises the activation per token group and makes
the GEMM group by group over every 128-channel group of K but the last, each group's products scaled by its
activation and weight-tile scales (the DeepGEMM accumulation); a TIRx kernel adds the last group's scaled products
to that partial sum and casts to bf16. The DSL makes 1/in_blocks of the products (1/3 at SMOKE), more than the
study's p52 plan leaves it (none of them), so no price of the eager work can reject it while that plan passes
(verifier README, "Plan kinds"): it passes, labelled partial, and fails where full plans are required."""

# problem: p52
# plan: partial
import torch
import tvm
from tvm.script import tirx as T

GROUP = 128


@T.prim_func
def last_group(
    partial_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle, w_ptr: T.handle, ws_ptr: T.handle, out_ptr: T.handle
):
    tokens = T.int32()
    hidden = T.int32()
    blocks = T.int32()
    partial = T.match_buffer(partial_ptr, (tokens, hidden), "float32")
    q = T.match_buffer(q_ptr, (tokens, GROUP), "float32")  # the activation's fp8 codes, as float32
    s = T.match_buffer(s_ptr, (tokens,), "float32")  # their scales
    w = T.match_buffer(w_ptr, (hidden, GROUP), "float32")  # the weight's fp8 codes, as float32
    ws = T.match_buffer(ws_ptr, (blocks,), "float32")  # the weight tiles' scales
    out = T.match_buffer(out_ptr, (tokens, hidden), "bfloat16")
    for t in range(tokens):
        for n in range(hidden):
            acc: T.f32 = T.float32(0)
            for k in range(GROUP):
                acc = acc + q[t, k] * w[n, k]
            out[t, n] = T.Cast("bfloat16", partial[t, n] + acc * s[t] * ws[n // GROUP])


_last_group = tvm.compile(last_group, target="llvm")


def run(attn_output, weight, weight_scale):
    tokens = attn_output.shape[0]
    x = attn_output.reshape(tokens, -1, GROUP).float()
    s = x.abs().amax(dim=-1).clamp_min(1e-10) / 448.0
    q = (x / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
    n, groups = weight.shape[0], q.shape[1]
    w = weight.float().view(n, groups, GROUP)
    tile = weight_scale.repeat_interleave(GROUP, dim=0)[:n]  # [n, groups]: each output channel's tile scales
    partial = torch.zeros(tokens, n)
    for g in range(groups - 1):  # eager: every K group but the last
        partial += (q[:, g] @ w[:, g].t()) * s[:, g, None] * tile[None, :, g]
    out = torch.empty((tokens, n), dtype=attn_output.dtype)
    last = groups - 1
    _last_group(partial, q[:, last].contiguous(), s[:, last].contiguous(), w[:, last].contiguous(),
                weight_scale[:, last].contiguous(), out)  # fmt: skip
    return out
