"""p66 wkv_time_decay_stabilization_rwkv4_fp32 — plan `ex2`, CuTe DSL: the WKV recurrence with hardware exponentials.

Plan `fused`'s kernel (one thread per (batch row, channel) walking the seq_len steps with the numerator
a, denominator b and running maximum exponent p in registers; consecutive threads on consecutive
channels, so every warp access is one 128-byte line; 128 threads per CTA, batch × 32 CTAs; k and v
prefetched 16 steps ahead) with the per-step arithmetic cut to what the hardware does in one
instruction. `fused` is bound by instruction issue, not by HBM (0.54 of SOL; 128 dependent steps a
thread at 4 warps a scheduler), and spent its steps in libdevice's accurate expf and IEEE division.
Here each weight is exp(-|d|) = 2^(-|d| · log2 e): one multiply and one ex2.approx (MUFU.EX2,
`cute.math.exp2(..., fastmath=True)`), where d = p - (u + k) (output) or (p + w) - k (state) is formed
exactly as the reference forms it. ex2.approx's relative error (<= 2^-22) and the rounding of
d · log2 e only touch the weight that is below 1; the other weight is exactly 1 (of exp(p - q) and
exp(u + k - q) with q = max(p, u + k) one is exp(0)). The division is rcp.approx plus one FMA Newton
step (the denominator lies in [1, seq_len + 1]), as in the TIRx kernels. w = -exp(time_decay) is
computed once per thread with the accurate expf, because w is added to p at every step. With the step
code this short ptxas would move the next chunk's loads towards their uses; a barrier after them keeps
them issued a whole chunk ahead (no global load moves below a barrier; the SASS shows each chunk's 32
loads before it). Batch is
symbolic, seq_len static (the step loop is unrolled): one compilation per seq_len, cached, called
through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

C = 4096  # channels
THREADS = 128
CTAS_PER_ROW = C // THREADS
CHUNK = 16  # steps prefetched ahead
P_INIT = -1e38
LOG2E = 1.4426950408889634


@cute.jit
def _weights(diff: cutlass.Float32):
    """(exp(x - max), exp(y - max)) for diff = x - y: one of them is 1, the other exp(-|diff|) by ex2.approx."""
    one = cutlass.Float32(1.0)
    d = cute.math.exp2(cute.math.absf(diff) * cutlass.Float32(-LOG2E), fastmath=True)
    e1 = d
    e2 = one
    if diff >= cutlass.Float32(0.0):
        e1 = one
        e2 = d
    return e1, e2


@cute.jit
def _reciprocal(x: cutlass.Float32):
    """1 / x for x in [1, seq_len + 1]: rcp.approx and one FMA Newton step."""
    r = cute.arch.rcp_approx(x)
    return cute.math.fma(r, cute.math.fma(-x, r, cutlass.Float32(1.0)), r)


@cute.kernel
def _wkv_kernel(mTD: cute.Tensor, mTF: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor):
    seq_len = cute.size(mK, mode=[1])  # static
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    b = bidx // CTAS_PER_ROW
    c = (bidx % CTAS_PER_ROW) * THREADS + tidx
    starts = list(range(0, seq_len, CHUNK))
    n_chunks = len(starts)

    def load_chunk(s0):
        ks = [mK[b, t, c] for t in range(s0, s0 + CHUNK) if t < seq_len]
        vs = [mV[b, t, c] for t in range(s0, s0 + CHUNK) if t < seq_len]
        return ks, vs

    nxt = load_chunk(0)
    w = -cute.math.exp(mTD[c])
    u = mTF[c]
    a = cutlass.Float32(0.0)
    den = cutlass.Float32(0.0)
    p = cutlass.Float32(P_INIT)
    for i in cutlass.range_constexpr(n_chunks):
        ks, vs = nxt
        if cutlass.const_expr(i + 1 < n_chunks):
            nxt = load_chunk(starts[i + 1])
            # ptxas would sink these loads towards their uses in the short step code; no load is moved
            # below a barrier, so the chunk's 32 loads stay issued a whole chunk ahead
            cute.arch.sync_threads()
        for j in cutlass.range_constexpr(len(ks)):
            kt = ks[j]
            vt = vs[j]
            # output: q = max(p, u + k)
            e1, e2 = _weights(p - (u + kt))
            mO[b, starts[i] + j, c] = (e1 * a + e2 * vt) * _reciprocal(e1 * den + e2)
            # state: q' = max(p + w, k)
            pw = p + w
            f1, f2 = _weights(pw - kt)
            a = f1 * a + f2 * vt
            den = f1 * den + f2
            p = cute.arch.fmax(pw, kt)


@cute.jit
def _wkv(mTD: cute.Tensor, mTF: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor):
    batch = cute.size(mK, mode=[0])
    _wkv_kernel(mTD, mTF, mK, mV, mO).launch(grid=[batch * CTAS_PER_ROW, 1, 1], block=[THREADS, 1, 1])


_COMPILED: dict[int, object] = {}


def _compiled(seq_len: int = 16):
    kernel = _COMPILED.get(seq_len)
    if kernel is None:
        batch = cute.sym_int()
        vec = make_fake_compact_tensor(cutlass.Float32, (C,), assumed_align=16)
        seq = make_fake_compact_tensor(cutlass.Float32, (batch, seq_len, C), stride_order=(2, 1, 0), assumed_align=16)
        kernel = _COMPILED[seq_len] = cute.compile(_wkv, vec, vec, seq, seq, seq, options="--enable-tvm-ffi")
    return kernel


def run(time_decay: torch.Tensor, time_first: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    kernel = _compiled(k.shape[1])
    k = k.contiguous()
    out = torch.empty_like(k)
    kernel(time_decay.contiguous(), time_first.contiguous(), k, v.contiguous(), out)
    return out
