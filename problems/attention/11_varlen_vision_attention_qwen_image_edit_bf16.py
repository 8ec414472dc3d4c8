"""Variable-length bidirectional vision attention (cu_seqlens) of Qwen-Image-Edit's Qwen2.5-VL encoder."""

# Source: SOL-ExecBench problem `varlen_vision_attention_qwen_image_edit` (its dataset is not
#   redistributed; this reference is written from the operator's public semantics).
# Upstream: Qwen-Image-Edit conditions on its input image through Qwen2.5-VL-7B, whose vision tower
#   (transformers Qwen2_5_VLVisionAttention) runs flash_attn_varlen_func(q, k, v, cu_seqlens,
#   cu_seqlens, max_seqlen, max_seqlen) without a causal mask: a token attends to every token of its
#   own segment only. Vision config: 16 heads, head_dim 80 (hidden 1280), patch 14, 2x2 spatial merge.
# Choices: the attention core only, on q/k/v after the vision RoPE; segments are whole images, as in
#   the full-attention layers (blocks 7, 15, 23, 31; the other layers use 112-px windows as their
#   segments). Segment lengths are multiples of 4 (2x2 merge groups); scale 1/sqrt(80); softmax in
#   fp32, output bf16.
# Production shape: a batch of 16 condition images (the pipeline resizes each to about 384x384
#   pixels, ~784 patches) of varying aspect ratios, 12544 patches in total.

from __future__ import annotations

import itertools
import math

import torch

from problems._common import Cost, cu_seqlens, generator, lengths, nbytes, randn, seq_lens, upcast

ID = "p11"
NAME = "varlen_vision_attention_qwen_image_edit_bf16"
FAMILY = "attention"
SOURCE = "SOL"
DESCRIPTION = """\
Variable-length, non-causal multi-head attention over packed image-patch sequences, as in the
Qwen2.5-VL vision encoder that Qwen-Image-Edit uses for its condition image. Inputs: `q`, `k`, `v`
[total_tokens, 16, 80] bf16 (16 heads, head dim 80; the patches of all images concatenated) and
`cu_seqlens` [num_seqs + 1] int32 (exclusive prefix sums of the segment lengths; cu_seqlens[0] = 0,
cu_seqlens[-1] = total_tokens). Segment i is rows cu_seqlens[i]:cu_seqlens[i+1]; a token attends to
every token of its own segment (no causal mask) and to nothing outside it. For each head:
out[t] = sum_j softmax_j(dot(q[t], k[j]) / sqrt(80)) * v[j] over the tokens j of t's segment, computed
in float32. Output: `output` [total_tokens, 16, 80] bf16. Segment lengths vary (multiples of 4)."""
NOTES = ""
AXES = {"total_tokens": "var", "num_seqs_plus_1": "var", "num_heads": 16, "head_dim": 80}
INPUTS = {
    "q": (("total_tokens", "num_heads", "head_dim"), "bfloat16"),
    "k": (("total_tokens", "num_heads", "head_dim"), "bfloat16"),
    "v": (("total_tokens", "num_heads", "head_dim"), "bfloat16"),
    "cu_seqlens": (("num_seqs_plus_1",), "int32"),
}
OUTPUTS = {"output": (("total_tokens", "num_heads", "head_dim"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"total_tokens": 12544, "num_seqs_plus_1": 17, "num_heads": 16, "head_dim": 80}
SMOKE = {"total_tokens": 96, "num_seqs_plus_1": 4, "num_heads": 16, "head_dim": 80}

MERGE = 4  # 2x2 spatial-merge groups: every image has a multiple of 4 patches


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    total, n, h, d = (workload[a] for a in ("total_tokens", "num_seqs_plus_1", "num_heads", "head_dim"))
    if total % MERGE:
        raise ValueError(f"total_tokens must be a multiple of {MERGE}")
    lens = [MERGE * x for x in seq_lens(n - 1, total // MERGE, gen, minimum=4)]
    q = randn((total, h, d), torch.bfloat16, gen, device)
    k = randn((total, h, d), torch.bfloat16, gen, device)
    v = randn((total, h, d), torch.bfloat16, gen, device)
    return q, k, v, cu_seqlens(lens, device)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1])
    bounds = cu_seqlens.tolist()
    out = torch.empty_like(q)
    for s, e in itertools.pairwise(bounds):
        if s == e:
            continue
        qs, ks, vs = (upcast(x[s:e]).transpose(0, 1) for x in (q, k, v))  # [H, L, D]
        probs = torch.softmax((qs @ ks.transpose(-1, -2)) * scale, dim=-1)
        out[s:e] = (probs @ vs).transpose(0, 1).to(q.dtype)
    return out


def cost(workload: dict[str, int]) -> Cost:
    total, n = workload["total_tokens"], workload["num_seqs_plus_1"]
    # equal lengths give the fewest (query, key) pairs for this total: a lower bound
    return _cost(workload, total * total / (n - 1))


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    cu = inputs[3]
    assert isinstance(cu, torch.Tensor)
    return _cost(workload, float(sum(n * n for n in lengths(cu))))


def _cost(workload: dict[str, int], pairs: float) -> Cost:
    total, n, h, d = (workload[a] for a in ("total_tokens", "num_seqs_plus_1", "num_heads", "head_dim"))
    moved = 4 * nbytes((total, h, d), torch.bfloat16) + 4 * n
    return Cost(bytes=moved, flops={"bf16": 4.0 * h * d * pairs, "fp32": 5.0 * h * pairs})
