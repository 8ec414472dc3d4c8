"""The claim extractor: sentence segmentation and rubric classification on hand-written skills."""

from __future__ import annotations

import pytest

from mkbsim.claims import CATEGORIES, classify, extract_claims, remove_categories, segment, speedups

SKILL = """# p28: notes from a CuTe DSL attempt

## What worked

The fused kernel passed verification at 2.7x over eager (0.141 ms). Keeping the residual add in eager
PyTorch cost little, e.g. one extra pass over the rows.

## Open points
- A later attempt should try a single-pass row reduction.
- Is the vectorised store worth it?
"""


def test_segmentation_splits_paragraphs_items_and_sentences_and_skips_headings() -> None:
    texts = [s.text for s in segment(SKILL)]
    assert texts == [
        "The fused kernel passed verification at 2.7x over eager (0.141 ms).",
        "Keeping the residual add in eager PyTorch cost little, e.g. one extra pass over the rows.",
        "A later attempt should try a single-pass row reduction.",
        "Is the vectorised store worth it?",
    ]


def test_spans_point_back_into_the_text() -> None:
    for s in segment(SKILL):
        assert " ".join(SKILL[s.start : s.end].split()) == s.text


def test_decimals_and_abbreviations_do_not_end_sentences_but_units_do() -> None:
    assert [s.text for s in segment("It ran at 0.41 ms. Then vs. eager it was 2.5x faster, i.e. good.")] == [
        "It ran at 0.41 ms.",
        "Then vs. eager it was 2.5x faster, i.e. good.",
    ]


@pytest.mark.parametrize(
    ("sentence", "category"),
    [
        ("The split kernel measured 3.1x over eager on the production shape.", "evidence_backed_finding"),
        ("Rewriting the recurrence as chunked matmuls was verified correct at 40x.", "verified_reformulation"),
        ("The gather stays in eager PyTorch while the DSL kernel handles the attention core.", "work_partitioning"),
        ("The first build failed because the accumulator was bf16 instead of fp32.", "failure_diagnosis"),
        ("This only holds when the batch is small; long sequences would change the balance.",
         "applicability_condition"),
        ("It is unclear whether split-KV beats the single kernel here.", "open_question"),
        ("Fusing the norm into the GEMM is not worth pursuing for this problem.", "unsupported_closure"),
        ("Next step: try a grouped GEMM over all experts.", "agenda_handoff"),
        ("A 2x speedup is good enough here; going further is not needed.", "ambition_capping"),
        ("A fully fused kernel should be roughly 5x faster than eager.", "unverified_claim"),
        ("In CuTe DSL the tiled copy atom needs a swizzled shared-memory layout.", "dsl_recipe_leak"),
    ],
)  # fmt: skip
def test_each_category_on_a_hand_written_sentence(sentence: str, category: str) -> None:
    result = classify(sentence)
    assert result.category == category, result.scores
    assert 0 < result.confidence <= 1


def test_a_measured_negative_result_is_evidence_not_closure() -> None:
    assert classify("The fused kernel cannot beat the split here: it measured 1.2x against 2.5x.").category == (
        "evidence_backed_finding"
    )
    assert classify("The fused kernel cannot beat the split here.").category == "unsupported_closure"


def test_confidence_is_higher_for_clear_cues() -> None:
    clear = classify("Avoid split-KV: it is a dead end and not worth pursuing.")
    vague = classify("Split-KV was part of the plan.")
    assert clear.confidence > vague.confidence


def test_speedups_are_read_from_the_text() -> None:
    assert speedups("From 1.5x to 12× after tiling, at 0.2 ms.") == (1.5, 12.0)


def test_extract_claims_classifies_every_sentence_in_order() -> None:
    claims = extract_claims(SKILL)
    assert [c.index for c in claims] == [0, 1, 2, 3]
    assert [c.category for c in claims] == [
        "evidence_backed_finding", "work_partitioning", "agenda_handoff", "open_question",
    ]  # fmt: skip
    assert claims[0].speedups == (2.7,)
    assert all(c.category in CATEGORIES for c in claims)


def test_remove_categories_drops_those_sentences_and_empty_items_only() -> None:
    text = remove_categories(SKILL, {"agenda_handoff"})
    assert "later attempt" not in text
    assert "- Is the vectorised store worth it?" in text
    assert "\n-\n" not in text and "- \n" not in text
    assert [c.category for c in extract_claims(text)] == [
        "evidence_backed_finding", "work_partitioning", "open_question",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown rubric"):
        remove_categories(SKILL, {"closure"})
