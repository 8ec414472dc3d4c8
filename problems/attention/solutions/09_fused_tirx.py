"""p09 gqa_ragged_prefill_causal_h8_kv1_d256_bf16 — plan `fused`, TIRx: flash attention (mma.sync).

Plan: the shared TIRx template (FlashAttention-2 forward; `_flash_prefill_tirx.py` and its index math
`_flash_prefill.py`, inlined in this file) instantiated for 8 query / 1 KV heads, head dim 256, ragged
K/V. One CTA of 4 warps per (sequence, query tile of 64 rows, query head): a grid of 136 query tiles at most x 8
heads, heads fastest so the 8 query heads of a KV head read its K/V tiles while they are in L2. K/V tiles of 64
tokens (contiguous rows of the sequence) are copied with 16-byte cp.async into swizzled shared memory (V(n)
while Q·K(n)ᵀ runs, K(n-1) while the softmax and P·V(n) run); Q·Kᵀ and P·V on mma.sync m16n8k16 (bf16 -> fp32)
fed by ldmatrix.x4; base-2 online softmax in fp32 with the end-aligned causal mask only on the tiles crossing
the diagonal; O / l rounded to bf16 and written as 16-byte row stores; lse = m + log2(l). Compute-bound: 52
GFLOP of bf16 matmul at WORKLOAD.
"""

import math
from types import SimpleNamespace

import torch
import tvm
from tvm.script import tirx as T

# bundle: problems/attention/solutions/_flash_prefill.py as FP
# bundle: problems/attention/solutions/_flash_prefill_tirx.py as FT

# ---- bundled shared kernel code (python -m problems._bundle; edit the source modules) ----

# problems/attention/solutions/_flash_prefill.py
_FP_BN = 64  # KV tokens per tile (also page size 64: one tile is one page)
_FP_THREADS = 128  # 4 warps
_FP_WARPS = _FP_THREADS // 32
_FP_NEG_BIG = -3.0e38  # finite "minus infinity" for masked logits: 2^(NEG_BIG - m) is 0 and never NaN


class _FP_Tiling:
    """The compile-time shape of one instantiation: heads, head dim and page size (0 = ragged K/V).

    A plain class: `dataclasses` generates its methods as dynamic code, which the verifier refuses in a submission."""

    def __init__(self, hq: int, hkv: int, d: int, page: int) -> None:
        if hq % hkv or d % 64 or page not in (0, 1, _FP_BN):
            raise ValueError(f"unsupported prefill tiling hq={hq} hkv={hkv} d={d} page={page}")
        self.hq, self.hkv, self.d, self.page = hq, hkv, d, page

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.hq // self.hkv

    @property
    def bm(self) -> int:
        """Query rows per CTA: one m16 tile a warp (two spill registers in both DSLs even at head dim 128)."""
        return _FP_WARPS * 16

    @property
    def chunks(self) -> int:
        """16-byte chunks per row of a Q/K/V tile."""
        return self.d // 8

    @property
    def row_step(self) -> int:
        """Rows one pass of the CTA's 16-byte copies covers (a thread copies one chunk a row)."""
        return _FP_THREADS // self.chunks

    @property
    def kv_loads(self) -> int:
        """16-byte copies per thread for one K or V tile."""
        return _FP_BN // self.row_step

    @property
    def q_loads(self) -> int:
        """16-byte copies per thread for the Q tile (and for the output tile)."""
        return self.bm // self.row_step

    @property
    def smem_bytes(self) -> int:
        """Q tile + one K tile + one V tile, bf16."""
        return (self.bm + 2 * _FP_BN) * self.d * 2

    def grid_tiles(self, total_q: int, batch: int) -> int:
        """Query tiles the grid covers: at most ceil(total_q / bm) plus one partial tile per sequence."""
        return (total_q + self.bm - 1) // self.bm + batch


def _FP_swizzled_chunk(row, chunk, chunks):
    """Shared-memory chunk index of 16-byte chunk ``chunk`` of tile row ``row``: the low three chunk bits
    are XOR-ed with row % 8, so the 8 rows one ldmatrix matrix reads fall in 8 different bank groups."""
    return row * chunks + (chunk ^ (row % 8))


def _FP_copy_row(tid, i, row_step, chunks):
    """Tile row of a thread's ``i``-th 16-byte copy (its chunk is ``tid % chunks``)."""
    return tid // chunks + row_step * i


def _FP_flat_copy(tid, i, chunks):
    """(row, chunk) of a thread's ``i``-th 16-byte copy when a row's chunks do not divide the CTA: the
    CTA's copies walk the tile's chunks in row-major order, THREADS at a time."""
    f = tid + _FP_THREADS * i
    return f // chunks, f % chunks


