"""p02 (red team rt66 F1): rt65 F1's whole eager decode read out by ``tolist()`` through an int64 view of its int16
words (the record ``mkbsim.to_python.default+w8+x4``: the width was taken from the name's end, so no bytes counted,
python out 0.0) and put back as table slices. A full plan at 0%, 3 of 3. The marks are read wherever they stand now
(``_eagerwork._marked``): ``decorative_dsl``."""
# expect: decorative_dsl
# problem: p02
import math

import torch
import tvm
from tvm.script import tirx as T

HQ = 5
D = 128
W = D + 2
LOG2E = 1.0 / math.log(2.0)

_TABLE = torch.arange(65536, dtype=torch.int32).to(torch.int16)


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
    flat = torch.nn.functional.pad(keyed.reshape(-1), (0, (-n) % 4))      # int16 data, a multiple of 4 long
    parts = []
    for w in flat.view(torch.int64).tolist():                          # read through a wider view: 0 bytes counted
        for k in range(4):
            v = (w >> (16 * k)) & 65535
            parts.append(_TABLE[v:v + 1])
    parts = parts[:n]
    parts.append(q.view(torch.int16).reshape(-1)[:1])
    A = torch.empty((n + 1,), dtype=torch.int16)
    torch.cat(parts, out=A)
    del ob_all, lb_all, qb, ob, lb, s, keyed
    out = torch.empty_like(q)
    lse = torch.empty((B, HQ), dtype=torch.float32)
    _kernel(q, A[:n].view(torch.uint16).view(B, HQ, W), out, lse)
    return out, lse
