"""p26's slot mappings computed in plain Python and lifted with torch.tensor, then copied into the output by the
same TIRx kernel that appends the new blocks (the block table and its counts, honestly). The copy check finds the
slot mappings in the lifted tensor (0% the DSL's); the two in-place tensors the kernel updates (about 10 and 7
changed entries at SMOKE) are 100% the DSL's. Counted as one output each they carried the average to 2/3 and it
passed (rt10 F5's class); the state is one part of the answer, so the average is half: not most of it."""

# expect: decorative_dsl
# problem: p26
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def step(bt_ptr: T.handle, nb_ptr: T.handle, ur_ptr: T.handle, uo_ptr: T.handle, uc_ptr: T.handle, ui_ptr: T.handle,
         a_ptr: T.handle, out_ptr: T.handle):  # fmt: skip
    reqs = T.int32()
    width = T.int32()
    nu = T.int32()
    new = T.int32()
    n = T.int32()
    BT = T.match_buffer(bt_ptr, (2, reqs, width), "int32")
    NB = T.match_buffer(nb_ptr, (2, reqs), "int32")
    UR = T.match_buffer(ur_ptr, (nu,), "int32")
    UO = T.match_buffer(uo_ptr, (nu,), "int32")
    UC = T.match_buffer(uc_ptr, (2, nu), "int32")
    UI = T.match_buffer(ui_ptr, (2, new), "int32")
    A = T.match_buffer(a_ptr, (n,), "int64")
    OUT = T.match_buffer(out_ptr, (n,), "int64")
    at = T.alloc_buffer((2,), "int32")
    for g in T.serial(2):
        at[0] = 0
        for u in T.serial(nu):
            at[1] = T.Select(UO[u] != 0, 0, NB[g, UR[u]])
            for j in T.serial(UC[g, u]):
                BT[g, UR[u], at[1] + j] = UI[g, at[0] + j]
            NB[g, UR[u]] = at[1] + UC[g, u]
            at[0] = at[0] + UC[g, u]
    for i in T.serial(n):
        OUT[i] = A[i]


_step = tvm.compile(step, target="llvm")


def run(block_tables, num_blocks, block_sizes, update_req_indices, update_overwrite, update_counts,
        update_block_ids, idx_mapping, query_start_loc, positions):  # fmt: skip
    # the tables as the step leaves them, in Python: rows appended from the update's ids
    tokens = positions.shape[0]
    sizes, rows, starts = block_sizes.tolist(), idx_mapping.tolist(), query_start_loc.tolist()
    targets, counts, overwrite = update_req_indices.tolist(), update_counts.tolist(), update_overwrite.tolist()
    ids = update_block_ids.tolist()
    live = {(g, r): int(num_blocks[g, r].item()) for g in range(2) for r in set(targets)}
    appended: dict[tuple[int, int], list[int]] = {}
    for g in range(2):
        first = 0
        for u, r in enumerate(targets):
            start = 0 if overwrite[u] else live[(g, r)]
            appended[(g, r)] = [start, *ids[g][first : first + counts[g][u]]]
            first += counts[g][u]
    answer = [-1] * (2 * tokens)
    for g, bs in enumerate(sizes):
        for b, r in enumerate(rows):
            for t in range(starts[b], starts[b + 1]):
                p = int(positions[t].item())
                column = p // bs
                start, *fresh = appended.get((g, r), [1 << 30])
                if 0 <= column - start < len(fresh):
                    entry = fresh[column - start]
                else:
                    entry = int(block_tables[g, r, column].item())
                answer[g * tokens + t] = entry * bs + p % bs
    lifted = torch.tensor(answer, dtype=torch.int64)
    out = torch.empty((2, tokens), dtype=torch.int64)
    _step(block_tables, num_blocks, update_req_indices, update_overwrite, update_counts, update_block_ids, lifted,
          out.view(-1))  # fmt: skip
    return out
