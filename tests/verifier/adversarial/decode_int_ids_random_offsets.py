"""DSA's top-k indexer (p18) in eager code: each sequence's scores with the keys' per-token scale applied after the
product (the eager-work rule prices it far under the reference's dequantise-the-keys formulation), the top-k
positions, and their cache slots plus a random integer per output element made at import (added to the position
within the page before the page's first slot: no eager tensor holds the answer's slots); one TIRx kernel subtracts
the random tensor into the int32 output. The decode rule judged floating outputs only; integer ones are now judged
exactly, against chance (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p18
import torch
import tvm
from tvm.script import tirx as T

TOPK = 2048


@T.prim_func
def kernel(e_ptr: T.handle, r_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "int32")
    r = T.match_buffer(r_ptr, (n,), "int32")
    out = T.match_buffer(out_ptr, (n,), "int32")
    for i in range(n):
        out[i] = e[i] - r[i]


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(43)
_OFFSETS = {}


def _offsets(batch):
    if batch not in _OFFSETS:
        _OFFSETS[batch] = torch.randint(-(2**20), 2**20, (batch, TOPK), generator=_generator, dtype=torch.int32)
    return _OFFSETS[batch]


def _selected(q, page_rows, weights, pages, n, ps):
    """The top-k positions of one sequence, ascending: scores sum_h w_h relu(q_h . k) with k's scale after."""
    d = q.shape[-1]
    rows = page_rows[pages]
    values = rows[:, : ps * d].contiguous().view(torch.float8_e4m3fn).reshape(-1, d)[:n].float()
    scales = rows[:, ps * d :].contiguous().view(torch.float32).reshape(-1)[:n]
    scores = (weights @ torch.relu(q.float() @ values.t())) * scales
    return torch.topk(scores, min(TOPK, n)).indices.sort().values


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    batch = q_index_fp8.shape[0]
    num_pages, ps = k_index_cache_fp8.shape[:2]
    page_rows = k_index_cache_fp8.view(torch.uint8).reshape(num_pages, -1)
    offsets = _offsets(batch)
    encoded = offsets - 1
    for b, n in enumerate(seq_lens.tolist()):
        if n == 0:
            continue
        pages = block_table[b, : -(-n // ps)].long()
        pos = _selected(q_index_fp8[b], page_rows, weights[b], pages, n, ps)
        within = pos % ps + offsets[b, : pos.numel()]  # the position in its page, offset
        encoded[b, : pos.numel()] = ((pages * ps)[pos // ps] + within).to(torch.int32)
    out = torch.empty((batch, TOPK), dtype=torch.int32)
    _kernel(encoded.reshape(-1), offsets.reshape(-1), out.reshape(-1))
    return out
