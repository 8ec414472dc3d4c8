"""p58 quantized_attention_scores_qwen3_14b_nvfp4 — plan `fused`, TIRx: query-quant kernel + FP16-MMA scores kernel.

Plan: kernel 1 NVFP4-quantises the query exactly as `_nvfp4.quantize` does, one thread per
(sequence, query head, 32 dims = 2 blocks): float32 amax per 16, s = fp8_e4m3(min(amax / (6 g), 448))
(round to nearest even done with integer bit arithmetic), y = x / (s g), e2m1 rounding by the
midpoint thresholds (ties to even), and it writes e2m1·s as exact fp16 pairs already in the order of
an mma.m16n8k16 B fragment (10 KiB per sequence). Kernel 2 computes the scores on tensor cores: a CTA
of 8 warps owns 64 consecutive key rows, warp w = KV head w. Lane (g, t) loads 16 code bytes (dims
32t..32t+31) and the 2 fp8 scales of rows g and g+8 of each 16-row tile (all loads issued first),
turns nibbles into fp16 with bit moves (e2m1·2^-14, exact, incl. subnormal 0.5) and multiplies by the
fp16 block scale (ks·2^4) with HMUL2, an exact fp16 A fragment (e2m1·ks·2^-10); B is the query
fragment of the 5 heads of that KV head (n = 5..7 zero). Since the scale is folded into A, the dims
may be permuted freely inside a k-step, so one 16-byte load feeds 8 k-steps; 32 mma.sync per warp with
float32 accumulation. Each CTA binary-searches kv_indptr for its first row's sequence and loops over
the (usually one) sequences meeting its 64 rows, keeping only their rows. Scores·(1024·g_q·g_k/√128)
go to a 64×40 bf16 tile in shared memory and are written as coalesced 16-byte stores. Memory-bound:
every key byte is read once with 16-byte loads. Compiled once per (batch, total_kv).
"""

import torch
import tvm
from tvm.script import tirx as T

HQ = 40
HKV = 8
GROUP = HQ // HKV  # query heads per KV head
D = 128
ROWS = 64  # key rows per CTA
TILES = ROWS // 16  # mma m-tiles per warp
THREADS = HKV * 32  # one warp per KV head
QT = 4  # threads per query head row in kernel 1 (32 dims each)
Q_THREADS = 128
CHUNKS = ROWS * HQ // 8  # 16-byte output chunks per CTA
SCALE = 1024.0 / (128.0**0.5)  # 2^10 of the A fragment / sqrt(head_dim)
WIN = ROWS + 2  # kv_indptr window per CTA: b0 .. b0 + 64 (<= 64 sequences start in 64 rows)
CTAS_PER_SM = 4

_KERNELS: dict[tuple[int, int], tvm.runtime.Module] = {}


