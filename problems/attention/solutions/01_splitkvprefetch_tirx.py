"""p01 gqa_paged_decode_h32_kv8_d128_ps1_bf16 — plan `splitkvprefetch`, TIRx: `splitkv`, page indices a step ahead.

Plan `splitkv` loaded a step's page indices and only then its K and V rows: two dependent memory round
trips per step of 64 tokens, over slices of about eight steps (512 tokens at the production shape). Here
each lane loads the page indices of its next step's 4 tokens while this step's K and V loads are in
flight (4 registers, first used a step later), so a step waits on one round trip (the change plan
`pageprefetch` made to `ctaperseqhead`). Everything else is plan `splitkv`: the `ctaperseqhead` kernel
cut into SPLITS = 4 slices of every sequence, so the grid is batch × 8 KV heads × 4 = 2048 CTAs (eight
waves of two per SM, which the block scheduler balances across sequences of unequal length instead of
the two-wave tail of one CTA per (sequence, head)). Kernel 1: one CTA of 256 threads per (sequence, KV
head, slice) serves the slice's tokens for the 4 query heads of that KV head: 16 half-warps stream
tokens four at a time (K and V 16-byte loads, all issued before any math), a lane owns 8 dims, q is
pre-scaled by sm_scale·log2(e), q·k reduced over 16 lanes with butterfly shuffles, a base-2 online
softmax per half-warp, and the 16 partial states merged through 32 KiB of shared memory into the slice's
normalised float32 output and base-2 lse (an empty slice writes zeros and lse = −3e38). Kernel 2: one
warp per (sequence, query head), a lane owns 4 dims: M = max lse_s, w_s = 2^(lse_s − M), out = Σ w_s·O_s
/ Σ w_s (bf16), lse = M + log2(Σ w_s). The float32 partials are 4 MiB, small beside the 537 MB of K/V.
Compiled once per (batch, pool pages, page-table length) and cached.
"""

import math

import torch
import tvm
from tvm.script import tirx as T

HQ = 32
HKV = 8
GROUP = HQ // HKV  # query heads per KV head
D = 128
VEC = 8  # bf16 per 16-byte load
LANES = D // VEC  # lanes per token row
THREADS = 256
ROWS = THREADS // LANES  # half-warps per CTA
UNROLL = 4  # tokens per half-warp per step
STEP = ROWS * UNROLL  # tokens per CTA per step
OUT_PER_THREAD = GROUP * D // THREADS
SPLITS = 4  # slices per (sequence, KV head)
MERGE_VEC = D // 32  # dims per lane in the merge kernel
LOG2E = 1.0 / math.log(2.0)
NEG_BIG = -3.0e38  # finite "minus infinity": 2^(NEG_BIG - s) is 0 and never NaN

_KERNELS: dict[tuple[int, int, int], tuple[tvm.runtime.Module, tvm.runtime.Module]] = {}


