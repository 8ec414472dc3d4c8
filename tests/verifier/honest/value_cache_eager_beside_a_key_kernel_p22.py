"""A TIRx kernel inserts each token's k and index key into p22's caches and writes the list of valid tokens and their
slots; eager code inserts the value cache (a gather and an ``index_put_``: 44% of the problem's data movement). The
reference's only arithmetic is its slot computation (1.6% of its moved elements), which the kernel does: on element
work the plan was full at 0% (red team rt39 F2); p22 is a problem of data movement, so it is partial at 0.44."""

# problem: p22
# plan: partial
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def insert(
    qkv_ptr: T.handle,
    sm_ptr: T.handle,
    ism_ptr: T.handle,
    kc_ptr: T.handle,
    ic_ptr: T.handle,
    tok_ptr: T.handle,
    slot_ptr: T.handle,
    cnt_ptr: T.handle,
):
    n = T.int32()
    nb = T.int32()
    nib = T.int32()
    Q = T.match_buffer(qkv_ptr, (n, 9856), "bfloat16")
    SM = T.match_buffer(sm_ptr, (n,), "int64")
    ISM = T.match_buffer(ism_ptr, (n,), "int64")
    KC = T.match_buffer(kc_ptr, (nb, 512), "bfloat16")
    IC = T.match_buffer(ic_ptr, (nib, 128), "bfloat16")
    TOK = T.match_buffer(tok_ptr, (n,), "int64")
    SL = T.match_buffer(slot_ptr, (n,), "int64")
    CNT = T.match_buffer(cnt_ptr, (1,), "int64")
    CNT[0] = T.int64(0)
    for t in range(n):
        if SM[t] >= T.int64(0):
            TOK[CNT[0]] = T.Cast("int64", t)
            SL[CNT[0]] = SM[t]
            CNT[0] = CNT[0] + T.int64(1)
            for j in range(512):
                KC[SM[t], j] = Q[t, 8192 + j]
        if ISM[t] >= T.int64(0):
            for j in range(128):
                IC[ISM[t], j] = Q[t, 9728 + j]


_insert = tvm.compile(insert, target="llvm")


def run(qkv, slot_mapping, index_slot_mapping, key_cache, value_cache, index_cache):
    n = qkv.shape[0]
    tok = torch.empty(n, dtype=torch.int64)
    slot = torch.empty(n, dtype=torch.int64)
    cnt = torch.empty(1, dtype=torch.int64)
    _insert(qkv, slot_mapping, index_slot_mapping, key_cache.view(-1, 512), index_cache.view(-1, 128), tok, slot, cnt)
    c = int(cnt.item())
    value_cache.view(-1, 512)[slot[:c]] = qkv[tok[:c], 8704:9216]  # eager: 44% of the problem's data movement
    return ()
