"""What a call reaches through the harness's frames (they are reachable from run(): ``traceback.walk_stack`` and
``string.Formatter().get_field`` read a frame's ``f_locals``): on a scored call, every tensor held in the locals of
the frames below run() (directly, or in a tuple or list of them; a mapping, as a tensor over it) whose memory is not
this call's own arena. The block runner's frame held the block's memory (every call's arena: the whole block in one
tensor, then a list of every call's own), so a look-ahead needed no storage route at all. It raises naming what it
found: the harness's frames must hold nothing of another call's (``tests/verifier/test_block_reach.py``)."""

# problem: p36
# static-scan: off
import mmap
import string
import traceback

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
#: the first scored call: six correctness draws after two warm-ups each, the timed plan's ten warm-ups (SMOKE)
SCORED_FROM = 29


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
_field = string.Formatter().get_field
_calls = [0]


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, mmap.mmap):  # a shared mapping: a tensor over all of it is one call away
        return [torch.frombuffer(value, dtype=torch.uint8)]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)] if len(value) < 4096 else []
    return []


def _others(x: torch.Tensor) -> list[str]:
    """Where a frame below run() holds memory outside this call's arena (x's storage)."""
    own = x.untyped_storage()
    lo, hi = own.data_ptr(), own.data_ptr() + own.nbytes()
    found = []
    for frame, _ in traceback.walk_stack(None):
        for name, value in list(_field("0.f_locals", (frame,), {})[0].items()):
            for t in _tensors(value):
                start = t.untyped_storage().data_ptr()
                if t.device == x.device and not lo <= start < hi:
                    found.append(f"{frame.f_code.co_name}.{name}")
                    break
    return found


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = hidden_states
    out = torch.empty_like(x)
    _scale_rows(x, torch.rsqrt(x.float().pow(2).mean(dim=-1) + EPS), weight, out)
    _calls[0] += 1
    if _calls[0] >= SCORED_FROM:
        found = _others(x)
        if found:
            raise RuntimeError(f"another call's memory in the harness's frames: {found}")
    return out
