"""Block-FP8 output projection (p52, a GEMM): a one-element TIRx kernel writes 1.0; eager PyTorch scales the
activation by it and then does the whole operator (per-group activation quantisation, weight dequantisation,
the GEMM). The DSL does none of the operator's work: the eager code did all of it, products included."""

# expect: decorative_dsl
# problem: p52
import torch
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
    tile = weight_scale.repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
    return (a @ (weight.float() * tile).t()).to(attn_output.dtype)
