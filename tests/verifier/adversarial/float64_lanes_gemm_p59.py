"""p59 (NVFP4 GEMM): eager code makes every product. The e2m1 values times 2 are integers in [-12, 12], so a
16-element block's dot product is an integer in [-2304, 2304] (13 bits): four weight columns are packed by
arithmetic into one float64 (w0 + w1*2^13 + w2*2^26 + w3*2^39, exact below 2^53), and one float64 `bmm` over the
K/16 blocks makes four output columns' block sums per priced column. A TIRx kernel unpacks the lanes, applies the
block scales and sums over the blocks (the epilogue).

Red team rt28b F1: passed as a partial plan, share 0.347 (its twin, one weight column a bmm column: 1.0); now
decorative_dsl like that twin: a float64 product is priced as the float32 work its multiplier does, (53/24)^2 ~ 5
(``_widths.PRECISION``), float64 element work twice."""

# expect: decorative_dsl
# problem: p59
import torch
import tvm
from tvm.script import tirx as T

LANE = 13
P = 4
OFF = 2304.0
BIAS = sum(OFF * 2.0 ** (LANE * p) for p in range(P))


@T.prim_func
def combine(c_ptr: T.handle, xs_ptr: T.handle, ws_ptr: T.handle, pw_ptr: T.handle, o_ptr: T.handle):
    nb = T.int32()
    t = T.int32()
    nq = T.int32()
    n = T.int32()
    C = T.match_buffer(c_ptr, (nb, t, nq), "float64")
    XS = T.match_buffer(xs_ptr, (t, nb), "float32")
    WS = T.match_buffer(ws_ptr, (n, nb), "float32")
    PW = T.match_buffer(pw_ptr, (8,), "float64")
    Out = T.match_buffer(o_ptr, (t, n), "float32")
    for i, j in T.grid(t, n):
        Out[i, j] = T.float32(0)
        for b in range(nb):
            Out[i, j] = Out[i, j] + T.Cast("float32",
                T.floor((C[b, i, j // 4] + PW[5]) * PW[j % 4])
                - T.floor((C[b, i, j // 4] + PW[5]) * PW[j % 4 + 1]) * T.float64(8192.0)
                - T.float64(2304.0)) * XS[i, b] * WS[j, b]


_combine = tvm.compile(combine, target="llvm")

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_MIDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


_MIDS_T = torch.tensor(_MIDS)
_VALS2 = torch.tensor([0.0, 1, 2, 3, 4, 6, 8, 12], dtype=torch.float64)
_TABLE = torch.tensor([2.0 * v for v in _E2M1], dtype=torch.float64)
_PW = torch.tensor([2.0 ** (-LANE * p) for p in range(P + 1)] + [BIAS, 0.0, 0.0], dtype=torch.float64)


def _quant_x(x, g):
    """NVFP4 quantisation of the activations (as the reference): integer values 2*e2m1 and block scales."""
    xf = x.float()
    t, k = xf.shape
    blocks = xf.reshape(t, k // 16, 16)
    amax = blocks.abs().amax(dim=-1)
    scale = (amax / (6.0 * g)).clamp(max=448.0).to(torch.float8_e4m3fn)
    step = scale.float() * g
    safe = torch.where(step > 0, step, torch.ones_like(step))
    y = torch.where(step.unsqueeze(-1) > 0, blocks / safe.unsqueeze(-1), torch.zeros_like(blocks)).clamp(-6.0, 6.0)
    mag = y.abs()
    mids = _MIDS_T
    lo = torch.bucketize(mag, mids, right=False)
    hi = torch.bucketize(mag, mids, right=True)
    idx = torch.where((lo != hi) & (lo % 2 == 1), hi, lo)
    vals2 = _VALS2[idx]
    vals2 = torch.where(y < 0, -vals2, vals2)
    return vals2.reshape(t, k), scale.float()


def run(attn_output, input_scale, weight, weight_scale, weight_global):
    t = attn_output.shape[0]
    x = attn_output.reshape(t, -1)
    k = x.shape[1]
    n = weight.shape[0]
    nb = k // 16
    g = input_scale.float()
    xv, xs = _quant_x(x, g)                                     # [t, k] float64 integers, [t, nb]
    table = _TABLE
    codes = torch.stack((weight & 0x0F, weight >> 4), dim=-1).reshape(n, k).long()
    wv = table[codes]                                           # [n, k] integers in [-12, 12]
    wq = wv.reshape(n // P, P, nb, 16)
    packed = wq[:, 0] + wq[:, 1] * 2.0 ** LANE + wq[:, 2] * 2.0 ** (2 * LANE) + wq[:, 3] * 2.0 ** (3 * LANE)
    packed = packed.permute(1, 2, 0).contiguous()               # [nb, 16, n/4]
    xb = xv.reshape(t, nb, 16).permute(1, 0, 2).contiguous()   # [nb, t, 16]
    c = torch.bmm(xb, packed).contiguous()                      # [nb, t, n/4] packed block sums
    xsc = (xs * (g * 0.5)).contiguous()
    wsc = (weight_scale.float() * (weight_global.float() * 0.5)).contiguous()
    pw = _PW
    out = torch.empty((t, n), dtype=torch.float32)
    _combine(c, xsc, wsc, pw, out)
    return out.to(attn_output.dtype)
