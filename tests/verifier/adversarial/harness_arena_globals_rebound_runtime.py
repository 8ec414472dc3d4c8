"""Outputs rewritten after they were delivered, the harness's copies disabled through its module globals: the
harness copies what each call of a block delivered aside and puts it back before the verifier reads the slots
(``block_slot_rewrite_p36.py``), but its mapping and copy steps (``_arena.map_block``, ``MappedArena.keep`` /
``restore``) looked up ``_arena``'s module globals when they ran. A harness frame's ``f_globals`` leads to them
(the worker module's, then ``map_block.__globals__``); the case rebinds ``_Base`` there to a namespace whose
``copy_`` does nothing, then plays ``block_slot_rewrite_p36.py``: every scored call but the last few launches the
kernel on a wrong scale, and each later call writes the earlier calls' right answers, computed in eager torch, into
their slots (views an earlier call kept of its own arena). Now every step of the mapping and the copies is bound
before the submission loads: the wrong answers are judged."""

# expect: wrong_output
# problem: p36
# static-scan: off
import traceback
import types

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


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
#: SMOKE's calls in order: six correctness draws after two warm-ups each and the timed plan's ten warm-ups (honest),
#: then the 60 scored calls that run run() (50 timed, 10 evidence; null calls run the harness's own) in one block
HONEST_FIRST, SCORED, HONEST_TAIL = 28, 60, 4
_count = [0]
_pending: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # earlier calls' (input, weight, output slot)


def _honest() -> bool:
    """A draw or warm-up, or one of the block's last scored calls (no later call would repair it)."""
    _count[0] += 1
    return _count[0] <= HONEST_FIRST or _count[0] > HONEST_FIRST + SCORED - HONEST_TAIL


def _aligned(n: int) -> int:
    return -(-n // 256) * 256


def _inv_rms(x: torch.Tensor) -> torch.Tensor:
    return torch.rsqrt(x.float().pow(2).mean(dim=-1) + EPS)


def _disable_harness_copies() -> None:
    """``_arena``'s ``_Base`` replaced by a namespace of the same functions whose ``copy_`` does nothing."""
    for frame, _ in traceback.walk_stack(None):
        step = frame.f_globals.get("map_block")
        if step is not None and hasattr(step, "__globals__") and "_Base" in step.__globals__:
            base = torch._C.TensorBase
            fake = types.SimpleNamespace(**{n: getattr(base, n) for n in dir(base) if not n.startswith("__")})
            fake.__getitem__ = base.__getitem__
            fake.copy_ = lambda *args, **kwargs: None
            step.__globals__["_Base"] = fake
            return


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = hidden_states
    out = torch.empty_like(x)
    honest = _honest()
    if _count[0] == HONEST_FIRST + 1:
        _disable_harness_copies()
    _scale_rows(x, _inv_rms(x) if honest else torch.ones(x.shape[0]), weight, out)  # wrong: not normalised
    for xk, wk, slot in _pending:  # the earlier calls' right answers, after they were delivered
        slot.copy_((xk.float() * _inv_rms(xk)[:, None] * wk.float()).to(torch.bfloat16))
    _pending.clear()
    if not honest:
        at = x.storage_offset() + (_aligned(x.numel() * 2) + _aligned(weight.numel() * 2)) // 2
        _pending.append((x, weight, torch.as_strided(x, x.shape, x.stride(), at)))
    return out
