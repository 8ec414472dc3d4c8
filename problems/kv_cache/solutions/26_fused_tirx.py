"""p26 hybrid_kv_group_block_table_update_slot_mapping_int32_int64 — plan `fused`, TIRx: one kernel.

Plan: one kernel, grid num_reqs + num_updates + 1 CTAs of 256 threads. CTA b < num_reqs owns batch row
b and its request slot r = idx_mapping[b]: each warp finds the update u with update_req_indices[u] ==
r (lane-strided compare, butterfly max over the warp, -1 if none). If there is one, every thread gets,
per group, cnt = update_counts[g, u], the offset of u's ids first = Σ_{v<u} update_counts[g, v]
(lane-strided sum + butterfly), start = 0 if update_overwrite[u] else num_blocks[g, r], and the CTA
writes block_tables[g, r, start + j] = update_block_ids[g, first + j] (j strided over the threads). A
CTA barrier then makes the new entries visible to the whole CTA (and orders every read of the old
num_blocks before thread 0 writes num_blocks[g, r] = start + cnt); the CTA then maps its tokens qsl[b]
.. qsl[b+1]-1, 512 per pass (2 per thread, the position and table loads of both issued before the
stores; the first pass's positions are loaded before the update phase): slot = block_tables[g, r, p //
bs] * bs + p % bs in int64, for both groups. Only this CTA touches row r, so no grid-wide ordering is
needed. CTA num_reqs + u applies update u only when its slot is not scheduled (no batch row would),
and the last CTA writes -1 to the padded tail qsl[num_reqs] .. max_num_tokens-1. Positions are divided
in int32 (they index a table row, so p < max_num_blocks · bs < 2^31). Compiled once per shape and
cached.
"""

import torch
import tvm
from tvm.script import tirx as T

NG = 2  # KV-cache groups
THREADS = 256
UNROLL = 2  # tokens per thread per pass
FULL = 0xFFFFFFFF

_KERNELS: dict[tuple[int, ...], tvm.runtime.Module] = {}


