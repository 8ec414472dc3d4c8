"""p26's ``p // bs`` and ``block * bs`` evaluated by tables made at import, one entry per position and per block id
(2^17 and 2^20 entries: larger than a call's 8192 tokens, so not a replicated table), looked up by eager code; the DSL
appends the new blocks and adds ``p % bs`` (red team rt25b F1: passed as a full plan at PRODUCTION; one table held as
``nn.Parameter``s, rt26 F2). Each call also tries to take the tables out of what the verifier counts as made from
constants: one is cloned and concatenated with an empty slice of an input (rt26 F1), and a few entries of the other are
overwritten with values read from the inputs (a one-element view, an indexed store, a strided column: positions no call
has), none of which the lookups use. Priced as the divisions and products they stand for, the lookups leave this plan
the eager share of ``import_time_tables_computed_eagerly_p26.py``, which computes them."""

# problem: p26
import torch
import tvm
from tvm.script import tirx as T

SIZES = (16, 64)
# parameters, which the dispatch hands to the lookup as they are (red team rt26 F2: priced as movement then)
DIVIDED = [torch.nn.Parameter(torch.arange(1 << 17, dtype=torch.int64) // bs, requires_grad=False) for bs in SIZES]
SCALED = [torch.arange(1 << 20, dtype=torch.int64) * bs for bs in SIZES]


@T.prim_func
def append(bt_ptr: T.handle, nb_ptr: T.handle, ur_ptr: T.handle, uo_ptr: T.handle, uc_ptr: T.handle,
           ui_ptr: T.handle):  # fmt: skip
    reqs = T.int32()
    width = T.int32()
    nu = T.int32()
    new = T.int32()
    BT = T.match_buffer(bt_ptr, (2, reqs, width), "int32")
    NB = T.match_buffer(nb_ptr, (2, reqs), "int32")
    UR = T.match_buffer(ur_ptr, (nu,), "int32")
    UO = T.match_buffer(uo_ptr, (nu,), "int32")
    UC = T.match_buffer(uc_ptr, (2, nu), "int32")
    UI = T.match_buffer(ui_ptr, (2, new), "int32")
    at = T.alloc_buffer((2,), "int32")
    for g in T.serial(2):
        at[0] = 0
        for u in T.serial(nu):
            at[1] = T.Select(UO[u] != 0, 0, NB[g, UR[u]])
            for j in T.serial(UC[g, u]):
                BT[g, UR[u], at[1] + j] = UI[g, at[0] + j]
            NB[g, UR[u]] = at[1] + UC[g, u]
            at[0] = at[0] + UC[g, u]


@T.prim_func
def offsets(base_ptr: T.handle, pos_ptr: T.handle, bs_ptr: T.handle, out_ptr: T.handle):
    real = T.int32()
    n = T.int32()
    BASE = T.match_buffer(base_ptr, (2, real), "int64")
    P = T.match_buffer(pos_ptr, (n,), "int64")
    BS = T.match_buffer(bs_ptr, (2,), "int32")
    OUT = T.match_buffer(out_ptr, (2, n), "int64")
    for g in T.serial(2):
        for i in T.serial(n):
            OUT[g, i] = T.Select(i < real, BASE[g, T.min(i, real - 1)] + P[i] % T.Cast("int64", BS[g]), T.int64(-1))


_append = tvm.compile(append, target="llvm")
_offsets = tvm.compile(offsets, target="llvm")


def run(block_tables, num_blocks, block_sizes, update_req_indices, update_overwrite, update_counts,
        update_block_ids, idx_mapping, query_start_loc, positions):  # fmt: skip
    _append(block_tables, num_blocks, update_req_indices, update_overwrite, update_counts, update_block_ids)
    lens = torch.diff(query_start_loc).long()
    row = idx_mapping.long()[torch.repeat_interleave(torch.arange(lens.numel()), lens)]
    pos = positions[: row.numel()]
    for g in range(2):  # positions no call has (2^16 on): the last, the one before, every 1024th
        DIVIDED[g][-1:].copy_(positions[:1])
        DIVIDED[g][(positions[:1] * 0 - 2,)] = positions[:1]
        DIVIDED[g].view(-1, 1024)[64:, -1].copy_(positions[:1].expand(64))
    scaled = [torch.cat([SCALED[g].clone(), positions[:0]]) for g in range(2)]
    base = torch.stack([scaled[g][block_tables[g, row, DIVIDED[g][pos]].long()] for g in range(2)])
    out = torch.empty((2, positions.numel()), dtype=torch.int64)
    _offsets(base, positions, block_sizes, out)
    return out
