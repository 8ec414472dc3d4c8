"""Honest p22: the eager glue slices k, v and the index key out of qkv with ``.contiguous()`` (dense [n, 512] and
[n, 128] operands), one TIRx kernel scatters each valid token's rows into the caches (the twin of
``cache_insert_one_kernel_p22``, which reads qkv itself).

Red team rt49 F3: rejected as ``decorative_dsl`` in 2 of 2 runs. On the draws the slices are copies of an input; on an
evidence call only copies lined up element by element were an input's (``input_copies``), so the slices were eager-made
operands and every cache row the kernel wrote their copy. A slice of an input is now one too (``_decode.sliced_from``).
A partial plan: the slices' copies are 54% of the problem's movement."""

# problem: p22
# plan: partial
import tvm
from tvm.script import tirx as T


@T.prim_func
def insert(
    k_ptr: T.handle,
    v_ptr: T.handle,
    ik_ptr: T.handle,
    sm_ptr: T.handle,
    ism_ptr: T.handle,
    kc_ptr: T.handle,
    vc_ptr: T.handle,
    ic_ptr: T.handle,
):
    n = T.int32()
    nb = T.int32()
    nib = T.int32()
    K = T.match_buffer(k_ptr, (n, 512), "bfloat16")
    V = T.match_buffer(v_ptr, (n, 512), "bfloat16")
    IK = T.match_buffer(ik_ptr, (n, 128), "bfloat16")
    SM = T.match_buffer(sm_ptr, (n,), "int64")
    ISM = T.match_buffer(ism_ptr, (n,), "int64")
    KC = T.match_buffer(kc_ptr, (nb, 512), "bfloat16")
    VC = T.match_buffer(vc_ptr, (nb, 512), "bfloat16")
    IC = T.match_buffer(ic_ptr, (nib, 128), "bfloat16")
    for t in range(n):
        if SM[t] >= T.int64(0):
            for j in range(512):
                KC[SM[t], j] = K[t, j]
                VC[SM[t], j] = V[t, j]
        if ISM[t] >= T.int64(0):
            for j in range(128):
                IC[ISM[t], j] = IK[t, j]


_insert = tvm.compile(insert, target="llvm")


def run(qkv, slot_mapping, index_slot_mapping, key_cache, value_cache, index_cache):
    k = qkv[:, 8192:8704].contiguous()
    v = qkv[:, 8704:9216].contiguous()
    index_key = qkv[:, 9728:9856].contiguous()
    _insert(
        k,
        v,
        index_key,
        slot_mapping,
        index_slot_mapping,
        key_cache.view(-1, 512),
        value_cache.view(-1, 512),
        index_cache.view(-1, 128),
    )
    return ()
