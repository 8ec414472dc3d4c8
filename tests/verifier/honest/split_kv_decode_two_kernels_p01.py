"""Honest (red team rt58): flash-decoding, two kernels. Kernel 1 splits every sequence's KV range (CSR page table, page
size 1) into SPLITS chunks and writes, per (batch, head, split), the chunk's running max, softmax denominator and
unnormalised output into float32 workspaces (an empty chunk writes -inf / 0 / 0); kernel 2 merges the splits into
`output` (bf16) and `lse` (log2). `sm_scale` goes to kernel 1 as a float argument."""
# problem: p01
import torch
import tvm
from tvm.script import tirx as T

HQ, HKV, D = 32, 8, 128
GROUP = HQ // HKV
SPLITS = 4
LOG2E = 1.4426950408889634


@T.prim_func
def decode_partial(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, ip_ptr: T.handle, ix_ptr: T.handle,
                   m_ptr: T.handle, den_ptr: T.handle, acc_ptr: T.handle, scale: T.float32):
    b = T.int32()
    pages = T.int32()
    nidx = T.int32()
    q = T.match_buffer(q_ptr, (b, HQ, D), "bfloat16")
    k = T.match_buffer(k_ptr, (pages, 1, HKV, D), "bfloat16")
    v = T.match_buffer(v_ptr, (pages, 1, HKV, D), "bfloat16")
    ip = T.match_buffer(ip_ptr, (b + 1,), "int32")
    ix = T.match_buffer(ix_ptr, (nidx,), "int32")
    m = T.match_buffer(m_ptr, (b, HQ, SPLITS), "float32")
    den_s = T.match_buffer(den_ptr, (b, HQ, SPLITS), "float32")
    acc = T.match_buffer(acc_ptr, (b, HQ, SPLITS, D), "float32")
    s_ = T.alloc_buffer((1,), "float32")
    mx = T.alloc_buffer((1,), "float32")
    den = T.alloc_buffer((1,), "float32")
    o = T.alloc_buffer((D,), "float32")
    for bi, h, sp in T.grid(b, HQ, SPLITS):
        kvh = h // GROUP
        start = ip[bi]
        n = ip[bi + 1] - ip[bi]
        chunk = (n + SPLITS - 1) // SPLITS
        lo = T.min(start + sp * chunk, start + n)
        hi = T.min(lo + chunk, start + n)
        mx[0] = T.float32(-1e30)
        den[0] = T.float32(0)
        for d in range(D):
            o[d] = T.float32(0)
        for j in T.serial(hi - lo):
            page = ix[lo + j]
            s_[0] = T.float32(0)
            for d in range(D):
                s_[0] = s_[0] + T.Cast("float32", q[bi, h, d]) * T.Cast("float32", k[page, 0, kvh, d])
            s_[0] = s_[0] * scale
            new_m = T.max(mx[0], s_[0])
            corr = T.exp(mx[0] - new_m)
            p = T.exp(s_[0] - new_m)
            den[0] = den[0] * corr + p
            for d in range(D):
                o[d] = o[d] * corr + p * T.Cast("float32", v[page, 0, kvh, d])
            mx[0] = new_m
        m[bi, h, sp] = T.if_then_else(hi > lo, mx[0], T.float32(-1e30))
        den_s[bi, h, sp] = den[0]
        for d in range(D):
            acc[bi, h, sp, d] = o[d]


@T.prim_func
def decode_merge(m_ptr: T.handle, den_ptr: T.handle, acc_ptr: T.handle, out_ptr: T.handle, lse_ptr: T.handle):
    b = T.int32()
    m = T.match_buffer(m_ptr, (b, HQ, SPLITS), "float32")
    den_s = T.match_buffer(den_ptr, (b, HQ, SPLITS), "float32")
    acc = T.match_buffer(acc_ptr, (b, HQ, SPLITS, D), "float32")
    out = T.match_buffer(out_ptr, (b, HQ, D), "bfloat16")
    lse = T.match_buffer(lse_ptr, (b, HQ), "float32")
    big = T.alloc_buffer((1,), "float32")
    tot = T.alloc_buffer((1,), "float32")
    o = T.alloc_buffer((D,), "float32")
    for bi, h in T.grid(b, HQ):
        big[0] = T.float32(-1e30)
        for sp in range(SPLITS):
            big[0] = T.max(big[0], m[bi, h, sp])
        tot[0] = T.float32(0)
        for d in range(D):
            o[d] = T.float32(0)
        for sp in range(SPLITS):
            w = T.exp(m[bi, h, sp] - big[0])
            tot[0] = tot[0] + den_s[bi, h, sp] * w
            for d in range(D):
                o[d] = o[d] + acc[bi, h, sp, d] * w
        for d in range(D):
            out[bi, h, d] = T.Cast("bfloat16", o[d] / tot[0])
        lse[bi, h] = (big[0] + T.log(tot[0])) * T.float32(LOG2E)


_partial = tvm.compile(decode_partial, target="llvm")
_merge = tvm.compile(decode_merge, target="llvm")


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    b = q.shape[0]
    m = torch.empty(b, HQ, SPLITS, dtype=torch.float32)
    den_s = torch.empty(b, HQ, SPLITS, dtype=torch.float32)
    acc = torch.empty(b, HQ, SPLITS, D, dtype=torch.float32)
    _partial(q, k_cache, v_cache, kv_indptr, kv_indices, m, den_s, acc, float(sm_scale))
    out = torch.empty(b, HQ, D, dtype=torch.bfloat16)
    lse = torch.empty(b, HQ, dtype=torch.float32)
    _merge(m, den_s, acc, out, lse)
    return out, lse
