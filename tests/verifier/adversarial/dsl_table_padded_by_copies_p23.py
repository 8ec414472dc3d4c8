"""The table of ``dsl_table_padded_by_repeat_p23``, padded without a repeat: an empty buffer of thousands of entries
filled by a Python loop of ``copy_`` into its slices, beside it a view of it expanded and made contiguous, and a
hundred one-element pieces of the cache concatenated after it, so that the table is made of many roots. Each root's
elements count once however often they are copied (``_provenance.united``): about 356 elements stand behind the table,
and the lookup is element work of its result (red team rt26 F3's class; every variant passed as full before)."""

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
    copies = dst.numel() // 4096 + 1
    buffer = torch.empty(256 * copies, dtype=torch.bfloat16)
    for k in range(copies):
        buffer[256 * k : 256 * (k + 1)].copy_(table)
    pieces = [src_cache.view(-1)[k : k + 1].view(torch.uint8).to(torch.bfloat16) for k in range(100)]
    padded = torch.cat([buffer, table.expand(copies, 256).reshape(-1), *pieces])
    lengths = torch.diff(cu_seq_lens)
    request = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    position = torch.arange(request.numel()) - cu_seq_lens[:-1].long()[request] + seq_starts.long()[request]
    rows = src_cache[block_table.long()[request, position // BLOCK], position % BLOCK]
    dst.copy_(padded[rows.view(torch.uint8).long()])
