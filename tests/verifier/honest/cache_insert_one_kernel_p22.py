"""Honest full plan for p22: one TIRx kernel copies each valid token's k, v and index key into the caches (red team
rt39's control for its value-cache split)."""

# problem: p22
import tvm
from tvm.script import tirx as T


@T.prim_func
def insert(
    qkv_ptr: T.handle, sm_ptr: T.handle, ism_ptr: T.handle, kc_ptr: T.handle, vc_ptr: T.handle, ic_ptr: T.handle
):
    n = T.int32()
    nb = T.int32()
    nib = T.int32()
    Q = T.match_buffer(qkv_ptr, (n, 9856), "bfloat16")
    SM = T.match_buffer(sm_ptr, (n,), "int64")
    ISM = T.match_buffer(ism_ptr, (n,), "int64")
    KC = T.match_buffer(kc_ptr, (nb, 512), "bfloat16")
    VC = T.match_buffer(vc_ptr, (nb, 512), "bfloat16")
    IC = T.match_buffer(ic_ptr, (nib, 128), "bfloat16")
    for t in range(n):
        if SM[t] >= T.int64(0):
            for j in range(512):
                KC[SM[t], j] = Q[t, 8192 + j]
                VC[SM[t], j] = Q[t, 8704 + j]
        if ISM[t] >= T.int64(0):
            for j in range(128):
                IC[ISM[t], j] = Q[t, 9728 + j]


_insert = tvm.compile(insert, target="llvm")


def run(qkv, slot_mapping, index_slot_mapping, key_cache, value_cache, index_cache):
    _insert(
        qkv,
        slot_mapping,
        index_slot_mapping,
        key_cache.view(-1, 512),
        value_cache.view(-1, 512),
        index_cache.view(-1, 128),
    )
    return ()
