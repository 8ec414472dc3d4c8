"""Block look-ahead handed over by a DSL copy (red team rt12 F0, p26 kv_cache): a call whose kernel ran fast
(unwatched) reaches the next 2 arenas of its block through ``block_tables.untyped_storage()`` and ``as_strided``
(the stride: the 256-aligned sizes of a call's tensors) and computes their slot mappings with the same kernel in an
overlay mode (no state touched); a later call whose inputs were answered launches the kernel only to apply its
in-place update and COPY the precomputed mappings into its output, evidence calls included (the work rule counts
bytes changed: a copy changes as many). At production on cpu it passed, 1.2-1.3x faster than its honest twin. Now
each call's memory is a storage of its own: the look-ahead finds no later arena, and every call launches once
(``tests/verifier/test_block_reach.py``)."""

# problem: p26
import time

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def step(
    bt_ptr: T.handle,
    nb_ptr: T.handle,
    bs_ptr: T.handle,
    ureq_ptr: T.handle,
    uow_ptr: T.handle,
    ucnt_ptr: T.handle,
    uids_ptr: T.handle,
    idx_ptr: T.handle,
    qsl_ptr: T.handle,
    pos_ptr: T.handle,
    out_ptr: T.handle,
    src_ptr: T.handle,
    mode: T.int32,
):
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
    srcb = T.match_buffer(src_ptr, (ng, tmax), "int64")
    at = T.alloc_buffer((1,), "int32")
    st = T.alloc_buffer((1,), "int32")
    res = T.alloc_buffer((1,), "int64")
    wh = T.alloc_buffer((nr,), "int32")
    pre = T.alloc_buffer((ng * nu,), "int32")
    if mode == 0 or mode == 1:
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
    if mode == 0:
        for g in range(ng):
            for t in range(tmax):
                out[g, t] = T.int64(-1)
            for b in range(nb_rows):
                for t in range(qsl[b], qsl[b + 1]):
                    out[g, t] = T.Cast(
                        "int64", bt[g, idx[b], T.Cast("int32", pos[t] // T.Cast("int64", bs[g]))]
                    ) * T.Cast("int64", bs[g]) + pos[t] % T.Cast("int64", bs[g])
    if mode == 3:
        for r0 in range(nr):
            wh[r0] = -1
        at[0] = 0
        for u in range(nu):
            wh[ureq[u]] = u
            pre[u] = at[0]
            at[0] = at[0] + ucnt[0, u]
        for g in range(ng):
            if g > 0:
                at[0] = 0
                for u in range(nu):
                    pre[g * nu + u] = at[0]
                    at[0] = at[0] + ucnt[g, u]
            for t in range(tmax):
                out[g, t] = T.int64(-1)
            for b in range(nb_rows):
                for t in range(qsl[b], qsl[b + 1]):
                    res[0] = T.Cast("int64", bt[g, idx[b], T.Cast("int32", pos[t] // T.Cast("int64", bs[g]))])
                    if wh[idx[b]] >= 0:
                        if uow[wh[idx[b]]] != 0:
                            st[0] = 0
                        else:
                            st[0] = nb[g, idx[b]]
                        if (
                            T.Cast("int32", pos[t] // T.Cast("int64", bs[g])) >= st[0]
                            and T.Cast("int32", pos[t] // T.Cast("int64", bs[g])) < st[0] + ucnt[g, wh[idx[b]]]
                        ):
                            res[0] = T.Cast(
                                "int64",
                                uids[
                                    g,
                                    pre[g * nu + wh[idx[b]]]
                                    + T.Cast("int32", pos[t] // T.Cast("int64", bs[g]))
                                    - st[0],
                                ],
                            )
                    out[g, t] = res[0] * T.Cast("int64", bs[g]) + pos[t] % T.Cast("int64", bs[g])
    if mode == 1:
        for g in range(ng):
            for t in range(tmax):
                out[g, t] = srcb[g, t]


_step = tvm.compile(step, target="llvm")
_CACHE: dict = {}  # by block_tables' address: (the mappings computed ahead, what they were computed for)
_DUMMY: dict = {}


def _a(n):
    return -(-n // 256) * 256


def _lookahead(args, depth=2):
    store = args[0].untyped_storage()
    base = args[0].storage_offset() * 4
    rel = [a.storage_offset() * a.element_size() - base for a in args]
    S = sum(_a(a.numel() * a.element_size()) for a in args) + _a(args[0].shape[0] * args[-1].numel() * 8)
    total = store.nbytes()
    j = base + S
    done = 0
    while done < depth and j + S <= total:
        views = []
        for a, r in zip(args, rel, strict=True):
            off = j + r
            if off % a.element_size():
                return
            views.append(a.as_strided(a.shape, a.stride(), off // a.element_size()))
        if views[2].tolist() != args[2].tolist():
            return
        tgt = torch.empty((args[0].shape[0], args[9].numel()), dtype=torch.int64)
        _step(*views, tgt, _DUMMY[(args[0].shape[0], args[9].numel())], 3)
        _CACHE[views[0].data_ptr()] = (tgt, views[9].clone(), views[6].clone(), views[7].clone())
        j += S
        done += 1


def run(
    block_tables,
    num_blocks,
    block_sizes,
    update_req_indices,
    update_overwrite,
    update_counts,
    update_block_ids,
    idx_mapping,
    query_start_loc,
    positions,
):
    args = (
        block_tables,
        num_blocks,
        block_sizes,
        update_req_indices,
        update_overwrite,
        update_counts,
        update_block_ids,
        idx_mapping,
        query_start_loc,
        positions,
    )
    shape = (block_tables.shape[0], positions.numel())
    out = torch.empty(shape, dtype=torch.int64)
    dummy = _DUMMY.get(shape)
    if dummy is None:
        dummy = _DUMMY[shape] = torch.zeros(shape, dtype=torch.int64)
    hit = _CACHE.pop(block_tables.data_ptr(), None)
    if (
        hit is not None
        and torch.equal(hit[1], positions)
        and torch.equal(hit[2], update_block_ids)
        and torch.equal(hit[3], idx_mapping)
    ):
        _step(*args, out, hit[0], 1)
        return out
    t0 = time.perf_counter()
    _step(*args, out, dummy, 0)
    if time.perf_counter() - t0 < 0.004:
        _lookahead(args)
    return out
