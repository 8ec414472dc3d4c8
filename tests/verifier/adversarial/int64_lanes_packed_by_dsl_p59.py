"""p59 (NVFP4 GEMM): the GEMM as integer element work on lanes. A TIRx kernel decodes the weight and packs four
columns of 2·e2m1 codes as 16-bit lanes of one int64 (a block's dot product lies in [-2304, 2304]); one broadcast
int64 ``mul`` and one ``sum`` over each 16-element block make four output columns' block sums an element. TIRx
unpacks the lanes, applies the scales and sums the blocks; the activations' quantisation is eager as in the reference.

Red team rt30a F2 (on 4f75576): passed as a partial plan at 0.28 (int64 element operations priced once an element;
its one-column twin: decorative 0.85). Now decorative_dsl: an int64 multiplication is priced as an integer product
(7), other int64 element work at 3 (``_widths.PRECISION``)."""

# expect: decorative_dsl
# problem: p59
import torch
import tvm
from tvm.script import tirx as T

P = 4  # lanes per int64 (control: 1)
LANE = 16
OFFSET = 2304
BIAS = sum(OFFSET << (LANE * p) for p in range(P))


@T.prim_func
def pack_w(w_ptr: T.handle, tab_ptr: T.handle, o_ptr: T.handle):
    n = T.int32()
    kh = T.int32()
    nb = T.int32()
    nq = T.int32()
    Wb = T.match_buffer(w_ptr, (n, kh), "uint8")
    TAB = T.match_buffer(tab_ptr, (16,), "int64")
    OUT = T.match_buffer(o_ptr, (nb, 16, nq), "int64")
    for b, e, q in T.grid(nb, 16, nq):
        OUT[b, e, q] = T.int64(0)
        for p in range(P):
            OUT[b, e, q] = OUT[b, e, q] + TAB[
                T.if_then_else(
                    (b * 16 + e) % 2 == 0,
                    T.Cast("int32", Wb[q * P + p, (b * 16 + e) // 2]) % 16,
                    T.Cast("int32", Wb[q * P + p, (b * 16 + e) // 2]) // 16,
                )
            ] * T.shift_left(T.int64(1), T.Cast("int64", LANE * p))


_pack = tvm.compile(pack_w, target="llvm")


@T.prim_func
def combine(c_ptr: T.handle, xs_ptr: T.handle, ws_ptr: T.handle, o_ptr: T.handle):
    nb = T.int32()
    t = T.int32()
    nq = T.int32()
    n = T.int32()
    C = T.match_buffer(c_ptr, (nb, t, nq), "int64")
    XS = T.match_buffer(xs_ptr, (t, nb), "float32")
    WS = T.match_buffer(ws_ptr, (n, nb), "float32")
    OUT = T.match_buffer(o_ptr, (t, n), "float32")
    for i, j in T.grid(t, n):
        OUT[i, j] = T.float32(0)
        for b in range(nb):
            OUT[i, j] = (
                OUT[i, j]
                + T.Cast(
                    "float32",
                    T.bitwise_and(
                        T.shift_right(C[b, i, j // P] + T.int64(BIAS), T.Cast("int64", LANE * (j % P))), T.int64(65535)
                    )
                    - T.int64(OFFSET),
                )
                * XS[i, b]
                * WS[j, b]
            )


_combine = tvm.compile(combine, target="llvm")

_TAB64 = torch.tensor(
    [int(2 * v) for v in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)],
    dtype=torch.int64,
)
_MIDS_T = torch.tensor((0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0))
_VALS2 = torch.tensor([0.0, 1, 2, 3, 4, 6, 8, 12], dtype=torch.float64)


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
    lo = torch.bucketize(mag, _MIDS_T, right=False)
    hi = torch.bucketize(mag, _MIDS_T, right=True)
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
    xv, xs = _quant_x(x, g)  # [t, k] float64 integers, [t, nb]
    packed = torch.empty((nb, 16, n // P), dtype=torch.int64)
    _pack(weight.contiguous(), _TAB64, packed)
    xb = xv.reshape(t, nb, 16).permute(1, 0, 2).to(torch.int64)  # [nb, t, 16]
    c = (xb.unsqueeze(-1) * packed.unsqueeze(1)).sum(dim=2)  # [nb, t, n/P] packed block sums (int64 element ops)
    xsc = (xs * (g * 0.5)).contiguous()
    wsc = (weight_scale.float() * (weight_global.float() * 0.5)).contiguous()
    out = torch.empty((t, n), dtype=torch.float32)
    _combine(c.contiguous(), xsc, wsc, out)
    return out.to(attn_output.dtype)
