"""rt28b h2: rt28 h6 with the complex multiply written as torch.addcmul(zeros, xc, cos + i sin): COMPLEX_WORK
prices complex mul/div x3 but addcmul (a fused complex multiply-add) only at its weight 2 per real scalar.
p20 (MLA rope + compressed cache update), second form of h5: a TIRx kernel makes the real GPT-J rope of the first
HD of q's 128 heads into the output and writes the cache entries (kv_c and the rotated k_pe) at their slots; eager
code makes the other heads' rope and k_pe's as ONE complex multiply each (pairs viewed as complex numbers times
cos + i sin) and copies them into the output. The complex multiply does the reference's 6 real operations per pair
but is priced as one element of the complex tensor.

Red team rt28b F2: passed as a partial plan, share 0.460 (its twin with the complex multiplication as ``*``:
decorative, 0.69): a complex call other than mul/div was priced as two real scalars an element; every computing
complex call now as a multiplication (``_widths.COMPLEX_WORK``)."""

# expect: decorative_dsl
# problem: p20
import torch
import tvm
from tvm.script import tirx as T

HEADS, ROPE, HALF, RANK, DIM, BS = 128, 64, 32, 512, 576, 64
HD = 40  # heads the DSL rotates


@T.prim_func
def write(
    q_ptr: T.handle,
    pos_ptr: T.handle,
    cs_ptr: T.handle,
    kvc_ptr: T.handle,
    kr_ptr: T.handle,
    slot_ptr: T.handle,
    cache_ptr: T.handle,
    out_ptr: T.handle,
):
    n = T.int32()
    nb = T.int32()
    mp = T.int32()
    q = T.match_buffer(q_ptr, (n, HEADS, ROPE), "bfloat16")
    pos = T.match_buffer(pos_ptr, (n,), "int64")
    cs = T.match_buffer(cs_ptr, (mp, ROPE), "float32")
    kvc = T.match_buffer(kvc_ptr, (n, RANK), "bfloat16")
    kr = T.match_buffer(kr_ptr, (n, ROPE), "float32")
    slot = T.match_buffer(slot_ptr, (n,), "int64")
    cache = T.match_buffer(cache_ptr, (nb, BS, DIM), "bfloat16")
    out = T.match_buffer(out_ptr, (n, HEADS, ROPE), "bfloat16")
    for t, h, i in T.grid(n, HD, HALF):
        out[t, h, 2 * i] = T.Cast(
            "bfloat16",
            T.Cast("float32", q[t, h, 2 * i]) * cs[T.Cast("int32", pos[t]), i]
            - T.Cast("float32", q[t, h, 2 * i + 1]) * cs[T.Cast("int32", pos[t]), HALF + i],
        )
        out[t, h, 2 * i + 1] = T.Cast(
            "bfloat16",
            T.Cast("float32", q[t, h, 2 * i + 1]) * cs[T.Cast("int32", pos[t]), i]
            + T.Cast("float32", q[t, h, 2 * i]) * cs[T.Cast("int32", pos[t]), HALF + i],
        )
    for t in range(n):
        if slot[t] >= T.int64(0):
            page = T.Cast("int32", slot[t] // T.int64(BS))
            row = T.Cast("int32", slot[t] % T.int64(BS))
            for j in range(RANK):
                cache[page, row, j] = kvc[t, j]
            for j in range(ROPE):
                cache[page, row, RANK + j] = T.Cast("bfloat16", kr[t, j])


_write = tvm.compile(write, target="llvm")


def _rot(x, c, s):  # x [..., 64] float32 -> its GPT-J rotation as one complex multiply
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], HALF, 2))
    return torch.view_as_real(
        torch.addcmul(torch.zeros_like(xc), xc, torch.view_as_complex(torch.stack((c, s), -1)))
    ).flatten(-2)


def run(q_pe, kv_c, k_pe, positions, cos_sin_cache, slot_mapping, kv_cache):
    cs = cos_sin_cache[positions]  # [n, 64]: cos | sin
    c, s = cs[:, :HALF], cs[:, HALF:]
    out = torch.empty_like(q_pe)
    out[:, HD:] = _rot(q_pe[:, HD:].float(), c[:, None, :], s[:, None, :])
    kr = _rot(k_pe.float(), c, s).contiguous()
    _write(q_pe, positions, cos_sin_cache, kv_c, kr, slot_mapping, kv_cache, out)
    return out
