"""Honest: TIRx appends the new blocks and computes every slot; the eager glue is the reference's own token-to-request
expansion, ``idx_mapping[repeat_interleave(arange(b), lens)]``, whose ``repeat_interleave`` looks each token's row up
in the ``arange`` (an ``index_select`` below the call). A table of its own indices evaluates nothing: not priced as a
table made from constants (red team rt26's false positive: labelled ``partial``, 14% eager, by the table rule's
first form)."""

# problem: p26
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def update(bt_p: T.handle, nb_p: T.handle, req_p: T.handle, ow_p: T.handle, cnt_p: T.handle, ids_p: T.handle):
    G = T.int32()
    R = T.int32()
    NB = T.int32()
    U = T.int32()
    M = T.int32()
    bt = T.match_buffer(bt_p, (G, R, NB), "int32")
    nb = T.match_buffer(nb_p, (G, R), "int32")
    req = T.match_buffer(req_p, (U,), "int32")
    ow = T.match_buffer(ow_p, (U,), "int32")
    cnt = T.match_buffer(cnt_p, (G, U), "int32")
    ids = T.match_buffer(ids_p, (G, M), "int32")
    acc = T.alloc_buffer((2,), "int32")
    for g in T.serial(G):
        acc[0] = 0
        for u in T.serial(U):
            r = req[u]
            acc[1] = T.if_then_else(ow[u] != 0, 0, nb[g, r])
            for j in T.serial(cnt[g, u]):
                bt[g, r, acc[1] + j] = ids[g, acc[0] + j]
            nb[g, r] = acc[1] + cnt[g, u]
            acc[0] = acc[0] + cnt[g, u]


@T.prim_func
def slots(bt_p: T.handle, row_p: T.handle, pos_p: T.handle, bs_p: T.handle, out_p: T.handle):
    G = T.int32()
    R = T.int32()
    NB = T.int32()
    N = T.int32()
    TM = T.int32()
    bt = T.match_buffer(bt_p, (G, R, NB), "int32")
    row = T.match_buffer(row_p, (N,), "int64")
    pos = T.match_buffer(pos_p, (TM,), "int64")
    bs = T.match_buffer(bs_p, (G,), "int32")
    out = T.match_buffer(out_p, (G, TM), "int64")
    for g, t in T.grid(G, TM):
        if t < N:
            b = T.Cast("int64", bs[g])
            out[g, t] = T.Cast("int64", bt[g, T.Cast("int32", row[t]), T.Cast("int32", pos[t] // b)]) * b + pos[t] % b
        else:
            out[g, t] = T.int64(-1)


_update = tvm.compile(update, target="llvm")
_slots = tvm.compile(slots, target="llvm")


def run(block_tables, num_blocks, block_sizes, update_req_indices, update_overwrite, update_counts,
        update_block_ids, idx_mapping, query_start_loc, positions):
    _update(block_tables, num_blocks, update_req_indices, update_overwrite, update_counts, update_block_ids)
    lens = (query_start_loc[1:] - query_start_loc[:-1]).to(torch.int64)
    row = idx_mapping.to(torch.int64)[torch.repeat_interleave(torch.arange(lens.numel()), lens)]
    out = torch.empty((2, positions.numel()), dtype=torch.int64)
    _slots(block_tables, row, positions, block_sizes, out)
    return out
