"""Vision patch merger of Qwen3-Omni: per-patch LayerNorm, 2x2 merge, GELU MLP to the LLM width, bf16."""

# Source: SOL-ExecBench problem `patch_merger_mlp_qwen3_omni` (dataset not redistributable); the
#   operator is written here from the public model code.
# Upstream: transformers `Qwen3OmniMoeVisionPatchMerger` (the main merger, use_postshuffle_norm=False):
#   ln_q = LayerNorm(1152, eps=1e-6) on each patch, view 4 consecutive patches as one 4608-vector,
#   mlp = Linear(4608, 4608) -> nn.GELU() (exact erf form) -> Linear(4608, 2048), all with bias.
# Production shape: Qwen3-Omni-30B-A3B vision encoder (hidden 1152, spatial_merge_size 2,
#   out_hidden_size 2048); eight 768x768 images = 8 x 48 x 48 patches = 4608 merged tokens.

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import bias, io_bytes, linear_weight, norm_weight

ID = "p27"
NAME = "patch_merger_mlp_qwen3_omni_bf16"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Patch merger of the Qwen3-Omni vision encoder (bf16). Input `hidden_states` [num_tokens, 4, 1152]:
the vision transformer's output patches, where the 4 patches of each 2x2 spatial window are already
consecutive (a contiguous [4*num_tokens, 1152] tensor viewed in groups of 4). Steps:
1. LayerNorm over the 1152 features of every patch (eps 1e-6, affine `ln_weight`, `ln_bias` [1152]),
   computed in float32 and rounded to bf16.
2. Concatenate the 4 normalised patches of each window into one 4608-vector (patch 0 first).
3. h = x @ fc1_weight^T + fc1_bias with `fc1_weight` [4608, 4608] (nn.Linear layout [out, in]),
   bf16 inputs with float32 accumulation, rounded to bf16.
4. Exact GELU (0.5·h·(1 + erf(h/sqrt(2)))) in float32, rounded to bf16.
5. out = g @ fc2_weight^T + fc2_bias with `fc2_weight` [2048, 4608], float32 accumulation.
Output `output` [num_tokens, 2048] bf16 (the visual tokens fed to the language model)."""
NOTES = ""
AXES = {
    "num_tokens": "var", "merge_window": 4, "vision_hidden": 1152, "merged_hidden": 4608, "out_hidden": 2048,
}  # fmt: skip
INPUTS = {
    "hidden_states": (("num_tokens", "merge_window", "vision_hidden"), "bfloat16"),
    "ln_weight": (("vision_hidden",), "bfloat16"),
    "ln_bias": (("vision_hidden",), "bfloat16"),
    "fc1_weight": (("merged_hidden", "merged_hidden"), "bfloat16"),
    "fc1_bias": (("merged_hidden",), "bfloat16"),
    "fc2_weight": (("out_hidden", "merged_hidden"), "bfloat16"),
    "fc2_bias": (("out_hidden",), "bfloat16"),
}
OUTPUTS = {"output": (("num_tokens", "out_hidden"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 4608, "merge_window": 4, "vision_hidden": 1152, "merged_hidden": 4608, "out_hidden": 2048,
}  # fmt: skip
SMOKE = {"num_tokens": 6, "merge_window": 4, "vision_hidden": 1152, "merged_hidden": 4608, "out_hidden": 2048}

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, win, d = workload["num_tokens"], workload["merge_window"], workload["vision_hidden"]
    merged, out = workload["merged_hidden"], workload["out_hidden"]
    bf = torch.bfloat16
    # ViT residual-stream activations: non-zero mean per patch so the LayerNorm centring matters
    hidden = randn((n, win, d), bf, gen, device, scale=1.5, shift=0.3)
    return (
        hidden,
        norm_weight(d, bf, gen, device),
        randn((d,), bf, gen, device, scale=0.05),
        linear_weight(merged, merged, bf, gen, device),
        bias(merged, bf, gen, device),
        linear_weight(out, merged, bf, gen, device),
        bias(out, bf, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    ln_weight: torch.Tensor,
    ln_bias: torch.Tensor,
    fc1_weight: torch.Tensor,
    fc1_bias: torch.Tensor,
    fc2_weight: torch.Tensor,
    fc2_bias: torch.Tensor,
) -> torch.Tensor:
    dt = hidden_states.dtype
    n, _, d = hidden_states.shape
    x = F.layer_norm(upcast(hidden_states), (d,), upcast(ln_weight), upcast(ln_bias), EPS).to(dt)
    x = x.reshape(n, -1)  # 2x2 window -> one 4608-vector
    h = F.linear(x, fc1_weight, fc1_bias)  # bf16 tensor-core GEMM, fp32 accumulate
    g = F.gelu(upcast(h)).to(dt)
    return F.linear(g, fc2_weight, fc2_bias)


def cost(workload: dict[str, int]) -> Cost:
    n, win, d = workload["num_tokens"], workload["merge_window"], workload["vision_hidden"]
    merged, out = workload["merged_hidden"], workload["out_hidden"]
    gemm = 2.0 * n * merged * merged + 2.0 * n * merged * out
    # LayerNorm ~8 FLOPs/element, GELU ~10/element, two bias adds
    elementwise = 8.0 * n * win * d + 10.0 * n * merged + n * (merged + out)
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"bf16": gemm, "fp32": elementwise})
