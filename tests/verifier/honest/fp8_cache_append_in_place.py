"""Honest fused plan for an fp8 cache: one TIRx kernel computes each (token, head)'s scale and writes the e4m3 codes
and the scale straight into the caches, in place. With its launches undone, the old codes stay in the appended
slots: judged in fp8 steps they are wrong, so the suppression test sees the kernel's work (DESIGN §5). TVM's llvm
fp8 cast flushes subnormal codes to zero: a few codes differ from the reference's by less than the smallest normal."""

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
                    T.min(T.max(T.Cast("float32", key[i, h, d]) * (T.float32(1) / scale[slot[i], h]), -448.0), 448.0),
                )


_append = tvm.compile(append, target="llvm")


def run(key, value, slot_mapping, key_cache, value_cache, k_scale_cache, v_scale_cache):
    for new, cache, scales in ((key, key_cache, k_scale_cache), (value, value_cache, v_scale_cache)):
        _append(new, slot_mapping, cache.view(-1, 8, 128), scales.view(-1, 8))
    return ()
