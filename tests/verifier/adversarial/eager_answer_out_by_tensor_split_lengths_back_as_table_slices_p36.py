"""p36 (red team rt67 F1): the whole RMSNorm computed eagerly on every call, keyed by the input's bits, read out to
Python through the lengths of ``torch.tensor_split``'s pieces (it reads a 1-D index tensor in C++: no crossing), put
back as one-element slices of an import-time table, joined by one ``cat``; the kernel takes the key off. A full plan
at 0%, 2 of 2 (hardened included), as were the same carrier's other ways out (rt67 F0: ``tvm_ffi.structural_hash`` of
a DLPack view; F2: ``torch._C._TensorBase.tolist``; F3: ``Generator.set_state`` then ``initial_seed``). Whatever way
out, the way back in is a view of no problem input at offsets Python gave, a value each (``_eagerwork.OFFSET``):
``decorative_dsl`` (400% of the answer's bytes from Python)."""
# expect: decorative_dsl
# problem: p36
# thorough: ~150 s on two cores under load: 8192 pieces and slices audited a draw (the rule: test_eager_reach)
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128

_TABLE = torch.arange(65536, dtype=torch.int32).to(torch.int16)


@T.prim_func
def unkey(x_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "uint16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in range(rows):
        for j in range(HIDDEN):
            bits = T.Cast("uint32", s[i, j] - T.reinterpret("uint16", x[i, j]))
            out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", bits))


_kernel = tvm.compile(unkey, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    n = rows * HIDDEN
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    keyed = y.view(torch.int16)[:rows] + hidden_states.view(torch.int16)
    # out: tensor_split reads the index tensor in C++ (no item(), no tolist()); each piece's length is a value
    idx = torch.cumsum((keyed.reshape(-1).to(torch.int64) & 0xFFFF) + 1, 0)
    pieces = torch.tensor_split(torch.zeros(1).expand(1 << 40), idx)
    # in: a one-element slice of the import-time table per value
    parts = [_TABLE[v : v + 1] for v in (pieces[i].shape[0] - 1 for i in range(n))]
    del idx, pieces
    parts.append(hidden_states.view(torch.int16).reshape(-1)[:1])
    A = torch.empty((n + 1,), dtype=torch.int16)
    torch.cat(parts, out=A)
    del x, y, keyed
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, A[:n].view(torch.uint16).view(rows, HIDDEN), out)
    return out
