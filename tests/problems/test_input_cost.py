"""``input_cost``: a call's useful work on its own inputs, where it depends on their values (problems/FORMAT.md).

The verifier takes the padding a reference computes on out of its work by the draw's useful FLOPs; priced at the
lengths' expectation, a draw of short sequences left a per-sequence eager attention short of the reference's passes
(p03, the adversarial case ``attention_backward_as_forward_p03``: passed in about 1 of 8 runs). Two checks, each able
to fail: attention's pairs counted one (query, key) at a time from the page table, and, on references that compute
no padding, their recorded products a fixed multiple of ``input_cost``'s on every draw (``cost()``'s are not).
"""

from __future__ import annotations

import pytest
import torch

from mkbsim.catalog import load_catalog
from mkbsim.verifier import _eagerwork

CATALOG = load_catalog()
SEEDS = (0, 1, 2, 3)


def _inputs_by_name(problem, inputs: tuple) -> dict:
    return dict(zip(problem.inputs, inputs, strict=True))


def _pairs_one_by_one(problem, inputs: tuple) -> int:
    """(query, key) pairs a sequence's queries attend to, counted by looping: its keys from the page table page by
    page (every page full but the last), its queries from ``qo_indptr`` (one a sequence in decode), a query at
    position i of Lq seeing keys up to i + Lk - Lq where the problem is causal."""
    d = _inputs_by_name(problem, inputs)
    kvp = d["kv_indptr"].tolist()
    qo = d["qo_indptr"].tolist() if "qo_indptr" in d else list(range(len(kvp)))
    page_size = d["k_cache"].shape[1] if "k_cache" in d else d["ckv_cache"].shape[1] if "ckv_cache" in d else 1
    causal = "qo_indptr" in d
    count = 0
    for b in range(len(kvp) - 1):
        if "kv_indices" in d:
            pages = kvp[b + 1] - kvp[b]
            last = int(d["kv_last_page_len"][b]) if "kv_last_page_len" in d else 1
            keys = sum(page_size if i < pages - 1 else last for i in range(pages))
        else:
            keys = kvp[b + 1] - kvp[b]
        queries = qo[b + 1] - qo[b]
        for i in range(queries):
            count += sum(1 for j in range(keys) if not causal or j <= i + keys - queries)
    return count


ATTENTION = [
    p for p in CATALOG if p.family == "attention" and "kv_indptr" in p.inputs and hasattr(p.module, "input_cost")
]


@pytest.mark.parametrize("problem", ATTENTION, ids=lambda p: p.id)
def test_attention_pairs_are_the_draw_s_own(problem) -> None:
    """Every paged or ragged attention problem prices its draw's pairs; its nominal cost is off on some draw."""
    assert {p.id for p in ATTENTION} >= {"p03", "p04", "p06", "p08", "p09", "p15", "p16"}
    nominal = problem.cost(problem.smoke).flops["fp32"]
    off = 0
    for seed in SEEDS:
        inputs = problem.make_inputs(problem.smoke, seed=seed)
        heads = inputs[0].shape[1]
        priced = problem.input_cost(problem.smoke, inputs).flops["fp32"]  # softmax: 5 a (pair, head)
        assert priced == pytest.approx(5.0 * heads * _pairs_one_by_one(problem, inputs), rel=1e-9)
        off += abs(priced - nominal) > 1e-3 * nominal
    if problem.id not in ("p01", "p02"):  # page size 1, no queries of their own: the nominal count is exact
        assert off, "the draws all had the nominal pairs: the check cannot tell input_cost from cost"


def _products(problem, inputs: tuple) -> float:
    inplace = [i for i, name in enumerate(problem.inputs) if name in problem.inplace]
    work = _eagerwork.reference_work(problem.reference, inputs, 0.0, inplace)
    return work.amounts["matmul"]


@pytest.mark.parametrize("number", ["p11", "p44", "p47", "p48", "p51"])
def test_unpadded_references_compute_input_cost_s_products(number: str) -> None:
    """Varlen vision attention (a loop over sequences) and the MoE layers (each local expert's routed rows): the
    recorded products over ``input_cost``'s FLOPs are the same on every draw (within 1%: the FLOPs' element work
    per token is not per pair), where over ``cost()``'s they vary by more."""
    torch.set_num_threads(1)
    problem = CATALOG.get(number)
    priced, nominal = [], []
    for seed in SEEDS:
        inputs = problem.make_inputs(problem.smoke, seed=seed)
        products = _products(problem, inputs)
        priced.append(products / problem.input_cost(problem.smoke, inputs).total_flops)
        nominal.append(products / problem.cost(problem.smoke).total_flops)
    assert max(priced) / min(priced) < 1.01, priced
    assert max(nominal) / min(nominal) > 1.03, nominal
