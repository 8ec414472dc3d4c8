"""p43 embedding_rmsnorm_backward_jamba — plan `prefetched`, TIRx: plan `fused` with its row loop's loads staged.

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
once, ids twice; the partials add 9 MB. Compiled once per (tokens, vocabulary) and cached.
"""

import torch
import tvm
from tvm.script import tirx as T

D = 4096  # hidden size
EPS = 1e-6
VOCAB_MAX = 65536  # 16-bit sorted positions and counters (tokens < 65536)
SORT_THREADS = 1024
WORDS = VOCAB_MAX // 2  # two 16-bit counters per 32-bit shared word
PER_THREAD = VOCAB_MAX // SORT_THREADS  # counters scanned per thread (64)
ROW_THREADS = 256
VEC = 8  # bf16 per 16-byte access
HALF = D // 2  # a thread's second chunk starts here
ROW_CTAS = 2 * 132  # two per SM on the H200's 132 SMs
UNROLL = 4  # dy rows in flight per thread (two 16-byte loads each)
PIECE = ROW_THREADS  # sorted token indices of a row staged in shared memory at once (one per thread)
assert ROW_CTAS * ROW_THREADS >= VOCAB_MAX  # a CTA stages the offsets of all its rows at once
NORM_THREADS = 256

_KERNELS: dict[tuple[int, int], tuple] = {}


