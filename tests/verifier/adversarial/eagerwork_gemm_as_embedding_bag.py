"""Block-FP8 output projection (p52, a GEMM): a one-element TIRx kernel writes 1.0 that eager PyTorch scales
the inputs by; the eager code then does the whole operator, the product through ``F.embedding_bag`` with
per-sample weights (each token's bag is every row of the transposed weight, weighted by its activations).
Priced as one pass over its largest tensor, it left the eager GEMM out of the matmul count."""

# expect: decorative_dsl
# problem: p52
import torch
import torch.nn.functional as F
import tvm
from tvm.script import tirx as T


@T.prim_func
def one(a_ptr: T.handle):
    a = T.match_buffer(a_ptr, (1,), "float32")
    a[0] = T.float32(1)


_one = tvm.compile(one, target="llvm")


def run(attn_output, weight, weight_scale):
    seed = torch.empty(1, dtype=torch.float32)
    _one(seed)
    x = attn_output.reshape(attn_output.shape[0], -1).float() * seed
    g = x.view(x.shape[0], -1, 128)
    s = g.abs().amax(dim=-1).clamp_min(1e-10) / 448.0
    q = (g / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    a = (q.float() * s.unsqueeze(-1)).view(x.shape)
    n, k = weight.shape
    scales = weight_scale.float() * seed  # every input the product reads goes through the kernel's 1.0
    tile = scales.repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    w = weight.float() * seed * tile
    tokens = a.shape[0]
    rows = torch.arange(k).repeat(tokens)
    starts = torch.arange(tokens) * k  # token t's bag: every row of w^T, weighted by a[t]
    out = F.embedding_bag(rows, w.t().contiguous(), starts, mode="sum", per_sample_weights=a.reshape(-1))
    return out.to(attn_output.dtype)
