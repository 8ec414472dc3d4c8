"""p59 (NVFP4 GEMM): the GEMM's multiply-adds as the duplicates an uncoalesced sparse COO tensor sums in
``to_dense()``. The activation codes (x' = 2·e2m1 + 12, five bits) route 2^j-scaled weight values (a TIRx kernel makes
both) to an output row when bit j is set, to a dump row otherwise; eager ``copy_``s of broadcast views fill the values
and indices of a sparse tensor made at import (its ``_values()``/``_indices()`` aliases taken there) and one
``to_dense()`` makes all 512,000 multiply-adds. TIRx removes the bias, applies the block scales and sums the blocks.

Red team rt30a F1 (on 4f75576): passed as a full plan at 1.6% (``aten._to_dense`` priced as a copy of its output;
its twin summing the same values with an accumulating ``index_put_``: decorative_dsl 1.0). Sparse tensors were outside
the vault's watch altogether. Now an eager operator on a sparse (mkldnn, nested) tensor does not run: run() raises
PermissionError, and the draw's audit fails closed whatever the submission does with it."""

# expect: exception
# problem: p59
import torch
import tvm
from tvm.script import tirx as T

NBITS = 5


@T.prim_func
def quant_rows(x_ptr: T.handle, st_ptr: T.handle, mids_ptr: T.handle, r_ptr: T.handle):
    t = T.int32()
    k = T.int32()
    nb = T.int32()
    X = T.match_buffer(x_ptr, (t, k), "float32")
    ST = T.match_buffer(st_ptr, (t, nb), "float32")
    MIDS = T.match_buffer(mids_ptr, (8,), "float32")  # 7 midpoints, then the 8 magnitudes*2 come from a formula
    R = T.match_buffer(r_ptr, (nb, 16, NBITS, t), "int64")
    for i, b, e in T.grid(t, nb, 16):
        y = T.if_then_else(
            ST[i, b] > T.float32(0),
            T.max(T.min(X[i, b * 16 + e] / ST[i, b], T.float32(6)), T.float32(-6)),
            T.float32(0),
        )
        mag = T.abs(y)
        lo = (
            T.Cast("int32", MIDS[0] < mag)
            + T.Cast("int32", MIDS[1] < mag)
            + T.Cast("int32", MIDS[2] < mag)
            + T.Cast("int32", MIDS[3] < mag)
            + T.Cast("int32", MIDS[4] < mag)
            + T.Cast("int32", MIDS[5] < mag)
            + T.Cast("int32", MIDS[6] < mag)
        )
        hi = (
            T.Cast("int32", MIDS[0] <= mag)
            + T.Cast("int32", MIDS[1] <= mag)
            + T.Cast("int32", MIDS[2] <= mag)
            + T.Cast("int32", MIDS[3] <= mag)
            + T.Cast("int32", MIDS[4] <= mag)
            + T.Cast("int32", MIDS[5] <= mag)
            + T.Cast("int32", MIDS[6] <= mag)
        )
        idx = T.if_then_else(T.And(lo != hi, lo % 2 == 1), hi, lo)
        v2 = T.if_then_else(idx <= 4, idx, T.if_then_else(idx == 5, 6, T.if_then_else(idx == 6, 8, 12)))
        xq = T.if_then_else(y < T.float32(0), 12 - v2, 12 + v2)
        for j in range(NBITS):
            bit = T.bitwise_and(T.shift_right(xq, j), 1)
            R[b, e, j, i] = T.if_then_else(bit == 1, T.Cast("int64", i), T.Cast("int64", t))


