"""Eager code gathers every p24 cache entry through the block table, upconverts its fp8 codes and copies the rope
part; a TIRx kernel only multiplies by each tile's scale and casts into ``dst``. A full plan at 2% of the element work
before (red team rt39 F1); the eager code made all of the problem's data movement: a partial plan."""

# problem: p24
# plan: partial
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def scale_cast(c_ptr: T.handle, s_ptr: T.handle, dst_ptr: T.handle):
    n = T.int32()
    tot = T.int32()
    C = T.match_buffer(c_ptr, (n, 512), "float32")
    S = T.match_buffer(s_ptr, (n, 4), "float32")
    D = T.match_buffer(dst_ptr, (tot, 576), "bfloat16")
    for i, k in T.grid(n, 512):
        D[i, k] = T.Cast("bfloat16", C[i, k] * S[i, k // 128])


_scale_cast = tvm.compile(scale_cast, target="llvm")


def run(src_cache, block_table, seq_lens, workspace_starts, seq_starts, dst):
    lens = seq_lens.to(torch.int64)
    req = torch.repeat_interleave(torch.arange(lens.numel()), lens)
    first = torch.cumsum(lens, 0) - lens
    pos = torch.arange(req.numel()) - first[req] + seq_starts.to(torch.int64)[req]
    blocks = block_table.to(torch.int64)[req, torch.div(pos, 64, rounding_mode="floor")]
    entries = src_cache[blocks, pos % 64]  # eager gather of every entry
    codes = entries[:, :512].contiguous().view(torch.float8_e4m3fn).to(torch.float32)  # eager upconvert
    scales = entries[:, 512:528].contiguous().view(torch.float32)
    dst[:, 512:] = entries[:, 528:].contiguous().view(torch.bfloat16)  # eager rope copy (rows are in order)
    _scale_cast(codes, scales, dst)
    return ()
