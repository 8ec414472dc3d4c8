"""p54 as the study's partial plans do it (p56: eager quantisation and GEMM, a DSL epilogue): eager PyTorch quantises
the activation to block fp8 and makes the QKV GEMM in float32; one TIRx kernel makes the q/k RMSNorm epilogue and
casts v to bf16. The cast of the eager v is no work of the DSL's: the draws' coverage takes it from the DSL's credit
(v's share 0), the decode rule from the evidence calls' work, yet the work rule held the timed calls to the draws'
launch-left share of v (100%), and the plan was rejected as decorative (red team rt45, h01). Now an output the draws'
coverage does not credit to the DSL is not judged there: a partial plan at 100% of the products."""

# problem: p54
# plan: partial
# thorough: ~30 s on two cores: a 6144-wide eager GEMM on every call, the evidence calls' launches fitted
import torch
import tvm
from tvm.script import tirx as T

D = 128


@T.prim_func
def norm(r_ptr: T.handle, qw_ptr: T.handle, kw_ptr: T.handle, q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle):
    t = T.int32()
    R = T.match_buffer(r_ptr, (t, 6144), "float32")
    QW = T.match_buffer(qw_ptr, (D,), "bfloat16")
    KW = T.match_buffer(kw_ptr, (D,), "bfloat16")
    Q = T.match_buffer(q_ptr, (t, 32, D), "bfloat16")
    Ko = T.match_buffer(k_ptr, (t, 8, D), "bfloat16")
    V = T.match_buffer(v_ptr, (t, 8, D), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(t):
        for h in range(40):
            acc[0] = T.float32(0)
            for d in range(D):
                acc[0] = acc[0] + R[i, h * D + d] * R[i, h * D + d]
            r = T.rsqrt(acc[0] / T.float32(D) + T.float32(1e-6))
            for d in range(D):
                if h < 32:
                    Q[i, h, d] = T.Cast("bfloat16", R[i, h * D + d] * r * T.Cast("float32", QW[d]))
                else:
                    Ko[i, h - 32, d] = T.Cast("bfloat16", R[i, h * D + d] * r * T.Cast("float32", KW[d]))
        for h in range(8):
            for d in range(D):
                V[i, h, d] = T.Cast("bfloat16", R[i, 5120 + h * D + d])


_k = tvm.compile(norm, target="llvm")


def run(hidden_states, qkv_weight, qkv_scale, q_norm_weight, k_norm_weight):
    t, K = hidden_states.shape
    x = hidden_states.float().view(t, -1, 128)
    s = x.abs().amax(-1, keepdim=True).clamp_min(1e-10) / 448.0
    a = ((x / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s).view(t, K)
    w = qkv_weight.float() * qkv_scale.repeat_interleave(128, 0).repeat_interleave(128, 1)
    r = (a @ w.t()).contiguous()
    q = torch.empty((t, 32, D), dtype=torch.bfloat16)
    k = torch.empty((t, 8, D), dtype=torch.bfloat16)
    v = torch.empty((t, 8, D), dtype=torch.bfloat16)
    _k(r, q_norm_weight, k_norm_weight, q, k, v)
    return q, k, v
