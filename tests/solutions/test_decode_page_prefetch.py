"""Plan `pageprefetch` of p01 and p03 (both DSLs): the K/V rows its steps read from page indices loaded a
step ahead are the rows plan `ctaperseqhead` reads (p01, one token a page: kv_indices[kv_indptr[b] + t];
p03: kv_indices[kv_indptr[b] + t / 64]·64 + t % 64), every token of every sequence exactly once, and
every kv_indices load stays inside the sequence's own entries. Replayed on the SMOKE and production
draws' page tables (CPU, index math only)."""

from __future__ import annotations

import pytest
import torch
from kernel_emulation import constants, inputs, problem, solution


def _step_rows(c: dict, indices: torch.Tensor, start: int, length: int) -> tuple[list[int], list[int]]:
    """(rows read, kv_indices positions loaded) by one CTA of plan `pageprefetch`, in the kernel's order."""
    rows, loaded = [], []
    ahead = 0
    if length > 0:
        loaded.append(start)
        ahead = int(indices[start])
    for it in range((length + c["STEP"] - 1) // c["STEP"]):
        for u in range(c["UNROLL"]):
            for row in range(c["ROWS"]):  # half-warp `row` of the CTA
                if it * c["STEP"] + u * c["ROWS"] + row < length:
                    rows.append(ahead * c["PS"] + u * c["ROWS"] + row)
        if (it + 1) * c["STEP"] < length:
            loaded.append(start + it + 1)
            ahead = int(indices[start + it + 1])
    return rows, loaded


@pytest.mark.parametrize("dsl", ["tirx", "cutedsl"])
@pytest.mark.parametrize("which", ["smoke", "production"])
def test_p03_pageprefetch_reads_the_rows_of_ctaperseqhead(dsl: str, which: str) -> None:
    c = constants(solution("attention", f"03_pageprefetch_{dsl}.py"))
    assert c == {k: v for k, v in constants(solution("attention", f"03_ctaperseqhead_{dsl}.py")).items() if k in c}
    prob = problem(3)
    args = dict(zip(prob.inputs, inputs(prob, prob.smoke if which == "smoke" else prob.workload), strict=True))
    indptr, indices, last = args["kv_indptr"], args["kv_indices"], args["kv_last_page_len"]
    for b in range(indptr.numel() - 1):
        start, stop = int(indptr[b]), int(indptr[b + 1])
        length = (stop - start - 1) * c["PS"] + int(last[b])
        rows, loaded = _step_rows(c, indices, start, length)
        expected = sorted(int(indices[start + t // c["PS"]]) * c["PS"] + t % c["PS"] for t in range(length))
        assert sorted(rows) == expected, f"sequence {b}"
        assert all(start <= i < stop for i in loaded), f"sequence {b}: a kv_indices load outside its entries"


def _p01_step_rows(c: dict, indices: torch.Tensor, start: int, length: int) -> tuple[list[int], list[int]]:
    """(rows read, kv_indices positions loaded) by one CTA of p01's plan `pageprefetch`, in the kernel's order."""
    rows, loaded = [], []
    lanes = [(u, row) for u in range(c["UNROLL"]) for row in range(c["ROWS"])]
    ahead = {lane: 0 for lane in lanes}
    for u, row in lanes:
        if u * c["ROWS"] + row < length:
            loaded.append(start + u * c["ROWS"] + row)
            ahead[(u, row)] = int(indices[loaded[-1]])
    for it in range((length + c["STEP"] - 1) // c["STEP"]):
        rows += [ahead[(u, row)] for u, row in lanes if it * c["STEP"] + u * c["ROWS"] + row < length]
        for u, row in lanes:
            t = (it + 1) * c["STEP"] + u * c["ROWS"] + row
            if t < length:
                loaded.append(start + t)
                ahead[(u, row)] = int(indices[start + t])
    return rows, loaded


@pytest.mark.parametrize("dsl", ["tirx", "cutedsl"])
@pytest.mark.parametrize("which", ["smoke", "production"])
def test_p01_pageprefetch_reads_the_rows_of_ctaperseqhead(dsl: str, which: str) -> None:
    c = constants(solution("attention", f"01_pageprefetch_{dsl}.py"))
    assert c == {k: v for k, v in constants(solution("attention", f"01_ctaperseqhead_{dsl}.py")).items() if k in c}
    prob = problem(1)
    args = dict(zip(prob.inputs, inputs(prob, prob.smoke if which == "smoke" else prob.workload), strict=True))
    indptr, indices = args["kv_indptr"], args["kv_indices"]
    for b in range(indptr.numel() - 1):
        start, stop = int(indptr[b]), int(indptr[b + 1])
        rows, loaded = _p01_step_rows(c, indices, start, stop - start)
        assert sorted(rows) == sorted(int(i) for i in indices[start:stop]), f"sequence {b}"
        assert all(start <= i < stop for i in loaded), f"sequence {b}: a kv_indices load outside its entries"
