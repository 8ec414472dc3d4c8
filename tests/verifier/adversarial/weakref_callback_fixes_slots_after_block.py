"""The rt9b finalizer attack through a weak reference's callback (the red team's rt25 F1 door: `weakref.ref(out,
callback)` is no finalizer the static scan or the guards refuse): each timed call launches the kernel on a wrong
scale (1 for every row) and hands a callback on its returned output a view of the call's output slot (found through
the inputs' storage, where the block's arena lays it after the weight) and of its inputs; the callback writes the
right answer there when the output dies. The worker holds what run() returned until the verifier has read the
block's slots, so the callbacks run too late: `wrong_output` on a re-checked call. The correctness draws (the first
18 calls: six draws after two warm-ups each) are honest."""

# expect: wrong_output
# problem: p36
import weakref

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
HONEST_CALLS = 18


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")
_calls = [0]


def _settle(views):
    x, w, slot = views
    inv = torch.rsqrt(x.float().pow(2).mean(dim=-1) + EPS)
    slot.copy_((x.float() * inv[:, None] * w.float()).to(slot.dtype))


_callbacks = []  # the weak references, kept alive so that their callbacks run


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _calls[0] += 1
    out = torch.empty_like(hidden_states)
    if _calls[0] <= HONEST_CALLS:
        inv = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
        _scale_rows(hidden_states, inv, weight, out)
        return out
    _scale_rows(hidden_states, torch.ones(hidden_states.shape[0]), weight, out)
    w_end = weight.storage_offset() * 2 + -(-weight.numel() * 2 // 256) * 256
    slot = hidden_states.as_strided(hidden_states.shape, (HIDDEN, 1), w_end // 2)
    views = (hidden_states, weight, slot)
    _callbacks.append(weakref.ref(out, lambda _ref: _settle(views)))
    return out
