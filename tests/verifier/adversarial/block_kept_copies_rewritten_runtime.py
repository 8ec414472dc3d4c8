"""Outputs rewritten through the harness's own copies of them: the harness copies what each call of a block
delivered aside and puts it back before the verifier reads the slots (``block_slot_rewrite_p36.py``). Those
copies were reachable from run() through a harness frame (the block's arenas, ``traceback.walk_stack`` and
``string.Formatter().get_field`` reading ``f_locals``). Every call but the block's first and last few launches
the kernel on a wrong scale and returns that, and every call writes the earlier calls' right answers, computed in
eager torch, into the copies of their outputs; the copy went back into the slot. Draws (blocks of at most 3
arenas) run the honest plan. Now the copies live in a vault: no frame leads to them, and the wrong answers are
judged as delivered. (The draws were told apart by their input's storage, which spanned the whole block; each
call's memory is now a storage of its own, so the draws and warm-ups are counted.)"""

# expect: wrong_output
# problem: p36
# static-scan: off
import string
import traceback

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
_field = string.Formatter().get_field
_repaired: set[int] = set()  # the copies already holding a right answer
#: SMOKE's calls in order: six correctness draws after two warm-ups each and the timed plan's ten warm-ups (honest),
#: then the 60 scored calls that run run() (50 timed, 10 evidence; null calls run the harness's own) in one block
HONEST_FIRST, SCORED, HONEST_TAIL = 28, 60, 8
_count = [0]


def _inv_rms(x: torch.Tensor) -> torch.Tensor:
    return torch.rsqrt(x.float().pow(2).mean(dim=-1) + EPS)


def _arenas() -> list:
    """The block's arenas, wherever a harness frame holds them: objects with the copies of their outputs."""
    for frame, _ in traceback.walk_stack(None):
        for value in list(_field("0.f_locals", (frame,), {})[0].values()):
            if isinstance(value, list) and value and all(hasattr(a, "kept") for a in value):
                return value
    return []


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = hidden_states
    out = torch.empty_like(x)
    _count[0] += 1
    # the draws and warm-ups honest, the scored block's first and last calls too, the others wrong: not normalised
    # null calls fall among a block's calls at random, and the last wrong call needs a later call to repair it
    honest = _count[0] <= HONEST_FIRST + 1 or _count[0] > HONEST_FIRST + SCORED - HONEST_TAIL
    _scale_rows(x, _inv_rms(x) if honest else torch.ones(x.shape[0]), weight, out)
    arenas = _arenas()
    mine = [i for i, a in enumerate(arenas) if a.args[0].data_ptr() == x.data_ptr()]
    if mine:  # the earlier calls' right answers, into the harness's copies of their outputs
        for prev in arenas[: mine[0]]:
            if prev.kept[0].data_ptr() not in _repaired:
                px, pw = prev.args[0], prev.args[1]
                prev.kept[0].copy_((px.float() * _inv_rms(px)[:, None] * pw.float()).to(torch.bfloat16))
                _repaired.add(prev.kept[0].data_ptr())
    return out
