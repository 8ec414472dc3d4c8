"""A wrong kernel whose run() writes its own answer on the worker's channel (the socket found among its open
descriptors) before returning: a well-formed pickle (made beforehand: the file imports no pickle) whose fields hold
what the harness never writes (an output described by a list holding a dict with an int key). The verifier must
judge that as tampering, not fail on it in its own code (an uncounted infra_error, which would let a submission veto
every verdict it dislikes). The guards refuse the write first (``os.write`` on the harness's channel, whoever calls:
``forbidden_api``); the verifier's own judgement of forged bytes stays tested where no guard stands between
(``tests/verifier/test_channel.py``, ``test_schema.py``)."""

# expect: forbidden_api
# problem: p36
import os
import stat
import struct

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i])


_scale_rows = tvm.compile(scale_rows, target="llvm")
#: pickle.dumps({"ok": True, "structure": {"container": "single", "items": [[1, {2: ()}]]}, "copied": True}, 2)
_ANSWER = (
    b"\x80\x02}q\x00(X\x02\x00\x00\x00okq\x01\x88X\t\x00\x00\x00structureq\x02}q\x03(X\t\x00\x00\x00containerq"
    b"\x04X\x06\x00\x00\x00singleq\x05X\x05\x00\x00\x00itemsq\x06]q\x07]q\x08(K\x01}q\tK\x02)seauX\x06\x00\x00\x00"
    b"copiedq\n\x88u."
)


def _channel() -> int:
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            continue
    return -1


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + 1e-6)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, out)  # forgets the weight: wrong_output, were it judged
    payload = _ANSWER
    os.write(_channel(), struct.pack("!Q", len(payload)) + payload)
    return out
