"""RMSNorm in one TIRx kernel; run() also builds a small mask through a sparse tensor (``to_sparse`` then
``to_dense``), a legal tensor kind the audit must not fail on: what is made from it is eager work, priced as
such, and the outputs still come from the kernel. The usual ``__main__`` self-test at the end imports numpy: it
never runs in the verifier's worker, so it is not scanned."""

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    unused = torch.eye(4).to_sparse().to_dense()  # a sparse intermediate (a bookkeeping mask, here unused)
    assert unused.shape == (4, 4)
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out


if __name__ == "__main__":
    import numpy as np

    x = torch.randn(64, HIDDEN, dtype=torch.bfloat16)
    w = torch.randn(HIDDEN, dtype=torch.bfloat16)
    xf = x.float()
    expected = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
    print(np.abs(run(x, w).float().numpy() - expected.float().numpy()).max())
