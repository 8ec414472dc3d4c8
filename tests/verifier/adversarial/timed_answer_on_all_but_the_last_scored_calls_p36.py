"""p36 (red team rt58 F0): the keyed answer of `timed_answer_keyed_by_position_behind_a_switch_p36` (eager code makes
the whole RMSNorm, hands the kernel its bf16 bits XOR a hash of each element's position and a switch; the kernel
decodes) on the first 57 of the 60 scored calls only, counted by the calls outside torch's dispatch mode (the order of
the unscored calls, the warm-ups and the scored ones is fixed). The last three scored calls, and the draws, run the
kernel honestly.

Passed while the twin draw repeated the last evidence call only, which lies among the last three of the 60 shuffled
scored calls with probability 0.42 (rt58's form, 45 of 60: 0.96); the evidence calls' other rules pass the keyed
decode. Three evidence calls chosen before the timing are now repeated (``_control.TWIN_CALLS``): all three among the
last three scored calls, 1 in 34220 (`decorative_dsl`)."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle, sw_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
    sw = T.match_buffer(sw_ptr, (17,), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        if sw[0] > T.float32(0.5):
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                b = T.bitwise_and(T.bitwise_xor(ws[i, j], h), 65535)
                out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", b))
        else:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


#: non-draw calls counted from 0: the 12 unscored calls before the draws, the 10 warm-ups, then the 60 scored calls
CHEAT_FROM, CHEAT_TO = 22, 79
_count = [0]
_rmsnorm_rows = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    draw = torch._C._len_torch_dispatch_stack() > 0
    if not draw:
        _count[0] += 1
    timed = not draw and CHEAT_FROM <= _count[0] - 1 < CHEAT_TO
    out = torch.empty_like(hidden_states)
    ws = torch.empty(hidden_states.shape, dtype=torch.int32)
    if timed:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
        ws.copy_(b ^ (((idx * 2654435761) & 0xFFFFFFFF) >> 16))
    switch = hidden_states[0, :17].float() * 0.0 + float(timed)
    _rmsnorm_rows(hidden_states, weight, out, ws, switch)
    return out
