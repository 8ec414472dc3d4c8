"""p36 (red team rt63 F0): a torch.Tensor subclass met by the vault while it had no ``__torch_dispatch__`` (its verdict
was cached per class), then given one. Its instances made after that carry torch's Python dispatch key: one ``copy_``
reaches the vault's mode (priced as one movement pass) and then the class's handler, which computes the whole RMSNorm
with the mode popped and writes it keyed by the input's bits; the kernel takes the key off. Passed as a full plan at
0% (p36 2 of 2, p31 1 of 1; both protocols). Each operand is judged by its own dispatch keys now
(``_provenance.subclass_kind``): refused, the draw raises."""
# expect: exception
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
_ctx = {}


def _handler(cls, func, types, args=(), kwargs=None):
    x, w, dst = _ctx["x"], _ctx["w"], _ctx["dst"]
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * w.float()).to(torch.bfloat16)
    dst.copy_((y.view(torch.int16) + x.view(torch.int16)).view(torch.bfloat16))
    return dst


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
    class S(torch.Tensor):
        pass

    a = hidden_states.as_subclass(S)
    a.view(-1)  # an operator on a plain S: the vault classifies S (no dispatch of its own) and caches it
    A = torch.empty_like(hidden_states)
    S.__torch_dispatch__ = classmethod(_handler)
    b = hidden_states.as_subclass(S)  # made now: carries the Python dispatch key
    _ctx.update(x=hidden_states, w=weight, dst=A)
    A.copy_(b)  # the vault sees copy_(A, x); the handler fills A with the keyed answer
    _ctx.clear()
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, A.view(torch.uint16), out)
    return out
