"""The answer enters the DSL as the strides of one-element views (red team rt10 F3, its h3 on p26): every slot
mapping computed in plain Python from one gather of the block tables (read out with one ``tolist``: 11% of the
problem's input elements), then each value + 1 handed to a TIRx kernel as the stride of a one-element int8 view of
a two-byte zero tensor (``as_strided``: no operator priced, nothing lifted, no argument given by value); the kernel
binds the stride to a variable and stores it less one, eight views a launch, the output position in the output
view's offset. The block-table update runs in TIRx. No eager tensor holds the answer (the decode and copy rules
see zeros). Each stride that is neither compact nor one of the problem's sizes now counts as a value given by value
(eight elements): 65% of the output elements cross in (passed on main 5082941 at 6.7%)."""

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
    _view0 = T.match_buffer(a0, (1,), "int8", strides=(s0,))
    _view1 = T.match_buffer(a1, (1,), "int8", strides=(s1,))
    _view2 = T.match_buffer(a2, (1,), "int8", strides=(s2,))
    _view3 = T.match_buffer(a3, (1,), "int8", strides=(s3,))
    _view4 = T.match_buffer(a4, (1,), "int8", strides=(s4,))
    _view5 = T.match_buffer(a5, (1,), "int8", strides=(s5,))
    _view6 = T.match_buffer(a6, (1,), "int8", strides=(s6,))
    _view7 = T.match_buffer(a7, (1,), "int8", strides=(s7,))
    OUT = T.match_buffer(out_ptr, (8,), "int64")
    OUT[0] = T.Cast("int64", s0) - T.int64(1)
    OUT[1] = T.Cast("int64", s1) - T.int64(1)
    OUT[2] = T.Cast("int64", s2) - T.int64(1)
    OUT[3] = T.Cast("int64", s3) - T.int64(1)
    OUT[4] = T.Cast("int64", s4) - T.int64(1)
    OUT[5] = T.Cast("int64", s5) - T.int64(1)
    OUT[6] = T.Cast("int64", s6) - T.int64(1)
    OUT[7] = T.Cast("int64", s7) - T.int64(1)


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
    zero = torch.zeros(2, dtype=torch.int8, device=positions.device)
    views = [zero.as_strided((1,), (v + 1,)) for v in enc]
    for j in range(0, 2 * nt, 8):
        _decode(*views[j:j + 8], flat[j:j + 8])
    return out
