"""p52 attention_output_projection_qwen3vl_fp8 — plan `fused`, CuTe DSL: activation-quant kernel + FP8 WGMMA GEMM.

Plan: the op is a W8A8 block-FP8 linear of the flattened attention output [T, 32 * 128] against the
o_proj weight [4096, 4096], so it runs the shared full plan of `_fp8linear_cutedsl.py`: (1) a CuTe DSL
kernel quantises the activation per (token, head) = per 128-channel group to fp8 codes + block-major
scales; (2) the CuTe DSL FP8 GEMM (two warpgroups of m64n128k32 WGMMAs per 128 x 128 tile, TMA into a
6-deep mbarrier ring, per-k-tile promotion with s_act * s_w, raster of 8 m-tiles across N) writes the
bf16 output. Symbolic sizes: compiled once.
"""

import torch

from problems.quantization.solutions import _fp8linear_cutedsl as L


def _compiled():
    return L.compiled()


def run(attn_output: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    return L.linear(attn_output.view(attn_output.shape[0], -1), weight, weight_scale)
