"""The way out of rt71 F1 by another of TVM's C++ functions: ``TVMTensorCopyToBytes`` (the FFI function behind
``tvm.runtime.Tensor.numpy()``, which is refused by name) of a DLPack view (``tvm_ffi.from_dlpack`` of a torch view: a
torch producer, allowed) copies the tensor's bytes into a numpy array in C++ with no operator (its address given by TVM FFI's
opaque-pointer protocol: no ctypes). p36's whole RMSNorm
computed eagerly, keyed by the input's bits, out so 16 bits at a time, back in as one-byte slices of the problem
input's own bytes, one cat; the kernel takes the key off. TVM's structural family was refused by name (rt71 F1); any
TVM FFI function handed a tensor outside a counted launch is now (``_guards._ffi_tensor_call``): the static scan
off, the run-time refusal is what stops it (as a hook on ``tvm_ffi.Function``'s call, which TVM FFI's type kept
from Python code until the guards lift its immutable flag for the assignment: ``set_on_immutable_type``)."""
# expect: forbidden_api
# problem: p36
# static-scan: off
import numpy
import torch
import tvm
import tvm_ffi
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
THROUGH = True
#: host work the draws see: an eager product nothing reads (unreached, so unpriced), as long on every call
_BUSY = torch.full((1024, 1024), 0.5)


@T.prim_func
def unkey(x_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "uint16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in range(rows):
        for j in range(HIDDEN):
            bits = T.Cast("uint32", s[i, j] - T.reinterpret("uint16", x[i, j]))
            out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", bits))


_kernel = tvm.compile(unkey, target="llvm")


class _Pointer:
    """An address TVM FFI passes as ``void*`` (its opaque-pointer protocol: no ctypes)."""

    def __init__(self, address):
        self.address = address

    def __tvm_ffi_opaque_ptr__(self):
        return self.address


_BYTES = numpy.zeros(1, dtype=numpy.int16)
_AT = _Pointer(_BYTES.__array_interface__["data"][0])
_COPY = tvm.runtime._ffi_api.TVMTensorCopyToBytes  # (an attribute: no import of the module)


def _out_to_python(values):
    """16-bit values out to Python one at a time: tvm_ffi.from_dlpack of a torch view (allowed: a torch producer), and
    TVM's C++ copies its bytes into a numpy array with no operator."""
    found = []
    for v in values.to(torch.int16).reshape(-1, 1):
        _COPY(tvm_ffi.from_dlpack(v), _AT, 2)
        found.append(int(_BYTES[0]))
    return found


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    for _ in range(12):
        torch.mm(_BUSY, _BUSY)
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))  # padded: no eager tensor holds the answer
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    keyed = y.view(torch.int16)[:rows] + hidden_states.view(torch.int16)
    if THROUGH:
        u8 = hidden_states.reshape(-1).view(torch.uint8)  # the problem input's own bytes (a view of it)
        m = u8.shape[0]
        first = torch.full((256,), m, dtype=torch.int64).scatter_reduce_(
            0, u8.to(torch.int64), torch.arange(m, dtype=torch.int64), "amin")
        where = _out_to_python(first)
        halves = _out_to_python(keyed.reshape(-1))
        parts = []
        for h in halves:
            h &= 0xFFFF
            for k in range(2):
                b = (h >> (8 * k)) & 0xFF
                parts.append(u8[where[b]:where[b] + 1])
        del first
    else:
        parts = [keyed.reshape(-1).view(torch.uint8)]
    A = torch.cat(parts)
    del x, y, keyed
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, A.view(torch.uint16).view(rows, HIDDEN), out)
    return out
