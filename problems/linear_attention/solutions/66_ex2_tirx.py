"""p66 wkv_time_decay_stabilization_rwkv4_fp32 — plan `ex2`, TIRx: the WKV recurrence with hardware exponentials.

Plan `fused`'s walk (one thread per (batch row, channel) through the seq_len steps with the numerator
a, denominator b and running maximum exponent p in registers; consecutive threads on consecutive
channels; 128 threads per CTA, batch × 32 CTAs) with the per-step arithmetic cut to what the hardware
does in one instruction. `fused` is bound by instruction issue, not by HBM (0.36 of SOL, against CuTe
DSL's 0.54 with the same plan and a shorter libdevice exp): each half step spent ~20 instructions on a
software exponential (Cody-Waite, degree-7 Taylor); the SASS is 9748 instructions, this kernel's 4107.
Here each weight is exp(-|d|) = 2^(-|d| · log2 e): one multiply and one ex2.approx (MUFU.EX2; what
`T.exp2` compiles to under TIRx's --use_fast_math), where d = p - (u + k) (output) or (p + w) - k
(state) is formed exactly as the reference forms it. ex2.approx's relative error (<= 2^-22) and the
rounding of d · log2 e only touch the weight below 1; the other weight is exactly 1 (of exp(p - q)
and exp(u + k - q) with q = max(p, u + k) one is exp(0)). The division stays rcp.approx plus one FMA
Newton step (the denominator lies in [1, seq_len + 1]). w = -exp(time_decay) is computed once per
thread with `fused`'s accurate exponential, because w is added to p at every step.
With the step code this short, `fused`'s register prefetch no longer keeps loads in flight: ptxas
moves the read-only loads next to their uses (32 registers, any barrier notwithstanding). So k and v
travel through shared memory instead: chunk ch + 1 (16 steps × the CTA's 128 channels of k and of v,
2 × 8 KiB) is copied with 16-byte cp.async while chunk ch is computed (two buffers, 32 KiB a CTA;
wait_group and a barrier before a chunk is read, a barrier before its buffer is refilled); a thread
reads back only its own channel (consecutive words, no bank conflict). Compiled once per
(batch, seq_len) and cached.
"""

import math

import torch
import tvm
from tvm.script import tirx as T

C = 4096  # channels
THREADS = 128
CTAS_PER_ROW = C // THREADS
MAX_CHUNK = 16  # steps prefetched ahead
F32_PER_VEC = 4  # float32 per 16-byte cp.async
VECS = THREADS // F32_PER_VEC  # 16-byte vectors per step row of a CTA's channels
P_INIT = -1e38

# exp(x): x = j·ln2 + f, |f| <= ln2/2; ln2 split so that j·LN2_HI is exact for |j| < 2^9
LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125
LN2_LO = math.log(2.0) - LN2_HI
EXP_LO, EXP_HI = -87.0, 88.0
TAYLOR = [1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0]  # x^7 .. x^0

_KERNELS: dict[tuple[int, int], tvm.runtime.Module] = {}


def _f32(x: float):
    return T.float32(x)


def _fma(a, b, c):
    """Single-rounding a·b + c (CUDA __fmaf_rn), independent of the compiler's contraction choice."""
    return T.call_pure_extern("float32", "__fmaf_rn", a, b, c)


def _exp(x):
    """float32 e^x to ~1 ulp without the fast-math intrinsics (0 below EXP_LO): for w, once per thread."""
    xc = T.max(T.min(x, _f32(EXP_HI)), _f32(EXP_LO))
    j = T.floor(_fma(xc, _f32(LOG2E), _f32(0.5)))
    f = _fma(j, _f32(-LN2_LO), _fma(j, _f32(-LN2_HI), xc))
    p = _f32(TAYLOR[0])
    for c in TAYLOR[1:]:
        p = _fma(p, f, _f32(c))
    two_j = T.reinterpret("float32", T.shift_left(T.Cast("int32", j) + 127, 23))
    return T.Select(x < _f32(EXP_LO), _f32(0.0), p * two_j)


def _copies(step: int) -> int:
    """cp.async copies per thread per tensor for a chunk of ``step`` rows."""
    return (step * VECS + THREADS - 1) // THREADS


def _chunk(seq_len: int) -> int:
    """The largest power of two <= MAX_CHUNK dividing seq_len (the step loop has no tail)."""
    s = MAX_CHUNK
    while seq_len % s:
        s //= 2
    return s


