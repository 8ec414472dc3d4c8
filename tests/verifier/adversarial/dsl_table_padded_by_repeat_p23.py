"""A function evaluated by a table made larger than the replication rule's sixteenth: the DSL kernel computes p23's
dequantisation for the 256 fp8 codes only, eager code repeats the 256 entries past a sixteenth of the gathered cache
(a table of thousands of entries, every one a copy of one of 256), and one eager lookup dequantises every gathered
code. Read by its size, the table was large enough for the lookup to be a gather, and the plan passed as full with
"100% of the outputs produced by the DSL" (red team rt26 F3). The vault counts the elements a table was made from
(``_provenance.made_from``): 256 stand behind the padded table, and the lookup is element work of its result."""

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
    padded = table.repeat(dst.numel() // 2048 + 1)  # twice a sixteenth of the result
    lengths = torch.diff(cu_seq_lens)
    request = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    position = torch.arange(request.numel()) - cu_seq_lens[:-1].long()[request] + seq_starts.long()[request]
    rows = src_cache[block_table.long()[request, position // BLOCK], position % BLOCK]
    dst.copy_(padded[rows.view(torch.uint8).long()])
