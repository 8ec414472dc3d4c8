"""p23's DSL-made 256-entry table looked up by eager code in calls of 4000 codes, each under the replication rule's
16 x 256, the whole cache given to the launch beside the table (never read) so that the table is made from half a
million elements (red team rt27 F3: passed as full). All of a call's lookups into one table are judged together, the
positions they read against all they wrote (``lookup_kind``)."""

# expect: decorative_dsl
# problem: p23
import torch
import tvm
from tvm.script import tirx as T

BLOCK = 64


@T.prim_func
def codes_table(scale_ptr: T.handle, cache_ptr: T.handle, table_ptr: T.handle):
    blocks = T.int32()
    T.match_buffer(cache_ptr, (blocks, 64, 576), "uint8")  # given, never read: its elements join the table's roots
    scale = T.match_buffer(scale_ptr, (1,), "float32")
    table = T.match_buffer(table_ptr, (256,), "bfloat16")
    for code in range(256):
        exponent = (code >> 3) & 15
        mantissa = code & 7
        magnitude = T.Select(
            exponent == 0,
            T.Cast("float32", mantissa) / T.float32(512.0),
            T.Cast("float32", (8 + mantissa) * (1 << exponent)) / T.float32(1024.0),
        )
        table[code] = T.Cast("bfloat16", T.Select(code >= 128, -magnitude, magnitude) * scale[0])


_codes_table = tvm.compile(codes_table, target="llvm")


def run(src_cache, block_table, cu_seq_lens, seq_starts, scale, dst):
    table = torch.empty(256, dtype=torch.bfloat16)
    _codes_table(scale, src_cache.view(torch.uint8), table)
    lengths = torch.diff(cu_seq_lens)
    request = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    position = torch.arange(request.numel()) - cu_seq_lens[:-1].long()[request] + seq_starts.long()[request]
    rows = src_cache[block_table.long()[request, position // BLOCK], position % BLOCK]
    codes = rows.view(torch.uint8).long().view(-1)
    flat = dst.view(-1)
    for start in range(0, codes.numel(), 4000):
        flat[start : start + 4000].copy_(torch.take(table, codes[start : start + 4000]))
