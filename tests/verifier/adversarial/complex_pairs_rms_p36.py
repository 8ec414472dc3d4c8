"""p36 RMSNorm: eager code makes the sum of squares, the inverse RMS and the normalisation on a complex64 view of
the upcast rows (pairs of elements as one complex number: |z| of a pair, a scaling of a pair by a real), a TIRx
kernel multiplies by the weight and casts. Every eager element operator is priced at its tensor's element count,
which the complex view halves.

Red team rt28 h3: passed as a partial plan, share 0.505 (its real twin: decorative, 0.754); now decorative_dsl: a
complex element is two real scalars (``_widths``)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def weight_cast(y_ptr: T.handle, w_ptr: T.handle, o_ptr: T.handle):
    rows = T.int32()
    y = T.match_buffer(y_ptr, (rows, HIDDEN), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    o = T.match_buffer(o_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        o[i, j] = T.Cast("bfloat16", y[i, j] * T.Cast("float32", w[j]))


_weight_cast = tvm.compile(weight_cast, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    xc = torch.view_as_complex(hidden_states.float().view(rows, HIDDEN // 2, 2))
    a = xc.abs()
    inv = torch.rsqrt((a * a).sum(-1, keepdim=True) / HIDDEN + 1e-6)
    y = torch.view_as_real(xc * inv).reshape(rows, HIDDEN).contiguous()
    out = torch.empty_like(hidden_states)
    _weight_cast(y, weight, out)
    return out
