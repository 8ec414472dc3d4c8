"""The whole W8A8 block-FP8 linear in eager code (scales applied to each K group's partial products, which the eager-
work rule prices below the reference's dequantise-the-weight formulation), accumulated from a random offset R (so no
eager tensor holds the answer); its float32 bits XORed with a random key made at import; one TIRx kernel XORs the key
back, takes R off and narrows to bfloat16. No map of the operands' values follows a wide-code bijection; the decode
rule's bit maps (two operands' bits combined, decoded as the kernel reads them, then an affine map with R) do
(verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p52
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def kernel(e_ptr: T.handle, key_ptr: T.handle, r_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "int32")
    key = T.match_buffer(key_ptr, (n,), "int32")
    r = T.match_buffer(r_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (n,), "bfloat16")
    for i in range(n):
        out[i] = T.Cast("bfloat16", T.reinterpret("float32", T.bitwise_xor(e[i], key[i])) - r[i])


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(17)
_KEYS = {}


def _keys(shape):
    """A random bit key and a random offset per output shape, made once."""
    if shape not in _KEYS:
        key = torch.randint(-(2**31), 2**31 - 1, shape, generator=_generator, dtype=torch.int32)
        _KEYS[shape] = key, torch.randn(shape, generator=_generator) * 4.0
    return _KEYS[shape]


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
    key, offset = _keys(shape)
    encoded = _answer(attn_output, weight, weight_scale, offset).view(torch.int32) ^ key
    out = torch.empty(shape, dtype=attn_output.dtype)
    _kernel(encoded.reshape(-1), key.reshape(-1), offset.reshape(-1), out.reshape(-1))
    return out
