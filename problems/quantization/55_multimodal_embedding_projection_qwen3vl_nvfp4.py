"""Qwen3-VL vision-to-language patch-merger projection (LayerNorm, 2x2 merge, NVFP4 MLP with GELU)."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: Qwen3-VL's Qwen3VLVisionPatchMerger (transformers / vLLM): LayerNorm(eps 1e-6) over each
#   patch's 1152 features, 2x2 spatial merge (spatial_merge_size 2: 4 consecutive patches -> one token of
#   4608), linear_fc1 4608->4608 + bias, exact GELU, linear_fc2 4608->out_hidden_size + bias.
#   The two linears are taken as NVFP4 W4A4 (ModelOpt-style: packed e2m1 weights, fp8 block scales per
#   16, fp32 global scales, activations quantised to NVFP4 with static calibrated global scales).
# Production shape: Qwen3-VL-8B (vision hidden 1152, out_hidden_size 4096), 16384 patches = 4096
#   merged visual tokens (a few high-resolution images).

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.quantization import _nvfp4
from problems.quantization._util import nvfp4_linear

ID = "p55"
NAME = "multimodal_embedding_projection_qwen3vl_nvfp4"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = f"""\
Projection of Qwen3-VL vision-encoder patch features into the language model's embedding space (the
patch merger), with both linear layers in NVFP4 (W4A4).
{_nvfp4.FORMAT_TEXT}
{_nvfp4.ACT_QUANT_TEXT}
Inputs: `vision_hidden` [num_patches, vision_hidden] bf16 (num_patches divisible by 4; each run of 4
consecutive patches is one 2x2 merge group), `norm_weight`, `norm_bias` [vision_hidden] bf16,
`fc1_input_scale` float32 scalar (static global scale of fc1's activation), fc1 NVFP4 weight
[merged_hidden, merged_hidden] (`fc1_weight`, `fc1_weight_scale`, `fc1_weight_global`), `fc1_bias`
[merged_hidden] bf16, `fc2_input_scale` float32 scalar, fc2 NVFP4 weight [out_hidden, merged_hidden]
(`fc2_weight`, `fc2_weight_scale`, `fc2_weight_global`), `fc2_bias` [out_hidden] bf16.
Computation in float32 throughout (the fused semantics: intermediates are never rounded to bf16):
1. h = LayerNorm(vision_hidden) over the last dim, eps 1e-6, affine with norm_weight / norm_bias;
2. reshape h to [num_patches/4, merged_hidden = 4 * vision_hidden] (row-major: patch 4m+j fills
   columns j*vision_hidden .. (j+1)*vision_hidden-1 of merged token m);
3. a = dequant(nvfp4(h, fc1_input_scale)) @ W1^T + fc1_bias; a = GELU(a) (exact, erf form);
4. out = dequant(nvfp4(a, fc2_input_scale)) @ W2^T + fc2_bias.
Output `merged_embeddings` [num_patches/4, out_hidden] bf16. Production constants: vision_hidden 1152,
merged_hidden 4608, out_hidden 4096."""
NOTES = (
    _nvfp4.HOPPER_NOTE
    + """
Keep every intermediate in float32. Measured on an H200 at WORKLOAD: independent float32
implementations (other reduction orders, reciprocal-multiply quantiser) stay within 0.4 of the
allowance, while rounding the LayerNorm, fc1 and GELU outputs to bf16, as unfused production kernels
do, moves enough elements across e2m1 rounding boundaries before the NVFP4 re-quantisations to reach
it (0.9-1.1x of the allowance)."""
)
AXES = {
    "num_patches": "var",
    "merged_tokens": "var",  # num_patches / 4
    "vision_hidden": "var",
    "merged_hidden": "var",  # 4 * vision_hidden
    "merged_half": "var",  # merged_hidden / 2 (packed bytes per row)
    "merged_blocks": "var",  # merged_hidden / 16
    "out_hidden": "var",
}
INPUTS = {
    "vision_hidden": (("num_patches", "vision_hidden"), "bfloat16"),
    "norm_weight": (("vision_hidden",), "bfloat16"),
    "norm_bias": (("vision_hidden",), "bfloat16"),
    "fc1_input_scale": ((), "float32"),
    "fc1_weight": (("merged_hidden", "merged_half"), "uint8"),
    "fc1_weight_scale": (("merged_hidden", "merged_blocks"), "float8_e4m3fn"),
    "fc1_weight_global": ((), "float32"),
    "fc1_bias": (("merged_hidden",), "bfloat16"),
    "fc2_input_scale": ((), "float32"),
    "fc2_weight": (("out_hidden", "merged_half"), "uint8"),
    "fc2_weight_scale": (("out_hidden", "merged_blocks"), "float8_e4m3fn"),
    "fc2_weight_global": ((), "float32"),
    "fc2_bias": (("out_hidden",), "bfloat16"),
}
OUTPUTS = {"merged_embeddings": (("merged_tokens", "out_hidden"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_patches": 16384, "merged_tokens": 4096, "vision_hidden": 1152, "merged_hidden": 4608,
    "merged_half": 2304, "merged_blocks": 288, "out_hidden": 4096,
}  # fmt: skip
SMOKE = {
    "num_patches": 12, "merged_tokens": 3, "vision_hidden": 32, "merged_hidden": 128,
    "merged_half": 64, "merged_blocks": 8, "out_hidden": 48,
}  # fmt: skip
TOLERANCE_NOTE = """\
Activations are re-quantised to NVFP4 twice inside the op, both times from internal float32 values
(LayerNorm output, GELU output). The float32 run, the float64 anchor and a correct kernel compute those
values with different rounding, so an element within ~1e-6 (relative) of an e2m1 midpoint can flip by
one step (~20 elements per call at WORKLOAD), and a flip before fc1 nudges a whole row of fc1 outputs,
which flips further codes before fc2. Measured on an H200: the float32 reference sits 3.4-3.9 bf16
eps x max|anchor| from the anchor (so the allowance is ~10x eps x max), independent float32 kernels
stay within 0.4 of the allowance, and skipping the activation quantisation (W4A16) exceeds it 1.5x."""

EPS = 1e-6
MERGE = 4  # spatial_merge_size ** 2
ACT_AMAX = 8.0  # calibrated activation amax behind the static input scales


def _dims(w: dict[str, int]) -> tuple[int, int, int, int]:
    return w["num_patches"], w["vision_hidden"], w["merged_hidden"], w["out_hidden"]


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    p, c, m, o = _dims(workload)
    vision_hidden = randn((p, c), torch.bfloat16, gen, device, scale=3.0)
    norm_weight = randn((c,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    norm_bias = randn((c,), torch.bfloat16, gen, device, scale=0.05)
    act_scale = torch.tensor(_nvfp4.static_global_scale(ACT_AMAX), dtype=torch.float32, device=device)
    fc1 = _nvfp4.random_weight((m, m), gen, device, std=m**-0.5)
    fc1_bias = randn((m,), torch.bfloat16, gen, device, scale=0.1)
    fc2 = _nvfp4.random_weight((o, m), gen, device, std=m**-0.5)
    fc2_bias = randn((o,), torch.bfloat16, gen, device, scale=0.1)
    return (
        vision_hidden, norm_weight, norm_bias,
        act_scale, *fc1, fc1_bias,
        act_scale.clone(), *fc2, fc2_bias,
    )  # fmt: skip


def reference(
    vision_hidden: torch.Tensor,
    norm_weight: torch.Tensor,
    norm_bias: torch.Tensor,
    fc1_input_scale: torch.Tensor,
    fc1_weight: torch.Tensor,
    fc1_weight_scale: torch.Tensor,
    fc1_weight_global: torch.Tensor,
    fc1_bias: torch.Tensor,
    fc2_input_scale: torch.Tensor,
    fc2_weight: torch.Tensor,
    fc2_weight_scale: torch.Tensor,
    fc2_weight_global: torch.Tensor,
    fc2_bias: torch.Tensor,
) -> torch.Tensor:
    x = upcast(vision_hidden)
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    h = (x - mean) * torch.rsqrt(var + EPS) * upcast(norm_weight) + upcast(norm_bias)
    h = h.reshape(-1, MERGE * x.shape[-1])
    a = nvfp4_linear(h, fc1_input_scale, fc1_weight, fc1_weight_scale, fc1_weight_global) + upcast(fc1_bias)
    a = torch.nn.functional.gelu(a)
    out = nvfp4_linear(a, fc2_input_scale, fc2_weight, fc2_weight_scale, fc2_weight_global) + upcast(fc2_bias)
    return out.to(vision_hidden.dtype)


def cost(workload: dict[str, int]) -> Cost:
    p, c, m, o = _dims(workload)
    t = p // MERGE
    bf16 = torch.bfloat16
    moved = (
        nbytes((p, c), bf16)
        + 2 * nbytes((c,), bf16)
        + _nvfp4.weight_bytes(m, m)
        + _nvfp4.weight_bytes(o, m)
        + nbytes((m + o,), bf16)
        + 2 * 4
        + nbytes((t, o), bf16)
    )
    # fp4 GEMMs; LayerNorm (~8/elt), two NVFP4 activation quantisations (~5/elt), GELU (~8/elt), biases
    fp32 = 8.0 * p * c + 5.0 * t * m * 2 + 8.0 * t * m + t * (m + o)
    return Cost(bytes=moved, flops={"fp4": 2.0 * t * m * (m + o), "fp32": fp32})
