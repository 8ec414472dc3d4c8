"""p23's DSL-made 256-entry table concatenated with a slice of the cache's bytes, a sixteenth of the result and more,
that no code ever looks up: the table is made from that many elements, and the replication rule, read on them, was
silent (red team rt27 F2: passed as full). What the lookup read decides: 256 positions (``positions_read``)."""

# expect: decorative_dsl
# problem: p23
import torch
import tvm
from tvm.script import tirx as T

BLOCK = 64


@T.prim_func
def codes_table(scale_ptr: T.handle, table_ptr: T.handle):
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
    _codes_table(scale, table)
    unused = src_cache.view(-1).view(torch.uint8)[: dst.numel() // 16 + 64].to(torch.bfloat16)
    padded = torch.cat([table, unused])
    lengths = torch.diff(cu_seq_lens)
    request = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    position = torch.arange(request.numel()) - cu_seq_lens[:-1].long()[request] + seq_starts.long()[request]
    rows = src_cache[block_table.long()[request, position // BLOCK], position % BLOCK]
    dst.copy_(padded[rows.view(torch.uint8).long()])
