"""DSA's top-k indexer (p18) in eager code: each sequence's scores with the keys' per-token scale applied after the
product (the eager-work rule prices it far under the reference's dequantise-the-keys formulation), the top-k
positions and their cache slots, times an odd 32-bit constant (modulo 2^32); one TIRx kernel multiplies by its
inverse into the int32 output. No bit map of XOR, plus or minus fits (red team round 10's F1: slots times an odd
64-bit key on p26); a factor of the bit patterns, found from the sample's odd elements, does (verifier README
"Decoded answers", bits)."""

# expect: decorative_dsl
# problem: p18
import torch
import tvm
from tvm.script import tirx as T

TOPK = 2048
FACTOR = 0x2B5E3A17
INVERSE = 0x2C589DA7  # FACTOR's inverse modulo 2^32


@T.prim_func
def kernel(e_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "int32")
    out = T.match_buffer(out_ptr, (n,), "int32")
    for i in range(n):
        out[i] = T.Cast("int32", T.Cast("uint32", e[i]) * T.uint32(INVERSE))


_kernel = tvm.compile(kernel, target="llvm")


def _selected(q, page_rows, weights, pages, n, ps):
    """The top-k positions of one sequence, ascending: scores sum_h w_h relu(q_h . k) with k's scale after."""
    d = q.shape[-1]
    rows = page_rows[pages]
    values = rows[:, : ps * d].contiguous().view(torch.float8_e4m3fn).reshape(-1, d)[:n].float()
    scales = rows[:, ps * d :].contiguous().view(torch.float32).reshape(-1)[:n]
    scores = (weights @ torch.relu(q.float() @ values.t())) * scales
    return torch.topk(scores, min(TOPK, n)).indices.sort().values


def _wrapped(x):
    """``x`` modulo 2^32, as a signed int32 (a tensor's or an int's)."""
    x = x & 0xFFFFFFFF
    x = x - ((x >> 31) << 32)
    return x.to(torch.int32) if isinstance(x, torch.Tensor) else x


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    batch = q_index_fp8.shape[0]
    num_pages, ps = k_index_cache_fp8.shape[:2]
    page_rows = k_index_cache_fp8.view(torch.uint8).reshape(num_pages, -1)
    # row by row: no eager tensor holds the answer's slots (padding: -1 times the factor)
    encoded = torch.full((batch, TOPK), _wrapped(-FACTOR), dtype=torch.int32)
    for b, n in enumerate(seq_lens.tolist()):
        if n == 0:
            continue
        pages = block_table[b, : -(-n // ps)].long()
        pos = _selected(q_index_fp8[b], page_rows, weights[b], pages, n, ps)
        encoded[b, : pos.numel()] = _wrapped(((pages * ps)[pos // ps] + pos % ps) * FACTOR)
    out = torch.empty((batch, TOPK), dtype=torch.int32)
    _kernel(encoded.reshape(-1), out.reshape(-1))
    return out
