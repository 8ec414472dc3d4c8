"""p14 mla_paged_decode_h16_ckv512_kpe64_ps1_bf16 — plan `splitkv`, TIRx: MLA decode on mma.sync + a merge kernel.

Plan: the 16 heads of a sequence are one m16 row tile, so the absorbed MLA decode is a small GEMM per KV
tile that runs on tensor cores (mma.sync m16n8k16, bf16 -> fp32; on CUDA cores its 9 GFLOP would take
longer than reading the 302 MB cache). Kernel 1 splits the concatenated token stream of all sequences
(the CSR order of kv_indices) into 2 x SMs equal ranges, one CTA of 4 warps each; a CTA walks the
sequences its range meets. Per (CTA, sequence) segment: the 16 x 576 query (q_nope | q_pe) is copied to
shared memory and each warp keeps the ldmatrix A fragments of its 144 dims in registers; tiles of 32
tokens (ckv | kpe rows through the page table, staged per tile in shared memory) are double-buffered
with 16-byte cp.async into XOR-swizzled shared memory. Each warp computes Q·Kᵀ over its 144 dims, the
4 partial 16 x 32 score tiles are summed through shared memory, every warp runs the same base-2 online
softmax (fp32, tokens past the segment masked with -3e38) and multiplies P (bf16, from registers) by its
128 latent dims of V = ckv (ldmatrix.trans). The segment's normalised fp32 O and base-2 lse go to slot
CTA + sequence of a workspace (consecutive segments take consecutive or skipped slots, never the same).
Kernel 2, one CTA per sequence, merges its segments: M = max lse_k, w_k = 2^(lse_k - M), out = sum w_k O_k
/ sum w_k (bf16), lse = M + log2(sum w_k). Memory-bound: every cache row is read once (the fp32
workspace adds ~7%). Compiled once per (batch, pool pages, page-table length, grid) and cached.
"""

import math
from types import SimpleNamespace

import torch
import tvm
from tvm.script import tirx as T

# bundle: problems/attention/solutions/_flash_prefill.py as FP

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

# ---- end of bundle ----


H = 16  # query heads: one m16 tile
DC = 512  # latent (ckv) dims: the value, and the first part of the key
DP = 64  # rope (kpe) dims
DK = DC + DP
CHUNKS = DK // 8  # 16-byte chunks of a query or cache row
CKV_CHUNKS = DC // 8
BT = 32  # tokens per KV tile
K_STEPS = DK // 16 // FP.WARPS  # Q·Kᵀ k-steps of a warp (144 dims)
V_TILES = DC // FP.WARPS // 8  # n8 output tiles of a warp (128 dims)
S_TILES = BT // 8
Q_COPIES = H * CHUNKS // FP.THREADS
KV_COPIES = BT * CHUNKS // FP.THREADS
CTAS_PER_SM = 2  # 98 KiB of shared memory a CTA
MERGE_THREADS = 256
MERGE_VEC = H * DC // MERGE_THREADS  # dims a merge thread owns
LOG2E = 1.0 / math.log(2.0)

ShapeKey = tuple[int, int, int, int]
_KERNELS: dict[ShapeKey, tuple[tvm.runtime.Module, tvm.runtime.Module]] = {}


