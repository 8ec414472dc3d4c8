"""Derived credit follows elements, not operators (DESIGN §5, "derived credit").

Each case drives the provenance vault as ``test_provenance_bytes.py`` does. Under the per-operator rule this
replaced (an eager operator whose DSL operands outweighed its eager-made ones 4 to 1 made its whole result the
DSL's; contractions ignored their eager-made operands) every case marked "passed before" judged the eager
answer 0% outside the DSL.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mkbsim.verifier import VerifierSession, _eagerwork, _provenance
from tests.verifier.test_provenance_bytes import ROWS, Audit, N, _answer, _halves, audit, zero_fill

__all__ = ["audit"]  # the fixture

ADVERSARIAL = Path(__file__).with_name("adversarial")


def _dsl(audit: Audit, shape: list[int], fill: torch.Tensor | None = None) -> torch.Tensor:
    """A tensor a DSL launch wrote (zeros, or ``fill``)."""
    t = audit.eager("aten.empty.memory_format", (shape,), {"dtype": torch.float32})
    audit.launch(zero_fill if fill is None else (lambda s: s.copy_(fill)), t)
    return t


def test_an_eager_answer_concatenated_with_dsl_data_and_sliced_out_is_not_the_dsls(audit: Audit) -> None:
    """Passed before: the concatenation's DSL operand was 4x the answer's size."""
    junk = _dsl(audit, [4 * ROWS // 2, N // ROWS])
    pieces = []
    for half in _halves():
        both = audit.eager("aten.cat.default", ([half, junk],))
        pieces.append(audit.eager("aten.slice.Tensor", (both, 0, 0, ROWS // 2)))
    out = audit.eager("aten.cat.default", (pieces,))
    assert audit.outside_share(out) == 1.0


def test_an_eager_answer_broadcast_against_dsl_data_and_sliced_out_is_not_the_dsls(audit: Audit) -> None:
    """Passed before: the sum's DSL operand was 4x the answer's size; each answer element feeds 4 of its elements."""
    junk = _dsl(audit, [4, ROWS // 2, N // ROWS])
    pieces = []
    for half in _halves():
        wide = audit.eager("aten.add.Tensor", (half, junk))
        pieces.append(audit.eager("aten.select.int", (wide, 0, 0)))
    out = audit.eager("aten.cat.default", (pieces,))
    assert audit.outside_share(out) == 1.0


def test_a_broadcast_answer_stays_thin_through_casts_and_copies(audit: Audit) -> None:
    """Passed before: the lineage travels through a cast of the whole broadcast result and a copy of a slice."""
    junk = _dsl(audit, [4, ROWS // 2, N // ROWS])
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.bfloat16})
    for k, half in enumerate(_halves()):
        wide = audit.eager("aten.add.Tensor", (half, junk))
        cast = audit.eager("aten._to_copy.default", (wide,), {"dtype": torch.bfloat16})
        rows = audit.eager("aten.slice.Tensor", (out, 0, k * ROWS // 2, (k + 1) * ROWS // 2))
        audit.eager("aten.copy_.default", (rows, audit.eager("aten.select.int", (cast, 0, 2))))
    assert audit.outside_share(out) == 1.0


def test_a_thin_answer_hidden_behind_a_broad_eager_decoy_is_not_the_dsls(audit: Audit) -> None:
    """Two eager lineages on one element: the broad decoy (each element feeding a row) cannot vouch for the thin
    answer (each element feeding one)."""
    junk = _dsl(audit, [4, ROWS // 2, N // ROWS])
    decoy = audit.eager("aten.mul.Tensor", (torch.ones(ROWS // 2, 1), 0.0))
    pieces = []
    for half in _halves():
        wide = audit.eager("aten.add.Tensor", (audit.eager("aten.add.Tensor", (junk, decoy)), half))
        pieces.append(audit.eager("aten.select.int", (wide, 0, 0)))
    out = audit.eager("aten.cat.default", (pieces,))
    assert audit.outside_share(out) == 1.0


def test_dsl_values_stored_into_an_eager_answer_credit_only_what_they_store(audit: Audit) -> None:
    """Passed before: an indexed store's destination is no operand, so one row of DSL values stored into an eager
    answer (written half by half: no eager result of the output's size) made the whole answer the DSL's."""
    answer = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    for k, half in enumerate(_halves()):
        rows = audit.eager("aten.slice.Tensor", (answer, 0, k * ROWS // 2, (k + 1) * ROWS // 2))
        audit.eager("aten.copy_.default", (rows, audit.eager("aten.mul.Tensor", (half, 1.0))))
    values = _dsl(audit, [1, N // ROWS], torch.ones(1, N // ROWS))
    audit.eager("aten.index_put_.default", (answer, [torch.zeros(1, dtype=torch.int64)], values))
    assert audit.outside_share(answer) == (N - N // ROWS) / N


@pytest.mark.parametrize("store", ["index_put_", "index_copy_"])
def test_eager_values_stored_into_a_dsl_buffer_are_not_the_dsls(audit: Audit, store: str) -> None:
    """The destination keeps its credit only where nothing was stored (one result per call: the vault releases the
    call's memory records when it returns)."""
    buffer = _dsl(audit, [ROWS, N // ROWS])
    rows = torch.arange(ROWS // 2)
    answer = audit.eager("aten.mul.Tensor", (_answer()[: ROWS // 2], 1.0))
    if store == "index_put_":
        audit.eager("aten.index_put_.default", (buffer, [rows], answer))
    else:
        audit.eager("aten.index_copy_.default", (buffer, 0, rows, answer))
    assert audit.outside_share(buffer) == 0.5


@pytest.mark.parametrize("matrix", ["identity", "permutation", "scaled identity", "ones"])
def test_an_eager_answer_times_a_dsl_identity_or_permutation_is_not_the_dsls(audit: Audit, matrix: str) -> None:
    """Passed before: contractions ignored their eager-made operands."""
    cols = N // ROWS
    made = {"identity": torch.eye(cols), "permutation": torch.eye(cols)[torch.randperm(cols)],
            "scaled identity": 2 * torch.eye(cols), "ones": torch.ones(cols, cols)}  # fmt: skip
    dsl = _dsl(audit, [cols, cols], made[matrix])
    out = audit.eager("aten.cat.default", ([audit.eager("aten.mm.default", (h, dsl)) for h in _halves()],))
    assert audit.outside_share(out) == 1.0


def test_an_eager_answer_added_as_a_contractions_bias_is_not_the_dsls(audit: Audit) -> None:
    """Passed before: a contraction ignored every eager-made operand, its bias included."""
    cols = N // ROWS
    act = _dsl(audit, [ROWS // 2, cols], torch.randn(ROWS // 2, cols))
    pieces = [audit.eager("aten.addmm.default", (half, act, torch.zeros(cols, cols))) for half in _halves()]
    out = audit.eager("aten.cat.default", (pieces,))
    assert audit.outside_share(out) == 1.0


def test_a_reduction_over_an_answer_stacked_with_dsl_zeros_is_not_the_dsls(audit: Audit) -> None:
    """Passed before: the sum's operand was four-fifths the DSL's."""
    junk = _dsl(audit, [4, ROWS // 2, N // ROWS])
    pieces = []
    for half in _halves():
        answer = audit.eager("aten.mul.Tensor", (half, 1.0))
        stacked = audit.eager("aten.cat.default", ([audit.eager("aten.unsqueeze.default", (answer, 0)), junk],))
        pieces.append(audit.eager("aten.sum.dim_IntList", (stacked, [0])))
    out = audit.eager("aten.cat.default", (pieces,))
    assert audit.outside_share(out) == 1.0


@pytest.mark.parametrize("reduction", ["sum", "mean", "amax", "softmax", "cumsum"])
def test_dsl_rows_rescaled_by_an_eager_per_row_scale_keep_their_credit_through_a_reduction(
    audit: Audit, reduction: str
) -> None:
    """Red team rt42 F1 (p40): three DSL GEMMs' rows rescaled by an eager per-row target, then summed over the
    streams. Every element reduced into a result element rests on the one scale of its row: the result carries it
    (each feeds a row), where before the reduction dropped the credit and the plan was rejected as decorative."""
    cols = N // ROWS
    acc = _dsl(audit, [3, ROWS, cols], torch.randn(3, ROWS, cols))
    target = audit.eager("aten.mul.Tensor", (torch.rand(1, ROWS, 1), 2.0))
    scaled = audit.eager("aten.mul.Tensor", (acc, target))
    calls = {
        "sum": ("aten.sum.dim_IntList", (scaled, [0])), "mean": ("aten.mean.dim", (scaled, [-3], True)),
        "amax": ("aten.amax.default", (scaled, [0])), "softmax": ("aten._softmax.default", (scaled, -1, False)),
        "cumsum": ("aten.cumsum.default", (scaled, 2)),
    }  # fmt: skip
    name, args = calls[reduction]
    reduced = audit.eager(name, args)
    if reduced.dim() == 3:  # kept the streams' dimension: one of them is the output
        reduced = audit.eager("aten.select.int", (reduced, 0, 0))
    out = audit.eager("aten.clone.default", (reduced,))
    assert audit.outside_share(out) == 0.0


@pytest.mark.parametrize("combine", ["sum", "adds"])
def test_dsl_rows_beside_rows_left_zero_in_zeroed_memory_keep_their_credit_when_combined(
    audit: Audit, combine: str
) -> None:
    """Red team rt44 F3 (p51): one dense launch writes each expert's rows into ``torch.zeros``, the rows routed to
    another expert left zero (no evidence either way), then eager code combines the experts: a sum over them, or
    adds. The zeros counted as eager-made: the reduction gave no credit and the adds' DSL operands were not 4x them;
    the plan was decorative (with ``torch.empty`` and the kernel writing the zeros, full)."""
    cols = N // ROWS
    experts = audit.eager("aten.zeros.default", ([4, ROWS, cols],), {"dtype": torch.float32})
    routed = torch.rand(4, ROWS, 1, generator=torch.Generator().manual_seed(1)) < 0.5
    routed[0] = True  # every token has an expert: no output element is a sum of zeros alone
    values = torch.where(routed, torch.randn(4, ROWS, cols), 0.0)
    audit.launch(lambda y: y.copy_(values), experts)
    if combine == "sum":
        out = audit.eager("aten.sum.dim_IntList", (experts, [0]))
    else:
        out = audit.eager("aten.select.int", (experts, 0, 0))
        for k in range(1, 4):
            out = audit.eager("aten.add.Tensor", (out, audit.eager("aten.select.int", (experts, 0, k))))
    assert audit.outside_share(out) == 0.0


@pytest.mark.parametrize("combine", ["sum", "add"])
def test_an_eager_answer_combined_with_dsl_zeros_of_zeroed_memory_is_not_the_dsls(audit: Audit, combine: str) -> None:
    """Zeros a launch left in zeroed memory are no evidence for the DSL either: an eager answer stacked with them and
    summed, or added to them, stays eager."""
    zeros = audit.eager("aten.zeros.default", ([3, ROWS, N // ROWS],), {"dtype": torch.float32})
    audit.launch(lambda z: z.zero_(), zeros)
    answer = audit.eager("aten.mul.Tensor", (_answer(), 1.0))
    if combine == "sum":
        stacked = audit.eager("aten.cat.default", ([audit.eager("aten.unsqueeze.default", (answer, 0)), zeros],))
        out = audit.eager("aten.sum.dim_IntList", (stacked, [0]))
    else:
        out = audit.eager("aten.add.Tensor", (answer, audit.eager("aten.select.int", (zeros, 0, 1))))
    assert audit.outside_share(out) == 1.0


def test_eager_scales_that_differ_along_the_reduced_dimension_leave_no_credit(audit: Audit) -> None:
    """A result element resting on several eager elements rests on none the vault can hold to feeding a row."""
    cols = N // ROWS
    acc = _dsl(audit, [ROWS, cols, 4], torch.randn(ROWS, cols, 4))
    scale = audit.eager("aten.mul.Tensor", (torch.rand(1, 1, 4), 2.0))
    out = audit.eager("aten.sum.dim_IntList", (audit.eager("aten.mul.Tensor", (acc, scale)), [2]))
    assert audit.outside_share(out) == 1.0


def test_an_eager_answer_multiplied_into_dsl_copies_and_summed_back_is_not_the_dsls(audit: Audit) -> None:
    """Each answer element feeds four DSL copies (credited, each feeding four), which a sum over the copies folds
    back onto one element each: a lineage feeding one element of the output is not the DSL's."""
    quarter = _dsl(audit, [4, ROWS // 2, N // ROWS], 0.25 + 1e-3 * torch.randn(4, ROWS // 2, N // ROWS))
    pieces = []
    for half in _halves():
        wide = audit.eager("aten.mul.Tensor", (audit.eager("aten.mul.Tensor", (half, 1.0)), quarter))
        pieces.append(audit.eager("aten.sum.dim_IntList", (wide, [0])))
    out = audit.eager("aten.cat.default", (pieces,))
    assert audit.outside_share(out) == 1.0


def test_a_small_eager_scale_survives_casts_and_slices_of_the_dsl_result(audit: Audit) -> None:
    """A dequantisation epilogue: each eager scale feeds a whole row, before and after the slice and the cast."""
    acc = _dsl(audit, [ROWS, 2 * N // ROWS], torch.randn(ROWS, 2 * N // ROWS))
    scale = audit.eager("aten.mul.Tensor", (torch.rand(ROWS, 1), 2.0))
    scaled = audit.eager("aten.mul.Tensor", (acc, scale))
    again = audit.eager("aten.mul.Tensor", (scaled, scale))  # the same eager tensor: one lineage
    cast = audit.eager("aten._to_copy.default", (again,), {"dtype": torch.bfloat16})
    out = audit.eager("aten.clone.default", (audit.eager("aten.slice.Tensor", (cast, 1, 0, N // ROWS)),))
    assert audit.outside_share(out) == 0.0


def test_dsl_rows_concatenated_and_gathered_stay_the_dsls(audit: Audit) -> None:
    """Movement keeps the DSL's elements the DSL's: a concatenation of DSL halves, a gather of its rows."""
    halves = [_dsl(audit, [ROWS // 2, N // ROWS], h) for h in _halves()]
    both = audit.eager("aten.cat.default", (halves,))
    out = audit.eager("aten.index_select.default", (both, 0, torch.randperm(ROWS)))
    padded = audit.eager("aten.constant_pad_nd.default", (out, [0, 2], 0.0))
    assert audit.outside_share(out) == 0.0
    assert audit.outside_share(audit.eager("aten.slice.Tensor", (padded, 1, 0, N // ROWS))) == 0.0


def _seeded_answer(audit: Audit, seed: torch.Tensor, combine: str = "aten.mul.Tensor") -> torch.Tensor:
    """p36's answer computed eagerly from the cast input multiplied by a DSL ``seed`` (rt5a's F2/F4/F5 shape)."""
    x = (4 * torch.randn(ROWS, N // ROWS)).to(torch.bfloat16)  # no value the same normalised (rms about 4)
    audit.registry.protect(_provenance.report_inputs, _send=audit.send)([x])
    wide = audit.eager("aten._to_copy.default", (x,), {"dtype": torch.float32})
    seeded = audit.eager(combine, (wide, seed))
    squares = audit.eager("aten.pow.Tensor_Scalar", (seeded, 2))
    inv = audit.eager("aten.rsqrt.default", (audit.eager("aten.mean.dim", (squares, [-1], True)),))
    return audit.eager(
        "aten._to_copy.default", (audit.eager("aten.mul.Tensor", (seeded, inv)),), {"dtype": torch.bfloat16}
    )


def test_a_one_element_dsl_seed_multiplied_into_the_cast_input_derives_nothing(audit: Audit) -> None:
    """Passed before: the cast input is no eager-made operand, so the product, and all the eager work on it, was
    the DSL's."""
    assert audit.outside_share(_seeded_answer(audit, _dsl(audit, [1], torch.ones(1)))) == 1.0


def test_dsl_ones_of_the_answer_s_size_or_one_per_row_derive_nothing(audit: Audit) -> None:
    """Passed before: a constant carries no information, however many elements the kernel writes."""
    assert (
        audit.outside_share(_seeded_answer(audit, _dsl(audit, [ROWS, N // ROWS], torch.ones(ROWS, N // ROWS)))) == 1.0
    )


def test_a_constant_per_row_dsl_seed_derives_nothing(audit: Audit) -> None:
    assert audit.outside_share(_seeded_answer(audit, _dsl(audit, [ROWS, 1], torch.ones(ROWS, 1)))) == 1.0


def test_a_per_row_dsl_value_that_varies_keeps_its_credit(audit: Audit) -> None:
    """The line (DESIGN §5): a DSL operand with as many values as rows is a per-row partial plan's (an inverse RMS),
    and one the eager code undoes (RMSNorm ignores a per-row scale) cannot be told from it."""
    assert audit.outside_share(_seeded_answer(audit, _dsl(audit, [ROWS, 1], torch.rand(ROWS, 1) + 0.5))) == 0.0


def test_dsl_values_too_small_to_change_the_cast_input_derive_nothing(audit: Audit) -> None:
    """Distinct DSL values (they carry information by count) added into the cast input, too small to change any of its
    float32 elements: the sum is the cast input over again (passed before)."""
    tiny = _dsl(audit, [ROWS, N // ROWS], torch.rand(ROWS, N // ROWS) * 1e-30)
    assert audit.outside_share(_seeded_answer(audit, tiny, "aten.add.Tensor")) == 1.0


def _well_conditioned(cols: int) -> torch.Tensor:
    return torch.randn(cols, cols) / cols**0.5 + 2 * torch.eye(cols)


def test_an_eager_answer_times_a_dense_dsl_near_identity_is_not_the_dsls(audit: Audit) -> None:
    """Passed before: an identity plus a small dense DSL perturbation has a nonzero everywhere and carries
    information by every cheap test, yet the product is the eager answer within 1% (within a bf16 tolerance)."""
    cols = N // ROWS
    near = _dsl(audit, [cols, cols], torch.eye(cols) + 0.01 * torch.randn(cols, cols) / cols**0.5)
    out = audit.eager("aten.cat.default", ([audit.eager("aten.mm.default", (h, near)) for h in _halves()],))
    assert audit.outside_share(out) == 1.0


@pytest.mark.parametrize("way", ["inverse", "row scale between", "solve", "eager basis first", "difference"])
def test_an_eager_answer_through_a_dsl_matrix_and_its_inverse_is_not_the_dsls(audit: Audit, way: str) -> None:
    """Passed before: the product with a DSL matrix was the DSL's, and so was everything computed from it and the
    matrix's inverse (both the DSL's), the eager answer over again; a DSL row scale in between, a solve in place of
    the inverse, an eager change of basis first, or two products whose difference is the answer change nothing."""
    cols = N // ROWS
    values = _well_conditioned(cols)
    matrix = _dsl(audit, [cols, cols], values)
    shifted = _dsl(audit, [cols, cols], values + torch.eye(cols))
    inverse = audit.eager("aten.linalg_inv_ex.default", (matrix,))[0]
    rows = _dsl(audit, [ROWS // 2, 1], torch.rand(ROWS // 2, 1) + 0.5)
    basis = torch.linalg.qr(torch.randn(cols, cols))[0]
    inverse_after_basis = audit.eager("aten.linalg_inv_ex.default", (audit.eager("aten.mm.default", (basis, matrix)),))[
        0
    ]
    pieces = []
    for half in _halves():
        if way == "difference":  # E (I + A) - E A, both matrices the DSL's: a pointwise difference of two products
            both = audit.eager("aten.mm.default", (half, shifted))
            pieces.append(audit.eager("aten.sub.Tensor", (both, audit.eager("aten.mm.default", (half, matrix)))))
            continue
        if way == "eager basis first":
            turned = audit.eager("aten.mm.default", (audit.eager("aten.mm.default", (half, basis)), matrix))
            pieces.append(audit.eager("aten.mm.default", (turned, inverse_after_basis)))
            continue
        mixed = audit.eager("aten.mm.default", (half, matrix))
        if way == "row scale between":
            mixed = audit.eager("aten.mul.Tensor", (mixed, rows))
        if way == "solve":  # X A = Y: X^T = A^-T Y^T
            back = audit.eager("aten._linalg_solve_ex.default", (matrix.t(), mixed.t()))[0].t()  # (linalg_solve's core)
        else:
            back = audit.eager("aten.mm.default", (mixed, inverse))
        if way == "row scale between":
            back = audit.eager("aten.div.Tensor", (back, rows))
        pieces.append(back)
    assert audit.outside_share(audit.eager("aten.cat.default", (pieces,))) == 1.0


def test_dsl_data_times_an_eager_weight_keeps_its_credit(audit: Audit) -> None:
    """p52's partial plan: DSL-quantised activations, an eager GEMM against an eagerly scaled weight, whatever the
    weight (square and well conditioned, or near an identity: the result's lines are the data's, not the weight's)."""
    cols = N // ROWS
    for weight in (_well_conditioned(cols), torch.eye(cols) + 0.01 * torch.randn(cols, cols)):
        act = _dsl(audit, [ROWS, cols], torch.randn(ROWS, cols))
        scaled = audit.eager("aten.mul.Tensor", (weight, 0.5))
        out = audit.eager("aten.mm.default", (act, scaled))
        assert audit.outside_share(out) == 0.0


LAUNDERING = ("answer_times_dsl_near_identity", "answer_through_dsl_matrix_and_inverse")


@pytest.mark.parametrize("name", LAUNDERING)
def test_an_answer_laundered_through_dsl_matrices_fails_the_coverage_test_alone(
    cpu_session: VerifierSession, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the eager-work rule off (it rejects them too), the adversarial near-identity and inverse cases are
    correct and the coverage test rejects them: the output existed outside the DSL (both passed it before)."""
    monkeypatch.setattr(_eagerwork, "EAGER_SHARE", math.inf)
    report = cpu_session.verify(ADVERSARIAL / f"{name}.py", "p36", "tirx")
    assert report.correct, report.feedback
    assert not report.bypass_ok and "existed outside the DSL" in report.feedback, report.feedback


def test_a_scatter_does_not_drop_the_lineage_its_destination_s_credit_rests_on(audit: Audit) -> None:
    """An eager answer broadcast against DSL data and sliced back out (thin credit, as above) as an out-of-place
    ``index_add``'s destination, one DSL row landing on its first row: the rows nothing lands on keep no credit (the
    scatter carries no lineage, so it must not carry credit resting on one), nor does the row it lands on."""
    junk = _dsl(audit, [4, ROWS, N // ROWS], torch.randn(4, ROWS, N // ROWS))
    wide = audit.eager("aten.add.Tensor", (audit.eager("aten.mul.Tensor", (_answer(), 1.0)), junk))
    thin = audit.eager("aten.select.int", (wide, 0, 0))
    row = _dsl(audit, [1, N // ROWS], torch.randn(1, N // ROWS))
    out = audit.eager("aten.index_add.default", (thin, 0, torch.tensor([0]), row))
    assert audit.outside_share(out) == 1.0
