"""Mamba2 chunked SSD scan with the stable segment-sum decay masks (Granite-4.0-H-Tiny Mamba layers), bf16."""

# Source: SOL-ExecBench problem `mamba_chunk_scan_segsum_granite` (dataset not redistributable);
#   semantics written from the operator's public definition, not from that dataset.
# Upstream: Mamba2's state-space dual (SSD) in chunked form — ssd_minimal_discrete of state-spaces/mamba
#   (intra-chunk blocks exp(segsum(A dt)), chunk states, inter-chunk recurrence by segsum over chunk ends,
#   state read-out), which HF transformers' GraniteMoeHybrid torch_forward follows; dt_softplus with
#   dt_bias and the D skip as in that forward. Chunk 256 (mamba_chunk_size).
# Production shape: Granite-4.0-H-Tiny (mamba_n_heads 48, mamba_d_head 64, mamba_d_state 128,
#   mamba_n_groups 1, mamba_chunk_size 256): 2 sequences × 4096 tokens continuing from carried states.
# Assumptions (SOL): inputs as Mamba2's chunk-scan kernels take them (raw dt, A = -exp(A_log)); the final
#   state is returned (kept for decoding); no dt clamping (time_step_limit (0, inf)).

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, nbytes, upcast
from problems.linear_attention._util import mamba_ssm_inputs, segsum, ssd_flops

ID = "p64"
NAME = "mamba_chunk_scan_segsum_granite_bf16"
FAMILY = "linear_attention"
SOURCE = "SOL"
DESCRIPTION = """\
Mamba2 SSM scan in chunked (SSD) form for Granite-4.0-H. Inputs: `x` [batch, seq_len, 48, 64] bf16
(heads × head dim); `dt` [batch, seq_len, 48] bf16 (raw time step); `A` [48] fp32 (negative); `B`,
`C` [batch, seq_len, 1, 128] bf16 (one group shared by all heads, state 128); `D` [48] fp32;
`dt_bias` [48] fp32; `initial_state` [batch, 48, 64, 128] fp32. In float32: dt' = softplus(dt +
dt_bias). The result equals the recurrence, per sequence and head with h [64, 128] starting at
initial_state: h = exp(dt'_t A) h + dt'_t x_t B_t^T; y_t = h C_t + D x_t. The reference evaluates it
in chunks of 256 tokens: within a chunk y_l gets sum_{s<=l} (C_l . B_s) exp(sum_{s<m<=l} dt'_m A)
dt'_s x_s, plus the chunk-start state decayed to l and read out by C_l; chunk-start states follow
from a recurrence over chunk ends. Outputs: `y` [batch, seq_len, 48, 64] bf16 and `final_state`
[batch, 48, 64, 128] fp32."""
NOTES = ""
TOLERANCE_NOTE = """\
`final_state` is fp32, so its allowance is ~3x the fp32 reference's own rounding error: keep the
state path in fp32; bf16/tf32 tensor-core products there will not pass."""
AXES = {"batch": "var", "seq_len": "var", "nheads": 48, "headdim": 64, "ngroups": 1, "dstate": 128}
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
_MODEL = {"nheads": 48, "headdim": 64, "ngroups": 1, "dstate": 128}
WORKLOAD = {"batch": 2, "seq_len": 4096, **_MODEL}
SMOKE = {"batch": 1, "seq_len": 256, **_MODEL}

CHUNK = 256


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
    b, L, h, p = x.shape
    n = B.shape[-1]
    rep = h // B.shape[2]
    pad = (-L) % CHUNK
    c = (L + pad) // CHUNK
    dtp = F.softplus(upcast(dt) + upcast(dt_bias))  # [b, L, h]
    X = upcast(x) * dtp[..., None]
    Adt = dtp * upcast(A)
    Bh = upcast(B).repeat_interleave(rep, dim=2)
    Ch = upcast(C).repeat_interleave(rep, dim=2)
    if pad:  # zero x dt, A dt, B, C: padded steps neither decay nor feed the state
        X, Bh, Ch = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (X, Bh, Ch))
        Adt = F.pad(Adt, (0, 0, 0, pad))
    X = X.reshape(b, c, CHUNK, h, p)
    Bh, Ch = (t.reshape(b, c, CHUNK, h, n) for t in (Bh, Ch))
    Adt = Adt.reshape(b, c, CHUNK, h).permute(0, 3, 1, 2)  # [b, h, c, l]
    A_cs = Adt.cumsum(-1)
    # 1. intra-chunk (diagonal blocks): (C_l . B_s) exp(segsum) applied to x_s dt_s
    Lmat = torch.exp(segsum(Adt))  # [b, h, c, l, s]
    Bg, Cg = (t[:, :, :, ::rep] for t in (Bh, Ch))  # one copy per group
    CB = torch.einsum("bclgn,bcsgn->bgcls", Cg, Bg).repeat_interleave(rep, dim=1)  # per group -> heads
    Y_diag = torch.einsum("bhcls,bcshp->bclhp", CB * Lmat, X)
    # 2. state of each chunk from its own inputs, decayed to the chunk end
    decay_states = torch.exp(A_cs[..., -1:] - A_cs)  # [b, h, c, l]
    states = torch.einsum("bclhn,bclhp->bchpn", Bh * decay_states.permute(0, 2, 3, 1)[..., None], X)
    # 3. inter-chunk recurrence over chunk ends, starting from the initial state
    states = torch.cat([upcast(initial_state)[:, None], states], dim=1)  # [b, c + 1, h, p, n]
    decay_chunk = torch.exp(segsum(F.pad(A_cs[..., -1], (1, 0))))  # [b, h, c + 1, c + 1]
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = new_states[:, :-1], new_states[:, -1]
    # 4. chunk-start states read out at every position
    Y_off = torch.einsum("bclhn,bchpn->bclhp", Ch, states) * torch.exp(A_cs).permute(0, 2, 3, 1)[..., None]
    y = (Y_diag + Y_off).reshape(b, c * CHUNK, h, p)[:, :L] + upcast(D)[:, None] * upcast(x)
    return y.to(x.dtype), final_state.to(initial_state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, L = workload["batch"], workload["seq_len"]
    h, p, g, n = workload["nheads"], workload["headdim"], workload["ngroups"], workload["dstate"]
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        2 * nbytes((b, L, h, p), bf)  # x in, y out
        + nbytes((b, L, h), bf)
        + 2 * nbytes((b, L, g, n), bf)
        + 3 * nbytes((h,), f32)
        + 2 * nbytes((b, h, p, n), f32)
    )
    # decay masks exp(segsum) per head (2 per chunk-matrix element / token: CHUNK), dt and D skip
    elementwise = 2.0 * b * L * h * CHUNK + 6.0 * b * L * h + 3.0 * b * L * h * p
    return Cost(bytes=moved, flops={"bf16": ssd_flops(b * L, h, g, p, n, CHUNK), "fp32": elementwise})