def _build(batch: int, pages: int, n_idx: int, grid: int) -> tuple[tvm.runtime.Module, tvm.runtime.Module]:
    slots = grid + batch

    @T.prim_func
    def partial(
        qn_ptr: T.handle,
        qp_ptr: T.handle,
        ckv_ptr: T.handle,
        kpe_ptr: T.handle,
        ip_ptr: T.handle,
        idx_ptr: T.handle,
        po_ptr: T.handle,
        pl_ptr: T.handle,
        scale2: T.float32,
    ):
        QN = T.match_buffer(qn_ptr, (batch, H, DC), "bfloat16")
        QP = T.match_buffer(qp_ptr, (batch, H, DP), "bfloat16")
        CKV = T.match_buffer(ckv_ptr, (pages, DC), "bfloat16")
        KPE = T.match_buffer(kpe_ptr, (pages, DP), "bfloat16")
        IP = T.match_buffer(ip_ptr, (batch + 1,), "int32")
        IDX = T.match_buffer(idx_ptr, (n_idx,), "int32")
        PO = T.match_buffer(po_ptr, (slots, H, DC), "float32")
        PL = T.match_buffer(pl_ptr, (slots, H), "float32")
        T.device_entry()
        c = T.cta_id([grid])
        tx = T.thread_id([FP.THREADS])
        pool = T.SMEMPool()
        sq = pool.alloc((H * DK,), "bfloat16", align=128)
        skv = pool.alloc((2, BT * DK), "bfloat16", align=128)
        ss = pool.alloc((FP.WARPS * S_TILES * 4 * 32,), "float32", align=16)  # partial scores [warp, tile, c, lane]
        srows = pool.alloc((2, BT), "int32", align=16)  # pool rows of tile t in srows[t % 2]
        pool.commit()
        qa = T.alloc_local((K_STEPS, 4), "uint32")
        fb = T.alloc_local((4,), "uint32")
        s = T.alloc_local((S_TILES, 4), "float32")
        pa = T.alloc_local((BT // 16, 8), "bfloat16")
        pw = pa.view("uint32")
        o = T.alloc_local((V_TILES, 4), "float32")
        m_run = T.alloc_local((2,), "float32")
        l_run = T.alloc_local((2,), "float32")
        warp = T.meta_var(tx // 32)
        lane = T.meta_var(tx % 32)
        a_row, a_k = FP.ldsm_rows_then_k(lane)
        b_row, b_k = FP.ldsm_n_pairs(lane)

        @T.inline
        def fill_rows(t, s0, s1):
            # tokens past the segment re-read its last token (finite, masked)
            if tx < BT:
                srows[t % 2, tx] = IDX[T.min(s0 + t * BT + tx, s1 - 1)]

        @T.inline
        def copy_tile(t):
            for i in T.unroll(KV_COPIES):
                r, ch = FP.flat_copy(tx, i, CHUNKS)
                dst = T.meta_var(skv.ptr_to([t % 2, FP.swizzled_chunk(r, ch, CHUNKS) * 8]))
                if ch < CKV_CHUNKS:
                    T.ptx.cp.async_.cg.shared.global_(dst, CKV.ptr_to([srows[t % 2, r], ch * 8]), 16)
                else:
                    T.ptx.cp.async_.cg.shared.global_(dst, KPE.ptr_to([srows[t % 2, r], (ch - CKV_CHUNKS) * 8]), 16)

        # this CTA's range [lo, hi) of the concatenated token stream and the sequences it meets
        total: T.int32 = IP[batch]
        span: T.int32 = (total + grid - 1) // grid
        lo: T.int32 = c * span
        hi: T.int32 = T.min(lo + span, total)
        b_first: T.int32 = 0
        b_end: T.int32 = 0
        for j in T.serial(batch):
            if IP[j + 1] <= lo:
                b_first = b_first + 1
            if IP[j] < hi:
                b_end = b_end + 1
        for k in T.serial(b_end - b_first):
            bb = T.meta_var(b_first + k)
            s0: T.int32 = T.max(IP[bb], lo)
            s1: T.int32 = T.min(IP[bb + 1], hi)
            n: T.int32 = s1 - s0
            ntiles: T.int32 = (n + BT - 1) // BT
            for i in T.unroll(Q_COPIES):
                r, ch = FP.flat_copy(tx, i, CHUNKS)
                dst = T.meta_var(sq.ptr_to([FP.swizzled_chunk(r, ch, CHUNKS) * 8]))
                if ch < CKV_CHUNKS:
                    T.ptx.cp.async_.cg.shared.global_(dst, QN.ptr_to([bb, r, ch * 8]), 16)
                else:
                    T.ptx.cp.async_.cg.shared.global_(dst, QP.ptr_to([bb, r, (ch - CKV_CHUNKS) * 8]), 16)
            T.ptx.cp.async_.commit_group()
            fill_rows(0, s0, s1)
            T.cuda.cta_sync()
            copy_tile(0)
            T.ptx.cp.async_.commit_group()
            T.ptx.cp.async_.wait_group(1)  # the query landed; tile 0 may still be in flight
            T.cuda.cta_sync()
            for ks in T.unroll(K_STEPS):
                T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(
                    qa[ks, 0], qa[ks, 1], qa[ks, 2], qa[ks, 3],
                    sq.ptr_to([FP.swizzled_chunk(a_row, 2 * (warp * K_STEPS + ks) + a_k, CHUNKS) * 8]),
                )  # fmt: skip
            for hf in T.unroll(2):
                m_run[hf] = T.float32(FP.NEG_BIG)
                l_run[hf] = T.float32(0)
            for j in T.unroll(V_TILES):
                for e in T.unroll(4):
                    o[j, e] = T.float32(0)
            for it in T.serial(ntiles):
                if it + 1 < ntiles:
                    fill_rows(it + 1, s0, s1)
                # srows[(it+1) % 2] is written, and every warp is done with tile it-1 and the partial scores
                T.cuda.cta_sync()
                if it + 1 < ntiles:
                    copy_tile(it + 1)
                    T.ptx.cp.async_.commit_group()
                    T.ptx.cp.async_.wait_group(1)
                else:
                    T.ptx.cp.async_.wait_group(0)
                T.cuda.cta_sync()
                # this warp's share of S = Q K^T: dims 144 warp .. 144 warp + 143
                for j in T.unroll(S_TILES):
                    for e in T.unroll(4):
                        s[j, e] = T.float32(0)
                for ks in T.unroll(K_STEPS):
                    for np in T.unroll(S_TILES // 2):
                        T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(
                            fb[0], fb[1], fb[2], fb[3],
                            skv.ptr_to([it % 2, FP.swizzled_chunk(np * 16 + b_row, 2 * (warp * K_STEPS + ks) + b_k,
                                                               CHUNKS) * 8]),
                        )  # fmt: skip
                        for half in T.unroll(2):
                            T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(
                                s[2 * np + half, 0], s[2 * np + half, 1], s[2 * np + half, 2], s[2 * np + half, 3],
                                qa[ks, 0], qa[ks, 1], qa[ks, 2], qa[ks, 3],
                                fb[2 * half], fb[2 * half + 1],
                                s[2 * np + half, 0], s[2 * np + half, 1], s[2 * np + half, 2], s[2 * np + half, 3],
                            )  # fmt: skip
                for j in T.unroll(S_TILES):
                    for e in T.unroll(4):
                        ss[((warp * S_TILES + j) * 4 + e) * 32 + lane] = s[j, e]
                T.cuda.cta_sync()
                # every warp sums the four shares and runs the same softmax
                for j in T.unroll(S_TILES):
                    for e in T.unroll(4):
                        acc: T.float32 = T.float32(0)
                        for w in T.unroll(FP.WARPS):
                            acc = acc + ss[((w * S_TILES + j) * 4 + e) * 32 + lane]
                        s[j, e] = acc * scale2
                if (it + 1) * BT > n:  # the segment ends inside this tile
                    for j in T.unroll(S_TILES):
                        for e in T.unroll(4):
                            if it * BT + j * 8 + FP.acc_col(lane, e) >= n:
                                s[j, e] = T.float32(FP.NEG_BIG)
                for hf in T.unroll(2):
                    mx: T.float32 = m_run[hf]
                    for j in T.unroll(S_TILES):
                        for e in T.unroll(2):
                            mx = T.max(mx, s[j, 2 * hf + e])
                    mx = T.cuda.warp_max(mx, width=4)
                    alpha: T.float32 = T.exp2(m_run[hf] - mx)
                    rs: T.float32 = T.float32(0)
                    for j in T.unroll(S_TILES):
                        for e in T.unroll(2):
                            p: T.float32 = T.exp2(s[j, 2 * hf + e] - mx)
                            s[j, 2 * hf + e] = p
                            rs = rs + p
                    l_run[hf] = l_run[hf] * alpha + rs
                    m_run[hf] = mx
                    for j in T.unroll(V_TILES):
                        for e in T.unroll(2):
                            o[j, 2 * hf + e] = o[j, 2 * hf + e] * alpha
                # O += P V: this warp's 128 latent dims
                for kk in T.unroll(BT // 16):
                    for e in T.unroll(8):
                        pa[kk, e] = T.Cast("bfloat16", s[2 * kk + e // 4, e % 4])
                for kk in T.unroll(BT // 16):
                    for dp in T.unroll(V_TILES // 2):
                        T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(
                            fb[0], fb[1], fb[2], fb[3],
                            skv.ptr_to([it % 2, FP.swizzled_chunk(kk * 16 + a_row, warp * V_TILES + 2 * dp + a_k,
                                                               CHUNKS) * 8]),
                        )  # fmt: skip
                        for half in T.unroll(2):
                            T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(
                                o[2 * dp + half, 0], o[2 * dp + half, 1], o[2 * dp + half, 2], o[2 * dp + half, 3],
                                pw[kk, 0], pw[kk, 1], pw[kk, 2], pw[kk, 3],
                                fb[2 * half], fb[2 * half + 1],
                                o[2 * dp + half, 0], o[2 * dp + half, 1], o[2 * dp + half, 2], o[2 * dp + half, 3],
                            )  # fmt: skip
            # the segment's normalised O and lse, in slot CTA + sequence
            for hf in T.unroll(2):
                head = T.meta_var(FP.acc_row(lane, 2 * hf))
                lsum: T.float32 = T.cuda.warp_sum(l_run[hf], width=4)
                inv: T.float32 = T.float32(1) / lsum
                for j in T.unroll(V_TILES):
                    for e in T.unroll(2):
                        PO[c + bb, head, warp * V_TILES * 8 + j * 8 + FP.acc_col(lane, e)] = o[j, 2 * hf + e] * inv
                if warp == 0 and lane % 4 == 0:
                    PL[c + bb, head] = m_run[hf] + T.log2(lsum)
            T.cuda.cta_sync()  # every warp is done with sq and skv before the next segment's copies

    @T.prim_func
    def merge(po_ptr: T.handle, pl_ptr: T.handle, ip_ptr: T.handle, o_ptr: T.handle, lse_ptr: T.handle):
        PO = T.match_buffer(po_ptr, (slots, H, DC), "float32")
        PL = T.match_buffer(pl_ptr, (slots, H), "float32")
        IP = T.match_buffer(ip_ptr, (batch + 1,), "int32")
        OUT = T.match_buffer(o_ptr, (batch, H, DC), "bfloat16")
        LSE = T.match_buffer(lse_ptr, (batch, H), "float32")
        T.device_entry()
        b = T.cta_id([batch])
        tx = T.thread_id([MERGE_THREADS])
        acc = T.alloc_local((MERGE_VEC,), "float32")
        part = T.alloc_local((MERGE_VEC,), "float32")
        ov = T.alloc_local((MERGE_VEC,), "bfloat16")
        h = T.meta_var(tx // (MERGE_THREADS // H))
        d0 = T.meta_var(tx % (MERGE_THREADS // H) * MERGE_VEC)
        span: T.int32 = (IP[batch] + grid - 1) // grid
        c0: T.int32 = IP[b] // span
        pieces: T.int32 = (IP[b + 1] - 1) // span - c0 + 1
        big: T.float32 = T.float32(FP.NEG_BIG)
        for k in T.serial(pieces):
            big = T.max(big, PL[c0 + k + b, h])
        wsum: T.float32 = T.float32(0)
        for e in T.unroll(MERGE_VEC):
            acc[e] = T.float32(0)
        for k in T.serial(pieces):
            w: T.float32 = T.exp2(PL[c0 + k + b, h] - big)
            wsum = wsum + w
            for v in T.unroll(MERGE_VEC // 4):
                for e in T.vectorized(4):
                    part[v * 4 + e] = PO[c0 + k + b, h, d0 + v * 4 + e]
            for e in T.unroll(MERGE_VEC):
                acc[e] = acc[e] + w * part[e]
        inv: T.float32 = T.float32(1) / wsum
        for e in T.unroll(MERGE_VEC):
            ov[e] = T.Cast("bfloat16", acc[e] * inv)
        for v in T.unroll(MERGE_VEC // 8):
            for e in T.vectorized(8):
                OUT[b, h, d0 + v * 8 + e] = ov[v * 8 + e]
        if tx % (MERGE_THREADS // H) == 0:
            LSE[b, h] = big + T.log2(wsum)

    target = {"kind": "cuda", "arch": "sm_90a"}
    return (
        tvm.compile(tvm.IRModule({"main": partial}), target=target, tir_pipeline="tirx"),
        tvm.compile(tvm.IRModule({"main": merge}), target=target, tir_pipeline="tirx"),
    )


def _grid(device: torch.device) -> int:
    """CTAS_PER_SM CTAs on every SM (an H200 has 132; the CPU compile check uses that)."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132
    return CTAS_PER_SM * sms


def _shape_key(
    q_nope: torch.Tensor, q_pe: torch.Tensor, ckv_cache: torch.Tensor, kpe_cache: torch.Tensor, kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor, *_: object,
) -> ShapeKey:  # fmt: skip
    return q_nope.shape[0], ckv_cache.shape[0], kv_indices.shape[0], _grid(q_nope.device)


def run(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    ckv_cache: torch.Tensor,
    kpe_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    key = _shape_key(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    partial, merge = kernels
    batch, pages, _, grid = key
    dev = q_nope.device
    part_o = torch.empty((grid + batch, H, DC), dtype=torch.float32, device=dev)
    part_lse = torch.empty((grid + batch, H), dtype=torch.float32, device=dev)
    # page size 1: the pools are [pages, dims]; the scale carries log2(e) so the kernel works in base 2
    partial(
        q_nope.contiguous(),
        q_pe.contiguous(),
        ckv_cache.reshape(pages, DC),
        kpe_cache.reshape(pages, DP),
        kv_indptr.contiguous(),
        kv_indices.contiguous(),
        part_o,
        part_lse,
        float(sm_scale) * LOG2E,
    )
    out = torch.empty_like(q_nope)
    lse = torch.empty((batch, H), dtype=torch.float32, device=dev)
    merge(part_o, part_lse, kv_indptr.contiguous(), out, lse)
    return out, lse
