"""Gated DeltaNet multi-token (MTP verify) decode from a state pool, caching each intermediate state, bf16."""

# Source: FlashInfer-Trace definition `gdn_mtp_qk16_v32_d128_k_last` (flashinfer-ai/flashinfer-bench,
#   flashinfer_trace/definitions/gdn/), captured from Qwen3-Next MTP layers. Facts taken from it: axes,
#   dtypes, pool-indexed k-last states [pool_size, H, V, K], gate formulas, default scale, and the
#   intermediate_states_buffer[pool slot, t] written after every token for speculative rollback.
# Upstream: FlashInfer's GDN MTP kernel for speculative-decoding verification. The definition's
#   reference runs it with the state update disabled (disable_state_update=True: the pool is left
#   untouched; the accepted intermediate state is copied back by the caller) and returns `final_state`
#   as an unchanged copy of the pool. This problem drops that copy and makes the intermediate-state
#   cache, which the reference fills, the in-place output instead.
# Production shape: Qwen3-Next-80B-A3B (16 q/k heads, 32 v heads, head 128), 32 sequences verifying
#   4 tokens each (3 draft tokens + 1), pool of 48 state slots.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, randperm, upcast
from problems.linear_attention._util import decay_params, gdn_gates, state_tensor, unit_vectors

