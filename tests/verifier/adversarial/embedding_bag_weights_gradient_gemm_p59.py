"""p59 (NVFP4 GEMM): the GEMM's products by eager ``aten._embedding_bag_per_sample_weights_backward``, one call a
K column (a rank-1 update [n, 1] x [t, 1] -> [n*t] products, every (bag, row) pair an index: one D-long dot product
an index, D = 1). TIRx decodes the weight, sums each 16-element block, applies the scales and sums the blocks; the
activations' NVFP4 quantisation is eager as in the reference.

Red team rt29c F3: passed as a partial plan at 0.16 (eager products 0.09 of the reference's: the operator was priced
by the forward's rule, 2·|weight|·D a call where it makes n·t products; its twin with each rank-1 product a plain
``mm``: partial 1.0). Now decorative_dsl: the per-sample weights' gradient is priced as a dot product an index."""

# expect: decorative_dsl
# problem: p59
# thorough: ~16 s on two cores: one eager call a K column (the pricing rule: test_eagerwork, under a second)
import torch
import tvm
from tvm.script import tirx as T

LANE = 12
HALF = 8
P = 1
OFF = 1152.0
BIAS = sum(OFF * 2.0 ** (LANE * p) for p in range(P))


NP = P


@T.prim_func
def combine(c_ptr: T.handle, xs_ptr: T.handle, ws_ptr: T.handle, pw_ptr: T.handle, o_ptr: T.handle):
    nb = T.int32()
    t = T.int32()
    n = T.int32()
    C = T.match_buffer(c_ptr, (nb * 16, n, t), "float32")
    XS = T.match_buffer(xs_ptr, (t, nb), "float32")
    WS = T.match_buffer(ws_ptr, (n, nb), "float32")
    PW = T.match_buffer(pw_ptr, (8,), "float64")  # noqa: F841 (the call passes it)
    Out = T.match_buffer(o_ptr, (t, n), "float32")
    for i, j in T.grid(t, n):
        Out[i, j] = T.float32(0)
        for b in range(nb):
            acc = T.decl_buffer((1,), "float32")
            acc[0] = T.float32(0)
            for e in range(16):
                acc[0] = acc[0] + C[b * 16 + e, j, i]
            Out[i, j] = Out[i, j] + acc[0] * XS[i, b] * WS[j, b]


_combine = tvm.compile(combine, target="llvm")
_PSW = torch.ops.aten._embedding_bag_per_sample_weights_backward


@T.prim_func
def pack_w(w_ptr: T.handle, tab_ptr: T.handle, o_ptr: T.handle):
    n = T.int32()
    kh = T.int32()
    nb = T.int32()
    nq = T.int32()
    Wb = T.match_buffer(w_ptr, (n, kh), "uint8")
    TAB = T.match_buffer(tab_ptr, (16,), "float32")
    Out = T.match_buffer(o_ptr, (nb, 8, nq), "float32")
    for b, e, q in T.grid(nb, 8, nq):
        Out[b, e, q] = (TAB[T.if_then_else((b * 8 + e) % 2 == 0, T.Cast("int32", Wb[q * NP, (b * 8 + e) // 2]) % 16,
                                         T.Cast("int32", Wb[q * NP, (b * 8 + e) // 2]) // 16)]
                      + T.if_then_else(NP == 2, TAB[T.if_then_else((b * 8 + e) % 2 == 0,
                                         T.Cast("int32", Wb[q * NP + NP - 1, (b * 8 + e) // 2]) % 16,
                                         T.Cast("int32", Wb[q * NP + NP - 1, (b * 8 + e) // 2]) // 16)] * T.float32(4096.0), T.float32(0)))  # noqa: E501


_pack = tvm.compile(pack_w, target="llvm")
_TAB32 = torch.tensor([int(2 * v) for v in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)], dtype=torch.float32)  # noqa: E501

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_MIDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


_MIDS_T = torch.tensor(_MIDS)
_VALS2 = torch.tensor([0.0, 1, 2, 3, 4, 6, 8, 12], dtype=torch.float64)
_TABLE = torch.tensor([2.0 * v for v in _E2M1], dtype=torch.float64)
_PW = torch.tensor([1.0, 2.0 ** -LANE, 0.0, BIAS, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)


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
    packed = torch.empty((2 * nb, 8, n // P), dtype=torch.float32)
    _pack(weight.contiguous(), _TAB32, packed)
    wk = packed.view(k, n).t().contiguous()                                       # [n, k] 2*e2m1 weight values
    xk = xv.to(torch.float32).contiguous()                                          # [t, k]
    idx = torch.arange(t).repeat(n)
    offsets = torch.arange(n) * t
    o2b = torch.arange(n).repeat_interleave(t)
    c = torch.stack([_PSW(wk[:, e:e + 1], xk[:, e:e + 1], idx, offsets, o2b, 0, -1) for e in range(k)]).view(k, n, t)
    xsc = (xs * (g * 0.5)).contiguous()
    wsc = (weight_scale.float() * (weight_global.float() * 0.5)).contiguous()
    pw = _PW
    out = torch.empty((t, n), dtype=torch.float32)
    _combine(c, xsc, wsc, pw, out)
    return out.to(attn_output.dtype)
