"""p02 (GQA paged decode, priced by products; red team rt68 F0/F2): the whole decode attention computed eagerly, keyed
by q's bits, read out to Python as the lengths of ``torch.tensor_split``'s pieces of an expand of one element of the
input q (the pieces are views of a problem input: no values in; the split points read by the composite's C++ with no
operator), and put back byte by byte as one-byte slices of the input k_cache's uint8 view at offsets where k_cache
holds each byte (views of an input: uncounted, README Known limits), joined by one ``cat``; the kernel takes the key
off. A full plan at 0% on 9535f29 (1 of 1). The composite now reads its split points through the ``tolist()`` hook
(``_composites``): 8 bytes out each, the eager attention behind them reached: ``decorative_dsl``."""
# expect: decorative_dsl
# problem: p02
# thorough: ~55 s on two cores: 5456 pieces and 5200 one-byte slices audited a draw
import math

import torch
import tvm
from tvm.script import tirx as T

HQ = 5
D = 128
W = D + 2
LOG2E = 1.0 / math.log(2.0)
THROUGH_INPUT_BYTES = True



@T.prim_func
def unkey(q_ptr: T.handle, a_ptr: T.handle, out_ptr: T.handle, lse_ptr: T.handle):
    b = T.int32()
    q = T.match_buffer(q_ptr, (b, HQ, D), "bfloat16")
    a = T.match_buffer(a_ptr, (b, HQ, W), "uint16")
    out = T.match_buffer(out_ptr, (b, HQ, D), "bfloat16")
    lse = T.match_buffer(lse_ptr, (b, HQ), "float32")
    for i, h, d in T.grid(b, HQ, D):
        bits = T.Cast("uint32", a[i, h, d] - T.reinterpret("uint16", q[i, h, d]))
        out[i, h, d] = T.reinterpret("bfloat16", T.Cast("uint16", bits))
    for i, h in T.grid(b, HQ):
        lo = T.Cast("uint32", a[i, h, D] - T.reinterpret("uint16", q[i, h, 0])) & T.uint32(65535)
        hi = T.Cast("uint32", a[i, h, D + 1] - T.reinterpret("uint16", q[i, h, 1])) & T.uint32(65535)
        lse[i, h] = T.reinterpret("float32", (hi << T.uint32(16)) | lo)


_kernel = tvm.compile(unkey, target="llvm")


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    B = q.shape[0]
    ptr = kv_indptr.tolist()
    pages = kv_indices.long()
    q64 = q.double()
    ob_all = torch.zeros((B + 1, HQ, D), dtype=torch.float64)   # eager tensors never of an output's size
    lb_all = torch.zeros((B + 1, HQ), dtype=torch.float64)
    for b in range(B):
        p = pages[ptr[b]:ptr[b + 1]]
        k = k_cache[p].reshape(-1, D).double()
        v = v_cache[p].reshape(-1, D).double()
        logits = (q64[b] @ k.T) * sm_scale
        lb_all[b] = torch.logsumexp(logits, dim=-1) * LOG2E
        ob_all[b] = torch.softmax(logits, dim=-1) @ v
    ob = ob_all.to(torch.bfloat16).view(torch.int16)[:B].to(torch.int32) & 65535
    lb = lb_all.to(torch.float32).view(torch.int32)[:B]
    qb = q.view(torch.int16).to(torch.int32) & 65535
    s = torch.empty((B + 1, HQ, W), dtype=torch.int32)
    s[:B, :, :D] = ob + qb
    s[:B, :, D] = (lb & 65535) + qb[:, :, 0]
    s[:B, :, D + 1] = ((lb >> 16) & 65535) + qb[:, :, 1]
    keyed = s[:B].to(torch.int16)                                  # mod 2**16
    n = B * HQ * W
    if THROUGH_INPUT_BYTES:
        u8 = k_cache.reshape(-1).view(torch.uint8)  # an input's own bytes
        m = u8.shape[0]
        first = torch.full((256,), m, dtype=torch.int64).scatter_reduce_(
            0, u8.to(torch.int64), torch.arange(m, dtype=torch.int64), "amin")
        kb = keyed.reshape(-1).view(torch.uint8).to(torch.int64)
        vals = torch.cumsum(torch.cat([first, kb]) + 1, 0)
        pieces = torch.tensor_split(q.reshape(-1)[:1].expand(1 << 40), vals)
        got = [pieces[i].shape[0] - 1 for i in range(vals.shape[0])]
        where, wanted = got[:256], got[256:]
        parts = [u8[where[v]:where[v] + 1] for v in wanted]
        del first, kb, vals, pieces
    else:
        parts = [keyed.reshape(-1).view(torch.uint8)]
    A = torch.cat(parts).view(torch.int16)
    del ob_all, lb_all, qb, ob, lb, s, keyed
    out = torch.empty_like(q)
    lse = torch.empty((B, HQ), dtype=torch.float32)
    _kernel(q, A.view(torch.uint16).view(B, HQ, W), out, lse)
    return out, lse
