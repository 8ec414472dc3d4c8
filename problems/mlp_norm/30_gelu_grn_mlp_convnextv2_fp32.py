"""ConvNeXt V2 block MLP: pointwise Linear -> GELU -> Global Response Normalization -> Linear, fp32."""

# Source: SOL-ExecBench problem `gelu_grn_mlp_convnextv2` (dataset not redistributable); the operator
#   is written here from the public model code.
# Upstream: ConvNeXt V2 `Block` (facebookresearch/ConvNeXt-V2; transformers `ConvNextV2Layer`): after
#   the depthwise conv and LayerNorm, in channels-last layout: pwconv1 = Linear(C, 4C) -> GELU (exact)
#   -> GRN(4C) -> pwconv2 = Linear(4C, C). GRN: G = ||x||_2 over the spatial dims (H, W) per image and
#   channel, N = G / (mean_channels(G) + 1e-6), y = gamma·(x·N) + beta + x. The block's residual add
#   and drop-path are outside this operator.
# Production shape: ConvNeXt V2-Base (dims 128/256/512/1024) stage 3 at 224x224: 14x14 maps of
#   C = 512 (27 of its 36 blocks), batch 64.

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, randn
from problems.mlp_norm._util import bias, io_bytes, linear_weight

ID = "p30"
NAME = "gelu_grn_mlp_convnextv2_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
ConvNeXt V2 inverted-bottleneck MLP with Global Response Normalization (float32). Input
`hidden_states` [batch, height, width, 512] (channels-last, already LayerNorm'ed). Weights use the
nn.Linear layout [out, in]: `pwconv1_weight` [2048, 512], `pwconv1_bias` [2048], `pwconv2_weight`
[512, 2048], `pwconv2_bias` [512]; GRN parameters `grn_gamma`, `grn_beta` [2048].
1. h = hidden_states @ pwconv1_weight^T + pwconv1_bias; h = GELU(h) (exact erf form).
2. GRN: G[b, c] = sqrt(sum over all (y, x) of h[b, y, x, c]^2) (L2 norm over the spatial positions of
   each image and channel); N[b, c] = G[b, c] / (mean over the 2048 channels of G[b, :] + 1e-6);
   h = grn_gamma·(h·N[b, c]) + grn_beta + h.
3. output = h @ pwconv2_weight^T + pwconv2_bias, float32 [batch, height, width, 512].
GRN couples every spatial position of an image: the norms need the whole 14x14 map before step 3."""
NOTES = """\
Float32 semantics: the GEMMs must keep float32 accuracy (TF32/bf16 tensor-core inputs fall outside
the allowance)."""
AXES = {"batch": "var", "height": "var", "width": "var", "channels": 512, "mlp_channels": 2048}
INPUTS = {
    "hidden_states": (("batch", "height", "width", "channels"), "float32"),
    "pwconv1_weight": (("mlp_channels", "channels"), "float32"),
    "pwconv1_bias": (("mlp_channels",), "float32"),
    "grn_gamma": (("mlp_channels",), "float32"),
    "grn_beta": (("mlp_channels",), "float32"),
    "pwconv2_weight": (("channels", "mlp_channels"), "float32"),
    "pwconv2_bias": (("channels",), "float32"),
}
OUTPUTS = {"output": (("batch", "height", "width", "channels"), "float32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 64, "height": 14, "width": 14, "channels": 512, "mlp_channels": 2048}
SMOKE = {"batch": 2, "height": 5, "width": 3, "channels": 512, "mlp_channels": 2048}

GRN_EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, hh, ww = workload["batch"], workload["height"], workload["width"]
    c, m = workload["channels"], workload["mlp_channels"]
    fp = torch.float32
    return (
        randn((b, hh, ww, c), fp, gen, device),
        linear_weight(m, c, fp, gen, device),
        bias(m, fp, gen, device, scale=0.1),
        # trained GRN affine parameters are small, centred on zero (initialised to zero)
        randn((m,), fp, gen, device, scale=0.3),
        randn((m,), fp, gen, device, scale=0.1),
        linear_weight(c, m, fp, gen, device),
        bias(c, fp, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    pwconv1_weight: torch.Tensor,
    pwconv1_bias: torch.Tensor,
    grn_gamma: torch.Tensor,
    grn_beta: torch.Tensor,
    pwconv2_weight: torch.Tensor,
    pwconv2_bias: torch.Tensor,
) -> torch.Tensor:
    h = F.gelu(F.linear(hidden_states, pwconv1_weight, pwconv1_bias))
    g = torch.linalg.vector_norm(h, ord=2, dim=(1, 2), keepdim=True)  # [B, 1, 1, 4C]
    n = g / (g.mean(dim=-1, keepdim=True) + GRN_EPS)
    h = grn_gamma * (h * n) + grn_beta + h
    return F.linear(h, pwconv2_weight, pwconv2_bias)


def cost(workload: dict[str, int]) -> Cost:
    b, hh, ww = workload["batch"], workload["height"], workload["width"]
    c, m = workload["channels"], workload["mlp_channels"]
    tokens = b * hh * ww
    gemm = 2.0 * 2.0 * tokens * c * m
    # GELU ~10, GRN square-sum 2 + affine 4 per element, bias adds
    elementwise = 16.0 * tokens * m + tokens * (m + c) + 4.0 * b * m
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": gemm + elementwise})
