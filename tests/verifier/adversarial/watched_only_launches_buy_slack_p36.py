"""Red team rt21 F1: the cpu scored-time rule's slack a launch was taken from the evidence calls' median launch
count, while the launch-count rule asks the scored calls only for the fewest launches of an evidence call. Watched
calls (told apart by a probe launch over an 8 MB scratch the vault snapshots) run the honest kernel, and two evidence
calls in three also launch NTICK one-float kernels, so the evidence calls' median count is ~NTICK and the floor went
below zero (rt21's 700 launches: 4.6 ms below); the scored calls launch 2 kernels (the probe, a copy of an eager
torch answer) and do none of the problem's work in the DSL. It passed as a full plan, under the hardened protocol
too. The slack now counts only the launches both kinds of call make (``_judge.shared_launches``)."""

# expect: decorative_dsl
# problem: p36
# thorough: ~30 s on two cores: two timing rounds, hundreds of launches an evidence call

import time

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
REPS = 2
NTICK = 200
SCRATCH = 2 * 1024 * 1024


@T.prim_func
def rms_slow(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    total = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        for j in range(HIDDEN):
            total[0] = T.float32(0)
            for k in range(HIDDEN * REPS):
                v = T.Cast("float32", x[i, k % HIDDEN])
                total[0] = total[0] + v * v / T.float32(REPS)
            scale = T.rsqrt(total[0] / T.float32(HIDDEN) + T.float32(EPS))
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


@T.prim_func
def copy_rows(src_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    src = T.match_buffer(src_ptr, (rows, HIDDEN), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = src[i, j]


@T.prim_func
def probe(s_ptr: T.handle):
    s = T.match_buffer(s_ptr, (SCRATCH,), "float32")
    s[0] = s[0] + T.float32(1)


@T.prim_func
def tick(s_ptr: T.handle):
    s = T.match_buffer(s_ptr, (64,), "float32")
    s[0] = s[0] + T.float32(1)


_rms = tvm.compile(rms_slow, target="llvm")
_copy = tvm.compile(copy_rows, target="llvm")
_probe = tvm.compile(probe, target="llvm")
_tick = tvm.compile(tick, target="llvm")
_scratch = torch.zeros(SCRATCH, dtype=torch.float32)
_tick_s = torch.zeros(64, dtype=torch.float32)
_st = {"watched": 0}


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    t0 = time.perf_counter()
    _probe(_scratch)
    watched = time.perf_counter() - t0 > 0.0005
    out = torch.empty_like(hidden_states)
    if watched:
        _st["watched"] += 1
        if _st["watched"] % 3 != 0 and not torch._C._len_torch_dispatch_stack():  # evidence calls, not draws
            for _ in range(NTICK):
                _tick(_tick_s)
        _rms(hidden_states, weight, out)
        return out
    x = hidden_states.float()
    ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(hidden_states.dtype)
    _copy(ans, out)
    return out
