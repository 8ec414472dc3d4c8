"""NVFP4 as the quantization problems use it: a precise, self-contained definition.

Format (NVIDIA NVFP4, as in ModelOpt checkpoints, TensorRT-LLM, vLLM and FlashInfer):

* Elements are FP4 **e2m1** (1 sign, 2 exponent, 1 mantissa bit, no inf/NaN). The 16 codes map to
  ``E2M1_VALUES``: codes 0..7 are +0, 0.5, 1, 1.5, 2, 3, 4, 6 and codes 8..15 the same magnitudes
  negated (code = sign << 3 | magnitude index).
* **Packing**: two codes per ``uint8`` along the last (contiguous, reduction) dimension; element
  ``2i`` goes in the LOW nibble and element ``2i + 1`` in the HIGH nibble of byte ``i``:
  ``byte = code[2i] | code[2i + 1] << 4``. A ``[rows, K]`` tensor is stored as ``[rows, K // 2]``.
* **Block scale**: one ``float8_e4m3fn`` scale per 16 consecutive elements along the last dimension,
  stored row-major as ``[rows, K // 16]`` (the plain linear layout, not the 128x4 swizzled layout
  Blackwell tensor cores read).
* **Global scale**: one ``float32`` per tensor, a *dequantisation multiplier* (ModelOpt's
  ``weight_scale_2`` / ``input_scale``), normally ``amax(tensor) / (6 * 448)``.

Dequantisation: ``x = E2M1_VALUES[code] * float(block_scale) * global_scale``.

Quantisation of a block ``b`` of 16 values with global scale ``g`` (exact arithmetic, then the
stated roundings; the references evaluate it in float32, or float64 for the verifier's anchor):

1. ``s_b = fp8_e4m3(min(amax_b / (6 * g), 448))`` -- round-to-nearest-even to e4m3;
2. ``y_i = clamp(x_i / (float(s_b) * g), -6, 6)`` (``y_i = 0`` when ``s_b == 0``);
3. ``code_i = e2m1_rne(y_i)``: round to the nearest e2m1 value, ties to the value with an even
   mantissa bit (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4); the sign
   bit is set when ``y_i < 0`` (so tiny negatives give code 8, negative zero, which dequantises
   to 0 like code 0).

Static activation global scales (``static_global_scale``) are a calibrated ``amax / 2688`` rounded
to an odd 11-bit mantissa, which makes the codes of bf16 activations independent of how a kernel
evaluates step 2 in float32 (see that function). How a Hopper GPU (no FP4 tensor cores) must emulate
NVFP4 is spelled out in ``HOPPER_NOTE`` at the end of this module.

Only torch is imported: this module runs on the bare GPU machine.
"""

from __future__ import annotations

import math

import torch

from problems._common import nbytes, randn, upcast

BLOCK = 16
FP4_MAX = 6.0
FP8_MAX = 448.0

#: value of each 4-bit code (index = code)
E2M1_VALUES = (
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
    -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
)  # fmt: skip

# midpoints between consecutive magnitudes; at a midpoint RNE picks the even magnitude index
_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def global_scale_for(amax: float | torch.Tensor) -> float | torch.Tensor:
    """The usual global (dequantisation) scale for a tensor whose absolute maximum is ``amax``."""
    return amax / (FP4_MAX * FP8_MAX)


def static_global_scale(amax: float) -> float:
    """A static activation global scale: ``amax / 2688`` rounded to ``G * 2^e``, G odd, 1025 <= G < 2048.

    Why this shape: ``float(s_b) * g`` then has at most 15 significant bits (exact in float32), and
    since G's odd part exceeds 255 no bf16 input can sit exactly on an e2m1 or fp8 rounding midpoint;
    the nearest one is >= 2^-18 (relative) away. So float32 division, float32 reciprocal
    multiplication and float64 all give the same codes for bf16 activations. (With a power-of-two g,
    exact midpoints are common and a reciprocal flips them; with a full 24-bit mantissa, float32
    rounding itself can.)
    """
    mant, exp = math.frexp(amax / (FP4_MAX * FP8_MAX))  # mant in [0.5, 1)
    g_int = round(mant * 2048)
    g_int = min(g_int | 1, 2047)
    return math.ldexp(g_int, exp - 11)


def e2m1_codes(y: torch.Tensor) -> torch.Tensor:
    """4-bit codes (uint8, one per element) of ``y`` rounded to e2m1, ties to even; |y| <= 6 expected."""
    mag = y.abs()
    mids = torch.tensor(_MIDPOINTS, dtype=mag.dtype, device=mag.device)
    lo = torch.bucketize(mag, mids, right=False)  # ties resolved downwards
    hi = torch.bucketize(mag, mids, right=True)  # ties resolved upwards
    idx = torch.where((lo != hi) & (lo % 2 == 1), hi, lo)  # at a tie keep the even index
    return (idx | ((y < 0).to(idx.dtype) << 3)).to(torch.uint8)


