"""Mamba2 SSD intra-chunk (diagonal-block) output of Nemotron-Nano-9B-v2's Mamba layers, bf16."""

# Source: SOL-ExecBench problem `mamba2_intra_chunk_diagonal_nemotron_nano` (dataset not redistributable);
#   semantics written from the operator's public definition, not from that dataset.
# Upstream: step 1 of Mamba2's chunked SSD (ssd_minimal_discrete of state-spaces/mamba; the diagonal-block
#   part of mamba_ssm's _chunk_scan_fwd): Y_diag = (C B^T ∘ exp(segsum(A dt))) (x dt) inside each chunk,
#   with C B^T formed per group (_bmm_chunk_fwd) and broadcast to the group's heads.
# Production shape: NVIDIA-Nemotron-Nano-9B-v2 (mamba_num_heads 128, mamba_head_dim 80, ssm_state_size
#   128, n_groups 8, chunk_size 128): one 8192-token prefill.
# Assumptions (SOL): dt arrives already softplus'ed (fp32, as _chunk_cumsum_fwd produces it); the output
#   is only the diagonal-block term (no inter-chunk states, no D skip), in bf16.

from __future__ import annotations

import math

import torch

from problems._common import Cost, generator, nbytes, rand, randn, upcast
from problems.linear_attention._util import decay_params, segsum

ID = "p65"
NAME = "mamba2_intra_chunk_diagonal_nemotron_nano_bf16"
FAMILY = "linear_attention"
SOURCE = "SOL"
DESCRIPTION = """\
Intra-chunk (diagonal block) output of Mamba2's chunked SSD for Nemotron-Nano-9B-v2, chunk length 128.
Inputs: `x` [batch, seq_len, 128, 80] bf16 (heads × head dim); `dt` [batch, seq_len, 128] fp32 (time
step after softplus, > 0); `A` [128] fp32 (negative); `B`, `C` [batch, seq_len, 8, 128] bf16 (8 groups
× state 128; head h uses group h // 16). seq_len is a multiple of 128; tokens are split into
consecutive chunks of 128. In float32, for every token l and head, with s running over the tokens of
l's chunk up to and including l: y_l = sum_s (C_l . B_s) * exp(sum_{s<m<=l} dt_m A) * dt_s * x_s,
where . is the dot product over the state dimension of the head's group. Nothing crosses a chunk
boundary (no carried state, no D skip). Output: `y` [batch, seq_len, 128, 80] bf16."""
NOTES = ""
AXES = {"batch": "var", "seq_len": "var", "nheads": 128, "headdim": 80, "ngroups": 8, "dstate": 128}
INPUTS = {
    "x": (("batch", "seq_len", "nheads", "headdim"), "bfloat16"),
    "dt": (("batch", "seq_len", "nheads"), "float32"),
    "A": (("nheads",), "float32"),
    "B": (("batch", "seq_len", "ngroups", "dstate"), "bfloat16"),
    "C": (("batch", "seq_len", "ngroups", "dstate"), "bfloat16"),
}
OUTPUTS = {"y": (("batch", "seq_len", "nheads", "headdim"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
_MODEL = {"nheads": 128, "headdim": 80, "ngroups": 8, "dstate": 128}
WORKLOAD = {"batch": 1, "seq_len": 8192, **_MODEL}
SMOKE = {"batch": 1, "seq_len": 128, **_MODEL}

CHUNK = 128


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, L = workload["batch"], workload["seq_len"]
    h, p, g, n = workload["nheads"], workload["headdim"], workload["ngroups"], workload["dstate"]
    x = randn((b, L, h, p), torch.bfloat16, gen, device)
    A_log, _ = decay_params((h,), gen, device)
    # dt' = softplus(raw + dt_bias): log-uniform over the model's range 1e-3..1e-1, with spikes up to ~1
    dt = torch.exp(rand((b, L, h), torch.float32, gen, device, low=math.log(1e-3), high=math.log(1.0)))
    B = randn((b, L, g, n), torch.bfloat16, gen, device)
    C = randn((b, L, g, n), torch.bfloat16, gen, device)
    return x, dt, -torch.exp(A_log), B, C


def reference(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    b, L, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    c = L // CHUNK
    dtf = upcast(dt)
    X = (upcast(x) * dtf[..., None]).reshape(b, c, CHUNK, h, p)
    Adt = (dtf * upcast(A)).reshape(b, c, CHUNK, h).permute(0, 3, 1, 2)  # [b, h, c, l]
    Lmat = torch.exp(segsum(Adt)).permute(0, 2, 1, 3, 4)  # [b, c, h, l, s], zero above the diagonal
    Bc, Cc = (upcast(t).reshape(b, c, CHUNK, g, n) for t in (B, C))
    CB = torch.einsum("bclgn,bcsgn->bcgls", Cc, Bc).repeat_interleave(h // g, dim=2)  # per group -> heads
    y = torch.einsum("bchls,bcshp->bclhp", CB * Lmat, X)
    return y.reshape(b, L, h, p).to(x.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, L = workload["batch"], workload["seq_len"]
    h, p, g, n = workload["nheads"], workload["headdim"], workload["ngroups"], workload["dstate"]
    bf = torch.bfloat16
    moved = 2 * nbytes((b, L, h, p), bf) + 2 * nbytes((b, L, g, n), bf) + nbytes((b, L, h), torch.float32)
    moved += nbytes((h,), torch.float32)
    # C B^T per group (2 Q N per token) and the masked product with x dt per head (2 Q P per token);
    # decay mask and its product per head (~3 per token and chunk position), x dt
    mm = b * L * (g * 2.0 * CHUNK * n + h * 2.0 * CHUNK * p)
    return Cost(bytes=moved, flops={"bf16": mm, "fp32": 3.0 * b * L * h * CHUNK + b * L * h * p})