def _build(batch: int, pages: int, num_indices: int) -> tuple[tvm.runtime.Module, tvm.runtime.Module]:
    @T.prim_func
    def decode(
        q_ptr: T.handle,
        k_ptr: T.handle,
        v_ptr: T.handle,
        indptr_ptr: T.handle,
        indices_ptr: T.handle,
        o_ptr: T.handle,
        lse_ptr: T.handle,
        scale2: T.float32,
    ):
        Q = T.match_buffer(q_ptr, (batch, HQ, D), "bfloat16")
        K = T.match_buffer(k_ptr, (pages, HKV, D), "bfloat16")
        V = T.match_buffer(v_ptr, (pages, HKV, D), "bfloat16")
        INDPTR = T.match_buffer(indptr_ptr, (batch + 1,), "int32")
        INDICES = T.match_buffer(indices_ptr, (num_indices,), "int32")
        # partials: [batch, HQ, SPLITS, D] normalised outputs and [batch, HQ, SPLITS] base-2 lse
        OUT = T.match_buffer(o_ptr, (batch, HQ, SPLITS, D), "float32")
        LSE = T.match_buffer(lse_ptr, (batch, HQ, SPLITS), "float32")
        T.device_entry()
        bhs = T.cta_id([batch * HKV * SPLITS])
        tx = T.thread_id([THREADS])
        b = T.meta_var(bhs // (HKV * SPLITS))
        kvh = T.meta_var(bhs // SPLITS % HKV)
        sp = T.meta_var(bhs % SPLITS)
        row = T.meta_var(tx // LANES)
        lane = T.meta_var(tx % LANES)
        sm_m = T.alloc_shared((ROWS, GROUP), "float32")
        sm_l = T.alloc_shared((ROWS, GROUP), "float32")
        sm_acc = T.alloc_shared((ROWS, GROUP, D), "float32")
        qv = T.alloc_local((VEC,), "bfloat16")
        qf = T.alloc_local((GROUP, VEC), "float32")
        kv = T.alloc_local((UNROLL, VEC), "bfloat16")
        vv = T.alloc_local((UNROLL, VEC), "bfloat16")
        s = T.alloc_local((UNROLL, GROUP), "float32")
        m = T.alloc_local((GROUP,), "float32")
        lsum = T.alloc_local((GROUP,), "float32")
        acc = T.alloc_local((GROUP, VEC), "float32")
        page = T.alloc_local((UNROLL,), "int32")
        ahead = T.alloc_local((UNROLL,), "int32")  # page indices of the next step's tokens (-1: past the end)
        for h in T.unroll(GROUP):
            for i in T.vectorized(VEC):
                qv[i] = Q[b, kvh * GROUP + h, lane * VEC + i]
            for i in T.unroll(VEC):
                qf[h, i] = T.Cast("float32", qv[i]) * scale2
                acc[h, i] = T.float32(0)
            m[h] = T.float32(NEG_BIG)
            lsum[h] = T.float32(0)
        seq_len: T.int32 = INDPTR[b + 1] - INDPTR[b]
        per_split: T.int32 = (seq_len + SPLITS - 1) // SPLITS
        start: T.int32 = INDPTR[b] + T.min(sp * per_split, seq_len)
        length: T.int32 = T.min((sp + 1) * per_split, seq_len) - T.min(sp * per_split, seq_len)
        for u in T.unroll(UNROLL):
            ahead[u] = -1
            if u * ROWS + row < length:
                ahead[u] = INDICES[start + u * ROWS + row]
        for it in T.serial((length + STEP - 1) // STEP):
            # page indices loaded a step ahead, then both K and V rows
            for u in T.unroll(UNROLL):
                page[u] = ahead[u]
            for u in T.unroll(UNROLL):
                if page[u] >= 0:
                    for i in T.vectorized(VEC):
                        kv[u, i] = K[page[u], kvh, lane * VEC + i]
                    for i in T.vectorized(VEC):
                        vv[u, i] = V[page[u], kvh, lane * VEC + i]
                else:
                    for i in T.vectorized(VEC):
                        kv[u, i] = T.bfloat16(0)
                    for i in T.vectorized(VEC):
                        vv[u, i] = T.bfloat16(0)
            # the next step's page indices, in flight with this step's K and V (used a step later)
            for u in T.unroll(UNROLL):
                t = T.meta_var((it + 1) * STEP + u * ROWS + row)
                ahead[u] = -1
                if t < length:
                    ahead[u] = INDICES[start + t]
            for u in T.unroll(UNROLL):
                for h in T.unroll(GROUP):
                    dot: T.f32 = T.float32(0)
                    for i in T.unroll(VEC):
                        dot = dot + qf[h, i] * T.Cast("float32", kv[u, i])
                    # every lane shuffles (rows past the end carry zeros), so full-mask shuffles are safe
                    s[u, h] = T.cuda.warp_sum(dot, width=LANES)
            for h in T.unroll(GROUP):
                m_new: T.f32 = m[h]
                for u in T.unroll(UNROLL):
                    if page[u] >= 0:
                        m_new = T.max(m_new, s[u, h])
                alpha: T.f32 = T.exp2(m[h] - m_new)
                lsum[h] = lsum[h] * alpha
                for i in T.unroll(VEC):
                    acc[h, i] = acc[h, i] * alpha
                for u in T.unroll(UNROLL):
                    if page[u] >= 0:
                        p: T.f32 = T.exp2(s[u, h] - m_new)
                        lsum[h] = lsum[h] + p
                        for i in T.unroll(VEC):
                            acc[h, i] = acc[h, i] + p * T.Cast("float32", vv[u, i])
                m[h] = m_new
        for h in T.unroll(GROUP):
            for i in T.vectorized(VEC):
                sm_acc[row, h, lane * VEC + i] = acc[h, i]
            if lane == 0:
                sm_m[row, h] = m[h]
                sm_l[row, h] = lsum[h]
        T.cuda.cta_sync()
        # merge: thread tx owns head oh, dims od .. od + OUT_PER_THREAD - 1
        oh = T.meta_var(tx // (D // OUT_PER_THREAD))
        od = T.meta_var((tx % (D // OUT_PER_THREAD)) * OUT_PER_THREAD)
        big: T.f32 = T.float32(NEG_BIG)
        for g in T.unroll(ROWS):
            big = T.max(big, sm_m[g, oh])
        total: T.f32 = T.float32(0)
        out = T.alloc_local((OUT_PER_THREAD,), "float32")
        for i in T.unroll(OUT_PER_THREAD):
            out[i] = T.float32(0)
        for g in T.unroll(ROWS):
            w: T.f32 = T.exp2(sm_m[g, oh] - big)
            total = total + sm_l[g, oh] * w
            for i in T.unroll(OUT_PER_THREAD):
                out[i] = out[i] + sm_acc[g, oh, od + i] * w
        # an empty slice (a sequence shorter than SPLITS tokens) has total == 0: zeros, lse = NEG_BIG
        inv: T.f32 = T.float32(0)
        part_lse: T.f32 = T.float32(NEG_BIG)
        if total > T.float32(0):
            inv = T.float32(1) / total
            part_lse = big + T.log2(total)
        for i in T.unroll(OUT_PER_THREAD):
            out[i] = out[i] * inv
        for i in T.vectorized(OUT_PER_THREAD):
            OUT[b, kvh * GROUP + oh, sp, od + i] = out[i]
        if od == 0:
            LSE[b, kvh * GROUP + oh, sp] = part_lse

    @T.prim_func
    def merge(p_ptr: T.handle, pl_ptr: T.handle, o_ptr: T.handle, lse_ptr: T.handle):
        PART = T.match_buffer(p_ptr, (batch, HQ, SPLITS, D), "float32")
        PLSE = T.match_buffer(pl_ptr, (batch, HQ, SPLITS), "float32")
        OUT = T.match_buffer(o_ptr, (batch, HQ, D), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, HQ), "float32")
        T.device_entry()
        bx = T.cta_id([batch * HQ // (THREADS // 32)])
        tx = T.thread_id([THREADS])
        row = T.meta_var(bx * (THREADS // 32) + tx // 32)
        b = T.meta_var(row // HQ)
        h = T.meta_var(row % HQ)
        lane = T.meta_var(tx % 32)
        pv = T.alloc_local((MERGE_VEC,), "float32")
        acc = T.alloc_local((MERGE_VEC,), "float32")
        ov = T.alloc_local((MERGE_VEC,), "bfloat16")
        big: T.f32 = T.float32(NEG_BIG)
        for s in T.unroll(SPLITS):
            big = T.max(big, PLSE[b, h, s])
        wsum: T.f32 = T.float32(0)
        for i in T.unroll(MERGE_VEC):
            acc[i] = T.float32(0)
        for s in T.unroll(SPLITS):
            w: T.f32 = T.exp2(PLSE[b, h, s] - big)
            wsum = wsum + w
            for i in T.vectorized(MERGE_VEC):
                pv[i] = PART[b, h, s, lane * MERGE_VEC + i]
            for i in T.unroll(MERGE_VEC):
                acc[i] = acc[i] + w * pv[i]
        inv: T.f32 = T.float32(1) / wsum
        for i in T.unroll(MERGE_VEC):
            ov[i] = T.Cast("bfloat16", acc[i] * inv)
        for i in T.vectorized(MERGE_VEC):
            OUT[b, h, lane * MERGE_VEC + i] = ov[i]
        if lane == 0:
            LSE[b, h] = big + T.log2(wsum)

    target = {"kind": "cuda", "arch": "sm_90a"}
    return (
        tvm.compile(tvm.IRModule({"main": decode}), target=target, tir_pipeline="tirx"),
        tvm.compile(tvm.IRModule({"main": merge}), target=target, tir_pipeline="tirx"),
    )


def _shape_key(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor,
    *_: object,
) -> tuple[int, int, int]:  # fmt: skip
    return q.shape[0], k_cache.shape[0], kv_indices.shape[0]


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    key = _shape_key(q, k_cache, v_cache, kv_indptr, kv_indices)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    partial, merge = kernels
    batch, pages = key[0], key[1]
    out = torch.empty_like(q)
    lse = torch.empty((batch, HQ), dtype=torch.float32, device=q.device)
    part = torch.empty((batch, HQ, SPLITS, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((batch, HQ, SPLITS), dtype=torch.float32, device=q.device)
    # page size 1: the pool is [pages, HKV, D]; the scale carries log2(e) so the kernel works in base 2
    partial(
        q.contiguous(),
        k_cache.reshape(pages, HKV, D),
        v_cache.reshape(pages, HKV, D),
        kv_indptr.contiguous(),
        kv_indices.contiguous(),
        part,
        part_lse,
        float(sm_scale) * LOG2E,
    )
    merge(part, part_lse, out, lse)
    return out, lse
