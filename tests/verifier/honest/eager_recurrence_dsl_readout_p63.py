"""p63 (Mamba2 selective scan): eager code runs the SSM recurrence (softplus, decays, and per step
h = decay*h + (x dt') B^T, the reference's own operators) for every step but the last, stacking each step's state;
TIRx kernels do the readout y_t = h_t C_t + D x_t (the reference's one product, ``state @ C``) and the last step's
state update (the final state). A real plan, but a partial one: the eager code made 55% of the problem's compute.

Red team rt29 F1: labelled a full plan at 0% (the plan's basis was the reference's products alone, and the eager
recurrence, 91% of the reference's element work, was "element work the reference does too"); the share is now of
the problem's compute, products and element work together, wherever that is the larger one. Its worker peaks at 2.1-2.3
GB (sampled from /proc, session 46), past the tests' 2 GiB (a plain process running it holds 0.67 GB)."""

# problem: p63
# plan: partial
# thorough: ~130 s on two cores: the eager recurrence's states, each launch's arguments audited
# memory: 3 GiB (its worker peaks at 2.1-2.3 GB: ~1 GB of torch, TVM and LLVM, staged arenas, audited states)
# call timeout: 30 s (a block of its timed calls with their evidence calls' audits took over 8 s on two loaded cores)
# test timeout: 900 s (over 300 s under the THOROUGH suite's load: session 47)
import torch
import torch.nn.functional as F
import tvm
from tvm.script import tirx as T


@T.prim_func
def readout(s_ptr: T.handle, c_ptr: T.handle, x_ptr: T.handle, d_ptr: T.handle, y_ptr: T.handle, t0: T.int32):
    nb = T.int32()
    L = T.int32()
    tc = T.int32()
    S = T.match_buffer(s_ptr, (tc, nb, 128, 64, 128), "float32")
    Cm = T.match_buffer(c_ptr, (nb, L, 8, 128), "bfloat16")
    X = T.match_buffer(x_ptr, (nb, L, 128, 64), "bfloat16")
    Dv = T.match_buffer(d_ptr, (128,), "float32")
    Y = T.match_buffer(y_ptr, (nb, L, 128, 64), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for t, b, h, p in T.grid(tc, nb, 128, 64):
        acc[0] = T.float32(0)
        for n in range(128):
            acc[0] = acc[0] + S[t, b, h, p, n] * T.Cast("float32", Cm[b, t0 + t, h // 16, n])
        Y[b, t0 + t, h, p] = T.Cast("bfloat16", acc[0] + Dv[h] * T.Cast("float32", X[b, t0 + t, h, p]))


@T.prim_func
def last_step(s_ptr: T.handle, dec_ptr: T.handle, xdt_ptr: T.handle, b_ptr: T.handle, f_ptr: T.handle):
    nb = T.int32()
    S = T.match_buffer(s_ptr, (nb, 128, 64, 128), "float32")
    Dc = T.match_buffer(dec_ptr, (nb * 128,), "float32")
    Xd = T.match_buffer(xdt_ptr, (nb, 128, 64), "float32")
    Bm = T.match_buffer(b_ptr, (nb, 8, 128), "bfloat16")
    Fs = T.match_buffer(f_ptr, (nb, 128, 64, 128), "float32")
    for b, h, p, n in T.grid(nb, 128, 64, 128):
        Fs[b, h, p, n] = S[b, h, p, n] * Dc[b * 128 + h] + Xd[b, h, p] * T.Cast("float32", Bm[b, h // 16, n])


_readout = tvm.compile(readout, target="llvm")
_last = tvm.compile(last_step, target="llvm")
CHUNK = 8
EAGER_READOUT = False


def run(x, dt, A, B, C, D, dt_bias, initial_state):
    rep = x.shape[2] // B.shape[2]
    xf = x.float()
    dtp = F.softplus(dt.float() + dt_bias.float())
    decay = torch.exp(dtp * A.float())
    xdt = xf * dtp[..., None]
    Bh = B.float().repeat_interleave(rep, dim=2)
    state = initial_state.float()
    y = torch.zeros_like(x)
    L = x.shape[1]
    Cc, xc, Dc = C.contiguous(), x.contiguous(), D.contiguous()
    for t0 in range(0, L - 1, CHUNK):
        states = []
        for t in range(t0, min(L - 1, t0 + CHUNK)):
            state = state * decay[:, t, :, None, None] + xdt[:, t, :, :, None] * Bh[:, t, :, None, :]
            if EAGER_READOUT:
                Ch = C[:, t].float().repeat_interleave(rep, dim=1)
                states.append((state @ Ch[:, :, :, None]).expand(-1, -1, -1, 128))
            else:
                states.append(state)
        _readout(torch.stack(states), Cc, xc, Dc, y, t0)
    final_state = torch.empty_like(initial_state)
    _last(state.contiguous(), decay[:, L - 1].reshape(-1).contiguous(), xdt[:, L - 1].contiguous(),
          B[:, L - 1].contiguous(), final_state)
    if EAGER_READOUT:
        Ch = C[:, L - 1].float().repeat_interleave(rep, dim=1)
        last = (final_state @ Ch[:, :, :, None]).expand(-1, -1, -1, 128)[None]
    else:
        last = final_state[None]
    _readout(last.contiguous(), Cc, xc, Dc, y, L - 1)
    return y, final_state
