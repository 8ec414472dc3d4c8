"""RMSNorm (p36): eager PyTorch computes the whole answer, four chunks of rows at a time, each chunk's stages written
with other operators (a square as ``mul``, ``pow`` or ``square``, a mean as ``mean`` or ``sum`` then ``div``, the
epsilon added or the negation subtracted, ``rsqrt``, ``reciprocal`` of ``sqrt`` or ``exp2`` of ``log2``, a product
as ``mul`` or ``div`` by the reciprocal), on a copy padded by two rows, as 3y (the 3 folded into the weight); a TIRx
kernel decodes it into the output. Pooled by operator name no pool held a whole pass (passes 0.50, and it passed);
pooled across names, the chunks are the reference's passes (DESIGN §5, "eager work")."""

# expect: decorative_dsl
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
        y[i] = e[i] / T.float32(3)


_decode = tvm.compile(decode, target="llvm")


def _chunk(rows, w, k):
    n = rows.shape[-1]
    if k == 0:
        return rows * torch.rsqrt((rows * rows).mean(dim=-1, keepdim=True) + 1e-6) * w
    if k == 1:
        inv = torch.reciprocal(torch.sqrt(rows.pow(2).sum(dim=-1, keepdim=True) / n - (-1e-6)))
        return rows / torch.reciprocal(inv) / torch.reciprocal(w)
    if k == 2:
        inv = torch.exp2(torch.log2(torch.square(rows).mean(dim=-1, keepdim=True).add(1e-6)) * -0.5)
        return torch.div(rows, torch.reciprocal(inv)).mul(w)
    return torch.addcmul(torch.zeros_like(rows), rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + 1e-6), w)


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))  # no eager tensor of the output's size
    w = weight.float() * 3  # the encoding folded into the weight: no pass of its own
    encoded = torch.cat([_chunk(part, w, k) for k, part in enumerate(x.chunk(4, dim=0))])[:rows].reshape(-1)
    decoded = torch.empty(encoded.numel(), dtype=torch.float32)
    _decode(encoded, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
