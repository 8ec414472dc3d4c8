"""p20 mla_rope_compressed_cache_update_bf16 — plan `fused`, TIRx: one kernel for q_pe, k_pe and the cache entry.

Plan: one CTA of 288 threads per token (8192 CTAs at the production shape). Warps 0-7 rotate the
token's 128 query heads: a head is 64 bf16 = 8 16-byte vectors, thread t owns lane l = t % 8 of the
heads t // 8 + 32 k (k = 0..3), so it issues its 4 16-byte q_pe loads before any math (every warp
instruction reads 512 contiguous bytes), loads cos/sin of its 4 GPT-J pairs 4l..4l+3 once (two
16-byte float32 loads of the position's row, L1/L2 resident), rotates each pair in float32
((x0 c - x1 s, x1 c + x0 s), one bf16 rounding) and stores 16 bytes to q_pe_out. Warp 8 writes the
576-wide cache entry when slot >= 0: lane w copies kv_c vectors w and w + 32 (bit copies) and lanes
0-7 also rotate k_pe vector w into entry vector 64 + w. Padding tokens (slot -1) still get q_pe_out
but touch no cache entry. Every byte is read once and written once. The cache is updated in place
(the kernel splits slot into block and row). Compiled once per (num_tokens, max_position,
num_blocks) and cached.
"""

import torch
import tvm
from tvm.script import tirx as T

HEADS = 128
ROPE = 64
RANK = 512
ENTRY = RANK + ROPE  # 576
BLOCK = 64
VEC = 8  # bf16 per 16-byte vector
PAIRS = VEC // 2  # GPT-J pairs per vector (4 float32 cos = one 16-byte load)
HALF = ROPE // 2  # sines start at column 32 of a cos_sin row
HEAD_VECS = ROPE // VEC  # 8 lanes per head
Q_THREADS = 256
Q_ITERS = HEADS * HEAD_VECS // Q_THREADS  # 4 q_pe vectors per thread
HEAD_STRIDE = Q_THREADS // HEAD_VECS  # 32 heads between a thread's vectors
KV_THREADS = 32
THREADS = Q_THREADS + KV_THREADS

_KERNELS: dict[tuple[int, int, int], tvm.runtime.Module] = {}


def _build(tokens: int, max_pos: int, blocks: int) -> tvm.runtime.Module:
    @T.prim_func
    def mla(
        q_ptr: T.handle,
        kv_ptr: T.handle,
        kpe_ptr: T.handle,
        pos_ptr: T.handle,
        cs_ptr: T.handle,
        s_ptr: T.handle,
        c_ptr: T.handle,
        o_ptr: T.handle,
    ):
        Q = T.match_buffer(q_ptr, (tokens, HEADS, ROPE), "bfloat16")
        KV = T.match_buffer(kv_ptr, (tokens, RANK), "bfloat16")
        KPE = T.match_buffer(kpe_ptr, (tokens, ROPE), "bfloat16")
        POS = T.match_buffer(pos_ptr, (tokens,), "int64")
        CS = T.match_buffer(cs_ptr, (max_pos, ROPE), "float32")
        S = T.match_buffer(s_ptr, (tokens,), "int64")
        C = T.match_buffer(c_ptr, (blocks, BLOCK, ENTRY), "bfloat16")
        QO = T.match_buffer(o_ptr, (tokens, HEADS, ROPE), "bfloat16")
        T.device_entry()
        tok = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        x = T.alloc_local((Q_ITERS * VEC,), "bfloat16")
        cs = T.alloc_local((2 * PAIRS,), "float32")  # 4 cosines, then 4 sines
        y = T.alloc_local((VEC,), "bfloat16")
        pos: T.int32 = T.Cast("int32", POS[tok])
        if tx < Q_THREADS:
            lane = T.meta_var(tx % HEAD_VECS)
            head0 = T.meta_var(tx // HEAD_VECS)
            for k in T.unroll(Q_ITERS):
                for i in T.vectorized(VEC):
                    x[k * VEC + i] = Q[tok, head0 + k * HEAD_STRIDE, lane * VEC + i]
            for i in T.vectorized(PAIRS):
                cs[i] = CS[pos, lane * PAIRS + i]
            for i in T.vectorized(PAIRS):
                cs[PAIRS + i] = CS[pos, HALF + lane * PAIRS + i]
            for k in T.unroll(Q_ITERS):
                for m in T.unroll(PAIRS):
                    x0: T.f32 = T.Cast("float32", x[k * VEC + 2 * m])
                    x1: T.f32 = T.Cast("float32", x[k * VEC + 2 * m + 1])
                    y[2 * m] = T.Cast("bfloat16", x0 * cs[m] - x1 * cs[PAIRS + m])
                    y[2 * m + 1] = T.Cast("bfloat16", x1 * cs[m] + x0 * cs[PAIRS + m])
                for i in T.vectorized(VEC):
                    QO[tok, head0 + k * HEAD_STRIDE, lane * VEC + i] = y[i]
        else:
            w = T.meta_var(tx - Q_THREADS)
            slot: T.int32 = T.Cast("int32", S[tok])
            if slot >= 0:
                blk = T.meta_var(slot // BLOCK)
                row = T.meta_var(slot % BLOCK)
                for i in T.vectorized(VEC):
                    x[i] = KV[tok, w * VEC + i]
                for i in T.vectorized(VEC):
                    x[VEC + i] = KV[tok, (w + KV_THREADS) * VEC + i]
                if w < HEAD_VECS:
                    for i in T.vectorized(VEC):
                        x[2 * VEC + i] = KPE[tok, w * VEC + i]
                    for i in T.vectorized(PAIRS):
                        cs[i] = CS[pos, w * PAIRS + i]
                    for i in T.vectorized(PAIRS):
                        cs[PAIRS + i] = CS[pos, HALF + w * PAIRS + i]
                    for m in T.unroll(PAIRS):
                        k0: T.f32 = T.Cast("float32", x[2 * VEC + 2 * m])
                        k1: T.f32 = T.Cast("float32", x[2 * VEC + 2 * m + 1])
                        y[2 * m] = T.Cast("bfloat16", k0 * cs[m] - k1 * cs[PAIRS + m])
                        y[2 * m + 1] = T.Cast("bfloat16", k1 * cs[m] + k0 * cs[PAIRS + m])
                    for i in T.vectorized(VEC):
                        C[blk, row, RANK + w * VEC + i] = y[i]
                for i in T.vectorized(VEC):
                    C[blk, row, w * VEC + i] = x[i]
                for i in T.vectorized(VEC):
                    C[blk, row, (w + KV_THREADS) * VEC + i] = x[VEC + i]

    mod = tvm.IRModule({"main": mla})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(
    q_pe: torch.Tensor,
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
) -> tuple[int, int, int]:
    return q_pe.shape[0], cos_sin_cache.shape[0], kv_cache.shape[0]


def run(
    q_pe: torch.Tensor,
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
) -> torch.Tensor:
    key = _shape_key(q_pe, kv_c, k_pe, positions, cos_sin_cache, slot_mapping, kv_cache)
    q = q_pe.contiguous()
    out = torch.empty_like(q)
    if key[0] == 0:
        return out
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    # kv_cache is updated in place (passed as it is: the kernel splits slots into block and row)
    kernel(
        q,
        kv_c.contiguous(),
        k_pe.contiguous(),
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        slot_mapping.contiguous(),
        kv_cache,
        out,
    )
    return out
