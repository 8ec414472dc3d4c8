"""Per-head RMSNorm of q, k (learned scale) and v (no scale), Gemma 3n audio encoder heads (8 x 192), fp32."""

# Source: SOL-ExecBench problem `qkv_per_head_rmsnorm_gemma3n_e4b_audio` (dataset not
#   redistributable); the operator is written here from the semantics its name implies.
# Upstream: Gemma 3n's attention normalises q, k and v per head (transformers `Gemma3nTextAttention`:
#   q_norm, k_norm = Gemma3nRMSNorm(head_dim) with a learned scale, v_norm = Gemma3nRMSNorm(head_dim,
#   with_scale=False); Gemma3nRMSNorm: x · (mean(x^2) + eps)^-0.5 · weight in float32, weight used as is,
#   not 1 + weight). Assumption: the catalogue places it in the E4B audio encoder, so the audio
#   tower's dimensions are used: hidden 1536 = 8 heads x 192, rms_norm_eps 1e-6.
# Production shape: a batch of 16 clips of 30 s; 4x subsampled 10 ms mel frames = 750 tokens each.

from __future__ import annotations

import torch

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import io_bytes, norm_weight

ID = "p41"
NAME = "qkv_per_head_rmsnorm_gemma3n_e4b_audio_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Per-head RMS normalisation of the query, key and value projections (float32), Gemma 3n style.
Inputs: `query`, `key`, `value` [batch, seq_len, 8, 192] (projection outputs viewed per head),
`q_weight`, `k_weight` [192]. For every (token, head) vector x of 192 values:
rms(x) = x / sqrt(mean(x^2) + 1e-6);
q_out = rms(q)·q_weight, k_out = rms(k)·k_weight, v_out = rms(v) (no scale).
Outputs `query_out`, `key_out`, `value_out` [batch, seq_len, 8, 192] float32, in that order."""
NOTES = ""
AXES = {"batch": "var", "seq_len": "var", "num_heads": 8, "head_dim": 192}
INPUTS = {
    "query": (("batch", "seq_len", "num_heads", "head_dim"), "float32"),
    "key": (("batch", "seq_len", "num_heads", "head_dim"), "float32"),
    "value": (("batch", "seq_len", "num_heads", "head_dim"), "float32"),
    "q_weight": (("head_dim",), "float32"),
    "k_weight": (("head_dim",), "float32"),
}
OUTPUTS = {
    "query_out": (("batch", "seq_len", "num_heads", "head_dim"), "float32"),
    "key_out": (("batch", "seq_len", "num_heads", "head_dim"), "float32"),
    "value_out": (("batch", "seq_len", "num_heads", "head_dim"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 16, "seq_len": 750, "num_heads": 8, "head_dim": 192}
SMOKE = {"batch": 2, "seq_len": 7, "num_heads": 8, "head_dim": 192}

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    shape = (workload["batch"], workload["seq_len"], workload["num_heads"], workload["head_dim"])
    d = workload["head_dim"]
    fp = torch.float32
    # projections of varying magnitude per head and token
    q = randn(shape, fp, gen, device) * torch.exp(randn((*shape[:-1], 1), fp, gen, device, scale=0.5))
    k = randn(shape, fp, gen, device) * torch.exp(randn((*shape[:-1], 1), fp, gen, device, scale=0.5))
    v = randn(shape, fp, gen, device, scale=0.7)
    return q, k, v, norm_weight(d, fp, gen, device), norm_weight(d, fp, gen, device)


def _rms(x: torch.Tensor) -> torch.Tensor:
    x = upcast(x)
    return x * torch.pow(x.pow(2).mean(dim=-1, keepdim=True) + EPS, -0.5)


def reference(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q = (_rms(query) * upcast(q_weight)).to(query.dtype)
    k = (_rms(key) * upcast(k_weight)).to(key.dtype)
    v = _rms(value).to(value.dtype)
    return q, k, v


def cost(workload: dict[str, int]) -> Cost:
    elems = workload["batch"] * workload["seq_len"] * workload["num_heads"] * workload["head_dim"]
    rows = elems // workload["head_dim"]
    # square, sum, scale per element (+ weight for q and k), one rsqrt per row
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": 11.0 * elems + 3.0 * rows})
