"""Paged GQA decode (p01): a one-element TIRx kernel writes 1.0 that eager PyTorch scales the queries by; the
eager code then attends each sequence over its own pages only. The reference pads every sequence to the
longest and computes on the padding, about twice the products the problem needs, so this complete eager answer
read as half the reference's work; the reference's padding is taken out of its price."""

# expect: decorative_dsl
# problem: p01
import math

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def one(a_ptr: T.handle):
    a = T.match_buffer(a_ptr, (1,), "float32")
    a[0] = T.float32(1)


_one = tvm.compile(one, target="llvm")


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    seed = torch.empty(1, dtype=torch.float32)
    _one(seed)
    batch, hq, d = q.shape
    hkv = k_cache.shape[2]
    qf = (q.float() * seed).view(batch, hkv, hq // hkv, d)
    out = torch.empty(batch, hq, d, dtype=q.dtype)
    lse = torch.empty(batch, hq, dtype=torch.float32)
    bounds = kv_indptr.tolist()
    for b in range(batch):
        pages = kv_indices[bounds[b] : bounds[b + 1]].long()
        k = k_cache[pages, 0].float()  # [L, Hkv, D]
        v = v_cache[pages, 0].float()
        logits = torch.einsum("hgd,lhd->hgl", qf[b], k) * sm_scale
        lse[b] = (torch.logsumexp(logits, dim=-1) / math.log(2.0)).reshape(hq)
        out[b] = torch.einsum("hgl,lhd->hgd", torch.softmax(logits, dim=-1), v).reshape(hq, d).to(q.dtype)
    return out, lse
