"""p26 with the slot mappings computed in plain Python (rt10 F1/F2's class, written independently): a TIRx kernel
appends the new blocks (the block table and its counts, honestly), then Python reads the positions, the offsets and
each needed table entry with item(), computes every slot, stores each minus a key of its position into a staging
tensor element by element, and a second kernel adds the key back (derived from the loop index, held by no operand:
no decode map finds it). Against the whole 2x16x64 block table (and in elements) what crossed was about a tenth of
the inputs and of the outputs and it passed; the answer is the slots and the 17 entries the step changes, and every
byte of the slots crossed."""

# expect: decorative_dsl
# problem: p26
import torch
import tvm
from tvm.script import tirx as T


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
    at = T.alloc_buffer((2,), "int32")  # the group's next new id, the update's first column
    for g in T.serial(2):
        at[0] = 0
        for u in T.serial(nu):
            at[1] = T.Select(UO[u] != 0, 0, NB[g, UR[u]])
            for j in T.serial(UC[g, u]):
                BT[g, UR[u], at[1] + j] = UI[g, at[0] + j]
            NB[g, UR[u]] = at[1] + UC[g, u]
            at[0] = at[0] + UC[g, u]


@T.prim_func
def unkey(e_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    E = T.match_buffer(e_ptr, (n,), "int64")
    OUT = T.match_buffer(out_ptr, (n,), "int64")
    for i in T.serial(n):
        k = T.Cast("int64", i)
        OUT[i] = E[i] + (k * T.int64(7919) + T.int64(13)) * (k + T.int64(101)) % T.int64(65521)


_append = tvm.compile(append, target="llvm")
_unkey = tvm.compile(unkey, target="llvm")


def _key(i: int) -> int:
    return (i * 7919 + 13) * (i + 101) % 65521


def run(block_tables, num_blocks, block_sizes, update_req_indices, update_overwrite, update_counts,
        update_block_ids, idx_mapping, query_start_loc, positions):  # fmt: skip
    _append(block_tables, num_blocks, update_req_indices, update_overwrite, update_counts, update_block_ids)
    tokens = positions.shape[0]
    sizes = [int(block_sizes[g].item()) for g in range(2)]
    starts = [int(query_start_loc[b].item()) for b in range(query_start_loc.shape[0])]
    staging = torch.empty(2 * tokens, dtype=torch.int64)
    for g, bs in enumerate(sizes):
        for b in range(idx_mapping.shape[0]):
            row = int(idx_mapping[b].item())
            for t in range(starts[b], starts[b + 1]):
                p = int(positions[t].item())
                slot = int(block_tables[g, row, p // bs].item()) * bs + p % bs
                staging[g * tokens + t] = slot - _key(g * tokens + t)
        for t in range(starts[-1], tokens):
            staging[g * tokens + t] = -1 - _key(g * tokens + t)
    out = torch.empty((2, tokens), dtype=torch.int64)
    _unkey(staging, out.view(-1))
    return out
