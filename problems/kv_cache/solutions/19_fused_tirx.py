"""p19 qk_rmsnorm_partial_rope_paged_kv_update_glm4_bf16 — plan `fused`, TIRx: one kernel, q, k and v.

Plan: one CTA of 224 threads per token (8192 CTAs at the production shape). A token's qkv row is 112
heads of 128 bf16 (96 q, 8 k, 8 v). Eight threads own a head, each two 16-byte vectors chosen so the
partial NeoX rotation needs no data exchange: lane l < 4 holds dims 8l..8l+7 and their rotary
partners 32+8l..32+8l+7, lane l >= 4 holds pass-through dims 64+8(l-4).. and 96+8(l-4)... The 28
head groups of a CTA cover heads 28p + g in 4 passes (p = 0..3); a thread issues all 8 of its 16-byte
qkv loads before any math (every warp instruction reads 8 fully used 64-byte runs). Per q/k head:
sum of squares over the 16 values, butterfly shuffles over the 8 lanes (all lanes of a warp take part:
q/k/v boundaries fall on warp boundaries), inv = rsqrt(ss/128 + 1e-5), n = x * inv * w (float32),
then y_a = n_a c - n_b s, y_b = n_b c + n_a s with c, s of the token's position (two 16-byte float32
loads each, L1/L2 resident; lanes >= 4 use c = 1, s = 0, which is exact), one bf16 rounding, two
16-byte stores: q heads to q_out, k heads to key_cache[slot // 16, slot % 16], v heads (raw bit
copies) to value_cache, cache writes only when slot >= 0. Every byte is read once and written once.
The caches are updated in place. Compiled once per (num_tokens, max_position, num_blocks) and cached.
"""

import torch
import tvm
from tvm.script import tirx as T

HQ = 96
HKV = 8
HEADS = HQ + 2 * HKV  # 112 heads per qkv row
DIM = 128
ROT_HALF = 32  # rotary_dim / 2
BLOCK = 16
VEC = 8  # bf16 per 16-byte vector
FVEC = 4  # float32 per 16-byte vector
LANES = 8  # threads per head, 2 vectors each
GROUPS = 28  # heads per pass
PASSES = HEADS // GROUPS  # 4
THREADS = GROUPS * LANES  # 224
Q_LAST = HQ - (PASSES - 1) * GROUPS  # q groups of the last pass (12)
K_LAST = Q_LAST + HKV  # 20
EPS = 1e-5

_KERNELS: dict[tuple[int, int, int], tvm.runtime.Module] = {}


