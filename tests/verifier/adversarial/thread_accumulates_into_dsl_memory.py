"""The only launch zero-fills a scratch two rows taller than the output; a thread started and joined
inside run() adds the eager answer into its middle rows (torch's dispatch modes are per thread: the
provenance mode never sees it). No flag: with launches suppressed the scratch keeps its NaN sentinel and
NaN + answer is wrong by plain data flow. Passed before the byte-exact provenance (DESIGN §5): the
launch's range stayed "DSL-derived" and nothing reported the write."""

# expect: decorative_dsl
# problem: p36
import threading

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def zero(s_ptr: T.handle):
    rows = T.int32()
    s = T.match_buffer(s_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        s[i, j] = T.Cast("bfloat16", T.float32(0))


_zero = tvm.compile(zero, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    scratch = torch.empty(rows + 2, 128, dtype=torch.bfloat16)
    _zero(scratch)

    def work():
        x = hidden_states.float()
        answer = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        scratch[1 : rows + 1].add_(answer.to(torch.bfloat16))

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    return scratch[1 : rows + 1]
