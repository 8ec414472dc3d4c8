"""p32 (SwiGLU MLP): eager code makes all three GEMMs and the SwiGLU; a TIRx kernel adds the down bias. The gate
and up projections are ONE complex64 product: the weight gate + i*up (a stack: movement, not judged on a problem
with products) times the activations as complex numbers with zero imaginary part gives x.Wg + i x.Wu; the down
projection pairs the weight's rows as real and imaginary parts. The eager-work price of a product counts
2*|a|*cols whatever the dtype: half the real FLOPs.

Red team rt28 h4: passed as a partial plan, share 0.500 (its real twin: decorative, 1.0); now decorative_dsl: a
complex product is priced as the four real products it does (``_widths``)."""

# expect: decorative_dsl
# problem: p32
import torch
import torch.nn.functional as F
import tvm
from tvm.script import tirx as T


@T.prim_func
def add_bias(y_ptr: T.handle, b_ptr: T.handle, o_ptr: T.handle):
    n = T.int32()
    d = T.int32()
    y = T.match_buffer(y_ptr, (n, d), "float32")
    b = T.match_buffer(b_ptr, (d,), "float32")
    o = T.match_buffer(o_ptr, (n, d), "float32")
    for i, j in T.grid(n, d):
        o[i, j] = y[i, j] + b[j]


_add_bias = tvm.compile(add_bias, target="llvm")


def _complex(x):
    return torch.view_as_complex(torch.stack((x, torch.zeros_like(x)), -1))


def _clinear(x, w):
    """x [n, K] @ w[N, K].T through one complex product of N/2 columns."""
    n, k = x.shape
    nout = w.shape[0]
    wc = torch.view_as_complex(w.view(nout // 2, 2, k).transpose(1, 2).contiguous())
    return torch.view_as_real(_complex(x) @ wc.T).reshape(n, nout)


def run(hidden_states, gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias):
    wgu = torch.view_as_complex(torch.stack((gate_weight, up_weight), -1))  # [f, d]: gate + i up
    gu = torch.view_as_real(_complex(hidden_states) @ wgu.T)  # [n, f, 2]
    g = gu[..., 0] + gate_bias
    u = gu[..., 1] + up_bias
    y = _clinear(F.silu(g) * u, down_weight).contiguous()
    out = torch.empty_like(y)
    _add_bias(y, down_bias.contiguous(), out)
    return out
