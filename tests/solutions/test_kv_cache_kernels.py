"""CPU emulations of kv_cache DSL solutions' plans (grid, per-thread index maps), checked against each problem's
reference under the verifier's allowance.

The CuTe DSL and TIRx files of a problem implement one plan: the emulation reads the tiling constants of both and
requires them to agree.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from kernel_emulation import assert_bijection, constants, inputs, problem, solution, worst_error

FAMILY = "kv_cache"


def _plan(number: int, plan: str) -> dict[str, Any]:
    tirx = constants(solution(FAMILY, f"{number}_{plan}_tirx.py"))
    cute = constants(solution(FAMILY, f"{number}_{plan}_cutedsl.py"))
    shared = set(tirx) & set(cute)
    assert {k: tirx[k] for k in shared} == {k: cute[k] for k in shared}
    return tirx


def _emulate_p23_tworows(
    c: dict[str, Any],
    src_cache: torch.Tensor,
    block_table: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    seq_starts: torch.Tensor,
    scale: torch.Tensor,
    dst: torch.Tensor,
) -> torch.Tensor:
    """Plan `tworows`: thread tx of CTA bx owns vector tx % LANES of rows r = bx ROWS_PER_CTA + tx // LANES
    + k GROUPS (k < ROWS), clamped to the last row for the loads and stored only when in range; a row's
    request is the count of cu_seq_lens[1:num_seqs] <= row. Every stored (row, vector) must be stored once."""
    total = dst.shape[0]
    grid = (total + c["ROWS_PER_CTA"] - 1) // c["ROWS_PER_CTA"]
    bx = torch.arange(grid)[:, None]
    tx = torch.arange(c["THREADS"])[None, :]
    seg = (tx % c["LANES"]).expand(grid, -1).reshape(-1)
    row0 = (bx * c["ROWS_PER_CTA"] + tx // c["LANES"]).reshape(-1)
    out = dst.clone()
    stored_rows, stored_segs = [], []
    for k in range(c["ROWS"]):
        row = row0 + k * c["GROUPS"]
        clamped = row.clamp(max=total - 1)
        seq = (cu_seq_lens[1:-1][None, :] <= clamped[:, None]).sum(1)
        pos = seq_starts[seq] + clamped - cu_seq_lens[seq]
        blk = block_table[seq, pos // c["BLOCK"]]
        lanes = seg[:, None] * c["VEC"] + torch.arange(c["VEC"])[None, :]
        codes = src_cache[blk[:, None], (pos % c["BLOCK"])[:, None], lanes]
        vals = (codes.float() * scale.float()).to(dst.dtype)
        live = row < total
        out[row[live][:, None], lanes[live]] = vals[live]
        stored_rows.append(row[live])
        stored_segs.append(seg[live])
    assert_bijection(torch.cat(stored_rows), torch.cat(stored_segs), shape=(total, c["LANES"]))
    return out


WORKLOADS = [
    pytest.param("smoke", id="smoke"),
    pytest.param({"total_tokens": 4099}, id="production-like", marks=pytest.mark.slow),  # a partial last CTA
]


@pytest.mark.parametrize("which", WORKLOADS)
def test_p23_tworows_plan_matches_reference(which: Any) -> None:
    prob = problem(23)
    args = inputs(prob, prob.smoke if which == "smoke" else {**prob.workload, **which})
    dst = _emulate_p23_tworows(_plan(23, "tworows"), *args)
    assert worst_error(prob, args, dst) < 1