def _FP_ldsm_rows_then_k(lane):
    """(row, chunk) offsets of the address ``lane`` gives ldmatrix.x4 for a 16x16 block whose matrices
    are rows 0-7 | rows 8-15 | rows 0-7, k + 8 | rows 8-15, k + 8: the mma A fragment a0..a3 (Q, P·V's
    V read with .trans, whose 'rows' are KV tokens and k the output dims)."""
    return lane % 8 + 8 * (lane // 8 % 2), lane // 16


def _FP_ldsm_n_pairs(lane):
    """(row, chunk) offsets for ldmatrix.x4 of K rows n 0-7 | n 0-7, k + 8 | n 8-15 | n 8-15, k + 8:
    b0, b1 of the n-tile n0 and b0, b1 of the n-tile n0 + 8 of Q·Kᵀ."""
    return lane % 8 + 8 * (lane // 16), lane // 8 % 2


def _FP_acc_row(lane, c):
    """Row of accumulator register ``c`` (0..3) of an m16n8 tile: rows g and g + 8, g = lane // 4."""
    return lane // 4 + 8 * (c // 2)


def _FP_acc_col(lane, c):
    """Column of accumulator register ``c`` of an m16n8 tile: 2·(lane % 4) and the next one."""
    return 2 * (lane % 4) + c % 2


def _FP_kv_row(table, kv_start, token, page):
    """Row of the [pool rows, Hkv, D] K/V view holding token ``token`` of a sequence: ragged (page 0)
    rows are contiguous from ``kv_start``; page size 1 reads the page table ``table`` at ``kv_start``;
    page size 64 reads it once per page and adds the slot."""
    if page == 0:
        return kv_start + token
    if page == 1:
        return table[kv_start + token]
    return table[kv_start + token // page] * page + token % page


FP = SimpleNamespace(
    BN=_FP_BN,
    THREADS=_FP_THREADS,
    WARPS=_FP_WARPS,
    NEG_BIG=_FP_NEG_BIG,
    Tiling=_FP_Tiling,
    swizzled_chunk=_FP_swizzled_chunk,
    copy_row=_FP_copy_row,
    flat_copy=_FP_flat_copy,
    ldsm_rows_then_k=_FP_ldsm_rows_then_k,
    ldsm_n_pairs=_FP_ldsm_n_pairs,
    acc_row=_FP_acc_row,
    acc_col=_FP_acc_col,
    kv_row=_FP_kv_row,
)


# problems/attention/solutions/_flash_prefill_tirx.py
_FT_LOG2E = 1.0 / math.log(2.0)

_FT_ShapeKey = tuple[int, int, int, int, int]


class _FT_FlashPrefill:
    """The template for one `Tiling`; ``__call__`` runs it on (q, k, v, qo_indptr, kv_indptr, table, last)."""

    def __init__(self, tiling: _FP_Tiling) -> None:
        self.t = tiling
        self._kernels: dict[_FT_ShapeKey, tvm.runtime.Module] = {}

    @staticmethod
    def shape_key(
        q: torch.Tensor, k: torch.Tensor, qo_indptr: torch.Tensor, table: torch.Tensor, last: torch.Tensor
    ) -> _FT_ShapeKey:
        """(total_q, KV pool rows, batch, page-table length, last-page-length length)."""
        rows = k.shape[0] * (k.shape[1] if k.dim() == 4 else 1)
        return q.shape[0], rows, qo_indptr.shape[0] - 1, table.shape[0], last.shape[0]

    def build(self, total_q: int, kv_rows: int, batch: int, n_table: int, n_last: int) -> tvm.runtime.Module:
        t = self.t
        hq, hkv, group, d, page = t.hq, t.hkv, t.group, t.d, t.page
        bm, chunks, row_step = t.bm, t.chunks, t.row_step
        kv_loads, q_loads = t.kv_loads, t.q_loads
        k_steps = d // 16  # Q·Kᵀ k-steps
        s_tiles = _FP_BN // 8  # n8 tiles of S
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
            tx = T.thread_id([_FP_THREADS])
            # two CTAs an SM: for 128 threads ptxas otherwise aims at three (168 registers) and spills (p08)
            T.attr(0, "tirx.launch_bounds_min_blocks_per_sm", 2)
            pool = T.SMEMPool()
            sq = pool.alloc((bm * d,), "bfloat16", align=128)
            sk = pool.alloc((_FP_BN * d,), "bfloat16", align=128)
            sv = pool.alloc((_FP_BN * d,), "bfloat16", align=128)
            srows = pool.alloc((2, _FP_BN), "int32", align=16)  # pool rows of tile n in srows[n % 2]
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
            a_row, a_k = _FP_ldsm_rows_then_k(lane)
            b_row, b_k = _FP_ldsm_n_pairs(lane)

            @T.inline
            def fill_rows(n, kv0, lk):
                # pool rows of tile n, one thread a token; tokens past the KV end re-read the last one
                if tx < _FP_BN:
                    srows[n % 2, tx] = _FP_kv_row(TABLE, kv0, T.min(n * _FP_BN + tx, lk - 1), page)

            @T.inline
            def copy_tile(dst, src, n):
                for i in T.unroll(kv_loads):
                    r = T.meta_var(_FP_copy_row(tx, i, row_step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        dst.ptr_to([_FP_swizzled_chunk(r, cc, chunks) * 8]),
                        src.ptr_to([srows[n % 2, r], kvh, cc * 8]),
                        16,
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
                ntile: T.int32 = (m0 + nrows + delta + _FP_BN - 1) // _FP_BN
                for i in T.unroll(q_loads):
                    r = T.meta_var(_FP_copy_row(tx, i, row_step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        sq.ptr_to([_FP_swizzled_chunk(r, cc, chunks) * 8]),
                        Q.ptr_to([q0 + T.min(m0 + r, lq - 1), h, cc * 8]),
                        16,
                    )
                fill_rows(ntile - 1, kv0, lk)
                T.cuda.cta_sync()
                copy_tile(sk, K, ntile - 1)
                T.ptx.cp.async_.commit_group()
                for hf in T.unroll(2):
                    m_run[hf] = T.float32(_FP_NEG_BIG)
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
                            sq.ptr_to([_FP_swizzled_chunk(warp * 16 + a_row, 2 * kk + a_k, chunks) * 8]),
                        )  # fmt: skip
                        for np in T.unroll(s_tiles // 2):
                            T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(
                                fb[0], fb[1], fb[2], fb[3],
                                sk.ptr_to([_FP_swizzled_chunk(np * 16 + b_row, 2 * kk + b_k, chunks) * 8]),
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
                    if (n + 1) * _FP_BN > m0 + delta + 1:  # the tile crosses the causal diagonal of row m0
                        for j in T.unroll(s_tiles):
                            for c in T.unroll(4):
                                qi = T.meta_var(m0 + warp * 16 + _FP_acc_row(lane, c))
                                if n * _FP_BN + j * 8 + _FP_acc_col(lane, c) > qi + delta:
                                    s[j, c] = T.float32(_FP_NEG_BIG)
                    for hf in T.unroll(2):
                        mx: T.float32 = m_run[hf]
                        for j in T.unroll(s_tiles):
                            for e in T.unroll(2):
                                mx = T.max(mx, s[j, 2 * hf + e])
                        mx = T.cuda.warp_max(mx, width=4)
                        # a row with every logit masked so far keeps p = 0 (2^(-3e38 - 0))
                        m_use: T.float32 = T.Select(mx == T.float32(_FP_NEG_BIG), T.float32(0), mx)
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
                    for kk in T.unroll(_FP_BN // 16):
                        for e in T.unroll(8):
                            pa[e] = T.Cast("bfloat16", s[2 * kk + e // 4, e % 4])
                        for dp in T.unroll(o_tiles // 2):
                            T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(
                                fb[0], fb[1], fb[2], fb[3],
                                sv.ptr_to([_FP_swizzled_chunk(kk * 16 + a_row, 2 * dp + a_k, chunks) * 8]),
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
                    row = T.meta_var(warp * 16 + _FP_acc_row(lane, 2 * hf))
                    total: T.float32 = T.cuda.warp_sum(l_run[hf], width=4)
                    inv: T.float32 = T.float32(1) / total
                    for j in T.unroll(o_tiles):
                        for e in T.unroll(2):
                            sq[_FP_swizzled_chunk(row, j, chunks) * 8 + _FP_acc_col(lane, e)] = T.Cast(
                                "bfloat16", o[j, 2 * hf + e] * inv
                            )
                    if lane % 4 == 0 and row < nrows:
                        LSE[q0 + m0 + row, h] = m_run[hf] + T.log2(total)
                T.cuda.cta_sync()
                for i in T.unroll(q_loads):
                    r = T.meta_var(_FP_copy_row(tx, i, row_step, chunks))
                    if r < nrows:
                        for e in T.vectorized(8):
                            OUT[q0 + m0 + r, h, cc * 8 + e] = sq[_FP_swizzled_chunk(r, cc, chunks) * 8 + e]

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
            float(sm_scale) * _FT_LOG2E,
        )
        return out, lse


FT = SimpleNamespace(
    LOG2E=_FT_LOG2E,
    ShapeKey=_FT_ShapeKey,
    FlashPrefill=_FT_FlashPrefill,
)

# ---- end of bundle ----


_PREFILL = FT.FlashPrefill(FP.Tiling(hq=8, hkv=1, d=256, page=0))


def _shape_key(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, *_: object
) -> tuple[int, int, int, int, int]:
    return _PREFILL.shape_key(q, k, qo_indptr, kv_indptr, kv_indptr)


def _build(*key: int):
    return _PREFILL.build(*key)


def run(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    # ragged K/V: rows are contiguous per sequence, so kv_indptr fills the unused page-table slots
    return _PREFILL(q, k, v, qo_indptr, kv_indptr, kv_indptr, kv_indptr, sm_scale)