def _build(batch: int, seq_len: int) -> tvm.runtime.Module:
    grid = batch * CTAS_PER_ROW
    step = _chunk(seq_len)
    n_chunks = seq_len // step

    @T.prim_func
    def wkv(td_ptr: T.handle, tf_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle):
        TD = T.match_buffer(td_ptr, (C,), "float32")
        TF = T.match_buffer(tf_ptr, (C,), "float32")
        K = T.match_buffer(k_ptr, (batch, seq_len, C), "float32")
        V = T.match_buffer(v_ptr, (batch, seq_len, C), "float32")
        OUT = T.match_buffer(o_ptr, (batch, seq_len, C), "float32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        b = T.meta_var(bx // CTAS_PER_ROW)
        c0 = T.meta_var((bx % CTAS_PER_ROW) * THREADS)  # the CTA's first channel
        c = T.meta_var(c0 + tx)
        # k and v chunks staged in shared memory: [buffer, step in chunk * THREADS + channel in CTA]
        pool = T.SMEMPool()
        sk = pool.alloc((2, step * THREADS), "float32", align=16)
        sv = pool.alloc((2, step * THREADS), "float32", align=16)
        pool.commit()

        @T.inline
        def copy_chunk(ch):
            # chunk ch's [step, THREADS] tiles of k and v as 16-byte cp.async copies, VECS per step row;
            # thread tx copies vectors tx, tx + THREADS, ... of the tile; a thread reads back only its channel
            for i in T.unroll(_copies(step)):
                q = T.meta_var(tx + i * THREADS)
                if q < step * VECS:
                    j = T.meta_var(q // VECS)
                    col = T.meta_var(q % VECS * F32_PER_VEC)
                    T.ptx.cp.async_.cg.shared.global_(
                        sk.ptr_to([ch % 2, j * THREADS + col]), K.ptr_to([b, ch * step + j, c0 + col]), 16
                    )
                    T.ptx.cp.async_.cg.shared.global_(
                        sv.ptr_to([ch % 2, j * THREADS + col]), V.ptr_to([b, ch * step + j, c0 + col]), 16
                    )
            T.ptx.cp.async_.commit_group()

        copy_chunk(0)
        w: T.f32 = T.float32(0) - _exp(TD[c])
        u: T.f32 = TF[c]
        a: T.f32 = T.float32(0)
        den: T.f32 = T.float32(0)
        p: T.f32 = T.float32(P_INIT)
        for ch in T.unroll(n_chunks):
            cur = T.meta_var(ch % 2)
            # chunk ch+1 is copied while chunk ch is computed: the copies are asynchronous, so no
            # register holds them and the compiler cannot move them next to their uses (as it did with
            # `fused`'s register prefetch once the step code was short)
            if ch + 1 < n_chunks:
                copy_chunk(ch + 1)
            else:
                T.ptx.cp.async_.commit_group()  # an empty group keeps wait_group(1) meaning chunk ch
            T.ptx.cp.async_.wait_group(1)  # this thread's copies of chunk ch landed
            T.cuda.cta_sync()  # and every thread's
            for j in T.unroll(step):
                # output: q = max(p, u + k); one of the two weights is exp(0) = 1
                diff: T.f32 = p - (u + sk[cur, j * THREADS + tx])
                d: T.f32 = T.exp2(T.abs(diff) * T.float32(-LOG2E))
                e1: T.f32 = T.Select(diff >= T.float32(0), T.float32(1), d)
                e2: T.f32 = T.Select(diff >= T.float32(0), d, T.float32(1))
                dn: T.f32 = e1 * den + e2
                r0: T.f32 = T.float32(1) / dn
                r1: T.f32 = _fma(r0, _fma(T.float32(0) - dn, r0, T.float32(1)), r0)
                OUT[b, ch * step + j, c] = (e1 * a + e2 * sv[cur, j * THREADS + tx]) * r1
                # state: q' = max(p + w, k)
                pw: T.f32 = p + w
                diff2: T.f32 = pw - sk[cur, j * THREADS + tx]
                d2: T.f32 = T.exp2(T.abs(diff2) * T.float32(-LOG2E))
                f1: T.f32 = T.Select(diff2 >= T.float32(0), T.float32(1), d2)
                f2: T.f32 = T.Select(diff2 >= T.float32(0), d2, T.float32(1))
                a = f1 * a + f2 * sv[cur, j * THREADS + tx]
                den = f1 * den + f2
                p = T.max(pw, sk[cur, j * THREADS + tx])
            T.cuda.cta_sync()  # every thread has read buffer cur before chunk ch+2's copies overwrite it

    mod = tvm.IRModule({"main": wkv})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(time_decay: torch.Tensor, time_first: torch.Tensor, k: torch.Tensor, *_: object) -> tuple[int, int]:
    return k.shape[0], k.shape[1]


def run(time_decay: torch.Tensor, time_first: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    key = _shape_key(time_decay, time_first, k)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    k = k.contiguous()
    out = torch.empty_like(k)
    kernel(time_decay.contiguous(), time_first.contiguous(), k, v.contiguous(), out)
    return out
