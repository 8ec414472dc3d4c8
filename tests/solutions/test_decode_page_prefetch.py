"""Plans `pageprefetch` (p01, p03; both DSLs) and `splitkvprefetch` (p01, p02, p03; both DSLs): the K/V
rows their steps read from page indices loaded a step ahead are the rows plans `ctaperseqhead` and `splitkv`
read (p01, p02: one token a page, kv_indices[kv_indptr[b] + t]; p03: kv_indices[kv_indptr[b] + t / 64]·64
+ t % 64), every token of every sequence exactly once, and every kv_indices load stays inside the CTA's own
entries (split-KV: its slice of the sequence). Replayed on the SMOKE and production draws' page tables (CPU,
index math only)."""

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


def _lane_ahead_rows(c: dict, indices: torch.Tensor, start: int, length: int) -> tuple[list[int], list[int]]:
    """(rows read, kv_indices positions loaded) by one CTA of page size 1 whose lane (u, half-warp row) keeps its
    next step's page index (p01's `pageprefetch`, p02's `splitkvprefetch`), in the kernel's order."""
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
        rows, loaded = _lane_ahead_rows(c, indices, start, stop - start)
        assert sorted(rows) == sorted(int(i) for i in indices[start:stop]), f"sequence {b}"
        assert all(start <= i < stop for i in loaded), f"sequence {b}: a kv_indices load outside its entries"


SPLITKV_PREFETCH = [f"{nn}_splitkvprefetch_{dsl}.py" for nn in ("01", "02") for dsl in ("tirx", "cutedsl")]


@pytest.mark.parametrize("name", SPLITKV_PREFETCH)
@pytest.mark.parametrize("which", ["smoke", "production"])
def test_splitkvprefetch_reads_the_rows_of_splitkv(name: str, which: str) -> None:
    c = constants(solution("attention", name))
    split_plan = constants(solution("attention", f"{name[:2]}_splitkv_tirx.py"))  # the tiling plan splitkv has
    assert {k: c[k] for k in ("ROWS", "UNROLL", "STEP", "SPLITS")} == {
        k: split_plan[k] for k in ("ROWS", "UNROLL", "STEP", "SPLITS")
    }
    prob = problem(int(name[:2]))
    args = dict(zip(prob.inputs, inputs(prob, prob.smoke if which == "smoke" else prob.workload), strict=True))
    indptr, indices = args["kv_indptr"], args["kv_indices"]
    for b in range(indptr.numel() - 1):
        seq_start, seq_len = int(indptr[b]), int(indptr[b + 1]) - int(indptr[b])
        per_split = (seq_len + c["SPLITS"] - 1) // c["SPLITS"]
        rows: list[int] = []
        for sp in range(c["SPLITS"]):  # the CTAs of the sequence's slices (each KV head's CTAs read the same rows)
            lo, hi = min(sp * per_split, seq_len), min((sp + 1) * per_split, seq_len)
            slice_rows, loaded = _lane_ahead_rows(c, indices, seq_start + lo, hi - lo)
            assert all(seq_start + lo <= i < seq_start + hi for i in loaded), f"sequence {b} slice {sp}"
            rows += slice_rows
        assert sorted(rows) == sorted(int(i) for i in indices[seq_start : seq_start + seq_len]), f"sequence {b}"


@pytest.mark.parametrize("dsl", ["tirx", "cutedsl"])
@pytest.mark.parametrize("which", ["smoke", "production"])
def test_p03_splitkvprefetch_reads_the_rows_of_pageprefetch(dsl: str, which: str) -> None:
    c = constants(solution("attention", f"03_splitkvprefetch_{dsl}.py"))
    page_plan = constants(solution("attention", f"03_pageprefetch_{dsl}.py"))
    assert {k: v for k, v in c.items() if k in page_plan} == page_plan
    prob = problem(3)
    args = dict(zip(prob.inputs, inputs(prob, prob.smoke if which == "smoke" else prob.workload), strict=True))
    indptr, indices, last = args["kv_indptr"], args["kv_indices"], args["kv_last_page_len"]
    for b in range(indptr.numel() - 1):
        first, n_pages = int(indptr[b]), int(indptr[b + 1]) - int(indptr[b])
        seq_len = (n_pages - 1) * c["PS"] + int(last[b])
        per_split = (n_pages + c["SPLITS"] - 1) // c["SPLITS"]
        rows: list[int] = []
        for sp in range(c["SPLITS"]):  # slices of the sequence's pages
            p0 = min(sp * per_split, n_pages)
            p1 = min(p0 + per_split, n_pages)
            slice_rows, loaded = _step_rows(c, indices, first + p0, max(min(p1 * c["PS"], seq_len) - p0 * c["PS"], 0))
            assert all(first + p0 <= i < first + p1 for i in loaded), f"sequence {b} slice {sp}"
            rows += slice_rows
        expected = sorted(int(indices[first + t // c["PS"]]) * c["PS"] + t % c["PS"] for t in range(seq_len))
        assert sorted(rows) == expected, f"sequence {b}"
