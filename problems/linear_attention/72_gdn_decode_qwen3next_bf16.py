"""Gated DeltaNet single-token decode with in-kernel gates and k-last state (Qwen3-Next, GVA 16/32), bf16."""

# Source: FlashInfer-Trace definition `gdn_decode_qk16_v32_d128_k_last` (flashinfer-ai/flashinfer-bench,
#   flashinfer_trace/definitions/gdn/); fi_api flashinfer.gdn.gated_delta_rule_decode, Qwen3-Next TP=1.
#   Facts taken from it: axes, dtypes, k-last state layout [B, H, V, K], gate formulas, default scale,
#   new_state returned as a separate output.
# Upstream: FlashInfer's GDN decode kernel; eager form = one recurrent step, vectorised over batch and heads.
# Production shape: Qwen3-Next-80B-A3B (16 q/k heads, 32 v heads, head 128) decoding 128 sequences.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.linear_attention._util import decay_params, gdn_gates, state_tensor, unit_vectors

ID = "p72"
NAME = "gdn_decode_qwen3next_bf16"
FAMILY = "linear_attention"
SOURCE = "FI"
DESCRIPTION = """\
One decode step of the gated delta rule for a batch of sequences (Qwen3-Next Gated DeltaNet,
FlashInfer layout). Inputs: `q`, `k` [batch_size, 1, 16, 128] bf16; `v` [batch_size, 1, 32, 128]
bf16; `state` [batch_size, 32, 128 (V), 128 (K)] fp32 (k-last); `A_log` [32] fp32; `a`
[batch_size, 1, 32] bf16; `dt_bias` [32] fp32; `b` [batch_size, 1, 32] bf16; `scale` (Python float;
0 means 1/sqrt(128)). Value head h uses q/k head h // 2; q and k are used as given. In float32:
g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b). With S [K, V] = transpose of the state
slice: S = exp(g) * S; u = beta * (v - S^T k); S = S + k u^T; o = scale * S^T q.
Outputs: `output` [batch_size, 1, 32, 128] bf16 and `new_state` [batch_size, 32, 128 (V), 128 (K)] fp32
(the updated S in k-last layout; the input state is not modified)."""
NOTES = ""
TOLERANCE_NOTE = "`new_state` is fp32 with a tight allowance: do the state update in fp32."
AXES = {
    "batch_size": "var",
    "seq_len": 1,
    "num_q_heads": 16,
    "num_k_heads": 16,
    "num_v_heads": 32,
    "head_size": 128,
}
INPUTS = {
    "q": (("batch_size", "seq_len", "num_q_heads", "head_size"), "bfloat16"),
    "k": (("batch_size", "seq_len", "num_k_heads", "head_size"), "bfloat16"),
    "v": (("batch_size", "seq_len", "num_v_heads", "head_size"), "bfloat16"),
    "state": (("batch_size", "num_v_heads", "head_size", "head_size"), "float32"),
    "A_log": (("num_v_heads",), "float32"),
    "a": (("batch_size", "seq_len", "num_v_heads"), "bfloat16"),
    "dt_bias": (("num_v_heads",), "float32"),
    "b": (("batch_size", "seq_len", "num_v_heads"), "bfloat16"),
    "scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("batch_size", "seq_len", "num_v_heads", "head_size"), "bfloat16"),
    "new_state": (("batch_size", "num_v_heads", "head_size", "head_size"), "float32"),
}
INPLACE: tuple[str, ...] = ()
_HEADS = {"seq_len": 1, "num_q_heads": 16, "num_k_heads": 16, "num_v_heads": 32, "head_size": 128}
WORKLOAD = {"batch_size": 128, **_HEADS}
SMOKE = {"batch_size": 4, **_HEADS}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    B, T = workload["batch_size"], workload["seq_len"]
    hq, hk, hv, d = (workload[a] for a in ("num_q_heads", "num_k_heads", "num_v_heads", "head_size"))
    # Qwen3-Next L2-normalises q and k before this kernel: feed unit vectors
    q = unit_vectors((B, T, hq, d), torch.bfloat16, gen, device)
    k = unit_vectors((B, T, hk, d), torch.bfloat16, gen, device)
    v = randn((B, T, hv, d), torch.bfloat16, gen, device)
    state = state_tensor((B, hv, d, d), gen, device)
    A_log, dt_bias = decay_params((hv,), gen, device)
    a = randn((B, T, hv), torch.bfloat16, gen, device)
    b = randn((B, T, hv), torch.bfloat16, gen, device)
    return q, k, v, state, A_log, a, dt_bias, b, d**-0.5


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    state: torch.Tensor,
    A_log: torch.Tensor,
    a: torch.Tensor,
    dt_bias: torch.Tensor,
    b: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    if not scale:
        scale = q.shape[-1] ** -0.5
    rep = v.shape[2] // q.shape[2]
    g, beta = gdn_gates(A_log, a[:, 0], dt_bias, b[:, 0])  # [B, HV]
    qf = upcast(q[:, 0]).repeat_interleave(rep, dim=1)  # [B, HV, K]
    kf = upcast(k[:, 0]).repeat_interleave(rep, dim=1)
    vf = upcast(v[:, 0])  # [B, HV, V]
    S = upcast(state) * torch.exp(g)[..., None, None]  # k-last [B, HV, V, K]
    u = beta[..., None] * (vf - (S @ kf[..., None]).squeeze(-1))
    S = S + u[..., :, None] * kf[..., None, :]
    o = scale * (S @ qf[..., None]).squeeze(-1)
    return o[:, None].to(v.dtype), S.to(state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, T = workload["batch_size"], workload["seq_len"]
    hq, hk, hv, d = (workload[a] for a in ("num_q_heads", "num_k_heads", "num_v_heads", "head_size"))
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        nbytes((B, T, hq, d), bf)
        + nbytes((B, T, hk, d), bf)
        + 2 * nbytes((B, T, hv, d), bf)  # v in, output out
        + 2 * nbytes((B, hv, d, d), f32)  # state in, new_state out
        + 2 * nbytes((B, T, hv), bf)
        + 2 * nbytes((hv,), f32)
    )
    # per state element: decay (1), S k (2), rank-1 update (2), S q (2); plus the gates
    return Cost(bytes=moved, flops={"fp32": 7.0 * B * hv * d * d + 8.0 * B * hv})
