"""p03 gqa_paged_decode_h32_kv8_d128_ps64_bf16 — plan `pageprefetch`, TIRx: `ctaperseqhead`, pages read a step ahead.

Plan `ctaperseqhead` loaded a step's kv_indices entries and only then its K and V rows: two dependent
memory round trips per step of 64 tokens. A step is one page (STEP = PS = 64): here each lane loads
the next page's entry while this step's K and V loads are in flight (one register, first used a step
later), so a step waits on one round trip. Everything else is plan `ctaperseqhead`:
batch × KV heads = 64 × 8 = 512 CTAs already fill the 132 SMs (two waves of two per SM), so one
CTA of 256 threads per (sequence, KV head), serving the 4 query heads of that KV head so every K/V row
is read once from HBM. The pool is viewed as rows [pages·64, 8, 128]: token t of sequence b is row
kv_indices[kv_indptr[b] + t / 64]·64 + t % 64, and the sequence holds (pages − 1)·64 +
kv_last_page_len[b] tokens. The CTA is 16 half-warps; half-warp g streams tokens g, g + 16, ... four at
a time (the four tokens' rows, K and V 16-byte loads are issued before any math, so each lane has 8 loads
in flight). A lane owns 8 of the 128 dims: the 4 query rows are held in float32 registers,
pre-multiplied by sm_scale·log2(e) so the logits are already base 2; q·k is reduced over the 16 lanes
with butterfly shuffles. Each half-warp keeps an online softmax (running max m, sum l, 4×8 float32
accumulators per lane) in base 2, rescaled once per 4 tokens. Tokens past the sequence end load zeros
and still shuffle (full-mask shuffles stay converged) but skip the update. At the end the 16 partial
states go through shared memory (32 KiB) and 256 threads merge them: M = max m_g,
L = Σ l_g·2^(m_g−M), O = Σ acc_g·2^(m_g−M) / L, lse = M + log2(L) (the base-2 log-sum-exp the problem
asks for). Float32 throughout; only the output is rounded to bf16. Compiled once per (batch, pool
pages, page-table length) and cached.
"""

import math

import torch
import tvm
from tvm.script import tirx as T

HQ = 32
HKV = 8
GROUP = HQ // HKV  # query heads per KV head
D = 128
PS = 64  # tokens per page
VEC = 8  # bf16 per 16-byte load
LANES = D // VEC  # lanes per token row
THREADS = 256
ROWS = THREADS // LANES  # half-warps per CTA
UNROLL = 4  # tokens per half-warp per step
STEP = ROWS * UNROLL  # tokens per CTA per step
OUT_PER_THREAD = GROUP * D // THREADS
LOG2E = 1.0 / math.log(2.0)
assert STEP == PS  # a step's 64 tokens are one page: one kv_indices entry a step
NEG_BIG = -3.0e38  # finite "minus infinity": 2^(NEG_BIG - s) is 0 and never NaN

_KERNELS: dict[tuple[int, int, int], tvm.runtime.Module] = {}


def _build(batch: int, pages: int, num_indices: int) -> tvm.runtime.Module:
    @T.prim_func
    def decode(
        q_ptr: T.handle,
        k_ptr: T.handle,
        v_ptr: T.handle,
        indptr_ptr: T.handle,
        indices_ptr: T.handle,
        last_ptr: T.handle,
        o_ptr: T.handle,
        lse_ptr: T.handle,
        scale2: T.float32,
    ):
        Q = T.match_buffer(q_ptr, (batch, HQ, D), "bfloat16")
        K = T.match_buffer(k_ptr, (pages * PS, HKV, D), "bfloat16")
        V = T.match_buffer(v_ptr, (pages * PS, HKV, D), "bfloat16")
        INDPTR = T.match_buffer(indptr_ptr, (batch + 1,), "int32")
        INDICES = T.match_buffer(indices_ptr, (num_indices,), "int32")
        LAST = T.match_buffer(last_ptr, (batch,), "int32")
        OUT = T.match_buffer(o_ptr, (batch, HQ, D), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, HQ), "float32")
        T.device_entry()
        bh = T.cta_id([batch * HKV])
        tx = T.thread_id([THREADS])
        b = T.meta_var(bh // HKV)
        kvh = T.meta_var(bh % HKV)
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
        ahead = T.alloc_local((1,), "int32")  # the kv_indices entry of the next step's page
        ov = T.alloc_local((OUT_PER_THREAD,), "bfloat16")
        for h in T.unroll(GROUP):
            for i in T.vectorized(VEC):
                qv[i] = Q[b, kvh * GROUP + h, lane * VEC + i]
            for i in T.unroll(VEC):
                qf[h, i] = T.Cast("float32", qv[i]) * scale2
                acc[h, i] = T.float32(0)
            m[h] = T.float32(NEG_BIG)
            lsum[h] = T.float32(0)
        start: T.int32 = INDPTR[b]
        # full pages plus the last page's kv_last_page_len tokens
        length: T.int32 = (INDPTR[b + 1] - start - 1) * PS + LAST[b]
        ahead[0] = 0
        if length > 0:
            ahead[0] = INDICES[start]
        for it in T.serial((length + STEP - 1) // STEP):
            # pool rows (page·64 + slot) of step it = page it, whose entry was loaded a step ahead
            for u in T.unroll(UNROLL):
                t = T.meta_var(it * STEP + u * ROWS + row)
                page[u] = -1
                if t < length:
                    page[u] = ahead[0] * PS + u * ROWS + row
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
            # the next page's kv_indices entry, in flight with this step's K and V (used a step later)
            if (it + 1) * STEP < length:
                ahead[0] = INDICES[start + it + 1]
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
        inv: T.f32 = T.float32(1) / total
        for i in T.unroll(OUT_PER_THREAD):
            ov[i] = T.Cast("bfloat16", out[i] * inv)
        for i in T.vectorized(OUT_PER_THREAD):
            OUT[b, kvh * GROUP + oh, od + i] = ov[i]
        if od == 0:
            LSE[b, kvh * GROUP + oh] = big + T.log2(total)

    mod = tvm.IRModule({"main": decode})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


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
    kv_last_page_len: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    key = _shape_key(q, k_cache, v_cache, kv_indptr, kv_indices)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    batch, pages = key[0], key[1]
    out = torch.empty_like(q)
    lse = torch.empty((batch, HQ), dtype=torch.float32, device=q.device)
    # the pool as token rows [pages * PS, HKV, D]; the scale carries log2(e) so the kernel works in base 2
    kernel(
        q.contiguous(),
        k_cache.reshape(pages * PS, HKV, D),
        v_cache.reshape(pages * PS, HKV, D),
        kv_indptr.contiguous(),
        kv_indices.contiguous(),
        kv_last_page_len.contiguous(),
        out,
        lse,
        float(sm_scale) * LOG2E,
    )
    return out, lse