def _build(batch: int, total: int) -> tuple[tvm.runtime.Module, tvm.runtime.Module]:
    qthreads = batch * HQ * QT
    qgrid = (qthreads + Q_THREADS - 1) // Q_THREADS
    grid = (total + ROWS - 1) // ROWS
    chunks_a = (batch + THREADS - 1) // THREADS  # kv_indptr pairs per thread (step A)
    chunks_b = (batch + 1 + THREADS - 1) // THREADS  # kv_indptr entries per thread (step B)

    @T.prim_func
    def quant_q(q_ptr: T.handle, qs_ptr: T.handle, w_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, HQ, D), "bfloat16")
        QS = T.match_buffer(qs_ptr, (1,), "float32")
        W = T.match_buffer(w_ptr, (batch, HQ, QT, 16), "int32")
        T.device_entry()
        bx = T.cta_id([qgrid])
        tx = T.thread_id([Q_THREADS])
        p = T.meta_var(bx * Q_THREADS + tx)
        pb = T.meta_var(p // (HQ * QT))
        ph = T.meta_var((p // QT) % HQ)
        pq = T.meta_var(p % QT)
        xv = T.alloc_local((32,), "bfloat16")
        val = T.alloc_local((32,), "float32")
        ov = T.alloc_local((16,), "int32")
        if p < qthreads:
            for c in T.unroll(4):
                for i in T.vectorized(8):
                    xv[c * 8 + i] = Q[pb, ph, pq * 32 + c * 8 + i]
            g: T.f32 = QS[0]
            for blk in T.unroll(2):
                amax: T.f32 = T.float32(0)
                for i in T.unroll(16):
                    amax = T.max(amax, T.abs(T.Cast("float32", xv[blk * 16 + i])))
                sv: T.f32 = T.min(amax / (T.float32(6) * g), T.float32(448))
                # fp8 e4m3 round to nearest even of sv >= 0, in integer arithmetic
                bits: T.int32 = T.reinterpret("int32", sv)
                ex: T.int32 = T.shift_right(bits, 23)
                rn: T.int32 = T.bitwise_and(bits + 0x7FFFF + T.bitwise_and(T.shift_right(bits, 20), 1), 0x7FF00000)
                man: T.int32 = T.bitwise_or(T.bitwise_and(bits, 0x7FFFFF), 0x800000)
                sh: T.int32 = T.min(141 - ex, 31)
                nsub: T.int32 = T.shift_right(
                    man + T.shift_left(1, sh - 1) - 1 + T.bitwise_and(T.shift_right(man, sh), 1), sh
                )
                sf: T.f32 = T.Select(
                    ex >= 121, T.reinterpret("float32", rn), T.Cast("float32", nsub) * T.float32(0.001953125)
                )
                step: T.f32 = sf * g
                for i in T.unroll(16):
                    y: T.f32 = T.Select(step > T.float32(0), T.Cast("float32", xv[blk * 16 + i]) / step, T.float32(0))
                    v: T.f32 = T.abs(y)
                    r: T.f32 = T.Select(
                        v <= T.float32(0.25),
                        T.float32(0),
                        T.Select(
                            v < T.float32(0.75),
                            T.float32(0.5),
                            T.Select(
                                v <= T.float32(1.25),
                                T.float32(1),
                                T.Select(
                                    v < T.float32(1.75),
                                    T.float32(1.5),
                                    T.Select(
                                        v <= T.float32(2.5),
                                        T.float32(2),
                                        T.Select(
                                            v < T.float32(3.5),
                                            T.float32(3),
                                            T.Select(v <= T.float32(5), T.float32(4), T.float32(6)),
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    )
                    val[blk * 16 + i] = T.Select(y < T.float32(0), T.float32(0) - r, r) * sf
            # B-fragment order: word 4k + j = fp16 pair (dim 8k + j, dim 8k + j + 4), k < 4, j < 4
            for k in T.unroll(4):
                for j in T.unroll(4):
                    lo16: T.uint32 = T.Cast("uint32", T.reinterpret("uint16", T.Cast("float16", val[8 * k + j])))
                    hi16: T.uint32 = T.Cast("uint32", T.reinterpret("uint16", T.Cast("float16", val[8 * k + j + 4])))
                    ov[4 * k + j] = T.reinterpret("int32", T.bitwise_or(lo16, T.shift_left(hi16, T.uint32(16))))
            for c in T.unroll(4):
                for e in T.vectorized(4):
                    W[pb, ph, pq, c * 4 + e] = ov[c * 4 + e]

    @T.prim_func
    def scores(
        kc_ptr: T.handle,
        ks_ptr: T.handle,
        w_ptr: T.handle,
        qs_ptr: T.handle,
        kg_ptr: T.handle,
        ip_ptr: T.handle,
        o_ptr: T.handle,
    ):
        KC = T.match_buffer(kc_ptr, (total, HKV, 16), "int32")  # 64 code bytes per (row, KV head)
        KS = T.match_buffer(ks_ptr, (total, HKV, 4), "int16")  # 8 fp8 scales per (row, KV head)
        QW = T.match_buffer(w_ptr, (batch, HQ, QT, 16), "int32")  # fp16x2 B fragments
        QS = T.match_buffer(qs_ptr, (1,), "float32")
        KG = T.match_buffer(kg_ptr, (1,), "float32")
        IP = T.match_buffer(ip_ptr, (batch + 1,), "int32")
        OUT = T.match_buffer(o_ptr, (total, HQ), "bfloat16")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        # __launch_bounds__(256, 4): at most 64 registers, so four CTAs (32 warps) share an SM
        T.attr(0, "tirx.launch_bounds_min_blocks_per_sm", CTAS_PER_SM)
        sm = T.alloc_shared((ROWS * HQ,), "bfloat16")
        skc = T.alloc_shared((TILES * 2, THREADS, 4), "int32")  # each thread's code words, k-major
        ssc = T.alloc_shared((THREADS, TILES), "uint32")  # each thread's scale pairs (rows g, g + 8)
        sip = T.alloc_shared((WIN,), "int32")  # kv_indptr[b0 + k], k < WIN
        sb0 = T.alloc_shared((1,), "int32")
        codes = T.alloc_local((TILES * 2, 4), "int32")
        scl = T.alloc_local((TILES * 2,), "uint32")
        sc4 = T.alloc_local((TILES,), "uint32")
        ipa = T.alloc_local((chunks_a, 2), "int32")
        cw = T.alloc_local((2, 4), "int32")
        bq = T.alloc_local((16,), "int32")
        ks2 = T.alloc_local((2, 2), "uint32")
        af = T.alloc_local((4,), "uint32")
        d = T.alloc_local((4,), "float32")
        ov = T.alloc_local((8,), "bfloat16")
        w = T.meta_var(tx // 32)
        gid = T.meta_var((tx % 32) // 4)
        t = T.meta_var(tx % 4)
        r0 = T.meta_var(bx * ROWS)
        # 1) every key load first (16-byte code loads, 2-byte scale loads) ...
        for k in T.unroll(TILES * 2):
            if r0 + k * 8 + gid < total:
                for c in T.vectorized(4):
                    codes[k, c] = KC[r0 + k * 8 + gid, w, t * 4 + c]
                scl[k] = T.Cast("uint32", T.reinterpret("uint16", KS[r0 + k * 8 + gid, w, t]))
            else:
                for c in T.vectorized(4):
                    codes[k, c] = 0
                scl[k] = T.uint32(0)
        # ... then, while they are in flight, kv_indptr pairs (clamped index: no branch before the stores below)
        for jj in T.unroll(chunks_a):
            for e in T.unroll(2):
                ipa[jj, e] = IP[T.min(jj * THREADS + tx, batch - 1) + e]
        # 2) park the keys in this thread's own smem slots (read back only by this thread); the stores
        #    precede the barrier, so ptxas cannot sink the loads behind the kv_indptr work
        for k in T.unroll(TILES * 2):
            for c in T.vectorized(4):
                skc[k, tx, c] = codes[k, c]
        for i in T.unroll(TILES):
            sc4[i] = T.bitwise_or(scl[2 * i], T.shift_left(scl[2 * i + 1], T.uint32(16)))
        for i in T.vectorized(TILES):
            ssc[tx, i] = sc4[i]
        # 3) sequence b0 of row r0: the one j with IP[j] <= r0 < IP[j + 1]
        for jj in T.unroll(chunks_a):
            if jj * THREADS + tx < batch and ipa[jj, 0] <= r0 and r0 < ipa[jj, 1]:
                sb0[0] = jj * THREADS + tx
        T.cuda.cta_sync()
        b0: T.int32 = sb0[0]
        # 4) window sip[k] = IP[b0 + k] (at most 64 sequences start inside the CTA's 64 rows) and the
        #    B fragment of sequence b0 (zero for n = 5..7)
        for jj in T.unroll(chunks_b):
            if jj * THREADS + tx <= batch and jj * THREADS + tx >= b0 and jj * THREADS + tx - b0 < WIN:
                sip[jj * THREADS + tx - b0] = IP[jj * THREADS + tx]
        if gid < GROUP:
            for c in T.unroll(4):
                for e in T.vectorized(4):
                    bq[c * 4 + e] = QW[b0, w * GROUP + gid, t, c * 4 + e]
        else:
            for c in T.unroll(16):
                bq[c] = 0
        fac: T.f32 = QS[0] * KG[0] * T.float32(SCALE)
        T.cuda.cta_sync()
        kb: T.int32 = 0  # window index of the sequence of the current row
        bl: T.int32 = 0  # window index of the sequence whose B fragment is in bq
        seg: T.int32 = 0
        go: T.int32 = 1
        for i in T.unroll(TILES):
            if r0 + i * 16 < total:
                # first sequence meeting tile i (sip[kb + 1] <= IP[batch] = total, so kb stays in range)
                while sip[kb + 1] <= r0 + i * 16:
                    kb = kb + 1
                for hh in T.unroll(2):
                    for c in T.vectorized(4):
                        cw[hh, c] = skc[2 * i + hh, tx, c]
                # fp16 block scales ks * 2^4 for blocks 2t, 2t + 1 of rows g, g + 8, as half2 pairs
                for hh in T.unroll(2):
                    for blk in T.unroll(2):
                        sb: T.uint32 = T.bitwise_and(
                            T.shift_right(ssc[tx, i], T.uint32(16 * hh + 8 * blk)), T.uint32(0xFF)
                        )
                        h16: T.uint32 = T.bitwise_or(
                            T.shift_left(T.bitwise_and(sb, T.uint32(0x7F)), T.uint32(7)),
                            T.shift_left(T.bitwise_and(sb, T.uint32(0x80)), T.uint32(8)),
                        )
                        kf: T.float16 = T.reinterpret("float16", T.Cast("uint16", h16)) * T.float16(4096)
                        ku: T.uint32 = T.Cast("uint32", T.reinterpret("uint16", kf))
                        ks2[hh, blk] = T.bitwise_or(ku, T.shift_left(ku, T.uint32(16)))
                # every sequence overlapping the tile's rows (usually one)
                seg = kb
                go = 1
                while go == 1:
                    if seg != bl:  # rare: a sequence boundary inside the CTA
                        if gid < GROUP:
                            for c in T.unroll(4):
                                for e in T.vectorized(4):
                                    bq[c * 4 + e] = QW[b0 + seg, w * GROUP + gid, t, c * 4 + e]
                        bl = seg
                    for c in T.unroll(4):
                        d[c] = T.float32(0)
                    for s in T.unroll(8):
                        for hh in T.unroll(2):
                            for r in T.unroll(2):
                                # nibble pair (j, j + 4) of code word s // 2 -> fp16 e2m1 * 2^-14 in both halves
                                x: T.uint32 = T.shift_right(
                                    T.reinterpret("uint32", cw[hh, s // 2]), T.uint32(4 * (2 * (s % 2) + r))
                                )
                                hb: T.uint32 = T.bitwise_or(
                                    T.shift_left(T.bitwise_and(x, T.uint32(0x00070007)), T.uint32(9)),
                                    T.shift_left(T.bitwise_and(x, T.uint32(0x00080008)), T.uint32(12)),
                                )
                                af[r * 2 + hh] = T.reinterpret(
                                    "uint32",
                                    T.reinterpret("float16x2", hb) * T.reinterpret("float16x2", ks2[hh, s // 4]),
                                )
                        T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32(
                            d[0], d[1], d[2], d[3],
                            af[0], af[1], af[2], af[3],
                            T.reinterpret("uint32", bq[2 * s]), T.reinterpret("uint32", bq[2 * s + 1]),
                            d[0], d[1], d[2], d[3],
                        )  # fmt: skip
                    # D fragment: rows g, g + 8 of the tile, query heads 2t, 2t + 1 of this KV head
                    seg_lo: T.int32 = sip[seg]
                    seg_hi: T.int32 = sip[seg + 1]
                    for c in T.unroll(4):
                        row = T.meta_var(r0 + i * 16 + gid + (c // 2) * 8)
                        if t * 2 + c % 2 < GROUP and row >= seg_lo and row < seg_hi:
                            sm[(i * 16 + gid + (c // 2) * 8) * HQ + w * GROUP + t * 2 + c % 2] = T.Cast(
                                "bfloat16", d[c] * fac
                            )
                    if seg_hi >= T.min(r0 + i * 16 + 16, total):
                        go = 0
                    else:
                        seg = seg + 1
                kb = seg  # the last sequence met may continue into the next tile
        T.cuda.cta_sync()
        for it in T.unroll((CHUNKS + THREADS - 1) // THREADS):
            ch = T.meta_var(it * THREADS + tx)
            if ch < CHUNKS and r0 + ch // 5 < total:
                for e in T.vectorized(8):
                    ov[e] = sm[ch * 8 + e]
                for e in T.vectorized(8):
                    OUT[r0 + ch // 5, (ch % 5) * 8 + e] = ov[e]

    qmod = tvm.compile(tvm.IRModule({"main": quant_q}), target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")
    smod = tvm.compile(tvm.IRModule({"main": scores}), target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")
    return qmod, smod


def _shape_key(query: torch.Tensor, q_scale: torch.Tensor, k_cache: torch.Tensor, *_: object) -> tuple[int, int]:
    return query.shape[0], k_cache.shape[0]


def run(
    query: torch.Tensor,
    q_scale: torch.Tensor,
    k_cache: torch.Tensor,
    k_cache_scale: torch.Tensor,
    k_global: torch.Tensor,
    kv_indptr: torch.Tensor,
) -> torch.Tensor:
    batch, total = query.shape[0], k_cache.shape[0]
    kernels = _KERNELS.get((batch, total))
    if kernels is None:
        kernels = _KERNELS[(batch, total)] = _build(batch, total)
    quant_q, scores_k = kernels
    qs = q_scale.reshape(1)
    # quantised query as fp16x2 B fragments (written by kernel 1, read by kernel 2)
    work = torch.empty((batch, HQ, QT, 16), dtype=torch.int32, device=query.device)
    quant_q(query, qs, work)
    out = torch.empty((total, HQ), dtype=torch.bfloat16, device=query.device)
    # same-size dtype views of the packed key bytes (no copies): 4 codes bytes per int32, 2 fp8 per int16
    scores_k(k_cache.view(torch.int32), k_cache_scale.view(torch.int16), work, qs, k_global.reshape(1), kv_indptr, out)
    return out
