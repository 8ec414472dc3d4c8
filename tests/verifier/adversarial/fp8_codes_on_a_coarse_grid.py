"""fp8 codes on a coarse grid: the scales are exact, but every e4m3 code is the scaled value rounded to a multiple of
64 (15 levels instead of e4m3's 253). Each code is off by up to 32 of 448: within the old allowance of fp8 outputs,
3 x eps(e4m3) x max|anchor| = 168, so it passed every correctness draw (and only the suppression test, blinded by
that same allowance, rejected it, as it rejected an honest kernel). Judged per element in e4m3 steps (DESIGN §5),
a code of 0 for an expected 20 is wrong."""

# expect: wrong_output
# problem: p21
import tvm
from tvm.script import tirx as T


@T.prim_func
def append(key_ptr: T.handle, slot_ptr: T.handle, cache_ptr: T.handle, scale_ptr: T.handle):
    n = T.int32()
    rows = T.int32()
    key = T.match_buffer(key_ptr, (n, 8, 128), "bfloat16")
    slot = T.match_buffer(slot_ptr, (n,), "int64")
    cache = T.match_buffer(cache_ptr, (rows, 8, 128), "float8_e4m3fn")
    scale = T.match_buffer(scale_ptr, (rows, 8), "float32")
    amax = T.alloc_buffer((1,), "float32")
    for i, h in T.grid(n, 8):
        if slot[i] >= 0:
            amax[0] = T.float32(0)
            for d in range(128):
                amax[0] = T.max(amax[0], T.abs(T.Cast("float32", key[i, h, d])))
            scale[slot[i], h] = T.max(amax[0] / T.float32(448), T.float32(1e-6))
            for d in range(128):
                cache[slot[i], h, d] = T.Cast(
                    "float8_e4m3fn",
                    T.round(T.Cast("float32", key[i, h, d]) / scale[slot[i], h] / T.float32(64)) * T.float32(64),
                )


_append = tvm.compile(append, target="llvm")


def run(key, value, slot_mapping, key_cache, value_cache, k_scale_cache, v_scale_cache):
    for new, cache, scales in ((key, key_cache, k_scale_cache), (value, value_cache, v_scale_cache)):
        _append(new, slot_mapping, cache.view(-1, 8, 128), scales.view(-1, 8))
    return ()
