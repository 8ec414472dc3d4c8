"""Attention block of Nova-1.3B: NVFP4 QKV projection, RoPE, causal attention, NVFP4 output projection."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: we take "Nova" to be lt-asset/nova-1.3b, a Llama-architecture model built on
#   DeepSeek-Coder-1.3B (hidden 2048, 16 heads x head_dim 128, MHA, no biases, rope_theta 100000 with
#   linear RoPE scaling factor 4). Its attention is served here as an NVFP4 W4A4 block (ModelOpt
#   NVFP4: e2m1 weights, fp8 block scales per 16, fp32 global scales, activations quantised to NVFP4
#   with static calibrated global scales before each projection); the attention core runs in high
#   precision. Nova's binary-specific hierarchical attention masks are not modelled: plain causal
#   self-attention, positions 0..seq_len-1 in every sequence.
# Production shape: 2 sequences x 2048 tokens (prefill), hidden 2048, 16 heads.

from __future__ import annotations

import math

import torch

from problems._common import Cost, generator, nbytes, randn
from problems.quantization import _nvfp4
from problems.quantization._util import nvfp4_linear

ID = "p57"
NAME = "qkvo_attention_block_nova_nvfp4"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = f"""\
Self-attention block of Nova-1.3B (Llama architecture) with NVFP4 (W4A4) projections.
{_nvfp4.FORMAT_TEXT}
{_nvfp4.ACT_QUANT_TEXT}
Inputs: `hidden_states` [batch, seq_len, hidden] bf16; `qkv_input_scale` float32 scalar (static
global scale of the QKV activation); NVFP4 weight [3*hidden, hidden] (`qkv_weight` uint8
[3*hidden, hidden/2], `qkv_weight_scale` fp8 [3*hidden, hidden/16], `qkv_weight_global` float32
scalar; rows 0..hidden-1 are q_proj, then k_proj, then v_proj, head h owning rows 128h..128h+127 of
each); `o_input_scale` float32 scalar; NVFP4 weight [hidden, hidden] (`o_weight`, `o_weight_scale`,
`o_weight_global`) for o_proj.
Computation in float32 throughout (num_heads = hidden / 128; the fused semantics: q, k, v, scores,
probabilities and the attention output are never rounded to bf16):
1. qkv = dequant(nvfp4(x, qkv_input_scale)) @ Wqkv^T for every token x (no bias); split into
   q, k, v [batch, seq_len, num_heads, 128].
2. RoPE (rotate-half / NeoX style) on q and k: the token at index p of its sequence has position p;
   for i < 64, angle = (p / 4) * 100000^(-2i/128) (linear scaling factor 4);
   out[i] = u[i] cos - u[i+64] sin, out[i+64] = u[i+64] cos + u[i] sin.
3. Causal attention per sequence and head: softmax over keys j <= query i of (q_i . k_j) / sqrt(128),
   times v; heads concatenated back to [batch, seq_len, hidden] (head h at columns 128h..).
4. out = dequant(nvfp4(attn, o_input_scale)) @ Wo^T (no bias).
Output `output` [batch, seq_len, hidden] bf16. Production constants: hidden 2048, 16 heads, head_dim 128."""
NOTES = (
    _nvfp4.HOPPER_NOTE
    + """
