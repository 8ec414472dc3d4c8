"""Gemma 3n E2B AltUp collapse: unembed 3 side streams, rescale to stream 0's magnitude, average, bf16."""

# Source: SOL-ExecBench problem `magnitude_normalized_collapse_gemma3n_e2b_altup` (dataset not
#   redistributable); the operator is written here from the public model code.
# Upstream: transformers `Gemma3nTextModel.forward` after the last decoder layer: target = RMS of
#   stream 0; for i = 1..3: p = altup_unembed_projections[i-1](stream i) (Linear(2048, 2048), no bias);
#   p = p · target / sqrt(max(mean(p^2), 1e-5)); output = mean over the 4 streams. The final RMSNorm
#   that follows is outside this operator.
# Production shape: Gemma 3n E2B (hidden 2048, altup_num_inputs 4), a prefill of 8192 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import io_bytes, linear_weight

ID = "p40"
NAME = "magnitude_normalized_collapse_gemma3n_e2b_altup_bf16"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
AltUp stream collapse at the end of the Gemma 3n E2B text model, bf16. Inputs: `hidden_states`
[4, num_tokens, 2048] (the 4 AltUp streams; stream 0 is the active one) and `unembed_weight`
[3, 2048, 2048] (the 3 altup_unembed_projections, nn.Linear layout [out, in], no bias); both bf16.
1. target[t] = sqrt(mean over the 2048 features of stream0[t]^2) in float32.
2. For i = 1, 2, 3: p_i = stream_i @ unembed_weight[i-1]^T (bf16 GEMM, float32 accumulation, rounded to
   bf16); then in float32: p_i = p_i · target / sqrt(max(mean(p_i^2), 1e-5)) per token.
3. output = (stream0 + p_1 + p_2 + p_3) / 4 in float32, rounded to bf16 [num_tokens, 2048]."""
NOTES = ""
AXES = {"num_streams": 4, "num_tokens": "var", "hidden_size": 2048, "num_side_streams": 3}
INPUTS = {
    "hidden_states": (("num_streams", "num_tokens", "hidden_size"), "bfloat16"),
    "unembed_weight": (("num_side_streams", "hidden_size", "hidden_size"), "bfloat16"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_streams": 4, "num_tokens": 8192, "hidden_size": 2048, "num_side_streams": 3}
SMOKE = {"num_streams": 4, "num_tokens": 10, "hidden_size": 2048, "num_side_streams": 3}

MAG_EPS = 1e-5


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    s, n = workload["num_streams"], workload["num_tokens"]
    d, k = workload["hidden_size"], workload["num_side_streams"]
    bf = torch.bfloat16
    # streams of a deep residual network: per-token magnitudes vary by an order of magnitude
    mag = torch.exp(randn((s, n, 1), torch.float32, gen, device, scale=0.7))
    hidden = (randn((s, n, d), torch.float32, gen, device) * mag).to(bf)
    weight = torch.stack([linear_weight(d, d, bf, gen, device) for _ in range(k)])
    return hidden, weight


def reference(hidden_states: torch.Tensor, unembed_weight: torch.Tensor) -> torch.Tensor:
    dt = hidden_states.dtype
    h0 = upcast(hidden_states[0])
    target = h0.pow(2).mean(dim=-1, keepdim=True).sqrt()
    p = upcast(torch.bmm(hidden_states[1:], unembed_weight.transpose(1, 2)))  # bf16 GEMMs
    p = p * target / p.pow(2).mean(dim=-1, keepdim=True).clamp_min(MAG_EPS).sqrt()
    return ((h0 + p.sum(dim=0)) / hidden_states.shape[0]).to(dt)


def cost(workload: dict[str, int]) -> Cost:
    s, n = workload["num_streams"], workload["num_tokens"]
    d, k = workload["hidden_size"], workload["num_side_streams"]
    gemm = 2.0 * k * n * d * d
    # magnitudes (2/element), rescale (2/element), mean over streams (1/element)
    elementwise = 2.0 * s * n * d + 2.0 * k * n * d + s * n * d
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"bf16": gemm, "fp32": elementwise})
