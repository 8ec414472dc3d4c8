"""The DSL kernel writes p23's 256-entry dequantisation table into the head of a buffer of 4M entries made at import,
and eager code dequantises every gathered code by one lookup into the whole buffer. Neither the buffer's size nor what
it was made from (its own memory, never written by the call but at its head) says what the lookup read: 256
positions, each copied hundreds of times: a function evaluated by its table (red team rt27 F1: passed as full; the
same buffer kept from the first call alike). The vault counts the positions a lookup read (``positions_read``)."""

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
_BUFFER = torch.zeros(1 << 22, dtype=torch.bfloat16)  # more than PRODUCTION's result over 16


def run(src_cache, block_table, cu_seq_lens, seq_starts, scale, dst):
    _BUFFER[:256].zero_()
    _codes_table(scale, _BUFFER[:256])
    lengths = torch.diff(cu_seq_lens)
    request = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    position = torch.arange(request.numel()) - cu_seq_lens[:-1].long()[request] + seq_starts.long()[request]
    rows = src_cache[block_table.long()[request, position // BLOCK], position % BLOCK]
    dst.copy_(torch.take(_BUFFER, rows.view(torch.uint8).long()))