def _build(tokens: int, max_pos: int, blocks: int) -> tvm.runtime.Module:
    @T.macro
    def norm_rope(x: T.Buffer, wv: T.Buffer, cs: T.Buffer, o: T.Buffer, xo: T.int32, wo: T.int32):
        # x[xo .. xo + 16): the thread's two vectors (a, then its rotary partner b); o: 16 bf16 results
        acc: T.f32 = T.float32(0)
        for i in T.unroll(2 * VEC):
            acc = acc + T.Cast("float32", x[xo + i]) * T.Cast("float32", x[xo + i])
        # all 32 lanes take part (the caller's branches are warp-uniform)
        acc = T.cuda.warp_sum(acc, width=LANES)
        inv: T.f32 = T.rsqrt(acc * T.float32(1.0 / DIM) + T.float32(EPS))
        for i in T.unroll(VEC):
            na: T.f32 = T.Cast("float32", x[xo + i]) * inv * T.Cast("float32", wv[wo + i])
            nb: T.f32 = T.Cast("float32", x[xo + VEC + i]) * inv * T.Cast("float32", wv[wo + VEC + i])
            o[i] = T.Cast("bfloat16", na * cs[i] - nb * cs[VEC + i])
            o[VEC + i] = T.Cast("bfloat16", nb * cs[i] + na * cs[VEC + i])

    @T.prim_func
    def glm(
        x_ptr: T.handle,
        wq_ptr: T.handle,
        wk_ptr: T.handle,
        pos_ptr: T.handle,
        cs_ptr: T.handle,
        s_ptr: T.handle,
        kc_ptr: T.handle,
        vc_ptr: T.handle,
        o_ptr: T.handle,
    ):
        X = T.match_buffer(x_ptr, (tokens, HEADS, DIM), "bfloat16")
        WQ = T.match_buffer(wq_ptr, (DIM,), "bfloat16")
        WK = T.match_buffer(wk_ptr, (DIM,), "bfloat16")
        POS = T.match_buffer(pos_ptr, (tokens,), "int64")
        CS = T.match_buffer(cs_ptr, (max_pos, 2 * ROT_HALF), "float32")
        S = T.match_buffer(s_ptr, (tokens,), "int64")
        KC = T.match_buffer(kc_ptr, (blocks, BLOCK, HKV, DIM), "bfloat16")
        VC = T.match_buffer(vc_ptr, (blocks, BLOCK, HKV, DIM), "bfloat16")
        QO = T.match_buffer(o_ptr, (tokens, HQ, DIM), "bfloat16")
        T.device_entry()
        tok = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        lane = T.meta_var(tx % LANES)
        grp = T.meta_var(tx // LANES)
        quad = T.meta_var(tx % 4)
        # the thread's dims: a = da .. da + 7 and its partner b = da + 32 .. da + 39
        da = T.meta_var((lane // 4) * 64 + quad * VEC)
        x = T.alloc_local((PASSES * 2 * VEC,), "bfloat16")
        wv = T.alloc_local((4 * VEC,), "bfloat16")  # q weight a, b, then k weight a, b
        cs = T.alloc_local((2 * VEC,), "float32")  # 8 cosines, then 8 sines
        o = T.alloc_local((2 * VEC,), "bfloat16")
        pos: T.int32 = T.Cast("int32", POS[tok])
        slot: T.int32 = T.Cast("int32", S[tok])
        for p in T.unroll(PASSES):
            for i in T.vectorized(VEC):
                x[p * 2 * VEC + i] = X[tok, p * GROUPS + grp, da + i]
            for i in T.vectorized(VEC):
                x[p * 2 * VEC + VEC + i] = X[tok, p * GROUPS + grp, da + ROT_HALF + i]
        for i in T.vectorized(VEC):
            wv[i] = WQ[da + i]
        for i in T.vectorized(VEC):
            wv[VEC + i] = WQ[da + ROT_HALF + i]
        for i in T.vectorized(VEC):
            wv[2 * VEC + i] = WK[da + i]
        for i in T.vectorized(VEC):
            wv[3 * VEC + i] = WK[da + ROT_HALF + i]
        if lane < 4:
            for h in T.unroll(2):
                for i in T.vectorized(FVEC):
                    cs[h * FVEC + i] = CS[pos, quad * VEC + h * FVEC + i]
                for i in T.vectorized(FVEC):
                    cs[VEC + h * FVEC + i] = CS[pos, ROT_HALF + quad * VEC + h * FVEC + i]
        else:
            for i in T.unroll(VEC):
                cs[i] = T.float32(1)
                cs[VEC + i] = T.float32(0)
        for p in T.unroll(PASSES - 1):
            norm_rope(x, wv, cs, o, p * 2 * VEC, 0)
            for i in T.vectorized(VEC):
                QO[tok, p * GROUPS + grp, da + i] = o[i]
            for i in T.vectorized(VEC):
                QO[tok, p * GROUPS + grp, da + ROT_HALF + i] = o[VEC + i]
        # last pass: groups 0..11 are q heads 84..95, 12..19 the k heads, 20..27 the v heads (warp-uniform)
        if grp < Q_LAST:
            norm_rope(x, wv, cs, o, (PASSES - 1) * 2 * VEC, 0)
            for i in T.vectorized(VEC):
                QO[tok, (PASSES - 1) * GROUPS + grp, da + i] = o[i]
            for i in T.vectorized(VEC):
                QO[tok, (PASSES - 1) * GROUPS + grp, da + ROT_HALF + i] = o[VEC + i]
        elif grp < K_LAST:
            norm_rope(x, wv, cs, o, (PASSES - 1) * 2 * VEC, 2 * VEC)
            if slot >= 0:
                for i in T.vectorized(VEC):
                    KC[slot // BLOCK, slot % BLOCK, grp - Q_LAST, da + i] = o[i]
                for i in T.vectorized(VEC):
                    KC[slot // BLOCK, slot % BLOCK, grp - Q_LAST, da + ROT_HALF + i] = o[VEC + i]
        else:
            if slot >= 0:
                for i in T.vectorized(VEC):
                    VC[slot // BLOCK, slot % BLOCK, grp - K_LAST, da + i] = x[(PASSES - 1) * 2 * VEC + i]
                for i in T.vectorized(VEC):
                    VC[slot // BLOCK, slot % BLOCK, grp - K_LAST, da + ROT_HALF + i] = x[
                        (PASSES - 1) * 2 * VEC + VEC + i
                    ]

    mod = tvm.IRModule({"main": glm})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(
    qkv: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
) -> tuple[int, int, int]:
    return qkv.shape[0], cos_sin_cache.shape[0], key_cache.shape[0]


def run(
    qkv: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
) -> torch.Tensor:
    key = _shape_key(qkv, q_norm_weight, k_norm_weight, positions, cos_sin_cache, slot_mapping, key_cache, value_cache)
    tokens = key[0]
    out = torch.empty((tokens, HQ, DIM), dtype=qkv.dtype, device=qkv.device)
    if tokens == 0:
        return out
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    # the caches are updated in place (passed as they are: the kernel splits slots into block and row)
    kernel(
        qkv.contiguous().view(tokens, HEADS, DIM),
        q_norm_weight.contiguous(),
        k_norm_weight.contiguous(),
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        slot_mapping.contiguous(),
        key_cache,
        value_cache,
        out,
    )
    return out
