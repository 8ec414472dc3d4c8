"""KV block copy (p25, in place, pure data movement): a one-element TIRx kernel writes 1; eager PyTorch does
every block copy itself, adding that 1 and taking 1 away again (with the kernel suppressed the byte is 0 and
every copied byte is off by one). The DSL moves none of the data: the eager code moved all of it."""

# expect: decorative_dsl
# problem: p25
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def one(a_ptr: T.handle):
    a = T.match_buffer(a_ptr, (1,), "uint8")
    a[0] = T.uint8(1)


_one = tvm.compile(one, target="llvm")


def run(key_caches, value_caches, block_mapping):
    seed = torch.empty(1, dtype=torch.uint8)
    _one(seed)
    src, dst = block_mapping[:, 0], block_mapping[:, 1]
    key_caches[:, dst] = key_caches[:, src] + seed - 1
    value_caches[:, dst] = value_caches[:, src] + seed - 1
    return ()
