"""The in-place-output case's table written instead into the first 256 bf16 slots of the read-only input
``src_cache`` (what they held saved aside by the same kernel), looked up there by one eager ``take`` over every
gathered code, and the slots restored by a second kernel before run() returns: no input changed when the call ends
(red team rt27b: passed as full, 100% of the outputs the DSL's). At the lookup the slots hold what a launch wrote,
not the input's bytes as the call got them: a table like any other."""

# expect: decorative_dsl
# problem: p23
import torch
import tvm
from tvm.script import tirx as T

BLOCK = 64


@T.prim_func
def codes_table(scale_ptr: T.handle, slots_ptr: T.handle, saved_ptr: T.handle):
    scale = T.match_buffer(scale_ptr, (1,), "float32")
    slots = T.match_buffer(slots_ptr, (256,), "bfloat16")
    saved = T.match_buffer(saved_ptr, (256,), "bfloat16")
    for code in range(256):
        exponent = (code >> 3) & 15
        mantissa = code & 7
        magnitude = T.Select(
            exponent == 0,
            T.Cast("float32", mantissa) / T.float32(512.0),
            T.Cast("float32", (8 + mantissa) * (1 << exponent)) / T.float32(1024.0),
        )
        saved[code] = slots[code]
        slots[code] = T.Cast("bfloat16", T.Select(code >= 128, -magnitude, magnitude) * scale[0])


@T.prim_func
def restore(slots_ptr: T.handle, saved_ptr: T.handle):
    slots = T.match_buffer(slots_ptr, (256,), "bfloat16")
    saved = T.match_buffer(saved_ptr, (256,), "bfloat16")
    for code in range(256):
        slots[code] = saved[code]


_codes_table = tvm.compile(codes_table, target="llvm")
_restore = tvm.compile(restore, target="llvm")


def run(src_cache, block_table, cu_seq_lens, seq_starts, scale, dst):
    lengths = torch.diff(cu_seq_lens)
    request = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    position = torch.arange(request.numel()) - cu_seq_lens[:-1].long()[request] + seq_starts.long()[request]
    codes = src_cache[block_table.long()[request, position // BLOCK], position % BLOCK].view(torch.uint8).long()
    slots = src_cache.view(-1).view(torch.bfloat16)[:256]
    saved = torch.empty(256, dtype=torch.bfloat16)
    _codes_table(scale, slots, saved)
    values = torch.take(slots, codes)
    _restore(slots, saved)
    dst.copy_(values)
