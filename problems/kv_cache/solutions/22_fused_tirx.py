"""p22 main_index_dual_cache_insert_minimax_m3_bf16 — plan `fused`, TIRx: one scatter kernel for K, V and index K.

Plan: one kernel does the whole insert. A token's used columns are 144 16-byte vectors (64 of key,
64 of value, contiguous at qkv columns 8192..9215, and 16 of index key at columns 9728..9855).
72 threads own a token and each thread moves the vectors `lane` and `lane + 72`: it loads both
16-byte vectors from qkv (issued together with the two int64 slot loads, so the loads do not wait
on the slot) and stores each one to key_cache[slot], value_cache[slot] or index_cache[index_slot],
skipping a store whose slot is -1. A CTA of 288 threads covers 4 tokens (2048 CTAs at the
production shape); warps read and write contiguous 16-byte runs, every byte is read once and
written once. The caches are passed as they are (in place); the kernel splits a slot into block
and row. Compiled once per (num_tokens, num_blocks, num_index_blocks) and cached.
"""

import torch
import tvm
from tvm.script import tirx as T

QKV = 9856
DIM = 128
KV = 4 * DIM  # key (or value) values per token
VEC = 8  # bf16 per 16-byte vector
K_COL = 64 * DIM  # first key column of a qkv row (8192); value columns follow
IK_COL = 64 * DIM + 3 * KV  # first index-key column (9728)
KV_VECS = KV // VEC  # 64
HEAD_VECS = DIM // VEC  # 16
BLOCK = 128
TOKEN_VECS = 2 * KV_VECS + DIM // VEC  # 144
LANES = TOKEN_VECS // 2  # 72 threads per token, 2 vectors each
TOKENS_PER_CTA = 4
THREADS = LANES * TOKENS_PER_CTA

_KERNELS: dict[tuple[int, int, int], tvm.runtime.Module] = {}


def _build(tokens: int, blocks: int, iblocks: int) -> tvm.runtime.Module:
    grid = (tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA

    @T.prim_func
    def insert(
        q_ptr: T.handle,
        s_ptr: T.handle,
        is_ptr: T.handle,
        kc_ptr: T.handle,
        vc_ptr: T.handle,
        ic_ptr: T.handle,
    ):
        Q = T.match_buffer(q_ptr, (tokens, QKV), "bfloat16")
        S = T.match_buffer(s_ptr, (tokens,), "int64")
        IS = T.match_buffer(is_ptr, (tokens,), "int64")
        KC = T.match_buffer(kc_ptr, (blocks, BLOCK, KV // DIM, DIM), "bfloat16")
        VC = T.match_buffer(vc_ptr, (blocks, BLOCK, KV // DIM, DIM), "bfloat16")
        IC = T.match_buffer(ic_ptr, (iblocks, BLOCK, DIM), "bfloat16")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        tok = T.meta_var(bx * TOKENS_PER_CTA + tx // LANES)
        lane = T.meta_var(tx % LANES)
        a = T.alloc_local((VEC,), "bfloat16")  # vector `lane`: key, or value for lane >= 64
        b = T.alloc_local((VEC,), "bfloat16")  # vector `lane + 72`: value, or index key for lane >= 56
        if tok < tokens:
            slot: T.int32 = T.Cast("int32", S[tok])
            islot: T.int32 = T.Cast("int32", IS[tok])
            # key and value columns are contiguous: vector v < 128 sits at column 8192 + 8 v
            for i in T.vectorized(VEC):
                a[i] = Q[tok, K_COL + lane * VEC + i]
            if lane < 2 * KV_VECS - LANES:
                for i in T.vectorized(VEC):
                    b[i] = Q[tok, K_COL + (lane + LANES) * VEC + i]
            else:
                for i in T.vectorized(VEC):
                    b[i] = Q[tok, IK_COL + (lane + LANES - 2 * KV_VECS) * VEC + i]
            if slot >= 0:
                if lane < KV_VECS:
                    for i in T.vectorized(VEC):
                        KC[slot // BLOCK, slot % BLOCK, lane // HEAD_VECS, (lane % HEAD_VECS) * VEC + i] = a[i]
                else:
                    for i in T.vectorized(VEC):
                        VC[slot // BLOCK, slot % BLOCK, 0, (lane - KV_VECS) * VEC + i] = a[i]
                if lane < 2 * KV_VECS - LANES:
                    for i in T.vectorized(VEC):
                        VC[
                            slot // BLOCK,
                            slot % BLOCK,
                            (lane + LANES - KV_VECS) // HEAD_VECS,
                            ((lane + LANES - KV_VECS) % HEAD_VECS) * VEC + i,
                        ] = b[i]
            if islot >= 0 and lane >= 2 * KV_VECS - LANES:
                for i in T.vectorized(VEC):
                    IC[islot // BLOCK, islot % BLOCK, (lane + LANES - 2 * KV_VECS) * VEC + i] = b[i]

    mod = tvm.IRModule({"main": insert})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(
    qkv: torch.Tensor,
    slot_mapping: torch.Tensor,
    index_slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    index_cache: torch.Tensor,
) -> tuple[int, int, int]:
    return qkv.shape[0], key_cache.shape[0], index_cache.shape[0]


def run(
    qkv: torch.Tensor,
    slot_mapping: torch.Tensor,
    index_slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    index_cache: torch.Tensor,
) -> tuple[()]:
    shape = _shape_key(qkv, slot_mapping, index_slot_mapping, key_cache, value_cache, index_cache)
    if shape[0] == 0:
        return ()
    kernel = _KERNELS.get(shape)
    if kernel is None:
        kernel = _KERNELS[shape] = _build(*shape)
    # the caches are updated in place (no views: the kernel splits slots into block and row)
    kernel(
        qkv.contiguous(),
        slot_mapping.contiguous(),
        index_slot_mapping.contiguous(),
        key_cache,
        value_cache,
        index_cache,
    )
    return ()
