"""The answer enters the DSL as the sizes of empty tensors (as ``answer_in_view_strides_p26``, another layout
channel): every slot mapping computed in plain Python, then each value + 2 handed to a TIRx kernel as the second
size of an empty int8 tensor (``torch.empty((0, v + 2))``: no memory, an allocation priced as nothing, nothing
lifted, no argument given by value); the kernel binds the size to a variable and stores it less two (padding slots
are -1, and a (0, 0) tensor's strides are not compact), eight tensors a launch, the output position in the output
view's offset. Each size that is none of the problem's now counts as a value given by value (eight elements)."""

# expect: decorative_dsl
# problem: p26

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def update(bt_ptr: T.handle, nb_ptr: T.handle, ur_ptr: T.handle, uo_ptr: T.handle,
           uc_ptr: T.handle, ui_ptr: T.handle):
    max_reqs = T.int32()
    max_blocks = T.int32()
    nu = T.int32()
    max_new = T.int32()
    BT = T.match_buffer(bt_ptr, (2, max_reqs, max_blocks), "int32")
    NB = T.match_buffer(nb_ptr, (2, max_reqs), "int32")
    UR = T.match_buffer(ur_ptr, (nu,), "int32")
    UO = T.match_buffer(uo_ptr, (nu,), "int32")
    UC = T.match_buffer(uc_ptr, (2, nu), "int32")
    UI = T.match_buffer(ui_ptr, (2, max_new), "int32")
    first = T.alloc_buffer((1,), "int32")
    start = T.alloc_buffer((1,), "int32")
    for g in T.serial(2):
        first[0] = 0
        for u in T.serial(nu):
            r = UR[u]
            start[0] = T.Select(UO[u] != 0, 0, NB[g, r])
            for j in T.serial(UC[g, u]):
                BT[g, r, start[0] + j] = UI[g, first[0] + j]
            NB[g, r] = start[0] + UC[g, u]
            first[0] = first[0] + UC[g, u]


@T.prim_func
def decode(a0: T.handle, a1: T.handle, a2: T.handle, a3: T.handle, a4: T.handle, a5: T.handle, a6: T.handle,
           a7: T.handle, out_ptr: T.handle):
    s0 = T.int32()
    s1 = T.int32()
    s2 = T.int32()
    s3 = T.int32()
    s4 = T.int32()
    s5 = T.int32()
    s6 = T.int32()
    s7 = T.int32()
    _view0 = T.match_buffer(a0, (0, s0), "int8")
    _view1 = T.match_buffer(a1, (0, s1), "int8")
    _view2 = T.match_buffer(a2, (0, s2), "int8")
    _view3 = T.match_buffer(a3, (0, s3), "int8")
    _view4 = T.match_buffer(a4, (0, s4), "int8")
    _view5 = T.match_buffer(a5, (0, s5), "int8")
    _view6 = T.match_buffer(a6, (0, s6), "int8")
    _view7 = T.match_buffer(a7, (0, s7), "int8")
    OUT = T.match_buffer(out_ptr, (8,), "int64")
    OUT[0] = T.Cast("int64", s0) - T.int64(2)
    OUT[1] = T.Cast("int64", s1) - T.int64(2)
    OUT[2] = T.Cast("int64", s2) - T.int64(2)
    OUT[3] = T.Cast("int64", s3) - T.int64(2)
    OUT[4] = T.Cast("int64", s4) - T.int64(2)
    OUT[5] = T.Cast("int64", s5) - T.int64(2)
    OUT[6] = T.Cast("int64", s6) - T.int64(2)
    OUT[7] = T.Cast("int64", s7) - T.int64(2)


_update = tvm.compile(update, target="llvm")
_decode = tvm.compile(decode, target="llvm")


def run(block_tables, num_blocks, block_sizes, update_req_indices, update_overwrite, update_counts,
        update_block_ids, idx_mapping, query_start_loc, positions):
    _update(block_tables, num_blocks, update_req_indices, update_overwrite, update_counts, update_block_ids)
    nt = positions.shape[0]
    bss = block_sizes.tolist()
    im = idx_mapping.tolist()
    qsl = query_start_loc.tolist()
    pos = positions[: qsl[-1]].tolist()
    nr_, mb = block_tables.shape[1], block_tables.shape[2]
    enc = [-1] * (2 * nt)
    idx = []
    for g in range(2):
        bs = bss[g]
        for b, r in enumerate(im):
            for t in range(qsl[b], qsl[b + 1]):
                idx.append((g * nr_ + r) * mb + pos[t] // bs)
    ids = block_tables.view(-1)[torch.tensor(idx, dtype=torch.int64)].tolist()
    k = 0
    for g in range(2):
        bs = bss[g]
        base = g * nt
        for b in range(len(im)):
            for t in range(qsl[b], qsl[b + 1]):
                p = pos[t]
                enc[base + t] = ids[k] * bs + p % bs
                k += 1
    out = torch.empty((2, nt), dtype=torch.int64, device=positions.device)
    flat = out.view(-1)
    views = [torch.empty((0, v + 2), dtype=torch.int8, device=positions.device) for v in enc]
    for j in range(0, 2 * nt, 8):
        _decode(*views[j:j + 8], flat[j:j + 8])
    return out
