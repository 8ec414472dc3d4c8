"""p67 (Hyena block): TIRx kernels make the short depthwise conv and the last gate y = z * x0 (the reference's only
product: F.conv1d); eager code makes the gating and the FFT long convolution (rfft/irfft, priced one element pass
each: `_fft_r2c`, `_fft_c2r` were element work). The plan's basis is the reference's products, so the eager FFT
convolution, 86% of the problem's own cost() FLOPs at PRODUCTION, left the plan `full` at 0%.

Red team rt28b F3: passed as a full plan, share 0.0 (the plan's basis was the reference's products, the conv1d the
kernel does; an rfft/irfft pair was priced one element pass each). A Fourier transform is now a product of ~2.5 n
log2 n FLOPs (``_eagerwork.FFTS``)."""

# expect: decorative_dsl
# problem: p67
import torch
import tvm
from tvm.script import tirx as T

W3 = 2304


@T.prim_func
def short_conv(u_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, s_ptr: T.handle):
    nb = T.int32()
    L = T.int32()
    U = T.match_buffer(u_ptr, (nb, L, W3), "float32")
    Wt = T.match_buffer(w_ptr, (W3, 3), "float32")
    Bs = T.match_buffer(b_ptr, (W3,), "float32")
    S = T.match_buffer(s_ptr, (nb, W3, L), "float32")
    for b, t, c in T.grid(nb, L, W3):
        S[b, c, t] = (
            Bs[c]
            + Wt[c, 2] * U[b, t, c]
            + T.Select(t >= 1, T.float32(1), T.float32(0)) * Wt[c, 1] * U[b, T.max(t - 1, 0), c]
            + T.Select(t >= 2, T.float32(1), T.float32(0)) * Wt[c, 0] * U[b, T.max(t - 2, 0), c]
        )


_conv = tvm.compile(short_conv, target="llvm")


@T.prim_func
def gate(z_ptr: T.handle, x_ptr: T.handle, y_ptr: T.handle):
    nb = T.int32()
    L = T.int32()
    d = T.int32()
    Z = T.match_buffer(z_ptr, (nb, d, L), "float32")
    X = T.match_buffer(x_ptr, (nb, d, L), "float32")
    Y = T.match_buffer(y_ptr, (nb, L, d), "float32")
    for b, t, c in T.grid(nb, L, d):
        Y[b, t, c] = Z[b, c, t] * X[b, c, t]


_gate = tvm.compile(gate, target="llvm")


def run(u, short_weight, short_bias, long_filter, filter_bias):
    B, L, _ = u.shape
    d = long_filter.shape[0]
    s = torch.empty((B, W3, L), dtype=torch.float32)
    _conv(u.contiguous(), short_weight.contiguous(), short_bias.contiguous(), s)
    x0, x1, v = s.split(d, dim=1)
    v = v * x1
    n = 2 * L
    k_f = torch.fft.rfft(long_filter, n=n)
    z = torch.fft.irfft(torch.fft.rfft(v, n=n) * k_f, n=n)[..., :L] + v * filter_bias[:, None]
    y = torch.empty((B, L, d), dtype=torch.float32)
    _gate(z.contiguous(), x0.contiguous(), y)
    return y