def _build(tokens: int, vocab: int) -> tuple:
    if vocab > VOCAB_MAX or tokens >= VOCAB_MAX:
        raise ValueError(f"16-bit counters hold vocab <= {VOCAB_MAX} and < {VOCAB_MAX} tokens")
    per_tok = (tokens + SORT_THREADS - 1) // SORT_THREADS

    @T.prim_func
    def sort_ids(ids_ptr: T.handle, off_ptr: T.handle, ord_ptr: T.handle):
        IDS = T.match_buffer(ids_ptr, (tokens,), "int64")
        OFF = T.match_buffer(off_ptr, (VOCAB_MAX + 1,), "int32")
        ORD = T.match_buffer(ord_ptr, (tokens,), "int32")
        T.device_entry()
        T.cta_id([1])
        tx = T.thread_id([SORT_THREADS])
        cnt = T.alloc_buffer((WORDS,), "uint32", scope="shared.dyn")
        warp_tot = T.alloc_shared((SORT_THREADS // 32,), "int32")
        run = T.alloc_local((1,), "int32")
        for j in T.unroll(WORDS // SORT_THREADS):
            cnt[j * SORT_THREADS + tx] = T.uint32(0)
        T.cuda.cta_sync()
        for i in T.unroll(per_tok):
            if i * SORT_THREADS + tx < tokens:
                v = T.meta_var(T.Cast("int32", IDS[i * SORT_THREADS + tx]))
                one = T.meta_var(T.shift_left(T.uint32(1), T.Cast("uint32", (v % 2) * 16)))
                T.evaluate(T.cuda.atomic_add(T.address_of(cnt[v // 2]), one))
        T.cuda.cta_sync()
        # exclusive scan: thread tx owns counters 64 tx .. 64 tx + 63 (words 32 tx ..)
        total: T.int32 = 0
        for j in T.unroll(PER_THREAD // 2):
            word: T.uint32 = cnt[tx * (PER_THREAD // 2) + j]
            lo16 = T.meta_var(T.Cast("int32", T.bitwise_and(word, T.uint32(0xFFFF))))
            total = total + lo16 + T.Cast("int32", T.shift_right(word, T.uint32(16)))
        incl: T.int32 = total
        for s in T.unroll(5):
            up: T.int32 = T.tvm_warp_shuffle_up(T.uint32(0xFFFFFFFF), incl, 1 << s, 32, 32)
            incl = incl + T.Select(tx % 32 >= (1 << s), up, 0)
        if tx % 32 == 31:
            warp_tot[tx // 32] = incl
        T.cuda.cta_sync()
        wsum: T.int32 = T.Select(tx % 32 < tx // 32, warp_tot[tx % 32], 0)
        wsum = T.cuda.warp_sum(wsum)
        run[0] = wsum + incl - total
        for j in T.unroll(PER_THREAD // 2):
            word2: T.uint32 = cnt[tx * (PER_THREAD // 2) + j]
            lo: T.int32 = run[0]
            hi: T.int32 = lo + T.Cast("int32", T.bitwise_and(word2, T.uint32(0xFFFF)))
            run[0] = hi + T.Cast("int32", T.shift_right(word2, T.uint32(16)))
            packed = T.meta_var(T.bitwise_or(T.Cast("uint32", lo), T.shift_left(T.Cast("uint32", hi), T.uint32(16))))
            cnt[tx * (PER_THREAD // 2) + j] = packed
        if tx == SORT_THREADS - 1:
            OFF[VOCAB_MAX] = tokens
        T.cuda.cta_sync()
        # offsets (coalesced), then the scatter claims positions from the same counters
        for j in T.unroll(PER_THREAD):
            c = T.meta_var(j * SORT_THREADS + tx)
            half = T.meta_var(T.shift_right(cnt[c // 2], T.Cast("uint32", (c % 2) * 16)))
            OFF[c] = T.Cast("int32", T.bitwise_and(half, T.uint32(0xFFFF)))
        T.cuda.cta_sync()
        for i in T.unroll(per_tok):
            if i * SORT_THREADS + tx < tokens:
                v2 = T.meta_var(T.Cast("int32", IDS[i * SORT_THREADS + tx]))
                sh = T.meta_var(T.Cast("uint32", (v2 % 2) * 16))
                old: T.uint32 = T.cuda.atomic_add(T.address_of(cnt[v2 // 2]), T.shift_left(T.uint32(1), sh))
                ORD[T.Cast("int32", T.bitwise_and(T.shift_right(old, sh), T.uint32(0xFFFF)))] = i * SORT_THREADS + tx

    @T.prim_func
    def rows(
        off_ptr: T.handle, ord_ptr: T.handle, e_ptr: T.handle, w_ptr: T.handle, dy_ptr: T.handle,
        ge_ptr: T.handle, part_ptr: T.handle,
    ):  # fmt: skip
        OFF = T.match_buffer(off_ptr, (VOCAB_MAX + 1,), "int32")
        ORD = T.match_buffer(ord_ptr, (tokens,), "int32")
        E = T.match_buffer(e_ptr, (vocab, D), "bfloat16")
        W = T.match_buffer(w_ptr, (D,), "bfloat16")
        DY = T.match_buffer(dy_ptr, (tokens, D), "bfloat16")
        GE = T.match_buffer(ge_ptr, (vocab, D), "bfloat16")
        PART = T.match_buffer(part_ptr, (ROW_CTAS, D), "float32")
        T.device_entry()
        bx = T.cta_id([ROW_CTAS])
        tx = T.thread_id([ROW_THREADS])
        # __launch_bounds__(256, 2): at most 128 registers
        T.attr(0, "tirx.launch_bounds_min_blocks_per_sm", 2)
        red = T.alloc_shared((2, ROW_THREADS // 32, 2), "float32")  # two rounds' warp partials
        span = T.alloc_shared((2, ROW_THREADS), "int32")  # offsets[v], offsets[v + 1] of the CTA's rows
        toks = T.alloc_shared((PIECE,), "int32")  # a piece of the current row's sorted token list
        wf = T.alloc_local((2 * VEC,), "float32")
        acc = T.alloc_local((2 * VEC,), "float32")
        gn = T.alloc_local((2 * VEC,), "float32")
        ef = T.alloc_local((2 * VEC,), "float32")
        ld = T.alloc_local((UNROLL, 2, VEC), "bfloat16")
        io = T.alloc_local((VEC,), "bfloat16")
        par = T.alloc_local((1,), "int32")
        f0 = T.meta_var(tx * VEC)
        for i in T.unroll(2 * VEC):
            gn[i] = T.float32(0)
        par[0] = 0
        n_rows = T.meta_var((vocab - bx + ROW_CTAS - 1) // ROW_CTAS)  # this CTA's rows bx + j ROW_CTAS
        if tx < n_rows:  # at most ROW_THREADS of them (vocab <= VOCAB_MAX): one staging
            span[0, tx] = OFF[bx + tx * ROW_CTAS]
            span[1, tx] = OFF[bx + tx * ROW_CTAS + 1]
        T.cuda.cta_sync()
        for j in T.serial(n_rows):
            v = T.meta_var(bx + j * ROW_CTAS)
            start: T.int32 = span[0, j]
            stop: T.int32 = span[1, j]
            if start == stop:
                for c in T.unroll(2):
                    for e in T.vectorized(VEC):
                        GE[v, c * HALF + f0 + e] = T.bfloat16(0)
            else:
                for i in T.unroll(2 * VEC):
                    acc[i] = T.float32(0)
                for p in T.serial((stop - start + PIECE - 1) // PIECE):
                    p0: T.int32 = start + p * PIECE
                    n: T.int32 = T.min(PIECE, stop - p0)
                    T.cuda.cta_sync()  # the previous piece's tokens are read
                    if tx < n:
                        toks[tx] = ORD[p0 + tx]
                    T.cuda.cta_sync()
                    for kk in T.serial((n + UNROLL - 1) // UNROLL):
                        for u in T.unroll(UNROLL):
                            if kk * UNROLL + u < n:
                                for c in T.unroll(2):
                                    for e in T.vectorized(VEC):
                                        ld[u, c, e] = DY[toks[kk * UNROLL + u], c * HALF + f0 + e]
                        for u in T.unroll(UNROLL):
                            if kk * UNROLL + u < n:
                                for c in T.unroll(2):
                                    for e in T.unroll(VEC):
                                        acc[c * VEC + e] = acc[c * VEC + e] + T.Cast("float32", ld[u, c, e])
                # e_v and w (L1/L2-resident) only now: fewer registers live across the dy loop
                for c in T.unroll(2):
                    for e in T.vectorized(VEC):
                        io[e] = E[v, c * HALF + f0 + e]
                    for e in T.unroll(VEC):
                        ef[c * VEC + e] = T.Cast("float32", io[e])
                    for e in T.vectorized(VEC):
                        io[e] = W[c * HALF + f0 + e]
                    for e in T.unroll(VEC):
                        wf[c * VEC + e] = T.Cast("float32", io[e])
                ss: T.f32 = T.float32(0)
                sge: T.f32 = T.float32(0)
                for i in T.unroll(2 * VEC):
                    ss = ss + ef[i] * ef[i]
                    sge = sge + wf[i] * acc[i] * ef[i]
                ss = T.cuda.warp_sum(ss)
                sge = T.cuda.warp_sum(sge)
                if tx % 32 == 0:
                    red[par[0], tx // 32, 0] = ss
                    red[par[0], tx // 32, 1] = sge
                T.cuda.cta_sync()
                tss: T.f32 = T.float32(0)
                tsge: T.f32 = T.float32(0)
                for w in T.unroll(ROW_THREADS // 32):
                    tss = tss + red[par[0], w, 0]
                    tsge = tsge + red[par[0], w, 1]
                par[0] = 1 - par[0]  # the next row writes the other buffer: one barrier per row
                r: T.f32 = T.rsqrt(tss * T.float32(1.0 / D) + T.float32(EPS))
                m: T.f32 = r * r * tsge * T.float32(1.0 / D)  # r · mean(w D ee)
                for c in T.unroll(2):
                    for e in T.unroll(VEC):
                        io[e] = T.Cast("bfloat16", r * (wf[c * VEC + e] * acc[c * VEC + e] - ef[c * VEC + e] * m))
                        gn[c * VEC + e] = gn[c * VEC + e] + ef[c * VEC + e] * r * acc[c * VEC + e]
                    for e in T.vectorized(VEC):
                        GE[v, c * HALF + f0 + e] = io[e]
        for c in T.unroll(2):
            for e in T.vectorized(VEC):
                PART[bx, c * HALF + f0 + e] = gn[c * VEC + e]

    @T.prim_func
    def norm_grad(part_ptr: T.handle, gw_ptr: T.handle):
        PART = T.match_buffer(part_ptr, (ROW_CTAS, D), "float32")
        GW = T.match_buffer(gw_ptr, (D,), "bfloat16")
        T.device_entry()
        bx = T.cta_id([D // NORM_THREADS])
        tx = T.thread_id([NORM_THREADS])
        s: T.f32 = T.float32(0)
        for k in T.serial(ROW_CTAS):
            s = s + PART[k, bx * NORM_THREADS + tx]
        GW[bx * NORM_THREADS + tx] = T.Cast("bfloat16", s)

    target = {"kind": "cuda", "arch": "sm_90a"}
    kernels = (sort_ids, rows, norm_grad)
    return tuple(tvm.compile(tvm.IRModule({"main": f}), target=target, tir_pipeline="tirx") for f in kernels)


def _shape_key(input_ids: torch.Tensor, embed_weight: torch.Tensor, *_: object) -> tuple[int, int]:
    return input_ids.numel(), embed_weight.shape[0]


def run(
    input_ids: torch.Tensor, embed_weight: torch.Tensor, norm_weight: torch.Tensor, grad_output: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    key = _shape_key(input_ids, embed_weight)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    sort_k, rows_k, norm_k = kernels
    tokens = key[0]
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
