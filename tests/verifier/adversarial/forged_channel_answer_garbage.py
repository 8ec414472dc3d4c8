"""A wrong kernel whose import writes bytes that are no pickle at all on the worker's channel (a length, then a
truncated pickle): the verifier reads them as the import's answer and must judge them as tampering, not fail while
decoding them (an uncounted infra_error). The guards refuse the write first (``os.write`` on the harness's channel,
whoever calls: ``forbidden_api``); the verifier's own judgement of forged bytes stays tested where no guard stands
between (``tests/verifier/test_channel.py``, ``test_schema.py``)."""

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

for _fd in range(3, 64):
    try:
        if stat.S_ISSOCK(os.fstat(_fd).st_mode):
            os.write(_fd, struct.pack("!Q", 6) + b"\x80\x05\x95\xff\xff\xff")
            break
    except OSError:
        continue


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + 1e-6)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, out)
    return out
