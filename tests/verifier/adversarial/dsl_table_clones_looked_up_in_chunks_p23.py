"""``dsl_table_looked_up_in_chunks_p23`` in calls of 1500 codes, each into a clone of the table of its own (kept
alive, so no two share memory) with an entry no code reads changed: no table is looked up twice and each call reads
fewer positions than 1500 / 16, but every clone is made from the same table. All lookups into tables made
from one root are judged together (``lookup_kind``: a clone carries its source's roots, an entry changed too; passed
as full before)."""

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
    kept = []
    for start in range(0, codes.numel(), 1500):
        chunk = table.clone()
        kept.append(chunk)
        chunk[127] = float(start)  # code 127 is fp8's NaN: no cache holds it
        flat[start : start + 1500].copy_(torch.take(chunk, codes[start : start + 1500]))
