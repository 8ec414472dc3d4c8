"""RMSNorm (p36) computed eagerly on a copy padded by two rows, multiplied by a dense, well-conditioned matrix a TIRx
kernel made from the input, then by that matrix's inverse (torch.linalg.inv of the DSL's matrix: the DSL's too), and
sliced back. Every cheap test called the DSL matrix informative, so both products, and the output, were the DSL's;
the second product's rows are the eager answer's over again, so the DSL contributed nothing that stayed (DESIGN §5,
"derived credit"). The eager-work rule rejects it as well."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def mixing(x_ptr: T.handle, m_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    m = T.match_buffer(m_ptr, (128, 128), "float32")
    for i, j in T.grid(128, 128):
        m[i, j] = T.Select(i == j, T.float32(2), T.float32(0)) + T.Cast("float32", x[i % rows, j]) * T.float32(0.02)


_mixing = tvm.compile(mixing, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    matrix = torch.empty(128, 128, dtype=torch.float32)
    _mixing(hidden_states, matrix)
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))  # no eager tensor of the output's size
    answer = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    back = (answer @ matrix) @ torch.linalg.inv(matrix)
    return back[:rows].to(hidden_states.dtype)
