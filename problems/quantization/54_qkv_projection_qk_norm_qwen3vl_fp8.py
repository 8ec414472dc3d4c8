"""Fused QKV projection (block-FP8) + per-head q/k RMSNorm of the Qwen3-VL-8B attention block."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: Qwen/Qwen3-VL-8B-Instruct-FP8 — quantization_config {quant_method: fp8, fmt: e4m3,
#   activation_scheme: dynamic, weight_block_size: [128, 128]}; vLLM's Qwen3 attention runs
#   qkv_proj (QKVParallelLinear, W8A8 block FP8), splits q/k/v and applies q_norm / k_norm
#   (RMSNorm over head_dim, eps 1e-6) before M-RoPE (RoPE is not part of this problem).
# Production shape: Qwen3-VL-8B text decoder, hidden 4096, 32 query heads, 8 KV heads, head_dim 128,
#   a prefill chunk of 8192 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.quantization._util import FP8, block_fp8_linear, random_block_weight

ID = "p54"
NAME = "qkv_projection_qk_norm_qwen3vl_fp8"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = """\
QKV projection of Qwen3-VL-8B with its FP8 checkpoint (W8A8, block-wise FP8) fused with the
per-head query/key RMSNorm. Inputs: `hidden_states` [num_tokens, hidden_size] bf16, `qkv_weight`
[(32+8+8)*128 = 6144, hidden_size] float8_e4m3fn (rows 0..4095 = q_proj, 4096..5119 = k_proj,
5120..6143 = v_proj; within each, head h owns rows 128h..128h+127), `qkv_scale`
[48, hidden_size/128] float32 (one dequantisation scale per 128x128 tile:
W[n, k] = float(qkv_weight[n, k]) * qkv_scale[n // 128, k // 128]), `q_norm_weight` [128] bf16,
`k_norm_weight` [128] bf16.
1. Quantise the activation dynamically per token and per group of 128 channels:
   s[t, g] = max(amax|x[t, 128g:128g+128]|, 1e-10) / 448, q8[t, k] = fp8_e4m3(clamp(x[t, k] / s[t, k // 128],
   -448, 448)) (round to nearest even).
2. qkv[t, n] = sum_k float(q8[t, k]) * s[t, k // 128] * W[n, k] in float32 (no bias).
3. Split into q [num_tokens, 32, 128], k [num_tokens, 8, 128], v [num_tokens, 8, 128]; for every
   token and head of q: q = q / sqrt(mean(q^2) + 1e-6) * q_norm_weight (same for k with
   k_norm_weight), in float32 directly on the GEMM result (not rounded to bf16 in between); v as is.
Outputs `q` [num_tokens, 32, 128], `k` [num_tokens, 8, 128], `v` [num_tokens, 8, 128], all bf16.
Production constants: hidden_size 4096, 32 query heads, 8 KV heads, head_dim 128."""
NOTES = """\
Scales are the Qwen3 / DeepSeek-V3 FP8 layout: 128x128 weight tiles and 1x128 activation groups,
float32. Every 128-row weight tile is exactly one head, so a CTA owning whole heads can finish the
RMSNorm in its epilogue. Hopper has FP8 tensor cores (rescale partial sums per 128-wide K group)."""
AXES = {
    "num_tokens": "var",
    "hidden_size": "var",
    "hidden_blocks": "var",  # hidden_size / 128
    "num_q_heads": 32,
    "num_kv_heads": 8,
    "head_dim": 128,
    "qkv_size": 6144,  # (num_q_heads + 2 * num_kv_heads) * head_dim
    "qkv_blocks": 48,  # qkv_size / 128
}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "qkv_weight": (("qkv_size", "hidden_size"), "float8_e4m3fn"),
    "qkv_scale": (("qkv_blocks", "hidden_blocks"), "float32"),
    "q_norm_weight": (("head_dim",), "bfloat16"),
    "k_norm_weight": (("head_dim",), "bfloat16"),
}
OUTPUTS = {
    "q": (("num_tokens", "num_q_heads", "head_dim"), "bfloat16"),
    "k": (("num_tokens", "num_kv_heads", "head_dim"), "bfloat16"),
    "v": (("num_tokens", "num_kv_heads", "head_dim"), "bfloat16"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 8192, "hidden_size": 4096, "hidden_blocks": 32, "num_q_heads": 32,
    "num_kv_heads": 8, "head_dim": 128, "qkv_size": 6144, "qkv_blocks": 48,
}  # fmt: skip
SMOKE = {
    "num_tokens": 5, "hidden_size": 256, "hidden_blocks": 2, "num_q_heads": 32,
    "num_kv_heads": 8, "head_dim": 128, "qkv_size": 6144, "qkv_blocks": 48,
}  # fmt: skip
TOLERANCE_NOTE = """\
The activation is quantised inside the op from exact bf16 inputs; float32 and the float64 anchor
differ only by rare one-ulp fp8 flips, far below the bf16 allowance of the normalised outputs."""

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, k = workload["num_tokens"], workload["hidden_size"]
    d, n = workload["head_dim"], workload["qkv_size"]
    hidden_states = randn((t, k), torch.bfloat16, gen, device)
    qkv_weight, qkv_scale = random_block_weight((n, k), gen, device, std=k**-0.5)
    q_norm_weight = randn((d,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    k_norm_weight = randn((d,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    return hidden_states, qkv_weight, qkv_scale, q_norm_weight, k_norm_weight


def _rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * upcast(weight).to(x.dtype)


def reference(
    hidden_states: torch.Tensor,
    qkv_weight: torch.Tensor,
    qkv_scale: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t = hidden_states.shape[0]
    d = q_norm_weight.shape[0]
    qkv = block_fp8_linear(hidden_states, qkv_weight, qkv_scale)
    n_kv = (qkv.shape[1] // d - 32) // 2
    q, k, v = qkv.split([32 * d, n_kv * d, n_kv * d], dim=-1)
    q = _rms_norm(q.reshape(t, 32, d), q_norm_weight)
    k = _rms_norm(k.reshape(t, n_kv, d), k_norm_weight)
    out = hidden_states.dtype
    return q.to(out), k.to(out), v.reshape(t, n_kv, d).to(out)


def cost(workload: dict[str, int]) -> Cost:
    t, k = workload["num_tokens"], workload["hidden_size"]
    d, n = workload["head_dim"], workload["qkv_size"]
    n_qk = n - workload["num_kv_heads"] * d
    moved = (
        nbytes((t, k), torch.bfloat16)
        + nbytes((n, k), FP8)
        + nbytes((n // 128, k // 128), torch.float32)
        + 2 * nbytes((d,), torch.bfloat16)
        + nbytes((t, n), torch.bfloat16)
    )
    # fp8 GEMM; activation quantisation, per-group rescale and the q/k RMSNorm (4 FLOPs/element) in fp32
    fp32 = 4.0 * t * k + 2.0 * t * n * (k // 128) + 4.0 * t * n_qk
    return Cost(bytes=moved, flops={"fp8": 2.0 * t * n * k, "fp32": fp32})
