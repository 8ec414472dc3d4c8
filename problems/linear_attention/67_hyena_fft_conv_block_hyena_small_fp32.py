"""Hyena operator block (order 2): short depthwise conv, gating and FFT long convolution, fp32."""

# Source: SOL-ExecBench problem `hyena_fft_conv_block_hyena_small` (dataset not redistributable);
#   semantics written from the operator's public definition, not from that dataset.
# Upstream: HyenaOperator.forward of HazyResearch/safari (standalone_hyena.py / hyena.py) between in_proj
#   and out_proj: causal depthwise short filter (Conv1d kernel 3, padding 2, truncated), split into
#   x0, x1, v; v = v * x1; v = fftconv(v, k, bias) (FFT size 2L, causal, plus bias * v skip);
#   y = v * x0. The implicit filter k (HyenaFilter's positional MLP with exponential modulation) is
#   materialised beforehand and passed in, as the operator does once per call.
# Production shape: Hyena small (d_model 768, order 2, context 2048, as the safari Pile configs):
#   batch 8 × 2048 tokens.
# Assumptions (SOL): the block excludes the in/out projections and dropout (inference); layout
#   [batch, seq_len, channels] in and out as around HyenaOperator's rearranges.

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, nbytes, rand, randn, upcast

ID = "p67"
NAME = "hyena_fft_conv_block_hyena_small_fp32"
FAMILY = "linear_attention"
SOURCE = "SOL"
DESCRIPTION = """\
Hyena operator (order 2) between its projections. Inputs: `u` [batch, seq_len, 2304] fp32 (in_proj
output, 3 × 768 channels); `short_weight` [2304, 3] fp32 and `short_bias` [2304] fp32 (causal
depthwise short filter); `long_filter` [768, seq_len] fp32 (the long implicit filter k, one per channel);
`filter_bias` [768] fp32. Per batch row, channel c and time t: s_c(t) = short_weight[c, 0] u_c(t-2) +
short_weight[c, 1] u_c(t-1) + short_weight[c, 2] u_c(t) + short_bias[c] (u = 0 before t = 0).
Split s into x0 = channels 0..767, x1 = 768..1535, v = 1536..2303. w = v * x1. Causal long
convolution z_c(t) = sum_{j=0..t} long_filter[c, j] w_c(t - j) + filter_bias[c] w_c(t) (computed with FFTs
of size 2 * seq_len in the reference; any exact method is fine). Output `y` [batch, seq_len, 768]
fp32 with y_c(t) = z_c(t) * x0_c(t)."""
NOTES = ""
AXES = {"batch": "var", "seq_len": "var", "d_model": 768, "inner_width": 2304, "short_len": 3}
INPUTS = {
    "u": (("batch", "seq_len", "inner_width"), "float32"),
    "short_weight": (("inner_width", "short_len"), "float32"),
    "short_bias": (("inner_width",), "float32"),
    "long_filter": (("d_model", "seq_len"), "float32"),
    "filter_bias": (("d_model",), "float32"),
}
OUTPUTS = {"y": (("batch", "seq_len", "d_model"), "float32")}
INPLACE: tuple[str, ...] = ()
_MODEL = {"d_model": 768, "inner_width": 2304, "short_len": 3}
WORKLOAD = {"batch": 8, "seq_len": 2048, **_MODEL}
SMOKE = {"batch": 2, "seq_len": 64, **_MODEL}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    B, L, d, w3, ks = (workload[a] for a in ("batch", "seq_len", "d_model", "inner_width", "short_len"))
    u = randn((B, L, w3), torch.float32, gen, device)
    bound = 1.0 / math.sqrt(ks)  # nn.Conv1d's default init for a depthwise kernel of 3
    short_weight = rand((w3, ks), torch.float32, gen, device, low=-bound, high=bound)
    short_bias = rand((w3,), torch.float32, gen, device, low=-bound, high=bound)
    # implicit filter: sin-MLP output (~N(0, 1)) times Hyena's ExponentialModulation exp(-t |delta_c|),
    # t in [0, 1], |delta_c| from log(1e-2)/0.3 (fast) to log(1e-2)/1.5 (slow)
    t = torch.linspace(0, 1, L, device=device)
    delta = torch.linspace(math.log(1e-2) / 0.3, math.log(1e-2) / 1.5, d, device=device).abs()
    filt = randn((d, L), torch.float32, gen, device, scale=0.1) * torch.exp(-t[None, :] * delta[:, None])
    filter_bias = randn((d,), torch.float32, gen, device)
    return u, short_weight, short_bias, filt, filter_bias


def reference(
    u: torch.Tensor,
    short_weight: torch.Tensor,
    short_bias: torch.Tensor,
    long_filter: torch.Tensor,
    filter_bias: torch.Tensor,
) -> torch.Tensor:
    L, width = u.shape[1], u.shape[2]
    d = long_filter.shape[0]
    x = upcast(u).transpose(1, 2)  # [B, 3d, L]
    w = upcast(short_weight)
    s = F.conv1d(x, w[:, None, :], upcast(short_bias), padding=w.shape[-1] - 1, groups=width)[..., :L]
    x0, x1, v = s.split(d, dim=1)
    v = v * x1
    n = 2 * L  # zero-padded FFT turns the circular product into the causal convolution
    k_f = torch.fft.rfft(upcast(long_filter), n=n)
    z = torch.fft.irfft(torch.fft.rfft(v, n=n) * k_f, n=n)[..., :L] + v * upcast(filter_bias)[:, None]
    return (z * x0).transpose(1, 2).contiguous().to(u.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, L, d, w3, ks = (workload[a] for a in ("batch", "seq_len", "d_model", "inner_width", "short_len"))
    f32 = torch.float32
    moved = (
        nbytes((B, L, w3), f32)
        + nbytes((w3, ks), f32)
        + nbytes((w3,), f32)
        + nbytes((d, L), f32)
        + nbytes((d,), f32)
        + nbytes((B, L, d), f32)
    )
    n = 2 * L
    fft = 2.5 * n * math.log2(n)  # real FFT of length n: ~2.5 n log2 n FLOPs
    # short conv (2 ks per element), gates and skip (4 per output element), one forward and one inverse
    # FFT per (row, channel) plus the filter FFT once per channel, complex product (6 per bin)
    flops = 2.0 * ks * B * L * w3 + 4.0 * B * L * d + (2 * B * d + d) * fft + 6.0 * B * d * (n // 2 + 1)
    return Cost(bytes=moved, flops={"fp32": flops})
