"""The whole W8A8 block-FP8 linear in eager code, kept encoded (3 * answer + 1); one TIRx kernel decodes it,
(e - 1) / 3, 60 elements per launch (with some idle arithmetic, so that the DSL's time is not negligible). The decode
rule judged each launch alone and none changed its minimum of 64 elements. The minimum applies to a tensor's changed
elements pooled over the call's launches (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p52
import torch
import tvm
from tvm.script import tirx as T

CHUNK = 60


@T.prim_func
def decode(e_ptr: T.handle, out_ptr: T.handle, start: T.int32):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (n,), "bfloat16")
    v = T.alloc_buffer((1,), "float32")
    for k in range(CHUNK):
        if start + k < n:
            v[0] = e[start + k]
            for _ in range(256):  # time in the DSL (adding nothing to the value)
                v[0] = v[0] + T.float32(1e-30)
            out[start + k] = T.Cast("bfloat16", (v[0] - T.float32(1)) / T.float32(3))


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
    encoded = _answer(attn_output, weight, weight_scale, torch.ones(shape), 3.0).reshape(-1)
    out = torch.empty(shape, dtype=attn_output.dtype)
    for start in range(0, encoded.numel(), CHUNK):
        _decode(encoded, out.reshape(-1), start)
    return out