The attention core is not quantised, but it feeds o_proj's NVFP4 re-quantisation, so it needs float32
operands (CUDA-core FP32, or split-bf16 / 3xTF32 MMA), not bf16 flash attention. Keep every
intermediate in float32. Measured on an H200 at WORKLOAD: independent float32 implementations (other
reduction orders, reciprocal-multiply quantiser) stay within 0.6 of the allowance, while rounding q,
k, v and the attention output to bf16, as production bf16 attention does, moves enough elements across
e2m1 rounding boundaries before the NVFP4 re-quantisation to exceed it (1.5-1.6x of the allowance)."""
)
AXES = {
    "batch": "var",
    "seq_len": "var",
    "hidden": "var",
    "hidden_half": "var",  # hidden / 2
    "hidden_blocks": "var",  # hidden / 16
    "qkv_size": "var",  # 3 * hidden
}
INPUTS = {
    "hidden_states": (("batch", "seq_len", "hidden"), "bfloat16"),
    "qkv_input_scale": ((), "float32"),
    "qkv_weight": (("qkv_size", "hidden_half"), "uint8"),
    "qkv_weight_scale": (("qkv_size", "hidden_blocks"), "float8_e4m3fn"),
    "qkv_weight_global": ((), "float32"),
    "o_input_scale": ((), "float32"),
    "o_weight": (("hidden", "hidden_half"), "uint8"),
    "o_weight_scale": (("hidden", "hidden_blocks"), "float8_e4m3fn"),
    "o_weight_global": ((), "float32"),
}
OUTPUTS = {"output": (("batch", "seq_len", "hidden"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "batch": 2, "seq_len": 2048, "hidden": 2048, "hidden_half": 1024, "hidden_blocks": 128, "qkv_size": 6144,
}  # fmt: skip
SMOKE = {"batch": 2, "seq_len": 9, "hidden": 256, "hidden_half": 128, "hidden_blocks": 16, "qkv_size": 768}
TOLERANCE_NOTE = """\
The bf16 input is quantised with a static global scale whose odd 11-bit mantissa keeps every quotient
away from rounding midpoints, so its NVFP4 codes are identical in float32, float64 and any correct
kernel. The attention output is an internal float32 value re-quantised to NVFP4, and the peaked
attention makes it sensitive: measured on an H200 the float32 reference sits 1.3-1.5 bf16 eps x
max|anchor| from the anchor, an independent float32 implementation stays within 0.6 of the allowance,
bf16 attention operands exceed it (1.5x) and skipping the activation quantisation exceeds it ~12x."""

HEAD_DIM = 128
ROPE_THETA = 100000.0
ROPE_SCALING = 4.0
ACT_AMAX = 8.0  # calibrated activation amax behind the static input scales
QK_GAIN = 3.0


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, s, h = workload["batch"], workload["seq_len"], workload["hidden"]
    hidden_states = randn((b, s, h), torch.bfloat16, gen, device)
    act_scale = torch.tensor(_nvfp4.static_global_scale(ACT_AMAX), dtype=torch.float32, device=device)
    # q/k rows 3x larger than v rows: logits of std ~9 give the peaked attention of a trained model
    # (near-uniform attention would shrink late tokens' outputs far below the max-relative allowance)
    w = randn((3 * h, h), torch.float32, gen, device, scale=h**-0.5)
    w[: 2 * h] *= QK_GAIN
    w_global = _nvfp4.global_scale_for(w.abs().amax()).reshape(()).to(torch.float32)
    qkv = (*_nvfp4.quantize(w, w_global), w_global)
    o = _nvfp4.random_weight((h, h), gen, device, std=h**-0.5)
    return hidden_states, act_scale, *qkv, act_scale.clone(), *o


def _rope(u: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on [batch, seq, heads, 128], positions 0..seq-1, linear scaling."""
    s, d = u.shape[1], u.shape[-1]
    inv_freq = ROPE_THETA ** (-torch.arange(0, d, 2, dtype=u.dtype, device=u.device) / d)
    angle = (torch.arange(s, dtype=u.dtype, device=u.device) / ROPE_SCALING)[:, None] * inv_freq[None, :]
    cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]
    lo, hi = u[..., : d // 2], u[..., d // 2 :]
    return torch.cat((lo * cos - hi * sin, hi * cos + lo * sin), dim=-1)


def reference(
    hidden_states: torch.Tensor,
    qkv_input_scale: torch.Tensor,
    qkv_weight: torch.Tensor,
    qkv_weight_scale: torch.Tensor,
    qkv_weight_global: torch.Tensor,
    o_input_scale: torch.Tensor,
    o_weight: torch.Tensor,
    o_weight_scale: torch.Tensor,
    o_weight_global: torch.Tensor,
) -> torch.Tensor:
    b, s, h = hidden_states.shape
    nh = h // HEAD_DIM
    x = hidden_states.reshape(b * s, h)
    qkv = nvfp4_linear(x, qkv_input_scale, qkv_weight, qkv_weight_scale, qkv_weight_global)
    q, k, v = qkv.reshape(b, s, 3, nh, HEAD_DIM).unbind(dim=2)
    q, k = _rope(q), _rope(k)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, heads, s, 128]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
    causal = torch.ones(s, s, dtype=torch.bool, device=scores.device).tril()
    probs = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    attn = (probs @ v).transpose(1, 2).reshape(b * s, h)
    out = nvfp4_linear(attn, o_input_scale, o_weight, o_weight_scale, o_weight_global)
    return out.reshape(b, s, h).to(hidden_states.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, s, h = workload["batch"], workload["seq_len"], workload["hidden"]
    t = b * s
    nh = h // HEAD_DIM
    moved = (
        2 * nbytes((t, h), torch.bfloat16)
        + _nvfp4.weight_bytes(3 * h, h)
        + _nvfp4.weight_bytes(h, h)
        + 2 * 4
    )
    causal_pairs = b * nh * s * (s + 1) / 2
    fp32 = 5.0 * t * h * 2 + 6.0 * t * 2 * h + 5.0 * causal_pairs  # quantise, RoPE, softmax
    return Cost(
        bytes=moved,
        flops={"fp4": 2.0 * t * h * 4 * h, "bf16": 4.0 * causal_pairs * HEAD_DIM, "fp32": fp32},
    )
