"""Mamba2 selective scan (scalar-decay SSM recurrence over time) of Nemotron-H-8B's Mamba layers, bf16."""

# Source: SOL-ExecBench problem `mamba2_selective_scan_nemotron_h` (dataset not redistributable);
#   semantics written from the operator's public definition, not from that dataset.
# Upstream: the Mamba2 SSM of mamba_ssm (state-spaces/mamba) as Nemotron-H runs it: dt_softplus with
#   dt_bias, scalar A per head, grouped B/C, D skip, z=None (Nemotron-H gates in its RMSNorm instead).
#   Eager form = the selective-scan reference recurrence (a Python loop over time steps, vectorised
#   over batch, heads, head dim and state), like mamba_ssm's selective_scan_ref.
# Production shape: Nemotron-H-8B (mamba_num_heads 128, mamba_head_dim 64, ssm_state_size 128,
#   n_groups 8): a batch of 8 sequences × 256 tokens continuing from carried fp32 SSM states (the eager
#   loop over time costs ~0.12 ms a step on an H200, which bounds seq_len).
# Assumptions (SOL): dt arrives raw from in_proj (bf16) and softplus(dt + dt_bias) is applied here;
#   the scan returns the final state (vLLM/HF keep it for decoding); no dt clamping (time_step_limit
#   is (0, inf) in the config).

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, nbytes, upcast
from problems.linear_attention._util import mamba_ssm_inputs, ssd_flops

ID = "p63"
NAME = "mamba2_selective_scan_nemotron_h_bf16"
FAMILY = "linear_attention"
SOURCE = "SOL"
DESCRIPTION = """\
Mamba2 selective scan (SSM recurrence) for Nemotron-H. Inputs: `x` [batch, seq_len, 128, 64] bf16
(heads × head dim); `dt` [batch, seq_len, 128] bf16 (raw time step); `A` [128] fp32 (negative);
`B`, `C` [batch, seq_len, 8, 128] bf16 (8 groups × state 128; head h uses group h // 16); `D` [128]
fp32; `dt_bias` [128] fp32; `initial_state` [batch, 128, 64, 128] fp32 (heads × head dim × state).
In float32: dt' = softplus(dt + dt_bias), decay_t = exp(dt'_t * A). Per sequence and head, with state
h [64, 128] starting at initial_state, for t in order: h = decay_t * h + dt'_t * x_t B_t^T (outer
product of the head's x_t [64] and its group's B_t [128]); y_t = h C_t + D * x_t.
Outputs: `y` [batch, seq_len, 128, 64] bf16 and `final_state` [batch, 128, 64, 128] fp32 (h after the
last token). Any evaluation order is allowed (chunked SSD forms are equivalent)."""
NOTES = ""
TOLERANCE_NOTE = """\
`final_state` is fp32, so its allowance is ~3x the fp32 reference's own rounding error: keep the
state path in fp32; bf16/tf32 tensor-core products there will not pass."""
AXES = {"batch": "var", "seq_len": "var", "nheads": 128, "headdim": 64, "ngroups": 8, "dstate": 128}
INPUTS = {
    "x": (("batch", "seq_len", "nheads", "headdim"), "bfloat16"),
    "dt": (("batch", "seq_len", "nheads"), "bfloat16"),
    "A": (("nheads",), "float32"),
    "B": (("batch", "seq_len", "ngroups", "dstate"), "bfloat16"),
    "C": (("batch", "seq_len", "ngroups", "dstate"), "bfloat16"),
    "D": (("nheads",), "float32"),
    "dt_bias": (("nheads",), "float32"),
    "initial_state": (("batch", "nheads", "headdim", "dstate"), "float32"),
}
OUTPUTS = {
    "y": (("batch", "seq_len", "nheads", "headdim"), "bfloat16"),
    "final_state": (("batch", "nheads", "headdim", "dstate"), "float32"),
}
INPLACE: tuple[str, ...] = ()
_MODEL = {"nheads": 128, "headdim": 64, "ngroups": 8, "dstate": 128}
WORKLOAD = {"batch": 8, "seq_len": 256, **_MODEL}
SMOKE = {"batch": 1, "seq_len": 8, **_MODEL}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    return mamba_ssm_inputs(workload, seed=seed, device=device)


def reference(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    dt_bias: torch.Tensor,
    initial_state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    rep = x.shape[2] // B.shape[2]
    xf = upcast(x)
    dtp = F.softplus(upcast(dt) + upcast(dt_bias))  # [b, L, h]
    decay = torch.exp(dtp * upcast(A))  # [b, L, h]
    xdt = xf * dtp[..., None]  # [b, L, h, p]
    Bh = upcast(B).repeat_interleave(rep, dim=2)  # [b, L, h, n]
    Ch = upcast(C).repeat_interleave(rep, dim=2)
    state = upcast(initial_state)
    ys = []
    for t in range(x.shape[1]):
        state = state * decay[:, t, :, None, None] + xdt[:, t, :, :, None] * Bh[:, t, :, None, :]
        ys.append((state @ Ch[:, t, :, :, None]).squeeze(-1))
    y = torch.stack(ys, dim=1) + upcast(D)[:, None] * xf
    return y.to(x.dtype), state.to(initial_state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, L = workload["batch"], workload["seq_len"]
    h, p, g, n = workload["nheads"], workload["headdim"], workload["ngroups"], workload["dstate"]
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        2 * nbytes((b, L, h, p), bf)  # x in, y out
        + nbytes((b, L, h), bf)
        + 2 * nbytes((b, L, g, n), bf)
        + 3 * nbytes((h,), f32)
        + 2 * nbytes((b, h, p, n), f32)  # initial state in, final state out
    )
    # the chunked SSD form on tensor cores (chunk 128 as Nemotron-H); decays, dt, D skip elementwise
    return Cost(
        bytes=moved,
        flops={"bf16": ssd_flops(b * L, h, g, p, n, 128), "fp32": 6.0 * b * L * h + 3.0 * b * L * h * p},
    )
