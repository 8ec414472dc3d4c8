"""p53 mlp_gate_up_projection_qwen3vl_fp8 — plan `fused`, TIRx: activation-quant kernel + FP8 WGMMA GEMM.

Plan: the op is a W8A8 block-FP8 linear, so it runs the shared full plan of
`_fp8linear_tirx.py` on hidden_states [T, 4096] against the merged gate/up weight [24576, 4096]:
(1) a TIRx kernel quantises the activation per (token, 128-channel group) to fp8 codes + block-major
scales; (2) the TIRx FP8 GEMM (two warpgroups of m64n128k32 WGMMAs per 128 x 128 tile, cp.async
into a 6-deep 128B-swizzled ring, per-k-tile promotion with s_act * s_w, tiles rastered 8 m-tiles at
a time so the 100 MB weight streams from HBM ~4 times) writes the bf16 gate_up output.
Compiled once per (tokens, hidden, gate_up_size).
"""

import torch

from problems.quantization.solutions import _fp8linear_tirx as L


def _shape_key(hidden_states: torch.Tensor, gate_up_weight: torch.Tensor, *_: object) -> tuple[int, int, int]:
    return hidden_states.shape[0], hidden_states.shape[1], gate_up_weight.shape[0]


def _build(tokens: int, k: int, n: int):
    return L.build(tokens, k, n)


def run(hidden_states: torch.Tensor, gate_up_weight: torch.Tensor, gate_up_scale: torch.Tensor) -> torch.Tensor:
    return L.linear(hidden_states, gate_up_weight, gate_up_scale)
