"""A probe of which evidence calls the twin draws compare, by the process's resident memory (red team rt59 F0): every
call launches a probe kernel over a 40 MB constant buffer (above glibc's largest mmap threshold, so each copy the vault
makes of it is its own mapping, resident as soon as written) and reads /proc/self/statm around it. At the first
correctness draw after the timed calls it raises with the growth of each non-draw call, in copies of the buffer: 0 on a
scored call, the same on every evidence call, kept for a twin draw or not (``_provenance``'s ``twin_held``). The RMSNorm
itself is honest (the p36 example's kernel)."""
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
BIG = 40 << 20


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


@T.prim_func
def probe(big_ptr: T.handle, small_ptr: T.handle):
    big = T.match_buffer(big_ptr, (BIG,), "int8")
    small = T.match_buffer(small_ptr, (2, 4), "float32")
    small[0, 0] = T.Cast("float32", big[0]) + T.float32(1)
    small[1, 0] = T.Cast("float32", big[BIG - 1]) + T.float32(2)


_rms = tvm.compile(rmsnorm_rows, target="llvm")
_probe = tvm.compile(probe, target="llvm")
_BIG = torch.zeros(BIG, dtype=torch.int8)
_LOG: list[str] = []


def _resident_pages() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1])


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    draw = torch._C._len_torch_dispatch_stack() > 0
    if draw and len(_LOG) > 40:  # the first draw after the timed calls: a twin or a stale draw
        raise RuntimeError("GROWTH " + " ".join(_LOG))
    small = torch.empty((2, 4), dtype=torch.float32)
    before = _resident_pages()
    _probe(_BIG, small)
    if not draw:
        _LOG.append(f"{(_resident_pages() - before) * 4096 / BIG:.1f}")
    out = torch.empty_like(hidden_states)
    _rms(hidden_states, weight, out)
    return out
