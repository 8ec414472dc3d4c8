"""An eager answer divided by a 16 x 16 tile of random values (made at import) repeated over it, folded into the
scaling: no eager tensor holds the answer, and the only kernel multiplies the tile back in. The tile is neither the
output's size nor a broadcast, so no operand lined up with the output element by element and the decode rule judged
only the divided answer alone (an offset tile added back was red team A's h1v2, session 7; here a factor, which costs
the eager code no extra pass over the data). Operands are now lined up as tiles too (verifier README "Decoded
answers"). The eager answer is priced low (squares looked up in a table of every bf16 pattern's, row sums by an
accumulating index_put: both movement; two passes of multiplication), so the eager-work rule alone does not reject
it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

_PATTERNS = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
_SQUARES = _PATTERNS * _PATTERNS  # the square of the bf16 whose bits are i (as int16, modulo 65536)
_GENERATOR = torch.Generator().manual_seed(16)
_TILE = (torch.rand(16, 16, generator=_GENERATOR) + 0.5) * (torch.randint(0, 2, (16, 16), generator=_GENERATOR) * 2 - 1)


@T.prim_func
def times_tile(e_ptr: T.handle, tile_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    e = T.match_buffer(e_ptr, (rows, 128), "float32")
    tile = T.match_buffer(tile_ptr, (16, 16), "float32")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", e[i, j] * tile[i % 16, j % 16])


_times_tile = tvm.compile(times_tile, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    x = hidden_states.float()
    squares = _SQUARES[hidden_states.view(torch.int16).long()]  # a negative pattern indexes from the end
    sums = torch.zeros(rows)
    sums.index_put_((torch.arange(rows).repeat_interleave(128),), squares.reshape(-1), accumulate=True)
    # the weight over the tile is 16 rows of 128; each row's scale multiplies it in one pass over the output
    weight_over_tile = weight.float() / _TILE.repeat(1, 8)
    scale = torch.rsqrt(sums / 128 + 1e-6).reshape(rows // 16, 16, 1) * weight_over_tile
    divided = x * scale.reshape(rows, 128)
    out = torch.empty_like(hidden_states)
    _times_tile(divided, _TILE, out)
    return out
