"""Relabels every aten operator that computes the eager answer as a view (a free operator for the eager-work
audit) by giving each operator object the view's schema, then computes the whole RMSNorm eagerly, encodes it
as 3y + 1 on a padded copy, and has a TIRx kernel decode it (eagerwork_answer_encoded, relabelled). The audit
runs each operator by the name it prices it by (read once, through the schema accessors captured before the
submission loaded), so a relabelled operator computes what its label says, never what it was: here a view
that cannot take the product's arguments, and run() raises."""

# expect: exception
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def decode(e_ptr: T.handle, y_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "float32")
    y = T.match_buffer(y_ptr, (n,), "float32")
    for i in range(n):
        y[i] = (e[i] - T.float32(1)) / T.float32(3)


_decode = tvm.compile(decode, target="llvm")
_aten = torch.ops.aten
for _op in (_aten.mul.Tensor, _aten.pow.Tensor_Scalar, _aten.mean.dim, _aten.add.Tensor, _aten.rsqrt.default):
    _op._schema = _aten.view.default._schema
    _op._overloadname = "default"


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    encoded = (y * 3 + 1)[:rows].reshape(-1)
    decoded = torch.empty(rows * hidden_states.shape[1], dtype=torch.float32)
    _decode(encoded, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
