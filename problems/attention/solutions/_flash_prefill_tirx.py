"""TIRx flash-attention causal prefill template, instantiated by the p04-p09 `NN_fused_tirx.py` solutions.

One kernel (FlashAttention-2 forward on mma.sync), CTA = 4 warps = one (sequence, query tile, query head);
CTAs of one query tile's heads are adjacent, so the heads of a KV head read its K/V tiles while they are
in L2. Each CTA walks its query tiles' sequence from the last tile to the first (the heaviest causal
tiles start first). Per CTA (index math in `_flash_prefill.py`):

- cp.async 16-byte copies stage the Q tile (rows past the sequence end re-read its last row) and one K
  and one V tile of 64 tokens into XOR-swizzled shared memory; K/V rows come through the page table
  (page size 1: one table read per row; 64: one page per tile) or straight from ragged K/V, tokens past
  the KV end re-read its last token. FA2's schedule: V(n) is copied while Q·K(n)ᵀ runs, K(n-1) while
  the softmax and P·V(n) run; two barriers per tile.
- Q·Kᵀ and P·V on mma.sync m16n8k16 (bf16 x bf16 -> fp32) fed by ldmatrix.x4 (.trans for V); P stays in
  registers (the S accumulator tile is the A fragment of P·V).
- Online softmax in base 2 (sm_scale·log2(e) folded into the scale), fp32 running max/sum per row,
  quad shuffles for the row max, P rounded to bf16 for the P·V product; the causal mask (query i sees
  KV tokens j <= i + Lk - Lq) only in the tiles that cross the diagonal; masked logits are -3e38 and a
  row whose max is still -3e38 uses 0 as its max, so no NaN ever forms.
- Epilogue: O / l rounded to bf16 through shared memory into 16-byte row stores; lse = m + log2(l).

Compiled once per (total_q, KV pool rows, batch, page-table length) and cached.
"""

from __future__ import annotations

import math

import torch
import tvm
from tvm.script import tirx as T

from problems.attention.solutions._flash_prefill import (
    BN,
    NEG_BIG,
    THREADS,
    Tiling,
    acc_col,
    acc_row,
    copy_row,
    kv_row,
    ldsm_n_pairs,
    ldsm_rows_then_k,
    swizzled_chunk,
)

LOG2E = 1.0 / math.log(2.0)

ShapeKey = tuple[int, int, int, int, int]


