"""The whole W8A8 block-FP8 linear in eager code, its answer (plain, not encoded) written into the lower part of a
flat buffer whose upper, larger part a first TIRx kernel filled (with some arithmetic, so that the DSL's time is not
negligible, its values other on every call); a second kernel copies the answer out. The answer is never a tensor of
the output's size (each K group's partial product is added into the whole buffer by an indexed add). The copy
checks skipped any argument the DSL had mostly written (and the decode rule any argument holding a DSL element);
they now read its eager-made elements whatever their share (verifier README "Layout-free copy check").
"""

# expect: decorative_dsl
# problem: p52
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def pad(buf_ptr: T.handle, start: T.int32, seed: T.float32):
    n = T.int32()
    buf = T.match_buffer(buf_ptr, (n,), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(n - start):
        acc[0] = T.Cast("float32", i)
        for _ in range(32):
            acc[0] = acc[0] * T.float32(0.5) + T.float32(1.25)
        buf[start + i] = acc[0] + seed


@T.prim_func
def copy(buf_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    m = T.int32()
    buf = T.match_buffer(buf_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (m,), "bfloat16")
    for i in range(m):
        out[i] = T.Cast("bfloat16", buf[i])


_pad = tvm.compile(pad, target="llvm")
_copy = tvm.compile(copy, target="llvm")
_calls = [0]


def _accumulate(buffer, attn_output, weight, weight_scale):
    """The whole operator in eager code, accumulated into the buffer's first elements by indexed adds (their result
    is the whole buffer, never a tensor of the output's size): activation groups quantised as the problem states,
    then the block-scaled GEMM one 128-wide K group at a time with both scales applied to the partial products."""
    x = attn_output.reshape(attn_output.shape[0], -1).float()
    m, k = x.shape
    n = weight.shape[0]
    groups = x.reshape(m, k // 128, 128)
    s = groups.abs().amax(dim=-1).clamp_min(1e-10) / 448.0
    q = (groups / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
    ws = weight_scale.repeat_interleave(128, dim=0)[:n]
    where = torch.arange(m * n)
    for g in range(k // 128):
        part = (q[:, g] @ weight[:, g * 128 : (g + 1) * 128].float().t()) * (s[:, g : g + 1] * ws[:, g])
        buffer.index_add_(0, where, part.reshape(-1))


def run(attn_output, weight, weight_scale):
    shape = (attn_output.shape[0], weight.shape[0])
    size = shape[0] * shape[1]
    buffer = torch.empty(2 * size + 64)  # the answer, then the DSL's part: more than half the buffer
    _calls[0] += 1  # other pad values on every call: its bytes change in a reused buffer too
    _pad(buffer, size, float(_calls[0]))
    buffer[:size].zero_()
    _accumulate(buffer, attn_output, weight, weight_scale)
    out = torch.empty(shape, dtype=attn_output.dtype)
    _copy(buffer, out.reshape(-1))
    return out
