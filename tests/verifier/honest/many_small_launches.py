"""Honest, many cheap launches: RMSNorm computed in 8 row chunks, each by two tiny TIRx kernels (the chunk's inverse
RMS, then its scaled rows), 16 launches a call. Every launch pays the evidence calls' watching and the block's
bookkeeping, so the timing rules' allowances per launch and per call are what this case measures
(tests/verifier/test_many_launches.py)."""

# problem: p36
# thorough: ~11 s on two cores: sixteen launches a call, each evidence call's launches fitted by the decode rule
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
CHUNKS = 8


@T.prim_func
def inv_rms(x_ptr: T.handle, inv_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    for i in range(rows):
        inv[i] = T.float32(0)
        for j in range(HIDDEN):
            inv[i] = inv[i] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        inv[i] = T.rsqrt(inv[i] / T.float32(HIDDEN) + T.float32(EPS))


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_inv_rms = tvm.compile(inv_rms, target="llvm")
_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    out = torch.empty_like(hidden_states)
    inv = torch.empty(rows, dtype=torch.float32)
    step = -(-rows // CHUNKS)
    for start in range(0, rows, step):
        end = min(start + step, rows)
        _inv_rms(hidden_states[start:end], inv[start:end])
        _scale_rows(hidden_states[start:end], inv[start:end], weight, out[start:end])
    return out