def pack(codes: torch.Tensor) -> torch.Tensor:
    """Pack 4-bit codes [..., K] into bytes [..., K // 2]: even element low nibble, odd element high."""
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of ``pack``: bytes [..., K // 2] -> codes [..., K] (uint8)."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack((low, high), dim=-1).flatten(-2)


def quantize(x: torch.Tensor, global_scale: torch.Tensor | float) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4-quantise ``x`` [..., K] (K % 16 == 0) -> (packed uint8 [..., K//2], fp8 scales [..., K//16]).

    Math runs in float32, or float64 when ``x`` or ``global_scale`` is float64 (the verifier's anchor).
    """
    xf = upcast(x)
    g = torch.as_tensor(global_scale, device=xf.device)
    g = upcast(g) if g.is_floating_point() else g.float()
    dt = torch.promote_types(xf.dtype, g.dtype)
    xf, g = xf.to(dt), g.to(dt)
    k = xf.shape[-1]
    if k % BLOCK:
        raise ValueError(f"last dimension {k} is not a multiple of {BLOCK}")
    blocks = xf.reshape(*xf.shape[:-1], k // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=-1)
    scale = (amax / (FP4_MAX * g)).clamp(max=FP8_MAX).to(torch.float8_e4m3fn)
    step = scale.to(dt) * g
    safe = torch.where(step > 0, step, torch.ones_like(step))
    y = torch.where(step.unsqueeze(-1) > 0, blocks / safe.unsqueeze(-1), torch.zeros_like(blocks))
    codes = e2m1_codes(y.clamp(-FP4_MAX, FP4_MAX)).reshape(xf.shape)
    return pack(codes), scale


def _byte_table(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[256, 2] values of the (low, high) elements of every byte."""
    vals = torch.tensor(E2M1_VALUES, dtype=dtype, device=device)
    b = torch.arange(256, device=device)
    return torch.stack((vals[b & 0x0F], vals[b >> 4]), dim=-1)


def dequantize(
    packed: torch.Tensor,
    scales: torch.Tensor,
    global_scale: torch.Tensor | float,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """NVFP4 -> float: packed [..., K//2] uint8, scales [..., K//16] fp8, global fp32 -> [..., K].

    ``dtype`` defaults to float32, or float64 when ``global_scale`` is a float64 tensor (anchor run).
    """
    g = torch.as_tensor(global_scale, device=packed.device)
    g = upcast(g) if g.is_floating_point() else g.float()
    dt = dtype or g.dtype
    vals = _byte_table(dt, packed.device)[packed.long()]  # [..., K//2, 2] in element order
    k = packed.shape[-1] * 2
    vals = vals.reshape(*packed.shape[:-1], k // BLOCK, BLOCK)
    step = scales.to(dt) * g.to(dt)
    return (vals * step.unsqueeze(-1)).reshape(*packed.shape[:-1], k)


def random_weight(
    shape: tuple[int, int],
    gen: torch.Generator,
    device: str | torch.device,
    *,
    std: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A Gaussian [N, K] weight quantised to NVFP4 as a checkpoint stores it: (packed, scales, global)."""
    w = randn(shape, torch.float32, gen, device, scale=std)
    g = global_scale_for(w.abs().amax())
    packed, scales = quantize(w, g)
    return packed, scales, g.reshape(()).to(torch.float32)


def weight_bytes(n: int, k: int) -> int:
    """Bytes of an NVFP4 [n, k] tensor: packed values, fp8 block scales and the fp32 global scale."""
    return nbytes((n, k // 2), torch.uint8) + nbytes((n, k // BLOCK), torch.float8_e4m3fn) + 4


#: task text shared by the NVFP4 problems (DSL-neutral)
FORMAT_TEXT = """\
NVFP4 tensor [rows, K]: a uint8 tensor [rows, K/2] holds two e2m1 codes per byte (element 2i in the
low nibble, element 2i+1 in the high nibble; code = sign<<3 | magnitude index, magnitudes
0, 0.5, 1, 1.5, 2, 3, 4, 6), a float8_e4m3fn tensor [rows, K/16] holds one scale per 16 consecutive
elements, and a float32 scalar is the global scale: value = e2m1 * float(block scale) * global."""

ACT_QUANT_TEXT = """\
NVFP4 quantisation of an activation row (inside the op) with a static float32 global scale g, per
block b of 16 consecutive channels: s_b = fp8_e4m3(min(amax_b / (6 g), 448)) (round to nearest
even); code_i = e2m1(clamp(x_i / (float(s_b) g), -6, 6)) rounded to nearest, ties to even mantissa
(0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4), sign bit set when the quotient is
negative, code 0 for the whole block when s_b == 0; the dequantised value is e2m1 * float(s_b) * g.
The static activation scales g here are a calibrated amax / 2688 rounded to g = G * 2^e with G an odd
integer in [1025, 2047]: float(s_b) * g is then exact in float32 and no bf16 value lies on, or within
float32 rounding error of, an e2m1 or fp8 rounding midpoint, so float32 division or multiplication by a
float32 reciprocal both reproduce the exact codes for bf16 activations."""

HOPPER_NOTE = """\
NVFP4 is defined exactly in problems/quantization/_nvfp4.py. An H200 has no FP4 tensor cores, so a
Hopper kernel must emulate them: unpack the e2m1 nibbles (16-entry lookup or bit manipulation) and
multiply by the fp8 block scale in registers -- an e2m1 x e4m3 product has at most 6 significant bits,
so it is exact in bf16 -- then feed bf16 wgmma/mma with float32 accumulation and apply the per-tensor
global scales once in the epilogue. Activations must be quantised with the exact formula (amax per
16, fp8 scale, e2m1 rounding) and dequantised the same way, in registers, before the bf16 MMA. Block
scales are given in plain row-major layout, not the swizzled layout Blackwell kernels read."""
