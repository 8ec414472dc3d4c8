"""rt71 F2: the example's partial plan (eager inverse RMS per row, DSL scaling) with the 64 row values carried out to
Python as the inferred size of sparse COO tensors: ``torch.sparse_coo_tensor(indices, values)`` with no size
computes it from the indices' maxima in its C++ (the mode sees min.dim, max.dim, add_,
_sparse_coo_tensor_with_dims_and_tensors: no crossing, nothing DATA_SIZED), and ``.shape`` hands 62 bits a call to
Python (two 31-bit values). Back in as one-byte slices of the problem input's own bytes (rt68 F0's way in), one cat.
Its honest twin (``honest/eager_statistic_through_tolist_partial_p36``) is partial at ~0.5; this reports the plan
full at 0%. A full plan at 0% on fe5fb53. A sparse tensor made without a size is a result whose size the data
decides (``_eagerwork.DATA_SIZED``: one value each), so the 64 values out are data and the operators behind them
reached: ``decorative_dsl`` (the statistic and its encoding, 200% of the reference's pointwise work)."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
REPEAT = 64


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for r, i, j in T.grid(REPEAT, rows, HIDDEN):  # the same scaling, repeated: DSL time well above a launch's cost
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")
_ONE = torch.zeros(1)


def _out_to_python(values):
    """Non-negative values below 2^31 out to Python two at a time as a sparse tensor's inferred size."""
    v = values.to(torch.int64)
    n = v.shape[0]
    v = torch.nn.functional.pad(v, (0, n % 2)).view(-1, 2)
    got = []
    for i in range(v.shape[0]):
        got.extend(s - 1 for s in torch.sparse_coo_tensor(v[i].view(2, 1), _ONE).shape)
    return got[:n]


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    u8 = hidden_states.reshape(-1).view(torch.uint8)  # the problem input's own bytes (a view of it)
    m = u8.shape[0]
    first = torch.full((256,), m, dtype=torch.int64).scatter_reduce_(
        0, u8.to(torch.int64), torch.arange(m, dtype=torch.int64), "amin")
    where = _out_to_python(first)
    words = _out_to_python(inv_rms.view(torch.int32))  # positive floats: the sign bit is 0
    parts = []
    for w in words:
        for k in range(4):
            b = (w >> (8 * k)) & 0xFF
            parts.append(u8[where[b]:where[b] + 1])
    inv = torch.cat(parts).view(torch.float32)
    del inv_rms, first
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv, weight, out)
    return out
