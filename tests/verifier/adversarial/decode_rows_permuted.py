"""The whole W8A8 block-FP8 linear in eager code (scales applied to each K group's partial products, which the eager-
work rule prices below the reference's dequantise-the-weight formulation), its rows computed in an order fixed at
import (the activation's rows permuted before the GEMM) and accumulated times -2, so no eager tensor holds the
answer or any row of it in place; one TIRx kernel gathers each row back and halves it. No map lines an operand's
elements up with the output's; the decode rule finds each element's run of neighbours in the operand by its pattern
of rises and falls (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p52
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def kernel(e_ptr: T.handle, back_ptr: T.handle, out_ptr: T.handle):
    m = T.int32()
    n = T.int32()
    e = T.match_buffer(e_ptr, (m, n), "float32")
    back = T.match_buffer(back_ptr, (m,), "int32")
    out = T.match_buffer(out_ptr, (m, n), "bfloat16")
    for i, j in T.grid(m, n):
        out[i, j] = T.Cast("bfloat16", e[back[i], j] * T.float32(-0.5))


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(23)
_ORDERS = {}


def _order(m):
    """A row order per row count, made once, and its inverse."""
    if m not in _ORDERS:
        order = torch.randperm(m, generator=_generator)
        _ORDERS[m] = order, torch.argsort(order).to(torch.int32)
    return _ORDERS[m]


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
    m, n = attn_output.shape[0], weight.shape[0]
    order, back = _order(m)
    moved = _answer(attn_output[order], weight, weight_scale, torch.zeros(m, n), -2.0)  # row r is row order[r]
    out = torch.empty((m, n), dtype=attn_output.dtype)
    _kernel(moved, back, out)
    return out
