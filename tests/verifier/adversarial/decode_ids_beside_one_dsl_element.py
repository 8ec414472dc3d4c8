"""DSA's top-k indexer (p18) in eager code, its slots times an odd 32-bit constant (as decode_ids_times_odd_constant),
but one element of the encoded operand left wrong by eager code and written right by a tiny DSL launch: that element
is the DSL's, and an integer operand with one masked element used to be taken as float64 with NaN, losing every bit
map (passed main and the first odd-factor rule). Its other elements keep their patterns now (verifier README "Decoded
answers")."""

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


@T.prim_func
def poke(e_ptr: T.handle, v: T.int32):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "int32")
    e[0] = v


_poke = tvm.compile(poke, target="llvm")


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
    flat = encoded.reshape(-1)
    right = int(flat[0])
    flat[0] = right ^ 1  # eager code leaves it wrong, a DSL launch writes the right one: that element is the DSL's
    _poke(flat, right)
    out = torch.empty((batch, TOPK), dtype=torch.int32)
    _kernel(encoded.reshape(-1), out.reshape(-1))
    return out
