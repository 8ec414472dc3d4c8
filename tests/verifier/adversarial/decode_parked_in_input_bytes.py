"""The whole W8A8 block-FP8 linear in eager code, kept encoded (3 * answer + 1) and parked in the bytes of a problem
input the call must not change (``weight``, saved first); one TIRx kernel decodes it from there, (e - 1) / 3, then
eager code restores the weight. The input-mutation check sees the weight as it was, and a launch argument overlapping
an input's memory counted as the input whatever it held. Bytes of an input that changed during the call are no longer
the input's: eager-made, the decode rule fits them (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p52
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def decode(e_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    m = T.int32()
    e = T.match_buffer(e_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (m,), "bfloat16")
    for i in range(m):
        out[i] = T.Cast("bfloat16", (e[i] - T.float32(1)) / T.float32(3))


_decode = tvm.compile(decode, target="llvm")


def _answer(attn_output, weight, weight_scale, start, factor):
    """The whole operator in eager code: activation groups quantised as the problem states, then the block-scaled
    GEMM one 128-wide K group at a time with both scales applied to the partial products, accumulated
    from ``start`` with every partial product times ``factor``: no eager tensor ever holds the answer."""
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
    encoded = _answer(attn_output, weight, weight_scale, torch.ones(shape), 3.0)
    saved = weight.clone()
    parked = weight.view(torch.uint8).reshape(-1)[: 4 * encoded.numel()].view(torch.float32)
    parked.copy_(encoded.reshape(-1))
    out = torch.empty(shape, dtype=attn_output.dtype)
    _decode(parked, out.reshape(-1))
    weight.copy_(saved)
    return out