def _build(
    max_reqs: int, max_blocks: int, num_updates: int, max_new: int, num_reqs: int, max_tokens: int
) -> tvm.runtime.Module:
    grid = num_reqs + num_updates + 1
    upd_iters = (num_updates + 31) // 32
    req_iters = (num_reqs + 31) // 32
    per_pass = THREADS * UNROLL

    @T.prim_func
    def block_table_step(
        bt_ptr: T.handle,
        nb_ptr: T.handle,
        bs_ptr: T.handle,
        ur_ptr: T.handle,
        uo_ptr: T.handle,
        uc_ptr: T.handle,
        ui_ptr: T.handle,
        im_ptr: T.handle,
        qsl_ptr: T.handle,
        pos_ptr: T.handle,
        out_ptr: T.handle,
    ):
        BT = T.match_buffer(bt_ptr, (NG, max_reqs, max_blocks), "int32")
        NB = T.match_buffer(nb_ptr, (NG, max_reqs), "int32")
        BS = T.match_buffer(bs_ptr, (NG,), "int32")
        UR = T.match_buffer(ur_ptr, (num_updates,), "int32")
        UO = T.match_buffer(uo_ptr, (num_updates,), "int32")
        UC = T.match_buffer(uc_ptr, (NG, num_updates), "int32")
        UI = T.match_buffer(ui_ptr, (NG, max_new), "int32")
        IM = T.match_buffer(im_ptr, (num_reqs,), "int32")
        QSL = T.match_buffer(qsl_ptr, (num_reqs + 1,), "int32")
        POS = T.match_buffer(pos_ptr, (max_tokens,), "int64")
        OUT = T.match_buffer(out_ptr, (NG, max_tokens), "int64")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        lane = T.meta_var(tx % 32)
        bs = T.alloc_local((NG,), "int32")
        start = T.alloc_local((NG,), "int32")
        cnt = T.alloc_local((NG,), "int32")
        first = T.alloc_local((NG,), "int32")
        pos = T.alloc_local((UNROLL,), "int32")
        pre = T.alloc_local((UNROLL,), "int32")
        blk = T.alloc_local((UNROLL, NG), "int32")
        r: T.int32 = 0
        u: T.int32 = -1
        t0: T.int32 = 0
        t1: T.int32 = 0
        if bx < num_reqs:
            # batch row bx: its slot, its tokens, and the update of that slot (if any)
            r = IM[bx]
            t0 = QSL[bx]
            t1 = QSL[bx + 1]
            # the first pass's positions do not depend on the update: load them now (clamped)
            for k in T.unroll(UNROLL):
                pre[k] = T.Cast("int32", POS[T.max(T.min(t0 + k * THREADS + tx, t1 - 1), 0)])
            for it in T.unroll(upd_iters):
                # clamped load, guarded select
                ur_v: T.int32 = UR[T.min(it * 32 + lane, num_updates - 1)]
                u = T.Select(T.And(it * 32 + lane < num_updates, ur_v == r), it * 32 + lane, u)
            for k in T.unroll(5):
                ou: T.int32 = T.cuda.__shfl_xor_sync(FULL, u, 16 >> k, 32)
                u = T.max(u, ou)
        elif bx < num_reqs + num_updates:
            # update bx - num_reqs, applied here only if no batch row owns its slot
            u = bx - num_reqs
            r = UR[bx - num_reqs]
            hit: T.int32 = 0
            for it in T.unroll(req_iters):
                im_v: T.int32 = IM[T.min(it * 32 + lane, num_reqs - 1)]
                hit = T.Select(T.And(it * 32 + lane < num_reqs, im_v == r), 1, hit)
            for k in T.unroll(5):
                oh: T.int32 = T.cuda.__shfl_xor_sync(FULL, hit, 16 >> k, 32)
                hit = T.max(hit, oh)
            if hit > 0:
                u = -1
        # u and r are uniform over the CTA from here on
        if u >= 0:
            for g in T.unroll(NG):
                part: T.int32 = 0
                for it in T.unroll(upd_iters):
                    if it * 32 + lane < u:
                        part = part + UC[g, it * 32 + lane]
                for k in T.unroll(5):
                    op: T.int32 = T.cuda.__shfl_xor_sync(FULL, part, 16 >> k, 32)
                    part = part + op
                first[g] = part
                cnt[g] = UC[g, u]
                start[g] = T.Select(UO[u] != 0, 0, NB[g, r])
            for g in T.unroll(NG):
                for it in T.serial((cnt[g] + THREADS - 1) // THREADS):
                    if it * THREADS + tx < cnt[g]:
                        BT[g, r, start[g] + it * THREADS + tx] = UI[g, first[g] + it * THREADS + tx]
        # the new entries are visible to the CTA, and every read of the old num_blocks is done
        T.cuda.cta_sync()
        if T.And(u >= 0, tx == 0):
            for g in T.unroll(NG):
                NB[g, r] = start[g] + cnt[g]
        for g in T.unroll(NG):
            bs[g] = BS[g]
        for it in T.serial((t1 - t0 + per_pass - 1) // per_pass):
            # clamped loads (always in the row), guarded stores
            for k in T.unroll(UNROLL):
                if it == 0:
                    pos[k] = pre[k]
                else:
                    pos[k] = T.Cast("int32", POS[T.min(t0 + it * per_pass + k * THREADS + tx, t1 - 1)])
            for k in T.unroll(UNROLL):
                for g in T.unroll(NG):
                    blk[k, g] = BT[g, r, pos[k] // bs[g]]
            for k in T.unroll(UNROLL):
                if t0 + it * per_pass + k * THREADS + tx < t1:
                    for g in T.unroll(NG):
                        OUT[g, t0 + it * per_pass + k * THREADS + tx] = T.Cast("int64", blk[k, g]) * T.Cast(
                            "int64", bs[g]
                        ) + T.Cast("int64", pos[k] % bs[g])
        if bx == num_reqs + num_updates:
            # padded tail
            ts: T.int32 = QSL[num_reqs]
            for it in T.serial((max_tokens - ts + THREADS - 1) // THREADS):
                if ts + it * THREADS + tx < max_tokens:
                    for g in T.unroll(NG):
                        OUT[g, ts + it * THREADS + tx] = T.int64(-1)

    mod = tvm.IRModule({"main": block_table_step})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(
    block_tables: torch.Tensor,
    num_blocks: torch.Tensor,
    block_sizes: torch.Tensor,
    update_req_indices: torch.Tensor,
    update_overwrite: torch.Tensor,
    update_counts: torch.Tensor,
    update_block_ids: torch.Tensor,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
) -> tuple[int, ...]:
    return (
        block_tables.shape[1],
        block_tables.shape[2],
        update_req_indices.shape[0],
        update_block_ids.shape[1],
        idx_mapping.shape[0],
        positions.shape[0],
    )


def run(
    block_tables: torch.Tensor,
    num_blocks: torch.Tensor,
    block_sizes: torch.Tensor,
    update_req_indices: torch.Tensor,
    update_overwrite: torch.Tensor,
    update_counts: torch.Tensor,
    update_block_ids: torch.Tensor,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    key = _shape_key(
        block_tables,
        num_blocks,
        block_sizes,
        update_req_indices,
        update_overwrite,
        update_counts,
        update_block_ids,
        idx_mapping,
        query_start_loc,
        positions,
    )
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    out = torch.empty((NG, positions.shape[0]), dtype=torch.int64, device=positions.device)
    # block_tables and num_blocks are updated in place (they are contiguous state tensors)
    kernel(
        block_tables,
        num_blocks,
        block_sizes,
        update_req_indices,
        update_overwrite,
        update_counts,
        update_block_ids,
        idx_mapping,
        query_start_loc,
        positions,
        out,
    )
    return out
