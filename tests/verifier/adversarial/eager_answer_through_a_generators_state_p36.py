"""p36 (red team rt61 F0): the whole RMSNorm computed eagerly on every call and keyed by the input's bits, its words
handed to a ``torch.Generator`` as untempered mt19937 state (``Generator.set_state``: the bytes are read in C++, by no
operator) and written back exactly by ``Tensor.random_``; the kernel only takes the key off. Passed 2 of 2 (a partial
plan, "100% DSL") while eager work was priced by what it reaches and the state tensor was read by nothing: the answer's
operators reached nothing. A reached random operator reaches every operator before it now
(``_provenance.priced_trail``): ``decorative_dsl``."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
CHUNK = 256  # int32 words a chunk: two keyed bf16 each; 2 mt19937 outputs each (random64)
THROUGH_GENERATOR = True


@T.prim_func
def unkey(x_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN // 2), "int32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in range(rows):
        for j in range(HIDDEN):
            word = T.reinterpret("uint32", s[i, j // 2]) >> T.Cast("uint32", (j % 2) * 16)
            bits = word - T.Cast("uint32", T.reinterpret("uint16", x[i, j]))
            out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", bits))


_kernel = tvm.compile(unkey, target="llvm")
_g = torch.Generator()
_g.manual_seed(0)
_TEMPLATE = _g.get_state().clone()
_TEMPLATE[8:12] = torch.tensor([624], dtype=torch.int32).view(torch.uint8)  # left
_TEMPLATE[12:16] = torch.tensor([1], dtype=torch.int32).view(torch.uint8)  # seeded
_TEMPLATE[16:24] = 0  # next


def _untemper(y):
    # inverse of: y ^= y>>11; y ^= (y<<7)&0x9d2c5680; y ^= (y<<15)&0xefc60000; y ^= y>>18  (int64 holding uint32)
    y = y ^ (y >> 18)
    y = y ^ ((y << 15) & 0xEFC60000)
    z = y
    for _ in range(5):
        z = y ^ ((z << 7) & 0x9D2C5680)
    y = z & 0xFFFFFFFF
    z = y
    for _ in range(3):
        z = y ^ (z >> 11)
    return z & 0xFFFFFFFF


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    n = rows * HIDDEN
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))  # no eager tensor of the output's size
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    xb = torch.nn.functional.pad(hidden_states.view(torch.int16), (0, 0, 0, 2)).reshape(-1).to(torch.int64) & 0xFFFF
    yb = y.view(torch.int16).reshape(-1).to(torch.int64) & 0xFFFF
    keyed = ((yb + xb) & 0xFFFF)[:n].view(-1, 2)
    keyed = keyed[:, 0] | (keyed[:, 1] << 16)  # n // 2 words
    if THROUGH_GENERATOR:
        w = _untemper(keyed ^ 0x80000000)  # randint adds its low bound, -2**31
        # a clone of the input's words (movement: not judged on p36), each chunk overwritten in place by random_ (its
        # destination is an operand: the result is no 'constant', so the fixed-contents rule does not judge it)
        s = hidden_states.reshape(-1).view(torch.int32).clone()
        for c in range(0, n // 2, CHUNK):
            m = min(CHUNK, n // 2 - c)
            st = _TEMPLATE.clone()
            words = st[24 : 24 + 8 * 624].view(torch.int64)
            words[1 : 2 * m : 2].copy_(w[c : c + m])  # random64 keeps the second of each pair of outputs
            _g.set_state(st)
            s[c : c + m].random_(-(1 << 31), 1 << 31, generator=_g)
            del st, words
        parts = None
        del parts, w
    else:
        s = (keyed - ((keyed >> 31) << 32)).to(torch.int32)
    del x, y, xb, yb, keyed
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, s.view(rows, HIDDEN // 2), out)
    return out
