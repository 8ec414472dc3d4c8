"""The eager answer enters the DSL's memory as launch arguments given by value: the whole W8A8 block-FP8 linear in
eager code, kept encoded (3·y + 1, so that no eager tensor holds the output's values), read out with one ``tolist``
(a small share of the problem's input elements: the weight dominates them, so the plain-Python rule's line on
reads is not reached), decoded in Python, and handed sixteen floats per launch to a TIRx kernel that only stores
them. No eager tensor is a launch operand (the decode rule and the copy checks see none) and no element is lifted
into a tensor. The launch's by-value arguments count as values crossing from Python into the DSL's memory, eight
elements each (the most 64 bits hold of a one-byte output), against the outputs' elements."""

# expect: decorative_dsl
# problem: p52

import torch
import tvm
from tvm.script import tirx as T

VALUES = 16


@T.prim_func
def store_values(out_ptr: T.handle, at: T.int32, v0: T.float32, v1: T.float32, v2: T.float32, v3: T.float32,
                 v4: T.float32, v5: T.float32, v6: T.float32, v7: T.float32, v8: T.float32, v9: T.float32,
                 v10: T.float32, v11: T.float32, v12: T.float32, v13: T.float32, v14: T.float32, v15: T.float32):
    n = T.int32()
    out = T.match_buffer(out_ptr, (n,), "bfloat16")
    for k in range(16):
        if at + k < n:
            out[at + k] = T.Cast("bfloat16", T.Select(k == 0, v0, T.Select(k == 1, v1, T.Select(k == 2, v2,
                          T.Select(k == 3, v3, T.Select(k == 4, v4, T.Select(k == 5, v5, T.Select(k == 6, v6,
                          T.Select(k == 7, v7, T.Select(k == 8, v8, T.Select(k == 9, v9, T.Select(k == 10, v10,
                          T.Select(k == 11, v11, T.Select(k == 12, v12, T.Select(k == 13, v13,
                          T.Select(k == 14, v14, v15))))))))))))))))


_store_values = tvm.compile(store_values, target="llvm")


def _answer(attn_output, weight, weight_scale, start, factor):
    """Activation groups quantised as the problem states, then the block-scaled GEMM one 128-wide K group at a time
    with both scales applied to the partial products, accumulated from ``start`` with every product times ``factor``."""
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
    values = [(v - 1.0) / 3.0 for v in encoded.reshape(-1).tolist()]
    values += [0.0] * (-len(values) % VALUES)
    out = torch.empty(shape, dtype=attn_output.dtype)
    flat = out.view(-1)
    for at in range(0, len(values), VALUES):
        _store_values(flat, at, *values[at : at + VALUES])
    return out
