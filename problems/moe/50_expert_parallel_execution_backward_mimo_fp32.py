"""Backward of MiMo-V2-Flash expert execution on one EP rank: grouped SwiGLU experts on dispatched rows."""

# Source: SOL-ExecBench problem `expert_parallel_execution_backward_mimo_fp32` (dataset not
#   redistributable); semantics written here from the name and public MoE training practice.
# Upstream: the expert stage of an expert-parallel MoE layer (Megatron-style GroupedMLP after the
#   all-to-all): rows already permuted and grouped by local expert, SwiGLU expert MLP (gate_proj / up_proj
#   / down_proj, no bias), routing probability applied to each row's expert output; backward of that stage.
# Production shape: XiaomiMiMo/MiMo-V2-Flash config: hidden_size 4096, moe_intermediate_size 2048,
#   n_routed_experts 256, top-8. One rank holding 4 experts (expert parallelism 64) receives 4096 rows;
#   fp32 weights + their gradients for 4 experts are 0.8 GB.

from __future__ import annotations

import torch

from problems._common import Cost, cu_seqlens, generator, nbytes, rand, randn, seq_lens, upcast

ID = "p50"
NAME = "expert_parallel_execution_backward_mimo_fp32"
FAMILY = "moe"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of the expert computation on one expert-parallel rank of MiMo-V2-Flash (4 local
SwiGLU experts, hidden 4096, intermediate 2048), in float32.

Inputs: `hidden_states` [num_rows, 4096] float32 — token copies already dispatched to this rank and
grouped by local expert; `expert_offsets` [5] int32 — rows expert_offsets[e] .. expert_offsets[e+1]-1
belong to local expert e (expert_offsets[0] = 0, expert_offsets[4] = num_rows, groups may be of any
size); `w13` [4, 4096, 4096] float32 — per expert, rows 0..2047 are the gate projection and rows
2048..4095 the up projection; `w2` [4, 4096, 2048] float32 — down projection; `probs` [num_rows]
float32 — routing weight of each row; `grad_output` [num_rows, 4096] float32 — gradient w.r.t. the
forward output.

Forward being differentiated, for a row r of expert e: h = w13[e] x_r (4096 values), act =
silu(h[0:2048]) * h[2048:4096], y_r = w2[e] act, out_r = probs[r] * y_r.

Outputs (float32): `grad_hidden_states` [num_rows, 4096], `grad_w13` [4, 4096, 4096], `grad_w2`
[4, 4096, 2048], `grad_probs` [num_rows] = <grad_output_r, y_r>. An expert with no rows gets zero
weight gradients. Intermediates are not saved: the forward must be recomputed."""
NOTES = ""
AXES = {
    "num_rows": "var",
    "num_local_experts": 4,
    "num_local_experts_plus_one": 5,
    "hidden_size": 4096,
    "intermediate_size": 2048,
    "gate_up_size": 4096,
}
INPUTS = {
    "hidden_states": (("num_rows", "hidden_size"), "float32"),
    "expert_offsets": (("num_local_experts_plus_one",), "int32"),
    "w13": (("num_local_experts", "gate_up_size", "hidden_size"), "float32"),
    "w2": (("num_local_experts", "hidden_size", "intermediate_size"), "float32"),
    "probs": (("num_rows",), "float32"),
    "grad_output": (("num_rows", "hidden_size"), "float32"),
}
OUTPUTS = {
    "grad_hidden_states": (("num_rows", "hidden_size"), "float32"),
    "grad_w13": (("num_local_experts", "gate_up_size", "hidden_size"), "float32"),
    "grad_w2": (("num_local_experts", "hidden_size", "intermediate_size"), "float32"),
    "grad_probs": (("num_rows",), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_rows": 4096,
    "num_local_experts": 4,
    "num_local_experts_plus_one": 5,
    "hidden_size": 4096,
    "intermediate_size": 2048,
    "gate_up_size": 4096,
}
SMOKE = {
    "num_rows": 40,
    "num_local_experts": 4,
    "num_local_experts_plus_one": 5,
    "hidden_size": 64,
    "intermediate_size": 32,
    "gate_up_size": 64,
}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    rows, local = workload["num_rows"], workload["num_local_experts"]
    hidden, inter = workload["hidden_size"], workload["intermediate_size"]
    # ragged expert groups, as routing leaves them (a group may be empty)
    offsets = cu_seqlens(seq_lens(local, rows, gen, minimum=0), device)
    x = randn((rows, hidden), torch.float32, gen, device)
    w13 = randn((local, 2 * inter, hidden), torch.float32, gen, device, scale=hidden**-0.5)
    w2 = randn((local, hidden, inter), torch.float32, gen, device, scale=inter**-0.5)
    probs = rand((rows,), torch.float32, gen, device, low=0.02, high=0.4)  # normalised top-8 weights
    grad_output = randn((rows, hidden), torch.float32, gen, device)
    return x, offsets, w13, w2, probs, grad_output


def reference(
    hidden_states: torch.Tensor,
    expert_offsets: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    probs: torch.Tensor,
    grad_output: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    bounds = expert_offsets.tolist()
    x, a, b = upcast(hidden_states), upcast(w13), upcast(w2)
    p, go = upcast(probs), upcast(grad_output)
    gx, ga, gb = torch.empty_like(x), torch.empty_like(a), torch.empty_like(b)
    gp = torch.empty_like(p)
    inter = b.shape[2]
    for e in range(a.shape[0]):  # one set of GEMMs per local expert, as a grouped GEMM would
        lo, hi = bounds[e], bounds[e + 1]
        xe = x[lo:hi]
        # recompute the forward (nothing was saved)
        h = xe @ a[e].t()
        g, u = h[:, :inter], h[:, inter:]
        sig = torch.sigmoid(g)
        silu = g * sig
        act = silu * u
        y = act @ b[e].t()
        # out = probs * y
        gp[lo:hi] = (go[lo:hi] * y).sum(dim=-1)
        gy = go[lo:hi] * p[lo:hi, None]
        gb[e] = gy.t() @ act
        g_act = gy @ b[e]
        g_h = torch.cat((g_act * u * sig * (1 + g * (1 - sig)), g_act * silu), dim=-1)
        ga[e] = g_h.t() @ xe
        gx[lo:hi] = g_h @ a[e]
    return gx.to(hidden_states.dtype), ga.to(w13.dtype), gb.to(w2.dtype), gp.to(probs.dtype)


def cost(workload: dict[str, int]) -> Cost:
    rows, local = workload["num_rows"], workload["num_local_experts"]
    hidden, inter = workload["hidden_size"], workload["intermediate_size"]
    f32 = torch.float32
    moved = (
        3 * nbytes((rows, hidden), f32)  # x, grad_output in; grad_x out
        + nbytes((local + 1,), torch.int32)
        + 2 * nbytes((local, 2 * inter, hidden), f32)  # w13 in, grad_w13 out
        + 2 * nbytes((local, hidden, inter), f32)  # w2 in, grad_w2 out
        + 2 * nbytes((rows,), f32)  # probs in, grad_probs out
    )
    # per row: recompute h (2·2I·H) and y (2·H·I); backward d_act, d_w2 (2·H·I each), d_x, d_w13 (2·2I·H each)
    gemm = rows * (3 * 2.0 * 2 * inter * hidden + 3 * 2.0 * hidden * inter)
    elementwise = rows * (12.0 * inter + 4.0 * hidden)
    return Cost(bytes=moved, flops={"fp32": gemm + elementwise})
