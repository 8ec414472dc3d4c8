"""A split-K plan (p52, block-FP8 GEMM) whose partial sums eager code adds: eager PyTorch quantises the activation per
token group, a TIRx kernel makes every 128-channel group of K's scaled products into a partial of the output's shape
(fp32), and eager code sums the partials and casts the sum to bf16. No element of the output is what a launch left in
its memory, and its values are seldom among the partials' (a sum changes them): the work rule judges the bytes the
launches change alone, on the draws and the timed calls alike (the carried share is noise under
``_coverage.WORK_CARRIED_FLOOR``)."""

# problem: p52
import torch
import tvm
from tvm.script import tirx as T

GROUP = 128


@T.prim_func
def group_products(q_ptr: T.handle, s_ptr: T.handle, w_ptr: T.handle, ws_ptr: T.handle, p_ptr: T.handle):
    tokens = T.int32()
    hidden = T.int32()
    groups = T.int32()
    blocks = T.int32()
    q = T.match_buffer(q_ptr, (tokens, groups, GROUP), "float32")  # the activation's fp8 codes, as float32
    s = T.match_buffer(s_ptr, (tokens, groups), "float32")  # their scales
    w = T.match_buffer(w_ptr, (hidden, groups, GROUP), "float32")  # the weight's fp8 codes, as float32
    ws = T.match_buffer(ws_ptr, (blocks, groups), "float32")  # the weight tiles' scales
    p = T.match_buffer(p_ptr, (groups, tokens, hidden), "float32")
    for g in range(groups):
        for t in range(tokens):
            for n in range(hidden):
                acc: T.f32 = T.float32(0)
                for k in range(GROUP):
                    acc = acc + q[t, g, k] * w[n, g, k]
                p[g, t, n] = acc * s[t, g] * ws[n // GROUP, g]


_group_products = tvm.compile(group_products, target="llvm")


def run(attn_output, weight, weight_scale):
    tokens = attn_output.shape[0]
    x = attn_output.reshape(tokens, -1, GROUP).float()
    s = x.abs().amax(dim=-1).clamp_min(1e-10) / 448.0
    q = (x / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
    n, groups = weight.shape[0], q.shape[1]
    partials = torch.empty((groups, tokens, n), dtype=torch.float32)
    _group_products(q.contiguous(), s.contiguous(), weight.float().view(n, groups, GROUP).contiguous(),
                    weight_scale.float().contiguous(), partials)  # fmt: skip
    return partials.sum(0).to(attn_output.dtype)
