"""Honest p02 (paged GQA decode, page size 1): each call copies its pages one by one into staging rows kept across
calls (grown as needed; ``k[i].copy_(k_cache[p, 0])``), and a TIRx kernel does the attention over the staged rows.
Each row of the kept staging is a view at an offset Python gives: 300 of them counted 8 bytes in each, 47% of the
answer's 5200 bytes, and the plan was rejected ``decorative_dsl`` (red team rt69's note, measured in session 48). A
run of views at a constant stride counts its first two pieces only (``_eagerwork.offset_mark``)."""
# problem: p02
# thorough: ~15 s on two cores: 300 staged rows copied a call, audited a draw (test_eager_reach -k run_of_views keeps the rule in the ordinary run)
import torch
import tvm
from tvm.script import tirx as T

HQ = 5
HKV = 1
D = 128
GROUP = HQ // HKV
LOG2E = 1.4426950408889634


@T.prim_func
def decode(q_h: T.handle, k_h: T.handle, v_h: T.handle, ip_h: T.handle, o_h: T.handle, l_h: T.handle, scale: T.float32):
    b_n = T.int32()
    n = T.int32()
    p_n = T.int32()
    q = T.match_buffer(q_h, (b_n, HQ, D), "bfloat16")
    k = T.match_buffer(k_h, (n, HKV, D), "bfloat16")
    v = T.match_buffer(v_h, (n, HKV, D), "bfloat16")
    ip = T.match_buffer(ip_h, (p_n,), "int32")
    o = T.match_buffer(o_h, (b_n, HQ, D), "bfloat16")
    lse = T.match_buffer(l_h, (b_n, HQ), "float32")
    acc = T.alloc_buffer((D,), "float32")
    st = T.alloc_buffer((4,), "float32")
    for b, h in T.grid(b_n, HQ):
        st[0] = T.float32(-3.0e38)  # running max
        st[1] = T.float32(0.0)  # running sum
        for d in range(D):
            acc[d] = T.float32(0.0)
        for t in range(ip[b + 1] - ip[b]):
            st[2] = T.float32(0.0)
            for d in range(D):
                st[2] = st[2] + T.Cast("float32", q[b, h, d]) * T.Cast("float32", k[ip[b] + t, h // GROUP, d])
            st[2] = st[2] * scale
            st[3] = T.max(st[0], st[2])
            for d in range(D):
                acc[d] = acc[d] * T.exp(st[0] - st[3]) + T.exp(st[2] - st[3]) * T.Cast(
                    "float32", v[ip[b] + t, h // GROUP, d]
                )
            st[1] = st[1] * T.exp(st[0] - st[3]) + T.exp(st[2] - st[3])
            st[0] = st[3]
        for d in range(D):
            o[b, h, d] = T.Cast("bfloat16", acc[d] / st[1])
        lse[b, h] = (st[0] + T.log(st[1])) * T.float32(LOG2E)


_decode = tvm.compile(decode, target="llvm")


_STAGE: dict[str, torch.Tensor] = {}


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    pages = kv_indices.tolist()
    n = len(pages)
    if "k" not in _STAGE or _STAGE["k"].shape[0] < n:  # staging kept across calls, grown as needed
        _STAGE["k"] = torch.empty((2 * n, HKV, D), dtype=k_cache.dtype)
        _STAGE["v"] = torch.empty((2 * n, HKV, D), dtype=v_cache.dtype)
    k, v = _STAGE["k"], _STAGE["v"]
    for i, p in enumerate(pages):  # page by page into the staging rows (page size 1)
        k[i].copy_(k_cache[p, 0])
        v[i].copy_(v_cache[p, 0])
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32)
    _decode(q, k, v, kv_indptr, out, lse, float(sm_scale))
    return out, lse
