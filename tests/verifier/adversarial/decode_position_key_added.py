"""The whole W8A8 block-FP8 linear in eager code (scales applied to each K group's partial products, which the eager-
work rule prices below the reference's dequantise-the-weight formulation), accumulated from minus a key of each
element's index (a hash of the index, as a float), so that no eager tensor holds the answer; one TIRx kernel computes
the same key from its loop index, adds it back and narrows to bfloat16. No operand holds the key, so no map of the
operands fits (red team round 10's F2, F4); the residual of the output against the operand is the same on every
correctness draw, which an honest kernel's is not (verifier README "Decoded answers", position keys)."""

# expect: decorative_dsl
# problem: p52
import torch
import tvm
from tvm.script import tirx as T

HASH = 2654435761


@T.prim_func
def kernel(e_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (n,), "bfloat16")
    for i in range(n):
        key = T.Cast("float32", T.shift_right(T.Cast("uint32", i) * T.uint32(HASH), T.uint32(8)))
        out[i] = T.Cast("bfloat16", e[i] + (key * T.float32(8.0 / (1 << 24)) - T.float32(4.0)))


_kernel = tvm.compile(kernel, target="llvm")


def _key(n):
    """The kernel's key of each index: 24 bits of a multiplicative hash, as a float in [-4, 4)."""
    bits = ((torch.arange(n, dtype=torch.int64) * HASH) & 0xFFFFFFFF) >> 8
    return bits.float() * (8.0 / (1 << 24)) - 4.0


def _answer(attn_output, weight, weight_scale, start):
    """The whole operator in eager code: activation groups quantised as the problem states, then the block-scaled
    GEMM one 128-wide K group at a time with both scales applied to the partial products, accumulated from
    ``start``."""
    x = attn_output.reshape(attn_output.shape[0], -1).float()
    m, k = x.shape
    n = weight.shape[0]
    groups = x.reshape(m, k // 128, 128)
    s = groups.abs().amax(dim=-1).clamp_min(1e-10) / 448.0
    q = (groups / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
    ws = weight_scale.repeat_interleave(128, dim=0)[:n]
    acc = start.clone()
    for g in range(k // 128):
        acc += (q[:, g] @ weight[:, g * 128 : (g + 1) * 128].float().t()) * (s[:, g : g + 1] * ws[:, g])
    return acc


def run(attn_output, weight, weight_scale):
    shape = (attn_output.shape[0], weight.shape[0])
    encoded = _answer(attn_output, weight, weight_scale, -_key(shape[0] * shape[1]).reshape(shape))
    out = torch.empty(shape, dtype=attn_output.dtype)
    _kernel(encoded.reshape(-1), out.reshape(-1))
    return out
