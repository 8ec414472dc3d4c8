"""SwiGLU feed-forward at the dimensions of the Parakeet FastConformer encoder (d 1024, ff 4096), fp32."""

# Source: SOL-ExecBench problem `swiglu_mlp_parakeet` (dataset not redistributable); the operator is
#   written here from the semantics its name implies.
# Upstream: NVIDIA Parakeet-TDT-0.6B-v2 FastConformer encoder (NeMo `ConformerFeedForward`;
#   transformers `ParakeetEncoderFeedForward`): d_model 1024, d_ff = 4 x 1024 = 4096, linears with
#   bias. Assumption: the catalogue names the block SwiGLU, so the gated form is used here:
#   down(silu(gate(x)) * up(x)), with gate, up [4096, 1024] and down [1024, 4096], all with bias.
#   (The released Parakeet FFN is linear1 -> SiLU -> linear2 without a gate; the macaron 0.5 residual
#   scale and the block's pre-LayerNorm are outside this operator.)
# Production shape: a batch of 16 utterances of 20.5 s; 8x subsampling (80 ms frames) = 256 frames
#   each, 4096 encoder frames in all.

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, randn
from problems.mlp_norm._util import bias, io_bytes, linear_weight

ID = "p32"
NAME = "swiglu_mlp_parakeet_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
SwiGLU MLP of a Parakeet FastConformer feed-forward module (float32 throughout). Input
`hidden_states` [num_tokens, 1024] (encoder frames, already layer-normalised). Weights use the
nn.Linear layout [out, in]: `gate_weight`, `up_weight` [4096, 1024] with biases `gate_bias`,
`up_bias` [4096]; `down_weight` [1024, 4096] with `down_bias` [1024].
g = x @ gate_weight^T + gate_bias; u = x @ up_weight^T + up_bias;
a = silu(g)·u where silu(g) = g / (1 + exp(-g));
output = a @ down_weight^T + down_bias, float32 [num_tokens, 1024]."""
NOTES = """\
Float32 semantics: the GEMMs must keep float32 accuracy (TF32/bf16 tensor-core inputs fall outside
the allowance). The gated (SwiGLU) form follows the catalogue name; see the provenance comments."""
AXES = {"num_tokens": "var", "hidden_size": 1024, "ffn_size": 4096}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "float32"),
    "gate_weight": (("ffn_size", "hidden_size"), "float32"),
    "gate_bias": (("ffn_size",), "float32"),
    "up_weight": (("ffn_size", "hidden_size"), "float32"),
    "up_bias": (("ffn_size",), "float32"),
    "down_weight": (("hidden_size", "ffn_size"), "float32"),
    "down_bias": (("hidden_size",), "float32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "float32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 4096, "hidden_size": 1024, "ffn_size": 4096}
SMOKE = {"num_tokens": 12, "hidden_size": 1024, "ffn_size": 4096}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["ffn_size"]
    fp = torch.float32
    return (
        randn((n, d), fp, gen, device),
        linear_weight(f, d, fp, gen, device),
        bias(f, fp, gen, device),
        linear_weight(f, d, fp, gen, device),
        bias(f, fp, gen, device),
        linear_weight(d, f, fp, gen, device),
        bias(d, fp, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    gate_weight: torch.Tensor,
    gate_bias: torch.Tensor,
    up_weight: torch.Tensor,
    up_bias: torch.Tensor,
    down_weight: torch.Tensor,
    down_bias: torch.Tensor,
) -> torch.Tensor:
    g = F.linear(hidden_states, gate_weight, gate_bias)
    u = F.linear(hidden_states, up_weight, up_bias)
    return F.linear(F.silu(g) * u, down_weight, down_bias)


def cost(workload: dict[str, int]) -> Cost:
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["ffn_size"]
    gemm = 3.0 * 2.0 * n * d * f
    # silu ~4 FLOPs + gating multiply per intermediate element, bias adds
    elementwise = 5.0 * n * f + n * (2 * f + d)
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": gemm + elementwise})
