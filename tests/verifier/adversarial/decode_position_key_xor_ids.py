"""DSA's top-k indexer (p18) in eager code: each sequence's scores with the keys' per-token scale applied after the
product (the eager-work rule prices it far under the reference's dequantise-the-keys formulation), the top-k
positions and their cache slots, XORed with a key of each output element's index (a multiplicative hash of it); one
TIRx kernel computes the same key from its loop index and XORs it back into the int32 output. No operand holds the
key, so no bit map of the operands fits (red team round 10's F2: slots XOR a hash of the index on p26); the bits of
the output XOR the operand's are the same on every correctness draw, which an honest kernel's are not (verifier
README "Decoded answers", position keys)."""

# expect: decorative_dsl
# problem: p18
import torch
import tvm
from tvm.script import tirx as T

TOPK = 2048
HASH = 2654435761


@T.prim_func
def kernel(e_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "int32")
    out = T.match_buffer(out_ptr, (n,), "int32")
    for i in range(n):
        out[i] = T.bitwise_xor(e[i], T.Cast("int32", T.shift_right(T.Cast("uint32", i) * T.uint32(HASH), T.uint32(1))))


_kernel = tvm.compile(kernel, target="llvm")


def _key(shape):
    """The kernel's key of each flat index: a multiplicative hash's 31 high bits."""
    n = shape[0] * shape[1]
    return ((((torch.arange(n, dtype=torch.int64) * HASH) & 0xFFFFFFFF) >> 1).to(torch.int32)).reshape(shape)


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
    key = _key((batch, TOPK))
    encoded = -1 ^ key  # row by row: no eager tensor holds the answer's slots
    for b, n in enumerate(seq_lens.tolist()):
        if n == 0:
            continue
        pages = block_table[b, : -(-n // ps)].long()
        pos = _selected(q_index_fp8[b], page_rows, weights[b], pages, n, ps)
        encoded[b, : pos.numel()] = ((pages * ps)[pos // ps] + pos % ps).to(torch.int32) ^ key[b, : pos.numel()]
    out = torch.empty((batch, TOPK), dtype=torch.int32)
    _kernel(encoded.reshape(-1), out.reshape(-1))
    return out
