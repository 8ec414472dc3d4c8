"""Red team rt73 G6: the honest partial p36 plan (the per-row inverse RMS eager, the scaling in TIRx: partial at
~0.50) with its statistic carried out to Python a byte at a time by ``torch._ctc_loss`` (its C++ reads the target
lengths and sizes ``log_alpha`` by their largest: ``.shape[2]`` is 2*max+1; no list named it: G2) and back in as
pieces of a 16-entry table split in the call, picked by nibble 512 times (the split's places counted once, every
read after free: G4). It passed as a FULL plan at 0.023 on d92e2cd. An operator whose meta kernel cannot size its
results hands Python their sizes (``_eagerwork.sized_by_data``), and a counted place is its first read's only."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for r, i, j in T.grid(64, rows, HIDDEN):  # repeated: the cpu DSL-time rule needs time to compare (as rt71 F2)
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")



_LP = torch.zeros(1, 1, 2)  # (T=1, batch=1, classes=2)
_TG = torch.ones(1, 256, dtype=torch.int64)
_IL = torch.ones(1, dtype=torch.int64)


def way_out(u8):
    """Python ints of a uint8 tensor: _ctc_loss.Tensor's C++ reads target_lengths and sizes log_alpha by its max."""
    v = u8.to(torch.int64)
    return [(torch._ctc_loss(_LP, _TG, _IL, v[i : i + 1])[1].shape[2] - 1) // 2 for i in range(v.shape[0])]


_T16 = torch.arange(16, dtype=torch.int32).to(torch.uint8)


def way_in(byte_values):
    """G4: a 16-entry table split in the call (16 bytes counted), its pieces then picked freely."""
    pieces = _T16.split(1)
    nibbles = [n for b in byte_values for n in (b >> 4, b & 15)]
    p = torch.cat([pieces[n] for n in nibbles]).view(-1, 2)
    return (p[:, 0] << 4) | p[:, 1]


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    key = hidden_states.reshape(-1).view(torch.uint8)[: 4 * inv_rms.shape[0]]
    bs = way_out(inv_rms.view(torch.uint8) ^ key)
    inv = (way_in(bs) ^ key).view(torch.float32)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv, weight, out)
    return out
