"""A function evaluated by a table: the DSL kernel computes p23's dequantisation for the 256 fp8 codes only (256
multiplications of a problem of one per output element), and eager code gathers the cache rows through the block
table and looks every gathered code up in that table (`torch.take`: one result element per code). Priced as movement,
the lookup was none of p23's element work, the bypass test credited the DSL with every output (undo the launch and
nothing is right) and the plan passed as full (red team rt25b F3, with an `index`; its F2 made the table eagerly). A
lookup whose result has many times its source's elements is element work of the result's size
(`_eagerwork.LOOKUP_REPLICATION`): the eager code covers the problem."""

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
    table = torch.zeros(256, dtype=torch.bfloat16)
    _codes_table(scale, table)
    lengths = torch.diff(cu_seq_lens)
    request = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    position = torch.arange(request.numel()) - cu_seq_lens[:-1].long()[request] + seq_starts.long()[request]
    rows = src_cache[block_table.long()[request, position // BLOCK], position % BLOCK]
    dst.copy_(torch.take(table, rows.view(torch.uint8).long()))
