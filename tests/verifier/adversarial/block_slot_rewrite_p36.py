"""Outputs rewritten after they were delivered: every scored call but the block's last few launches the kernel on a
wrong scale (no normalisation) and returns that, keeping views of its inputs and of its output slot (its own arena
lays the slot after the weight, reached through its input's storage); each later call computes the earlier calls'
right answers in eager torch and writes them into those slots, which the verifier reads after the block. The draws
and warm-ups (the first calls, counted) run the honest plan. Now the harness puts back what each call delivered
before the verifier reads a slot. (The case first reached every arena of its block through its input's storage;
each call's memory is now a storage of its own, so it reaches only arenas an earlier call handed it.)"""

# expect: wrong_output
# problem: p36
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


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = hidden_states
    out = torch.empty_like(x)
    honest = _honest()
    _scale_rows(x, _inv_rms(x) if honest else torch.ones(x.shape[0]), weight, out)  # wrong: not normalised
    for xk, wk, slot in _pending:  # the earlier calls' right answers, after they were delivered
        slot.copy_((xk.float() * _inv_rms(xk)[:, None] * wk.float()).to(torch.bfloat16))
    _pending.clear()
    if not honest:
        at = x.storage_offset() + (_aligned(x.numel() * 2) + _aligned(weight.numel() * 2)) // 2
        _pending.append((x, weight, torch.as_strided(x, x.shape, x.stride(), at)))
    return out
