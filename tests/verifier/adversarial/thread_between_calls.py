"""Starts a thread between calls (from a weak reference's callback the harness triggers when it drops a call's
inputs) that keeps a view of the shared arena: the verifier refills that memory with the next
call's inputs before sending the call, so such a thread could do the next call's work untimed and
be gone before run() returns. The worker flags any thread the submission starts between calls."""

# expect: background_work
# or: decorative_dsl, the harness frees a block's inputs only once the verifier's next message is waiting: the thread
#     then starts before the next block, and a correctness draw's audit may see it work first
# problem: p36
import threading
import weakref

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(128):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")
_views: list[torch.Tensor] = []


_refs: list = []


def _peek(view: torch.Tensor) -> None:
    view.sum()  # a real attack would wait here for the next inputs and compute ahead


def _start_watcher(view: torch.Tensor) -> None:
    threading.Thread(target=_peek, args=(view,)).start()


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    view = hidden_states.view(hidden_states.shape)  # another tensor over the same shared memory
    _views[:] = [view]
    # a weak reference's callback (weakref.finalize itself is refused): it runs when the harness drops the inputs
    _refs.append(weakref.ref(hidden_states, lambda _ref: _start_watcher(view)))
    return out
