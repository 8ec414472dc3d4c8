"""FP8 helpers shared by the quantization problems (torch only: runs on the bare GPU machine).

FP8 here is ``float8_e4m3fn`` (max 448, round-to-nearest-even, no inf) with the two scale layouts
DeepSeek-V3 / Qwen3 FP8 checkpoints use (``quantization_config``: ``quant_method: fp8``,
``fmt: e4m3``, ``activation_scheme: dynamic``, ``weight_block_size: [128, 128]``):

* weights: one float32 dequantisation scale per 128x128 tile, ``scale[N/128, K/128]`` (ceil for a
  partial last tile), ``w = float(w_fp8) * scale[n // 128, k // 128]``;
* activations: quantised inside the op per token and per group of 128 consecutive channels,
  ``s = max(amax(group), 1e-10) / 448``, ``q = fp8(clamp(x / s, -448, 448))`` (vLLM's
  ``per_token_group_quant_fp8``).

DeepSeek-V3.1 checkpoints add ``scale_fmt: ue8m0``: every scale (weight tile and activation group) is
rounded UP to a power of two, ``s = 2^ceil(log2(amax / 448))``; ``ue8m0=True`` selects that.
"""

from __future__ import annotations

import math

import torch

from problems._common import randn, upcast
from problems.quantization import _nvfp4

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
GROUP = 128
GROUP_EPS = 1e-10


def math_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any float input is float64 (the verifier's anchor run), else float32."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def ceil_pow2(v: torch.Tensor) -> torch.Tensor:
    """2^ceil(log2(v)) for v > 0, computed exactly (frexp: v = m * 2^e, m in [0.5, 1))."""
    m, e = torch.frexp(v)
    return torch.ldexp(torch.ones_like(v), torch.where(m == 0.5, e - 1, e))


def per_token_group_quant(
    x: torch.Tensor, group: int = GROUP, *, ue8m0: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic fp8 quantisation of x [..., K] per ``group`` channels -> (q fp8, scale [..., K/group])."""
    xf = upcast(x)
    k = xf.shape[-1]
    g = xf.reshape(*xf.shape[:-1], k // group, group)
    scale = g.abs().amax(dim=-1).clamp_min(GROUP_EPS) / FP8_MAX
    if ue8m0:
        scale = ceil_pow2(scale)
    q = (g / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q.reshape(xf.shape), scale


def dequant_groups(
    q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, group: int = GROUP
) -> torch.Tensor:
    """Inverse of ``per_token_group_quant`` (values exactly float(q) * scale in ``dtype``)."""
    k = q.shape[-1]
    v = q.to(dtype).reshape(*q.shape[:-1], k // group, group) * scale.to(dtype).unsqueeze(-1)
    return v.reshape(q.shape)


def dequant_block_weight(
    w: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, block: int = GROUP
) -> torch.Tensor:
    """Dequantise an fp8 weight [N, K] with 128x128 tile scales [ceil(N/128), ceil(K/128)]."""
    n, k = w.shape
    s = scale.to(dtype).repeat_interleave(block, dim=0)[:n].repeat_interleave(block, dim=1)[:, :k]
    return w.to(dtype) * s


def quantize_block_weight(
    w: torch.Tensor, block: int = GROUP, *, ue8m0: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Checkpoint-style 128x128 block quantisation of a float32 weight [N, K] -> (fp8 [N, K], scale f32)."""
    n, k = w.shape
    nb, kb = math.ceil(n / block), math.ceil(k / block)
    padded = torch.zeros(nb * block, kb * block, dtype=torch.float32, device=w.device)
    padded[:n, :k] = w
    tiles = padded.reshape(nb, block, kb, block)
    scale = tiles.abs().amax(dim=(1, 3)).clamp_min(1e-12) / FP8_MAX
    if ue8m0:
        scale = ceil_pow2(scale)
    q = (tiles / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q.reshape(nb * block, kb * block)[:n, :k].contiguous(), scale


def random_block_weight(
    shape: tuple[int, int],
    gen: torch.Generator,
    device: str | torch.device,
    *,
    std: float,
    ue8m0: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A Gaussian weight [N, K] stored as an FP8 checkpoint would: (fp8 weight, 128x128 scales)."""
    return quantize_block_weight(randn(shape, torch.float32, gen, device, scale=std), ue8m0=ue8m0)


def block_fp8_linear(
    x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, group: int = GROUP, *, ue8m0: bool = False
) -> torch.Tensor:
    """W8A8 block-FP8 linear y = x @ W^T with dynamic per-token-group activation quantisation.

    Returns the product in float32 (float64 for the anchor); products of fp8 values are exact in
    float32, so dequantise-then-matmul equals the per-block scaled accumulation up to summation order.
    """
    dt = math_dtype(x, w_scale)
    q, s = per_token_group_quant(x, group, ue8m0=ue8m0)
    a = dequant_groups(q, s, dt, group)
    return a @ dequant_block_weight(w, w_scale, dt, group).t()


def nvfp4_linear(
    x: torch.Tensor,
    x_global: torch.Tensor,
    w_packed: torch.Tensor,
    w_scales: torch.Tensor,
    w_global: torch.Tensor,
) -> torch.Tensor:
    """W4A4 NVFP4 linear y = x @ W^T: x is NVFP4-quantised with its static global scale, both operands
    are dequantised (exact in float32) and multiplied; float32 result (float64 for the anchor)."""
    dt = math_dtype(x, x_global, w_global)
    xp, xs = _nvfp4.quantize(x, x_global)
    a = _nvfp4.dequantize(xp, xs, x_global, dt)
    return a @ _nvfp4.dequantize(w_packed, w_scales, w_global, dt).t()
