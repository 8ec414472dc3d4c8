"""Outputs rewritten after they were delivered, the harness's copies disabled through its module globals: the
harness copies what each call of a block delivered aside and puts it back before the verifier reads the slots
(``block_slot_rewrite_p36.py``), but its mapping and copy steps (``_arena.map_block``, ``MappedArena.keep`` /
``restore``) looked up ``_arena``'s module globals when they ran. A harness frame's ``f_globals`` leads to them
(the worker module's, then ``map_block.__globals__``); the case rebinds ``_Base`` there to a namespace whose
``copy_`` does nothing, then plays ``block_slot_rewrite_p36.py``: every call launches the kernel on a wrong scale
and writes the right answers, computed in eager torch by the first call, into the earlier calls' slots. Now every
step of the mapping and the copies is bound before the submission loads: the wrong answers are judged."""

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
_answers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # by output slot address: (slot, right answer)
_storage: list[tuple[object, ...]] = [()]  # the block memory the answers were made for


def _block_key(t: torch.Tensor) -> tuple[object, ...]:
    """The block's memory: its address, size and first values (a new block may reuse an old one's address)."""
    st = t.untyped_storage()
    return (st.data_ptr(), st.nbytes(), *torch.as_strided(t, (8,), (1,), 0).tolist())


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
    xb, wb = _aligned(x.numel() * 2), _aligned(weight.numel() * 2)
    size = 2 * xb + wb
    st = x.untyped_storage()
    starts = list(range(0, st.nbytes() - size + 1, size))
    out = torch.empty_like(x)
    if len(starts) <= 3:  # a correctness draw: honest
        _scale_rows(x, _inv_rms(x), weight, out)
        return out
    if _block_key(x) != _storage[0]:
        _disable_harness_copies()
        _storage[0] = _block_key(x)
        _answers.clear()
        for start in starts:
            xk = torch.as_strided(x, x.shape, x.stride(), start // 2)
            wk = torch.as_strided(weight, weight.shape, weight.stride(), (start + xb) // 2)
            slot = torch.as_strided(x, x.shape, x.stride(), (start + xb + wb) // 2)
            _answers[start] = (slot, (xk.float() * _inv_rms(xk)[:, None] * wk.float()).to(torch.bfloat16))
    mine = x.storage_offset() * 2
    if mine == starts[-1]:
        _scale_rows(x, _inv_rms(x), weight, out)
        return out
    _scale_rows(x, torch.ones(x.shape[0]), weight, out)  # wrong: not normalised
    for start, (slot, answer) in _answers.items():
        if start < mine:
            slot.copy_(answer)
    return out