ID = "p73"
NAME = "gdn_mtp_qwen3next_bf16"
FAMILY = "linear_attention"
SOURCE = "FI"
DESCRIPTION = """\
Multi-token decode (speculative-decoding verification) of the gated delta rule, Qwen3-Next Gated
DeltaNet in FlashInfer layout. Inputs: `q`, `k` [batch_size, seq_len, 16, 128] bf16; `v`
[batch_size, seq_len, 32, 128] bf16; `initial_state` [pool_size, 32, 128 (V), 128 (K)] fp32, a pool
of k-last states; `initial_state_indices` [batch_size] int32 (distinct pool slot of each sequence);
`A_log` [32] fp32; `a`, `b` [batch_size, seq_len, 32] bf16; `dt_bias` [32] fp32; `scale` (Python
float; 0 means 1/sqrt(128)); `intermediate_states_buffer` [pool_size, seq_len, 32, 128 (V), 128 (K)]
fp32. Value head h uses q/k head h // 2; q and k are used as given. In float32:
g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b). For each sequence i with slot
p = initial_state_indices[i] and each value head, S [K, V] = transpose of initial_state[p]; for each
token t in order: S = exp(g_t) * S; u = beta_t * (v_t - S^T k_t); S = S + k_t u^T;
o_t = scale * S^T q_t; intermediate_states_buffer[p, t] = S (k-last). Output: `output`
[batch_size, seq_len, 32, 128] bf16. `intermediate_states_buffer` is updated in place (slots not
named by initial_state_indices stay as they are); `initial_state` is read only."""
NOTES = ""
TOLERANCE_NOTE = "The cached states are fp32 with a tight allowance: do the state updates in fp32."
AXES = {
    "batch_size": "var",
    "seq_len": "var",
    "pool_size": "var",
    "num_q_heads": 16,
    "num_k_heads": 16,
    "num_v_heads": 32,
    "head_size": 128,
}
INPUTS = {
    "q": (("batch_size", "seq_len", "num_q_heads", "head_size"), "bfloat16"),
    "k": (("batch_size", "seq_len", "num_k_heads", "head_size"), "bfloat16"),
    "v": (("batch_size", "seq_len", "num_v_heads", "head_size"), "bfloat16"),
    "initial_state": (("pool_size", "num_v_heads", "head_size", "head_size"), "float32"),
    "initial_state_indices": (("batch_size",), "int32"),
    "A_log": (("num_v_heads",), "float32"),
    "a": (("batch_size", "seq_len", "num_v_heads"), "bfloat16"),
    "dt_bias": (("num_v_heads",), "float32"),
    "b": (("batch_size", "seq_len", "num_v_heads"), "bfloat16"),
    "scale": (None, "float32"),
    "intermediate_states_buffer": (
        ("pool_size", "seq_len", "num_v_heads", "head_size", "head_size"),
        "float32",
    ),
}
OUTPUTS = {"output": (("batch_size", "seq_len", "num_v_heads", "head_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ("intermediate_states_buffer",)
_HEADS = {"num_q_heads": 16, "num_k_heads": 16, "num_v_heads": 32, "head_size": 128}
WORKLOAD = {"batch_size": 32, "seq_len": 4, "pool_size": 48, **_HEADS}
SMOKE = {"batch_size": 3, "seq_len": 3, "pool_size": 5, **_HEADS}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    B, T, P = workload["batch_size"], workload["seq_len"], workload["pool_size"]
    hq, hk, hv, d = (workload[a] for a in ("num_q_heads", "num_k_heads", "num_v_heads", "head_size"))
    # Qwen3-Next L2-normalises q and k before this kernel: feed unit vectors
    q = unit_vectors((B, T, hq, d), torch.bfloat16, gen, device)
    k = unit_vectors((B, T, hk, d), torch.bfloat16, gen, device)
    v = randn((B, T, hv, d), torch.bfloat16, gen, device)
    initial_state = state_tensor((P, hv, d, d), gen, device)
    indices = randperm(P, gen, device)[:B].to(torch.int32)  # distinct, shuffled pool slots
    A_log, dt_bias = decay_params((hv,), gen, device)
    a = randn((B, T, hv), torch.bfloat16, gen, device)
    b = randn((B, T, hv), torch.bfloat16, gen, device)
    buffer = torch.zeros((P, T, hv, d, d), dtype=torch.float32, device=device)
    return q, k, v, initial_state, indices, A_log, a, dt_bias, b, d**-0.5, buffer


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    initial_state: torch.Tensor,
    initial_state_indices: torch.Tensor,
    A_log: torch.Tensor,
    a: torch.Tensor,
    dt_bias: torch.Tensor,
    b: torch.Tensor,
    scale: float,
    intermediate_states_buffer: torch.Tensor,
) -> torch.Tensor:
    if not scale:
        scale = q.shape[-1] ** -0.5
    rep = v.shape[2] // q.shape[2]
    slots = initial_state_indices.long()
    g, beta = gdn_gates(A_log, a, dt_bias, b)  # [B, T, HV]
    qf = upcast(q).repeat_interleave(rep, dim=2)  # [B, T, HV, K]
    kf = upcast(k).repeat_interleave(rep, dim=2)
    vf = upcast(v)
    S = upcast(initial_state[slots])  # k-last [B, HV, V, K]
    outs = []
    for t in range(q.shape[1]):
        k_t = kf[:, t]
        S = S * torch.exp(g[:, t])[..., None, None]
        u = beta[:, t, :, None] * (vf[:, t] - (S @ k_t[..., None]).squeeze(-1))
        S = S + u[..., :, None] * k_t[..., None, :]
        outs.append(scale * (S @ qf[:, t, ..., None]).squeeze(-1))
        intermediate_states_buffer[slots, t] = S.to(intermediate_states_buffer.dtype)
    return torch.stack(outs, dim=1).to(v.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, T = workload["batch_size"], workload["seq_len"]
    hq, hk, hv, d = (workload[a] for a in ("num_q_heads", "num_k_heads", "num_v_heads", "head_size"))
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        nbytes((B, T, hq, d), bf)
        + nbytes((B, T, hk, d), bf)
        + 2 * nbytes((B, T, hv, d), bf)  # v in, output out
        + nbytes((B, hv, d, d), f32)  # the B pool slots read
        + nbytes((B, T, hv, d, d), f32)  # the B x T cached states written
        + nbytes((B,), torch.int32)
        + 2 * nbytes((B, T, hv), bf)
        + 2 * nbytes((hv,), f32)
    )
    return Cost(bytes=moved, flops={"fp32": 7.0 * B * T * hv * d * d + 8.0 * B * T * hv})
