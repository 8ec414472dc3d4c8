"""p36 RMSNorm in one TIRx kernel, by a submission that also runs code inside the harness before each call's timer
starts: at import it walks to the harness's frames, reads ``_worker``'s globals there and wraps ``native_ids``, which
the harness calls after loading a call's inputs and before its timer. On every call but the draws and the null calls
the wrapper launches the kernel on the call's inputs and spends a millisecond of CPU there.

Red team rt31b F1: such a launch ran, was counted and credited to the call, and run() returned its finished output at
speedup 100 (c2; five rebindings alike). Now a launch between a block's calls does not run (the timer's vault marks the
timed window, ``_control.TIMED``, and the gate's vault refuses a launch outside it): were it to run, run() here returns
zeros (wrong_output). What the wrapper spends outside the window is the call's in the verifier's own clock: the times
reported disagree with it (timing_tamper)."""

# expect: timing_tamper
# problem: p36
import string
import time
import traceback

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
_format = string.Formatter()
_launched_early: list[int] = []
_refused: list[int] = []


def _field(obj, path):
    return _format.get_field(path, (obj,), {})[0]


def _call_locals():
    """The locals of the harness's ``_call_once`` frame while it reads the threads before the timer, or None."""
    for frame, _ in traceback.walk_stack(None):
        if _field(frame, "0.f_code.co_name") == "_call_once":
            found = _field(frame, "0.f_locals")
            return None if "before" in found else found
    return None


def _wrap_native_ids():
    for frame, _ in traceback.walk_stack(None):
        if _field(frame, "0.f_code.co_name") == "import_file":
            names = _field(frame, "0.f_globals")
            original = names["native_ids"]

            def native_ids(idents, original=original):
                found = _call_locals()
                if found is not None and found.get("call") is found.get("fn") and not found.get("audit"):
                    x, w = found["args"][0], found["args"][1]
                    try:
                        _kernel(x, w, torch.empty_like(x))
                        _launched_early.append(1)
                    except PermissionError:
                        _refused.append(1)
                    end = time.thread_time() + 0.001
                    while time.thread_time() < end:
                        pass
                return original(idents)

            names["native_ids"] = native_ids
            return


_wrap_native_ids()


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    if _launched_early:
        return out.zero_()
    _kernel(hidden_states, weight, out)
    return out
