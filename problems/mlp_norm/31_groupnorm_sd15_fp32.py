"""GroupNorm (32 groups) over NCHW feature maps of the Stable Diffusion 1.5 UNet, fp32."""

# Source: SOL-ExecBench problem `groupnorm_sd15` (dataset not redistributable); the operator is
#   written here from the public model code.
# Upstream: diffusers `ResnetBlock2D.norm1` in `UNet2DConditionModel` (SD 1.5 config: norm_num_groups
#   32, norm_eps 1e-5, affine), i.e. torch.nn.GroupNorm(32, C, eps=1e-5).
# Production shape: the 640-channel input of the last up-block resnets (320 + 320 skip channels) at
#   64x64 latents (512x512 images); batch 8 = 4 prompts with classifier-free guidance.

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, rand, randn, upcast
from problems.mlp_norm._util import io_bytes, norm_weight

ID = "p31"
NAME = "groupnorm_sd15_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Group normalisation as in the Stable Diffusion 1.5 UNet (float32). Input `hidden_states`
[batch, 640, height, width] (NCHW, contiguous), affine `weight`, `bias` [640]. The 640 channels form
32 groups of 20 consecutive channels. For every (sample, group): mean and biased variance over its
20·height·width values; y = (x - mean) / sqrt(var + 1e-5); then per channel y·weight[c] + bias[c].
Output `output` [batch, 640, height, width] float32. Channels carry non-zero means and different
spreads, as conv feature maps do."""
NOTES = ""
AXES = {"batch": "var", "channels": 640, "height": "var", "width": "var", "num_groups": 32}
INPUTS = {
    "hidden_states": (("batch", "channels", "height", "width"), "float32"),
    "weight": (("channels",), "float32"),
    "bias": (("channels",), "float32"),
}
OUTPUTS = {"output": (("batch", "channels", "height", "width"), "float32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 8, "channels": 640, "height": 64, "width": 64, "num_groups": 32}
SMOKE = {"batch": 2, "channels": 640, "height": 6, "width": 10, "num_groups": 32}

EPS = 1e-5
NUM_GROUPS = 32


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, c, hh, ww = workload["batch"], workload["channels"], workload["height"], workload["width"]
    fp = torch.float32
    # conv feature maps: per-channel offsets and spreads, so groups are not zero-mean
    offset = randn((1, c, 1, 1), fp, gen, device, scale=1.0)
    spread = rand((1, c, 1, 1), fp, gen, device, low=0.3, high=2.0)
    x = randn((b, c, hh, ww), fp, gen, device) * spread + offset
    weight = norm_weight(c, fp, gen, device)
    bias = randn((c,), fp, gen, device, scale=0.1)
    return x, weight, bias


def reference(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    y = F.group_norm(upcast(hidden_states), NUM_GROUPS, upcast(weight), upcast(bias), EPS)
    return y.to(hidden_states.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, c, hh, ww = workload["batch"], workload["channels"], workload["height"], workload["width"]
    # mean, variance (sub, square, add), normalise (sub, mul), affine (mul, add)
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": 8.0 * b * c * hh * ww})