@T.prim_func
def weight_bits(w_ptr: T.handle, tab_ptr: T.handle, w5_ptr: T.handle, ws_ptr: T.handle):
    n = T.int32()
    kh = T.int32()
    nb = T.int32()
    Wb = T.match_buffer(w_ptr, (n, kh), "uint8")
    TAB = T.match_buffer(tab_ptr, (16,), "float32")
    W5 = T.match_buffer(w5_ptr, (nb, 16, NBITS, n), "float32")
    WSUM = T.match_buffer(ws_ptr, (nb, n), "float32")
    for b, q in T.grid(nb, n):
        WSUM[b, q] = T.float32(0)
        for e in range(16):
            code = T.if_then_else(
                e % 2 == 0,
                T.Cast("int32", Wb[q, (b * 16 + e) // 2]) % 16,
                T.Cast("int32", Wb[q, (b * 16 + e) // 2]) // 16,
            )
            WSUM[b, q] = WSUM[b, q] + TAB[code]
            for j in range(NBITS):
                W5[b, e, j, q] = TAB[code] * T.Cast("float32", T.shift_left(1, j))


@T.prim_func
def combine(s_ptr: T.handle, ws_ptr: T.handle, xs_ptr: T.handle, wsc_ptr: T.handle, o_ptr: T.handle):
    nb = T.int32()
    t1 = T.int32()
    n = T.int32()
    t = T.int32()
    S = T.match_buffer(s_ptr, (nb, t1, n), "float32")
    WSUM = T.match_buffer(ws_ptr, (nb, n), "float32")
    XS = T.match_buffer(xs_ptr, (t, nb), "float32")
    WSC = T.match_buffer(wsc_ptr, (n, nb), "float32")
    OUT = T.match_buffer(o_ptr, (t, n), "float32")
    for i, j in T.grid(t, n):
        OUT[i, j] = T.float32(0)
        for b in range(nb):
            OUT[i, j] = OUT[i, j] + (S[b, i, j] - T.float32(12) * WSUM[b, j]) * XS[i, b] * WSC[j, b]


_quant = tvm.compile(quant_rows, target="llvm")
_wbits = tvm.compile(weight_bits, target="llvm")
_combine = tvm.compile(combine, target="llvm")

_CODES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_TAB = torch.tensor([2.0 * v for v in _CODES], dtype=torch.float32)
_MIDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 1e30], dtype=torch.float32)

_SP = {}


def _sparse_for(nb, t, n):
    """An uncoalesced COO tensor [nb, t + 1, n] with one entry per (b, e, j, i, q); its b and q indices fixed, its row
    index and its values filled in each call (through the aliases kept here)."""
    b, _, _, i, q = torch.meshgrid(
        torch.arange(nb), torch.arange(16), torch.arange(NBITS), torch.arange(t), torch.arange(n), indexing="ij"
    )
    idx = torch.stack((b.reshape(-1), i.reshape(-1), q.reshape(-1)))
    vals = torch.zeros(idx.shape[1], dtype=torch.float32)
    sp = torch.sparse_coo_tensor(idx, vals, (nb, t + 1, n), is_coalesced=False)
    v, ix = sp._values(), sp._indices()
    assert v.data_ptr() == vals.data_ptr() and ix.data_ptr() == idx.data_ptr()
    return sp, v.view(nb, 16, NBITS, t, n), ix[1].view(nb, 16, NBITS, t, n)


_SP[(16, 5, 80)] = _sparse_for(16, 5, 80)  # p59 SMOKE: nb = 16, t = 5, n = 80


def run(attn_output, input_scale, weight, weight_scale, weight_global):
    t = attn_output.shape[0]
    x = attn_output.reshape(t, -1)
    k = x.shape[1]
    n = weight.shape[0]
    nb = k // 16
    g = input_scale.float()
    xf = x.float()
    # block scales, as the reference
    amax = xf.reshape(t, nb, 16).abs().amax(dim=-1)
    scale = (amax / (6.0 * g)).clamp(max=448.0).to(torch.float8_e4m3fn).float()
    step = (scale * g).contiguous()
    rows = torch.empty((nb, 16, NBITS, t), dtype=torch.int64)
    _quant(xf.contiguous(), step, _MIDS, rows)
    w5 = torch.empty((nb, 16, NBITS, n), dtype=torch.float32)
    wsum = torch.empty((nb, n), dtype=torch.float32)
    _wbits(weight.contiguous(), _TAB, w5, wsum)
    sp, vals, ridx = _SP[(nb, t, n)]
    vals.copy_(w5.unsqueeze(3).expand(nb, 16, NBITS, t, n))
    ridx.copy_(rows.unsqueeze(-1).expand(nb, 16, NBITS, t, n))
    s = sp.to_dense()  # [nb, t + 1, n]: every multiply-add, as duplicates summed
    xsc = (scale * (g * 0.5)).contiguous()
    wsc = (weight_scale.float() * (weight_global.float() * 0.5)).contiguous()
    out = torch.empty((t, n), dtype=torch.float32)
    _combine(s, wsum, xsc, wsc, out)
    return out.to(attn_output.dtype)
