"""Outputs rewritten after they were delivered: in a block of many arenas, the first call computes every
call's answer in eager torch (reading the later arenas through its input's storage); then every call launches
the kernel on a wrong scale (no normalisation) and returns that, and writes the right answers into the output
slots of the calls before it, which the verifier read after the block. Draws (blocks of at most 3 arenas) run
the honest plan. Now the harness puts back what each call delivered before the verifier reads a slot."""

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
