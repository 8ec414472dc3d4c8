"""p43 embedding_rmsnorm_backward_jamba — plan `prefetched`, CuTe DSL: plan `fused` with its row loop's loads staged.

Plan: the per-token gradient is linear in the token's dy, and every token of id v shares its embedding
row e_v (so r_v = 1/sqrt(mean(e_v^2) + 1e-6) and ee_v = e_v r_v): the sum over those tokens is
grad_embed[v] = r_v (w D_v - ee_v mean(w D_v ee_v)) with D_v = sum of their dy rows, and
grad_norm_weight = sum over ids of ee_v D_v. Three kernels:
(1) sort, one CTA of 1024 threads: a 65536-entry histogram of the ids as 16-bit counters packed in 128 KiB
    of shared memory (shared atomics), an exclusive scan (64 counters per thread, warp shuffles plus the
    32 warp totals) that writes offsets[v] = the first sorted position of id v (offsets[65536] = tokens),
    then a scatter that claims positions with the same atomics: order[pos] = token. The order inside an
    id is the atomics' (only float32 summation order depends on it).
(2) rows, a grid-stride loop over the vocabulary (264 CTAs of 256 threads, two per SM; thread t owns
    features 8t..8t+7 and 2048 + the same, 16-byte accesses). Plan `fused` waited on two dependent
    loads of offsets[] per row (~0.5 µs each, 248 rows a CTA, most of them empty) and on an order[]
    load before every round of dy loads (a hot id's row, 521 tokens at production, sat on one CTA's
    critical path). Here a CTA first stages the offsets of all its rows in shared memory (at most 249
    rows for vocab <= 65536: two loads per thread, all in flight at once, one barrier), so an empty
    row is two 16-byte zero stores and nothing waits; a non-empty row stages its sorted token indices
    256 at a time in shared memory, and its dy rows are summed in float32 with 4 rows (8 loads of 16
    bytes) in flight per thread and no load between them. Then, as in `fused`: e_v read, sum(e^2) and
    sum(w D e) reduced in one CTA round (butterflies, 8 warp partials in shared memory), r (w D - e r ·
    r sum(w D e) / 4096) written in bf16; each thread keeps its features' sum of ee_v D_v.
(3) norm weight: the [264, 4096] float32 partials summed per feature, rounded to bf16 once.
Traffic: grad_embed_weight is written once (512 MiB, the bulk), dy and the used embedding rows read
once, ids twice; the partials add 9 MB. Token count and vocabulary are symbolic: one compilation each.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

D = 4096  # hidden size
EPS = 1e-6
VOCAB_MAX = 65536  # 16-bit sorted positions and counters (tokens < 65536)
SORT_THREADS = 1024
WORDS = VOCAB_MAX // 2  # two 16-bit counters per 32-bit shared word
PER_THREAD = VOCAB_MAX // SORT_THREADS  # counters scanned per thread (64)
ROW_THREADS = 256
VEC = 8  # bf16 per 16-byte access
CHUNKS = 2  # 16-byte chunks per thread: features 8t.. and 2048 + 8t..
ROW_CTAS = 2 * 132  # two per SM on the H200's 132 SMs
UNROLL = 4  # dy rows in flight per thread (two 16-byte loads each)
PIECE = ROW_THREADS  # sorted token indices of a row staged in shared memory at once (one per thread)
assert ROW_CTAS * ROW_THREADS >= VOCAB_MAX  # a CTA stages the offsets of all its rows at once
NORM_THREADS = 256


@cute.kernel
def _sort_kernel(mIds: cute.Tensor, mOff: cute.Tensor, mOrd: cute.Tensor):
    tokens = cute.size(mIds, mode=[0])
    tidx, _, _ = cute.arch.thread_idx()
    lane = tidx % 32
    warp = tidx // 32
    smem = SmemAllocator()
    sCnt = smem.allocate_tensor(cutlass.Uint32, cute.make_layout((WORDS,)), byte_alignment=16)
    sWarp = smem.allocate_tensor(cutlass.Int32, cute.make_layout((SORT_THREADS // 32,)), byte_alignment=16)
    for j in cutlass.range_constexpr(WORDS // SORT_THREADS):
        sCnt[j * SORT_THREADS + tidx] = cutlass.Uint32(0)
    cute.arch.sync_threads()
    for t in cutlass.range(tidx, tokens, SORT_THREADS, unroll=1):
        v = cutlass.Int32(mIds[t])
        cute.arch.atomic_add(sCnt.iterator + v // 2, cutlass.Uint32(1) << cutlass.Uint32((v % 2) * 16))
    cute.arch.sync_threads()
    # exclusive scan: thread tidx owns counters 64 tidx .. 64 tidx + 63 (words 32 tidx ..)
    total = cutlass.Int32(0)
    for j in cutlass.range_constexpr(PER_THREAD // 2):
        word = sCnt[tidx * (PER_THREAD // 2) + j]
        total = total + cutlass.Int32(word & 0xFFFF) + cutlass.Int32(word >> 16)
    incl = total
    for s in cutlass.range_constexpr(5):
        up = cute.arch.shuffle_sync_up(incl, offset=1 << s)
        if lane >= (1 << s):
            incl = incl + up
    if lane == 31:
        sWarp[warp] = incl
    cute.arch.sync_threads()
    wsum = cutlass.Int32(0)
    if lane < warp:
        wsum = sWarp[lane]
    for s in cutlass.range_constexpr(5):
        wsum = wsum + cute.arch.shuffle_sync_bfly(wsum, offset=16 >> s)
    run = wsum + incl - total
    for j in cutlass.range_constexpr(PER_THREAD // 2):
        word = sCnt[tidx * (PER_THREAD // 2) + j]
        lo = run
        hi = lo + cutlass.Int32(word & 0xFFFF)
        run = hi + cutlass.Int32(word >> 16)
        sCnt[tidx * (PER_THREAD // 2) + j] = cutlass.Uint32(lo) | (cutlass.Uint32(hi) << 16)
    if tidx == SORT_THREADS - 1:
        mOff[VOCAB_MAX] = tokens
    cute.arch.sync_threads()
    # offsets (coalesced), then the scatter claims positions from the same counters
    for j in cutlass.range(PER_THREAD, unroll_full=True):
        c = j * SORT_THREADS + tidx
        mOff[c] = cutlass.Int32((sCnt[c // 2] >> cutlass.Uint32((c % 2) * 16)) & 0xFFFF)
    cute.arch.sync_threads()
    for t in cutlass.range(tidx, tokens, SORT_THREADS, unroll=1):
        v = cutlass.Int32(mIds[t])
        sh = cutlass.Uint32((v % 2) * 16)
        old = cute.arch.atomic_add(sCnt.iterator + v // 2, cutlass.Uint32(1) << sh)
        mOrd[cutlass.Int32((old >> sh) & 0xFFFF)] = t


@cute.kernel
def _rows_kernel(
    mOff: cute.Tensor, mOrd: cute.Tensor, mE: cute.Tensor, mW: cute.Tensor, mDy: cute.Tensor, mGE: cute.Tensor,
    mPart: cute.Tensor,
):  # fmt: skip
    vocab = cute.size(mE, mode=[0])
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = tidx % 32
    warp = tidx // 32
    smem = SmemAllocator()
    # two rounds' warp partials (sum e^2, sum w D e): consecutive rows alternate, one barrier per row
    sRed = smem.allocate_tensor(
        cutlass.Float32, cute.make_layout((2, ROW_THREADS // 32, 2), stride=(ROW_THREADS // 16, 2, 1)), byte_alignment=8
    )
    sSpan = smem.allocate_tensor(
        cutlass.Int32, cute.make_layout((2, ROW_THREADS), stride=(ROW_THREADS, 1)), byte_alignment=16
    )
    sToks = smem.allocate_tensor(cutlass.Int32, cute.make_layout(PIECE), byte_alignment=16)
    # a thread's features: chunk c covers 2048 c + 8 tidx .. + 7
    gE = cute.zipped_divide(mE, (1, VEC))  # ((1,8), (vocab, 512))
    gW = cute.zipped_divide(mW, (VEC,))
    gDy = cute.zipped_divide(mDy, (1, VEC))
    gGE = cute.zipped_divide(mGE, (1, VEC))
    gP = cute.zipped_divide(mPart, (1, 4))  # ((1,4), (ctas, 1024))
    acc = cute.make_rmem_tensor((VEC, CHUNKS), cutlass.Float32)
    gn = cute.make_rmem_tensor((VEC, CHUNKS), cutlass.Float32)
    ef = cute.make_rmem_tensor((VEC, CHUNKS), cutlass.Float32)
    wf = cute.make_rmem_tensor((VEC, CHUNKS), cutlass.Float32)
    ld = cute.make_rmem_tensor((VEC, CHUNKS, UNROLL), cutlass.BFloat16)
    io = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    zero = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    zero.fill(0.0)
    gn.fill(0.0)
    par = cutlass.Int32(0)
    n_rows = (vocab - bidx + ROW_CTAS - 1) // ROW_CTAS  # this CTA's rows bidx + j ROW_CTAS
    if tidx < n_rows:  # at most ROW_THREADS of them (vocab <= VOCAB_MAX): one staging
        sSpan[0, tidx] = mOff[bidx + tidx * ROW_CTAS]
        sSpan[1, tidx] = mOff[bidx + tidx * ROW_CTAS + 1]
    cute.arch.sync_threads()
    for j in cutlass.range(n_rows, unroll=1):
        v = bidx + j * ROW_CTAS
        start = sSpan[0, j]
        stop = sSpan[1, j]
        if start == stop:
            for c in cutlass.range_constexpr(CHUNKS):
                cute.autovec_copy(zero, gGE[(0, None), (v, c * (D // VEC // 2) + tidx)])
        else:
            acc.fill(0.0)
            for p0 in cutlass.range(start, stop, PIECE, unroll=1):
                n = stop - p0
                if n > PIECE:
                    n = cutlass.Int32(PIECE)
                cute.arch.sync_threads()  # the previous piece's tokens are read
                if tidx < n:
                    sToks[tidx] = mOrd[p0 + tidx]
                cute.arch.sync_threads()
                for k0 in cutlass.range(0, n, UNROLL, unroll=1):
                    for u in cutlass.range_constexpr(UNROLL):
                        if k0 + u < n:
                            t = sToks[k0 + u]
                            for c in cutlass.range_constexpr(CHUNKS):
                                cute.autovec_copy(gDy[(0, None), (t, c * (D // VEC // 2) + tidx)], ld[None, c, u])
                    for u in cutlass.range_constexpr(UNROLL):
                        if k0 + u < n:
                            for c in cutlass.range_constexpr(CHUNKS):
                                acc[None, c].store(acc[None, c].load() + ld[None, c, u].load().to(cutlass.Float32))
            # e_v and w (L1/L2-resident) only now: fewer registers live across the dy loop
            for c in cutlass.range_constexpr(CHUNKS):
                cute.autovec_copy(gE[(0, None), (v, c * (D // VEC // 2) + tidx)], io)
                ef[None, c].store(io.load().to(cutlass.Float32))
                cute.autovec_copy(gW[(None,), (c * (D // VEC // 2) + tidx,)], io)
                wf[None, c].store(io.load().to(cutlass.Float32))
            ss = cutlass.Float32(0.0)
            sge = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(VEC * CHUNKS):
                ss = ss + ef[i] * ef[i]
                sge = sge + wf[i] * acc[i] * ef[i]
            for s in cutlass.range_constexpr(5):
                ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=16 >> s)
                sge = sge + cute.arch.shuffle_sync_bfly(sge, offset=16 >> s)
            if lane == 0:
                sRed[par, warp, 0] = ss
                sRed[par, warp, 1] = sge
            cute.arch.sync_threads()
            tss = cutlass.Float32(0.0)
            tsge = cutlass.Float32(0.0)
            for w in cutlass.range_constexpr(ROW_THREADS // 32):
                tss = tss + sRed[par, w, 0]
                tsge = tsge + sRed[par, w, 1]
            par = 1 - par
            r = cute.math.rsqrt(tss * cutlass.Float32(1.0 / D) + cutlass.Float32(EPS))
            m = r * r * tsge * cutlass.Float32(1.0 / D)  # r · mean(w D ee)
            for c in cutlass.range_constexpr(CHUNKS):
                a = acc[None, c].load()
                e = ef[None, c].load()
                io.store((r * (wf[None, c].load() * a - e * m)).to(cutlass.BFloat16))
                gn[None, c].store(gn[None, c].load() + e * r * a)
                cute.autovec_copy(io, gGE[(0, None), (v, c * (D // VEC // 2) + tidx)])
    f4 = cute.make_rmem_tensor((4,), cutlass.Float32)
    for c in cutlass.range_constexpr(CHUNKS):
        for q in cutlass.range_constexpr(VEC // 4):
            for e in cutlass.range_constexpr(4):
                f4[e] = gn[q * 4 + e, c]
            cute.autovec_copy(f4, gP[(0, None), (bidx, c * (D // 8) + tidx * 2 + q)])


@cute.kernel
def _norm_kernel(mPart: cute.Tensor, mGW: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    f = bidx * NORM_THREADS + tidx
    s = cutlass.Float32(0.0)
    for k in cutlass.range(ROW_CTAS, unroll=4):
        s = s + mPart[k, f]
    mGW[f] = s.to(cutlass.BFloat16)


@cute.jit
def _sort(mIds: cute.Tensor, mOff: cute.Tensor, mOrd: cute.Tensor):
    _sort_kernel(mIds, mOff, mOrd).launch(grid=[1, 1, 1], block=[SORT_THREADS, 1, 1])


@cute.jit
def _rows(
    mOff: cute.Tensor, mOrd: cute.Tensor, mE: cute.Tensor, mW: cute.Tensor, mDy: cute.Tensor, mGE: cute.Tensor,
    mPart: cute.Tensor,
):  # fmt: skip
    _rows_kernel(mOff, mOrd, mE, mW, mDy, mGE, mPart).launch(
        grid=[ROW_CTAS, 1, 1], block=[ROW_THREADS, 1, 1], min_blocks_per_mp=2, preferred_smem_carveout=100
    )


@cute.jit
def _norm(mPart: cute.Tensor, mGW: cute.Tensor):
    _norm_kernel(mPart, mGW).launch(grid=[D // NORM_THREADS, 1, 1], block=[NORM_THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens, vocab = cute.sym_int(), cute.sym_int()

        def compact(dtype, shape, align):
            order = tuple(range(len(shape) - 1, -1, -1))
            return make_fake_compact_tensor(dtype, shape, stride_order=order, assumed_align=align)

        ids = compact(cutlass.Int64, (tokens,), 8)
        off = compact(cutlass.Int32, (VOCAB_MAX + 1,), 4)
        order = compact(cutlass.Int32, (tokens,), 4)
        table = compact(cutlass.BFloat16, (vocab, D), 16)
        w = compact(cutlass.BFloat16, (D,), 16)
        dy = compact(cutlass.BFloat16, (tokens, D), 16)
        part = compact(cutlass.Float32, (ROW_CTAS, D), 16)
        opts = "--enable-tvm-ffi"
        _COMPILED.append(cute.compile(_sort, ids, off, order, options=opts))
        _COMPILED.append(cute.compile(_rows, off, order, table, w, dy, table, part, options=opts))
        _COMPILED.append(cute.compile(_norm, part, w, options=opts))
    return _COMPILED


def run(
    input_ids: torch.Tensor, embed_weight: torch.Tensor, norm_weight: torch.Tensor, grad_output: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    sort_k, rows_k, norm_k = _compiled()
    tokens, vocab = input_ids.numel(), embed_weight.shape[0]
    if vocab > VOCAB_MAX or tokens >= VOCAB_MAX:
        raise ValueError(f"16-bit counters hold vocab <= {VOCAB_MAX} and < {VOCAB_MAX} tokens")
    dev = grad_output.device
    offsets = torch.empty(VOCAB_MAX + 1, dtype=torch.int32, device=dev)
    order = torch.empty(tokens, dtype=torch.int32, device=dev)
    sort_k(input_ids.reshape(-1).contiguous(), offsets, order)
    grad_embed = torch.empty_like(embed_weight)
    part = torch.empty((ROW_CTAS, D), dtype=torch.float32, device=dev)
    dy = grad_output.reshape(tokens, D).contiguous()
    rows_k(offsets, order, embed_weight.contiguous(), norm_weight.contiguous(), dy, grad_embed, part)
    grad_norm = torch.empty_like(norm_weight)
    norm_k(part, grad_norm)
    return grad_embed, grad_norm