class FlashPrefill:
    """The template for one `Tiling`; ``__call__`` runs it on (q, k, v, qo_indptr, kv_indptr, table, last)."""

    def __init__(self, tiling: Tiling) -> None:
        self.t = tiling
        self._kernels: dict[ShapeKey, tvm.runtime.Module] = {}

    @staticmethod
    def shape_key(
        q: torch.Tensor, k: torch.Tensor, qo_indptr: torch.Tensor, table: torch.Tensor, last: torch.Tensor
    ) -> ShapeKey:
        """(total_q, KV pool rows, batch, page-table length, last-page-length length)."""
        rows = k.shape[0] * (k.shape[1] if k.dim() == 4 else 1)
        return q.shape[0], rows, qo_indptr.shape[0] - 1, table.shape[0], last.shape[0]

    def build(self, total_q: int, kv_rows: int, batch: int, n_table: int, n_last: int) -> tvm.runtime.Module:
        t = self.t
        hq, hkv, group, d, page = t.hq, t.hkv, t.group, t.d, t.page
        bm, chunks, row_step = t.bm, t.chunks, t.row_step
        kv_loads, q_loads = t.kv_loads, t.q_loads
        k_steps = d // 16  # Q·Kᵀ k-steps
        s_tiles = BN // 8  # n8 tiles of S
        o_tiles = d // 8  # n8 tiles of O
        grid = t.grid_tiles(total_q, batch) * hq

        @T.prim_func
        def prefill(
            q_ptr: T.handle,
            k_ptr: T.handle,
            v_ptr: T.handle,
            qo_ptr: T.handle,
            kvp_ptr: T.handle,
            table_ptr: T.handle,
            last_ptr: T.handle,
            o_ptr: T.handle,
            lse_ptr: T.handle,
            scale2: T.float32,
        ):
            Q = T.match_buffer(q_ptr, (total_q, hq, d), "bfloat16")
            K = T.match_buffer(k_ptr, (kv_rows, hkv, d), "bfloat16")
            V = T.match_buffer(v_ptr, (kv_rows, hkv, d), "bfloat16")
            QO = T.match_buffer(qo_ptr, (batch + 1,), "int32")
            KVP = T.match_buffer(kvp_ptr, (batch + 1,), "int32")
            TABLE = T.match_buffer(table_ptr, (n_table,), "int32")
            LAST = T.match_buffer(last_ptr, (n_last,), "int32")
            OUT = T.match_buffer(o_ptr, (total_q, hq, d), "bfloat16")
            LSE = T.match_buffer(lse_ptr, (total_q, hq), "float32")
            T.device_entry()
            bid = T.cta_id([grid])
            tx = T.thread_id([THREADS])
            # two CTAs an SM: for 128 threads ptxas otherwise aims at three (168 registers) and spills (p08)
            T.attr(0, "tirx.launch_bounds_min_blocks_per_sm", 2)
            pool = T.SMEMPool()
            sq = pool.alloc((bm * d,), "bfloat16", align=128)
            sk = pool.alloc((BN * d,), "bfloat16", align=128)
            sv = pool.alloc((BN * d,), "bfloat16", align=128)
            srows = pool.alloc((2, BN), "int32", align=16)  # pool rows of tile n in srows[n % 2]
            pool.commit()
            qa = T.alloc_local((4,), "uint32")  # A fragments of Q
            fb = T.alloc_local((4,), "uint32")  # B fragments of two n8 tiles (K or V)
            pa = T.alloc_local((8,), "bfloat16")  # A fragments of P
            pw = pa.view("uint32")
            s = T.alloc_local((s_tiles, 4), "float32")
            o = T.alloc_local((o_tiles, 4), "float32")
            m_run = T.alloc_local((2,), "float32")
            l_run = T.alloc_local((2,), "float32")
            h = T.meta_var(bid % hq)
            kvh = T.meta_var(bid % hq // group)
            warp = T.meta_var(tx // 32)
            lane = T.meta_var(tx % 32)
            cc = T.meta_var(tx % chunks)  # the 16-byte chunk this thread copies in every row
            a_row, a_k = ldsm_rows_then_k(lane)
            b_row, b_k = ldsm_n_pairs(lane)

            @T.inline
            def fill_rows(n, kv0, lk):
                # pool rows of tile n, one thread a token; tokens past the KV end re-read the last one
                if tx < BN:
                    srows[n % 2, tx] = kv_row(TABLE, kv0, T.min(n * BN + tx, lk - 1), page)

            @T.inline
            def copy_tile(dst, src, n):
                for i in T.unroll(kv_loads):
                    r = T.meta_var(copy_row(tx, i, row_step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        dst.ptr_to([swizzled_chunk(r, cc, chunks) * 8]), src.ptr_to([srows[n % 2, r], kvh, cc * 8]), 16
                    )

            # this CTA's (sequence, query tile): tiles of a sequence are numbered from its last one
            seq: T.int32 = -1
            mblk: T.int32 = 0
            rem: T.int32 = bid // hq
            for b in T.serial(batch):
                ntb: T.int32 = (QO[b + 1] - QO[b] + bm - 1) // bm
                if seq < 0:
                    if rem < ntb:
                        seq = b
                        mblk = ntb - 1 - rem
                    else:
                        rem = rem - ntb
            if seq >= 0:
                q0: T.int32 = QO[seq]
                lq: T.int32 = QO[seq + 1] - q0
                kv0: T.int32 = KVP[seq]
                lk: T.int32 = KVP[seq + 1] - kv0
                if page > 1:
                    lk = (KVP[seq + 1] - kv0 - 1) * page + LAST[seq]
                m0: T.int32 = mblk * bm
                nrows: T.int32 = T.min(lq - m0, bm)
                delta: T.int32 = lk - lq  # query i sees KV tokens j <= i + delta
                ntile: T.int32 = (m0 + nrows + delta + BN - 1) // BN
                for i in T.unroll(q_loads):
                    r = T.meta_var(copy_row(tx, i, row_step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        sq.ptr_to([swizzled_chunk(r, cc, chunks) * 8]),
                        Q.ptr_to([q0 + T.min(m0 + r, lq - 1), h, cc * 8]),
                        16,
                    )
                fill_rows(ntile - 1, kv0, lk)
                T.cuda.cta_sync()
                copy_tile(sk, K, ntile - 1)
                T.ptx.cp.async_.commit_group()
                for hf in T.unroll(2):
                    m_run[hf] = T.float32(NEG_BIG)
                    l_run[hf] = T.float32(0)
                for j in T.unroll(o_tiles):
                    for c in T.unroll(4):
                        o[j, c] = T.float32(0)
                for it in T.serial(ntile):
                    n = T.meta_var(ntile - 1 - it)
                    # K(n) landed, and every warp is done reading V(n+1) and srows[(n+1) % 2]
                    T.ptx.cp.async_.wait_group(0)
                    T.cuda.cta_sync()
                    copy_tile(sv, V, n)
                    T.ptx.cp.async_.commit_group()
                    if n > 0:
                        fill_rows(n - 1, kv0, lk)
                    # S = Q K(n)^T
                    for j in T.unroll(s_tiles):
                        for c in T.unroll(4):
                            s[j, c] = T.float32(0)
                    for kk in T.unroll(k_steps):
                        T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(
                            qa[0], qa[1], qa[2], qa[3],
                            sq.ptr_to([swizzled_chunk(warp * 16 + a_row, 2 * kk + a_k, chunks) * 8]),
                        )  # fmt: skip
                        for np in T.unroll(s_tiles // 2):
                            T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(
                                fb[0], fb[1], fb[2], fb[3],
                                sk.ptr_to([swizzled_chunk(np * 16 + b_row, 2 * kk + b_k, chunks) * 8]),
                            )  # fmt: skip
                            for half in T.unroll(2):
                                T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(
                                    s[2 * np + half, 0], s[2 * np + half, 1],
                                    s[2 * np + half, 2], s[2 * np + half, 3],
                                    qa[0], qa[1], qa[2], qa[3],
                                    fb[2 * half], fb[2 * half + 1],
                                    s[2 * np + half, 0], s[2 * np + half, 1],
                                    s[2 * np + half, 2], s[2 * np + half, 3],
                                )  # fmt: skip
                    # V(n) landed, srows[(n-1) % 2] is written, and every warp is done reading K(n)
                    T.ptx.cp.async_.wait_group(0)
                    T.cuda.cta_sync()
                    if n > 0:
                        copy_tile(sk, K, n - 1)
                        T.ptx.cp.async_.commit_group()
                    for j in T.unroll(s_tiles):
                        for c in T.unroll(4):
                            s[j, c] = s[j, c] * scale2
                    if (n + 1) * BN > m0 + delta + 1:  # the tile crosses the causal diagonal of row m0
                        for j in T.unroll(s_tiles):
                            for c in T.unroll(4):
                                qi = T.meta_var(m0 + warp * 16 + acc_row(lane, c))
                                if n * BN + j * 8 + acc_col(lane, c) > qi + delta:
                                    s[j, c] = T.float32(NEG_BIG)
                    for hf in T.unroll(2):
                        mx: T.float32 = m_run[hf]
                        for j in T.unroll(s_tiles):
                            for e in T.unroll(2):
                                mx = T.max(mx, s[j, 2 * hf + e])
                        mx = T.cuda.warp_max(mx, width=4)
                        # a row with every logit masked so far keeps p = 0 (2^(-3e38 - 0))
                        m_use: T.float32 = T.Select(mx == T.float32(NEG_BIG), T.float32(0), mx)
                        alpha: T.float32 = T.exp2(m_run[hf] - m_use)
                        rs: T.float32 = T.float32(0)
                        for j in T.unroll(s_tiles):
                            for e in T.unroll(2):
                                p: T.float32 = T.exp2(s[j, 2 * hf + e] - m_use)
                                s[j, 2 * hf + e] = p
                                rs = rs + p
                        l_run[hf] = l_run[hf] * alpha + rs
                        m_run[hf] = mx
                        for j in T.unroll(o_tiles):
                            for e in T.unroll(2):
                                o[j, 2 * hf + e] = o[j, 2 * hf + e] * alpha
                    # O += P V(n): the S accumulators of n8 tiles 2kk, 2kk + 1 are P's A fragment
                    for kk in T.unroll(BN // 16):
                        for e in T.unroll(8):
                            pa[e] = T.Cast("bfloat16", s[2 * kk + e // 4, e % 4])
                        for dp in T.unroll(o_tiles // 2):
                            T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(
                                fb[0], fb[1], fb[2], fb[3],
                                sv.ptr_to([swizzled_chunk(kk * 16 + a_row, 2 * dp + a_k, chunks) * 8]),
                            )  # fmt: skip
                            for half in T.unroll(2):
                                T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(
                                    o[2 * dp + half, 0], o[2 * dp + half, 1],
                                    o[2 * dp + half, 2], o[2 * dp + half, 3],
                                    pw[0], pw[1], pw[2], pw[3],
                                    fb[2 * half], fb[2 * half + 1],
                                    o[2 * dp + half, 0], o[2 * dp + half, 1],
                                    o[2 * dp + half, 2], o[2 * dp + half, 3],
                                )  # fmt: skip
                # epilogue: every warp writes only its own rows of sq, which only it has read
                for hf in T.unroll(2):
                    row = T.meta_var(warp * 16 + acc_row(lane, 2 * hf))
                    total: T.float32 = T.cuda.warp_sum(l_run[hf], width=4)
                    inv: T.float32 = T.float32(1) / total
                    for j in T.unroll(o_tiles):
                        for e in T.unroll(2):
                            sq[swizzled_chunk(row, j, chunks) * 8 + acc_col(lane, e)] = T.Cast(
                                "bfloat16", o[j, 2 * hf + e] * inv
                            )
                    if lane % 4 == 0 and row < nrows:
                        LSE[q0 + m0 + row, h] = m_run[hf] + T.log2(total)
                T.cuda.cta_sync()
                for i in T.unroll(q_loads):
                    r = T.meta_var(copy_row(tx, i, row_step, chunks))
                    if r < nrows:
                        for e in T.vectorized(8):
                            OUT[q0 + m0 + r, h, cc * 8 + e] = sq[swizzled_chunk(r, cc, chunks) * 8 + e]

        mod = tvm.IRModule({"main": prefill})
        return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        qo_indptr: torch.Tensor,
        kv_indptr: torch.Tensor,
        table: torch.Tensor,
        last: torch.Tensor,
        sm_scale: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Paged K/V arrive as [pages, page size, Hkv, D] and run as the [pages · page size, Hkv, D] view;
        ragged K/V pass ``kv_indptr`` as the unused ``table``/``last`` (likewise ``last`` at page size 1)."""
        key = self.shape_key(q, k, qo_indptr, table, last)
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = self.build(*key)
        rows = key[1]
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
        kernel(
            q.contiguous(),
            k.reshape(rows, self.t.hkv, self.t.d),
            v.reshape(rows, self.t.hkv, self.t.d),
            qo_indptr.contiguous(),
            kv_indptr.contiguous(),
            table.contiguous(),
            last.contiguous(),
            out,
            lse,
            float(sm_scale) * LOG2E,
        )
        return out, lse
