"""p52 attention_output_projection_qwen3vl_fp8 — plan `fused`, TIRx: activation-quant kernel + FP8 WGMMA GEMM.

Plan: the op is a W8A8 block-FP8 linear of the flattened attention output [T, 32 * 128] against the
o_proj weight [4096, 4096], so it runs the shared full plan of `_fp8linear_tirx.py`: (1) a TIRx kernel
quantises the activation per (token, head) = per 128-channel group to fp8 codes + block-major scales;
(2) the TIRx FP8 GEMM (two warpgroups of m64n128k32 WGMMAs per 128 x 128 tile, cp.async into a
6-deep 128B-swizzled ring, per-k-tile promotion with s_act * s_w, raster of 8 m-tiles across N) writes
the bf16 output. Compiled once per (tokens, in_features, hidden).
"""

import torch

from problems.quantization.solutions import _fp8linear_tirx as L


def _shape_key(attn_output: torch.Tensor, weight: torch.Tensor, *_: object) -> tuple[int, int, int]:
    return attn_output.shape[0], attn_output.shape[1] * attn_output.shape[2], weight.shape[0]


def _build(tokens: int, k: int, n: int):
    return L.build(tokens, k, n)


def run(attn_output: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    return L.linear(attn_output.view(attn_output.shape[0], -1), weight, weight_scale)
