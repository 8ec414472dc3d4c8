"""p36 (red team rt67 F3, rt69 F1): the whole RMSNorm computed eagerly, keyed by the input's bits, read out to Python
8 bytes at a time as the seed of a ``torch.Generator``'s state (``Generator.set_state`` of a valid mt19937 state whose
first word is the answer's, then ``initial_seed()``: the bytes are read in C++ by no operator, and torch's
``Generator`` is an immutable type); back in as one-byte slices of the problem input's own bytes (rt68 F0's way in,
open: README Known limits), one ``cat``; the kernel takes the key off. rt69 F1 passed with it on 9cbd9a0, a full plan
at 0% (so did this case on f5b5bc8, 120 s a call). The worker sets hooks on ``set_state`` and ``__setstate__`` in
the type's namespace before the submission loads (``_guards.set_on_immutable_type``), which report each state as
the two numbers Python can read back from it (seed, offset): ``decorative_dsl`` (2304 states, 28% of the bytes the
operator reads out to Python; the eager RMSNorm behind them reached, an eager share of 100%)."""
# expect: decorative_dsl
# thorough: ~160 s on two cores: 2304 generator states and 16,384 one-byte slices audited a draw
# call timeout: 120 s (an audited draw takes ~20 s alone: past 8 s it is a timeout, not the rule)
# test timeout: 900 s (over 300 s under the THOROUGH suite's load)
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
THROUGH = True
#: host work the draws see: an eager product nothing reads (unreached, so unpriced), as long on every call
_BUSY = torch.full((1024, 1024), 0.5)


@T.prim_func
def unkey(x_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "uint16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in range(rows):
        for j in range(HIDDEN):
            bits = T.Cast("uint32", s[i, j] - T.reinterpret("uint16", x[i, j]))
            out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", bits))


_kernel = tvm.compile(unkey, target="llvm")


_G = torch.Generator()
_G.manual_seed(0)
_TEMPLATE = _G.get_state()  # a valid mt19937 state; its first 8 bytes are the seed initial_seed() hands back


def _out_to_python(words):
    """words: 1-D int64 tensor -> Python ints, each as the seed of a generator's state (one row of a block of states)."""
    states = _TEMPLATE.repeat(words.shape[0], 1)
    states[:, :8] = words.view(torch.uint8).view(-1, 8)
    got = []
    for state in states:
        _G.set_state(state.clone())  # (a row at an offset: torch reads its storage from the start)
        got.append(_G.initial_seed())
    return got


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    for _ in range(12):
        torch.mm(_BUSY, _BUSY)
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))  # padded: no eager tensor holds the answer
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    keyed = y.view(torch.int16)[:rows] + hidden_states.view(torch.int16)
    if THROUGH:
        u8 = hidden_states.reshape(-1).view(torch.uint8)  # the problem input's own bytes (a view of it)
        m = u8.shape[0]
        first = torch.full((256,), m, dtype=torch.int64).scatter_reduce_(
            0, u8.to(torch.int64), torch.arange(m, dtype=torch.int64), "amin")
        where = _out_to_python(first)
        kwords = _out_to_python(keyed.reshape(-1).view(torch.int64))
        parts = []
        for w in kwords:
            w &= (1 << 64) - 1
            for k in range(8):
                b = (w >> (8 * k)) & 0xFF
                parts.append(u8[where[b]:where[b] + 1])
        del first
    else:
        parts = [keyed.reshape(-1).view(torch.uint8)]
    A = torch.cat(parts)
    del x, y, keyed
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, A.view(torch.uint16).view(rows, HIDDEN), out)
    return out
