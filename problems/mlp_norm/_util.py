"""Shared pieces of the mlp_norm problems: parameter draws, activation derivatives, byte counts."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from problems._common import DTYPES, nbytes, randn

#: sqrt(2/pi), the constant of the tanh approximation of GELU
GELU_TANH_C = math.sqrt(2.0 / math.pi)
GELU_TANH_A = 0.044715

Spec = tuple[tuple[str | int, ...] | None, str]


def linear_weight(
    out_features: int, in_features: int, dtype: torch.dtype, gen: torch.Generator, device: str
) -> torch.Tensor:
    """An nn.Linear weight [out, in] with fan-in scaling, so activations stay O(1) through the layer."""
    return randn((out_features, in_features), dtype, gen, device, scale=1.0 / math.sqrt(in_features))


def bias(n: int, dtype: torch.dtype, gen: torch.Generator, device: str, scale: float = 0.02) -> torch.Tensor:
    """A small trained-looking bias vector."""
    return randn((n,), dtype, gen, device, scale=scale)


def norm_weight(n: int, dtype: torch.dtype, gen: torch.Generator, device: str) -> torch.Tensor:
    """A norm gain near 1 (trained RMSNorm/LayerNorm weights)."""
    return randn((n,), dtype, gen, device, scale=0.1, shift=1.0)


def gelu_tanh_grad(h: torch.Tensor) -> torch.Tensor:
    """d/dh of 0.5·h·(1 + tanh(c·(h + a·h³))), the tanh-approximate GELU."""
    t = torch.tanh(GELU_TANH_C * (h + GELU_TANH_A * h * h * h))
    return 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * GELU_TANH_C * (1.0 + 3.0 * GELU_TANH_A * h * h)


def silu_grad(g: torch.Tensor) -> torch.Tensor:
    """d/dg of g·sigmoid(g)."""
    s = torch.sigmoid(g)
    return s * (1.0 + g * (1.0 - s))


def shape_of(dims: tuple[str | int, ...], workload: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else workload[d] for d in dims)


def io_bytes(
    inputs: Mapping[str, Spec],
    outputs: Mapping[str, Spec],
    workload: Mapping[str, int],
    *,
    skip: tuple[str, ...] = (),
) -> int:
    """Every tensor input read once plus every output written once (names in ``skip`` left out)."""
    total = 0
    for name, (dims, dtype) in list(inputs.items()) + list(outputs.items()):
        if dims is None or name in skip:
            continue
        total += nbytes(shape_of(dims, workload), DTYPES[dtype])
    return total


def token_ids(shape: tuple[int, ...], vocab: int, gen: torch.Generator, device: str) -> torch.Tensor:
    """Token ids with a Zipf-like (log-uniform) frequency profile: frequent ids repeat, as in real text."""
    u = torch.rand(shape, generator=gen, device=device, dtype=torch.float64)
    ids = torch.exp(u * math.log(vocab)).floor().to(torch.int64) - 1
    return ids.clamp_(0, vocab - 1)
