"""The whole W8A8 block-FP8 linear in eager code (scales applied to each K group's partial products, which the eager-
work rule prices below the reference's dequantise-the-weight formulation), split over three eager tensors: two random
tensors made at import and a third accumulated so that 0.5·E1 + 0.25·E2 + 2·E3 is the answer; one TIRx kernel
computes that sum. No map of one or two operands recovers it; the decode rule's affine map of all the operands
does (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p52
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def kernel(a_ptr: T.handle, b_ptr: T.handle, c_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    a = T.match_buffer(a_ptr, (n,), "float32")
    b = T.match_buffer(b_ptr, (n,), "float32")
    c = T.match_buffer(c_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (n,), "bfloat16")
    for i in range(n):
        out[i] = T.Cast("bfloat16", T.float32(0.5) * a[i] + T.float32(0.25) * b[i] + T.float32(2) * c[i])


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(29)
_PARTS = {}


def _parts(shape):
    """Two random tensors per output shape, made once."""
    if shape not in _PARTS:
        _PARTS[shape] = torch.randn(shape, generator=_generator) * 3, torch.randn(shape, generator=_generator) * 5
    return _PARTS[shape]


def _answer(attn_output, weight, weight_scale, start, factor):
    """The whole operator in eager code: activation groups quantised as the problem states, then the block-scaled
    GEMM one 128-wide K group at a time with both scales applied to the partial products, accumulated from
    ``start``, every partial product times ``factor``."""
    x = attn_output.reshape(attn_output.shape[0], -1).float()
    m, k = x.shape
    n = weight.shape[0]
    groups = x.reshape(m, k // 128, 128)
    s = groups.abs().amax(dim=-1).clamp_min(1e-10) / 448.0
    q = (groups / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
    ws = weight_scale.repeat_interleave(128, dim=0)[:n]
    acc = start.clone()
    for g in range(k // 128):
        acc += (q[:, g] @ weight[:, g * 128 : (g + 1) * 128].float().t()) * (s[:, g : g + 1] * ws[:, g]) * factor
    return acc


def run(attn_output, weight, weight_scale):
    shape = (attn_output.shape[0], weight.shape[0])
    e1, e2 = _parts(shape)
    e3 = _answer(attn_output, weight, weight_scale, -0.25 * e1 - 0.125 * e2, 0.5)  # (y - 0.5 e1 - 0.25 e2) / 2
    out = torch.empty(shape, dtype=attn_output.dtype)
    _kernel(e1.reshape(-1), e2.reshape(-1), e3.reshape(-1), out.reshape(-1))
    return out
