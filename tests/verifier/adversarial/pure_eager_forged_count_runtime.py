"""Pure eager PyTorch that tries to forge the launch count by calling the counting hook with a Python
function. The count lives in memory only the verifier reads."""

# expect: not_dsl
# problem: p36
# static-scan: off
import contextlib

import torch
import tvm_ffi


def _eager(x, w):
    inv = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    return (x.float() * inv * w.float()).to(x.dtype)


def run(hidden_states, weight):
    with contextlib.suppress(Exception):
        tvm_ffi.Function.__call__(lambda *a: None)
    return _eager(hidden_states, weight)
