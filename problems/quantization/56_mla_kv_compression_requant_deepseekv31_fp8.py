"""DeepSeek-V3.1 MLA KV compression (block-FP8 kv_a_proj, RMSNorm, RoPE) re-quantised to an FP8 cache row."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: DeepSeek-V3.1 MLA as served by vLLM with kv_cache_dtype=fp8: kv_a_proj_with_mqa is a W8A8
#   block-FP8 linear (checkpoint quantization_config {quant_method: fp8, fmt: e4m3, activation_scheme:
#   dynamic, weight_block_size: [128, 128], scale_fmt: ue8m0} -- V3.1 was trained with UE8M0, i.e.
#   power-of-two, scales -- activations per_token_group_quant_fp8, group 128, scales rounded up to 2^k);
#   its 576 outputs split into the 512-wide compressed latent (kv_a_layernorm: RMSNorm, eps 1e-6) and
#   the 64-wide shared rope key (DeepSeek rotary, GPT-J interleaved pairs, is_neox_style=False);
#   concat_and_cache_mla then stores [latent | k_pe] as fp8 e4m3 with a per-tensor kv scale.
# Production shape: DeepSeek-V3.1 hidden 7168, kv_lora_rank 512, qk_rope_head_dim 64; a prefill chunk
#   of 8192 tokens from 4 sequences at arbitrary context offsets, rope cache of 16384 positions.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randint, randn, seq_lens, upcast
from problems.quantization._util import FP8, FP8_MAX, block_fp8_linear, random_block_weight

ID = "p56"
NAME = "mla_kv_compression_requant_deepseekv31_fp8"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = """\
KV compression of DeepSeek-V3.1 multi-head latent attention, producing the fp8 KV-cache entry of
every token. Inputs: `hidden_states` [num_tokens, 7168] bf16 (the normed layer input),
`kv_a_weight` [576, 7168] float8_e4m3fn and `kv_a_scale` [5, 56] float32 (kv_a_proj_with_mqa in
128x128 block FP8: W[n, k] = float(kv_a_weight[n, k]) * kv_a_scale[n // 128, k // 128]; the scales
are powers of two (UE8M0); the last tile row covers only rows 512..575), `kv_norm_weight` [512]
bf16, `positions` [num_tokens] int64, `cos_sin_cache` [max_position, 64] float32 (row p = cos of the
32 rotary frequencies at position p, then their sin), `kv_cache_scale` float32 scalar (per-tensor
dequantisation scale of the fp8 cache).
1. Quantise the activation dynamically per token and per group of 128 channels with UE8M0
   (power-of-two) scales: s[t, g] = 2^ceil(log2(max(amax|x[t, 128g:128g+128]|, 1e-10) / 448)),
   q[t, k] = fp8_e4m3(clamp(x[t, k] / s[t, k // 128], -448, 448)) (round to nearest even; the division
   by a power of two is exact).
2. kv[t, n] = sum_k float(q[t, k]) * s[t, k // 128] * W[n, k] in float32, n < 576 (no bias).
3. c = kv[:, :512]: c = c / sqrt(mean(c^2) + 1e-6) * kv_norm_weight (RMSNorm over the 512 latent).
4. r = kv[:, 512:]: rotate interleaved pairs (r[2i], r[2i+1]), i < 32, with cos = cos_sin_cache[pos, i],
   sin = cos_sin_cache[pos, 32 + i]: (r[2i] cos - r[2i+1] sin, r[2i+1] cos + r[2i] sin).
5. entry = concat(c, r) (576 values, float32, never rounded to bf16) / kv_cache_scale, clamped to
   [-448, 448] and rounded to float8_e4m3fn (nearest even).
Output `kv_entry` [num_tokens, 576] float8_e4m3fn (the quantised cache row is the point of the op).
Production constants: hidden 7168, kv_lora_rank 512, rope dim 64 (576 = 512 + 64)."""
NOTES = """\
FP8 scales follow DeepSeek-V3.1's checkpoint layout: 128x128 weight tiles, 1x128 dynamic activation
groups, float32 values that are powers of two (UE8M0), so rescaling partial sums is exact. The
N = 576 GEMM is skinny: one CTA can own whole rows of 576 and apply the RMSNorm, RoPE and fp8 store
in its epilogue. Hopper has FP8 tensor cores."""
AXES = {
    "num_tokens": "var",
    "hidden_size": 7168,
    "kv_a_size": 576,  # kv_lora_rank + qk_rope_head_dim
    "kv_a_blocks": 5,  # ceil(576 / 128)
    "hidden_blocks": 56,  # 7168 / 128
    "kv_lora_rank": 512,
    "rope_dim": 64,
    "max_position": "var",
}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "kv_a_weight": (("kv_a_size", "hidden_size"), "float8_e4m3fn"),
    "kv_a_scale": (("kv_a_blocks", "hidden_blocks"), "float32"),
    "kv_norm_weight": (("kv_lora_rank",), "bfloat16"),
    "positions": (("num_tokens",), "int64"),
    "cos_sin_cache": (("max_position", "rope_dim"), "float32"),
    "kv_cache_scale": ((), "float32"),
}
OUTPUTS = {"kv_entry": (("num_tokens", "kv_a_size"), "float8_e4m3fn")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 8192, "hidden_size": 7168, "kv_a_size": 576, "kv_a_blocks": 5, "hidden_blocks": 56,
    "kv_lora_rank": 512, "rope_dim": 64, "max_position": 16384,
}  # fmt: skip
SMOKE = {
    "num_tokens": 5, "hidden_size": 7168, "kv_a_size": 576, "kv_a_blocks": 5, "hidden_blocks": 56,
    "kv_lora_rank": 512, "rope_dim": 64, "max_position": 64,
}  # fmt: skip
TOLERANCE_NOTE = """\
The output is the fp8 cache row itself. Its value before the final rounding is a K = 7168 sum: the
float32 reference and the float64 anchor land on opposite sides of an fp8 midpoint for ~1e-5 of the
elements (one fp8 ulp, 6-12% of the element). An fp8 tensor core keeps only ~14 bits of its accumulator
(DeepSeek-V3 3.3.2), so an honest WGMMA kernel's sums are off by up to ~1e-4 of the row's largest value:
a small element beside large ones moves by several of its own ulps (3 to 4.5 of a code near 0.05 in a
row reaching ~200, both DSLs on an H100). The verifier judges one-byte floats per element:
3 * max(the reference's error there, the element's fp8 ulp, 2^-12 * max|anchor|)."""

EPS = 1e-6
NUM_SEQS = 4
ROPE_THETA = 10000.0
KV_AMAX = 8.0  # calibrated |entry| maximum behind the static per-tensor cache scale


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, k, n = workload["num_tokens"], workload["hidden_size"], workload["kv_a_size"]
    r, p = workload["rope_dim"], workload["max_position"]
    hidden_states = randn((t, k), torch.bfloat16, gen, device)
    kv_a_weight, kv_a_scale = random_block_weight((n, k), gen, device, std=k**-0.5, ue8m0=True)
    kv_norm_weight = randn((workload["kv_lora_rank"],), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    # a chunk of a few sequences, each a run of consecutive positions at a random context offset
    lens = seq_lens(min(NUM_SEQS, t), t, gen)
    runs = [(int(randint(0, p - n_i + 1, (1,), gen, device).item()), n_i) for n_i in lens]
    positions = torch.cat([torch.arange(s, s + n_i, device=device) for s, n_i in runs])
    inv_freq = ROPE_THETA ** (-torch.arange(0, r, 2, dtype=torch.float64, device=device) / r)
    angles = torch.arange(p, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    cos_sin_cache = torch.cat((angles.cos(), angles.sin()), dim=-1).to(torch.float32)
    kv_cache_scale = torch.tensor(KV_AMAX / FP8_MAX, dtype=torch.float32, device=device)
    return hidden_states, kv_a_weight, kv_a_scale, kv_norm_weight, positions, cos_sin_cache, kv_cache_scale


def reference(
    hidden_states: torch.Tensor,
    kv_a_weight: torch.Tensor,
    kv_a_scale: torch.Tensor,
    kv_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache_scale: torch.Tensor,
) -> torch.Tensor:
    rank = kv_norm_weight.shape[0]
    kv = block_fp8_linear(hidden_states, kv_a_weight, kv_a_scale, ue8m0=True)
    c, pe = kv[:, :rank], kv[:, rank:]
    c = c * torch.rsqrt(c.pow(2).mean(dim=-1, keepdim=True) + EPS) * upcast(kv_norm_weight)
    cos, sin = upcast(cos_sin_cache)[positions].to(kv.dtype).chunk(2, dim=-1)
    even, odd = pe[:, 0::2], pe[:, 1::2]
    pe = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1).flatten(1)
    entry = torch.cat((c, pe), dim=-1) / upcast(kv_cache_scale)
    return entry.clamp(-FP8_MAX, FP8_MAX).to(FP8)


def cost(workload: dict[str, int]) -> Cost:
    t, k, n = workload["num_tokens"], workload["hidden_size"], workload["kv_a_size"]
    r, rank = workload["rope_dim"], workload["kv_lora_rank"]
    moved = (
        nbytes((t, k), torch.bfloat16)
        + nbytes((n, k), FP8)
        + nbytes((-(-n // 128), k // 128), torch.float32)
        + nbytes((rank,), torch.bfloat16)
        + nbytes((t,), torch.int64)
        + nbytes((min(t, workload["max_position"]), r), torch.float32)  # only the rows of used positions
        + 4
        + nbytes((t, n), FP8)
    )
    # fp8 GEMM; activation quantisation, per-group rescale, RMSNorm, RoPE and the fp8 store in fp32
    fp32 = 4.0 * t * k + 2.0 * t * n * (k // 128) + 4.0 * t * rank + 3.0 * t * r + 2.0 * t * n
    return Cost(bytes=moved, flops={"fp8": 2.0 * t * n * k, "fp32": fp32})
