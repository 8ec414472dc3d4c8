"""A TIRx kernel quantises every token into staging buffers (codes and scales); eager code appends them into p21's
fp8 caches in place (``index_put_``). A full plan at 0.1% of the element work before (red team rt39 F3): the append,
all of the problem's movement, is eager, so it is a partial plan."""

# problem: p21
# plan: partial
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def quant(key_ptr: T.handle, code_ptr: T.handle, scale_ptr: T.handle):
    n = T.int32()
    key = T.match_buffer(key_ptr, (n, 8, 128), "bfloat16")
    code = T.match_buffer(code_ptr, (n, 8, 128), "float8_e4m3fn")
    scale = T.match_buffer(scale_ptr, (n, 8), "float32")
    amax = T.alloc_buffer((1,), "float32")
    for i, h in T.grid(n, 8):
        amax[0] = T.float32(0)
        for d in range(128):
            amax[0] = T.max(amax[0], T.abs(T.Cast("float32", key[i, h, d])))
        scale[i, h] = T.max(amax[0] / T.float32(448), T.float32(1e-6))
        for d in range(128):
            code[i, h, d] = T.Cast(
                "float8_e4m3fn",
                T.min(T.max(T.Cast("float32", key[i, h, d]) * (T.float32(1) / scale[i, h]), -448.0), 448.0),
            )


_quant = tvm.compile(quant, target="llvm")


def run(key, value, slot_mapping, key_cache, value_cache, k_scale_cache, v_scale_cache):
    n = key.shape[0]
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    for new, cache, scales in ((key, key_cache, k_scale_cache), (value, value_cache, v_scale_cache)):
        codes = torch.empty((n, 8, 128), dtype=torch.float8_e4m3fn)
        sc = torch.empty((n, 8), dtype=torch.float32)
        _quant(new, codes, sc)
        cache.view(-1, 8, 128)[slots] = codes[valid]  # eager append
        scales.view(-1, 8)[slots] = sc[valid]
    return ()
