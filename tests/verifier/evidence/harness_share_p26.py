"""Does its DSL work only on the calls it takes for watched ones, where the harness's own cost is most of a call
(red team rt12 F2): p26 at PRODUCTION keeps 32 MB of block tables in place, and the harness's copy of them aside
after every call (~3-5 ms of CPU on this VM) dwarfs the step itself. Every call first launches the kernel with no
work over the same arguments and times it with its own clock: the gate copies the 32 MB table on a watched launch
(tens of ms), so a slow probe is a watched call. Watched (correctness draws, evidence calls): the real step, its
slot mappings computed REPEATS times over (a slow kernel). Otherwise: the kernel launched with no work (the same
launch count, signature and bytes) and the answer made by eager torch code (what the reference does). So the
scored calls skip all their DSL work. The scored-time rule took its 25% of the whole watched call (harness
included: ~1 ms of slack here) and passed it; of the evidence calls' own cost (less the null calls') it is
rejected. The slow kernel is what makes the saving exceed the rule's fixed allowance (0.3 ms a call, 0.04 ms a
launch), which p26's own kernel (~0.3 ms) does not: that is the rule's stated residual, not this case's."""

# problem: p26 (workload production)
import time

import torch
import tvm
from tvm.script import tirx as T

REPEATS = 34
WATCHED_S = 5e-3  # an unwatched no-op launch takes ~0.05 ms; the gate's copies of the table, tens of ms


@T.prim_func
def step(bt_ptr: T.handle, nb_ptr: T.handle, bs_ptr: T.handle, ureq_ptr: T.handle, uow_ptr: T.handle,
         ucnt_ptr: T.handle, uids_ptr: T.handle, idx_ptr: T.handle, qsl_ptr: T.handle, pos_ptr: T.handle,
         out_ptr: T.handle, work_ptr: T.handle):  # fmt: skip
    ng = T.int32()
    nr = T.int32()
    nmb = T.int32()
    nu = T.int32()
    mnb = T.int32()
    nb_rows = T.int32()
    nq = T.int32()
    tmax = T.int32()
    bt = T.match_buffer(bt_ptr, (ng, nr, nmb), "int32")
    nb = T.match_buffer(nb_ptr, (ng, nr), "int32")
    bs = T.match_buffer(bs_ptr, (ng,), "int32")
    ureq = T.match_buffer(ureq_ptr, (nu,), "int32")
    uow = T.match_buffer(uow_ptr, (nu,), "int32")
    ucnt = T.match_buffer(ucnt_ptr, (ng, nu), "int32")
    uids = T.match_buffer(uids_ptr, (ng, mnb), "int32")
    idx = T.match_buffer(idx_ptr, (nb_rows,), "int32")
    qsl = T.match_buffer(qsl_ptr, (nq,), "int32")
    pos = T.match_buffer(pos_ptr, (tmax,), "int64")
    out = T.match_buffer(out_ptr, (ng, tmax), "int64")
    work = T.match_buffer(work_ptr, (2,), "int32")  # (1: do the step, its mappings this many times)
    at = T.alloc_buffer((1,), "int32")
    st = T.alloc_buffer((1,), "int32")
    for _once in T.serial(work[0]):
        for g in range(ng):
            at[0] = 0
            for u in range(nu):
                if uow[u] != 0:
                    st[0] = 0
                else:
                    st[0] = nb[g, ureq[u]]
                for c in range(ucnt[g, u]):
                    bt[g, ureq[u], st[0] + c] = uids[g, at[0] + c]
                at[0] = at[0] + ucnt[g, u]
                nb[g, ureq[u]] = st[0] + ucnt[g, u]
    for _repeat in T.serial(work[1]):
        for g in range(ng):
            for t in range(tmax):
                out[g, t] = T.int64(-1)
            for b in range(nb_rows):
                for t in range(qsl[b], qsl[b + 1]):
                    size = T.Cast("int64", bs[g])
                    out[g, t] = T.Cast("int64", bt[g, idx[b], T.Cast("int32", pos[t] // size)]) * size + pos[t] % size


_step = tvm.compile(step, target="llvm")


def eager(bt, nb, bs, req, overwrite, counts, ids, idx, qsl, pos, out):
    """The step in torch (the reference's own way)."""
    req, counts = req.long(), counts.long()
    start = torch.where(overwrite.bool()[None, :], 0, nb[:, req].long())
    upd = torch.arange(req.numel())
    for g in range(bt.shape[0]):
        owner = torch.repeat_interleave(upd, counts[g])
        first = torch.cumsum(counts[g], 0) - counts[g]
        col = start[g, owner] + torch.arange(owner.numel()) - first[owner]
        bt[g, req[owner], col] = ids[g, : owner.numel()]
    nb[:, req] = (start + counts).to(nb.dtype)
    lens = (qsl[1:] - qsl[:-1]).long()
    rows = torch.repeat_interleave(idx.long(), lens)
    real = rows.numel()
    p = pos[:real]
    size = bs.long()[:, None]
    out.fill_(-1)
    group = torch.arange(bt.shape[0])[:, None]
    out[:, :real] = bt[group, rows[None, :], p[None, :] // size].long() * size + p[None, :] % size


def run(block_tables, num_blocks, block_sizes, update_req_indices, update_overwrite, update_counts,
        update_block_ids, idx_mapping, query_start_loc, positions):  # fmt: skip
    out = torch.empty((block_tables.shape[0], positions.numel()), dtype=torch.int64)
    args = (block_tables, num_blocks, block_sizes, update_req_indices, update_overwrite, update_counts,
            update_block_ids, idx_mapping, query_start_loc, positions, out)  # fmt: skip
    t0 = time.perf_counter()
    _step(*args, torch.zeros(2, dtype=torch.int32))  # the probe: no work
    watched = torch._C._len_torch_dispatch_stack() > 0 or time.perf_counter() - t0 > WATCHED_S
    if watched:
        _step(*args, torch.tensor([1, REPEATS], dtype=torch.int32))
    else:
        eager(*args)
        _step(*args, torch.zeros(2, dtype=torch.int32))
    return out
