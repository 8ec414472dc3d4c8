"""The natural language of simulated skills: how plans are named and how each kind of conclusion is
phrased (several phrasings each), and the lexicon a reader uses to find plan mentions in text.

Writer and reader share only the lexicon, the way two engineers share vocabulary: the reader never
sees the writer's labels, so whatever a filter removes from the text is gone for it.
"""

from __future__ import annotations

import re
from functools import lru_cache

# noun phrases per plan kind; reformulations are named per family reformulation
PLAN_PHRASES: dict[str, tuple[str, ...]] = {
    "eager_only": ("the pure eager PyTorch version", "leaving everything in eager PyTorch"),
    "minimal_dsl": (
        "a light DSL kernel for one cheap stage with the rest left in eager PyTorch",
        "offloading only a cheap stage to a DSL kernel",
        "the minimal DSL port of a single cheap stage",
    ),
    "split_dominant": (
        "one DSL kernel for the dominant stage with the glue left in eager PyTorch",
        "moving the dominant stage into a single DSL kernel",
        "the eager-plus-one-kernel split around the dominant stage",
    ),
    "multi_kernel": (
        "one DSL kernel per stage",
        "a chain of separate DSL kernels, one per stage",
        "the multi-kernel pipeline",
    ),
    "fused": ("a single fused kernel", "fusing all stages into one kernel", "the fully fused kernel"),
    "fused_tiled": (
        "the tiled, vectorised fused kernel",
        "a fused kernel with tiling and wide vector loads",
        "tiling the fused kernel with vectorised memory access",
    ),
}
REFORMULATION_PHRASES: dict[str, tuple[str, ...]] = {
    "split_kv": (
        "split-KV with a final merge of partial softmax results",
        "splitting the KV sequence across thread blocks",
        "the split-KV reformulation",
    ),
    "online_softmax": (
        "online-softmax tiling that never materialises the score matrix",
        "flash-style tiling with a running softmax",
        "the online-softmax reformulation",
    ),
    "chunked_recurrence": (
        "the chunked form of the recurrence",
        "processing the recurrence in chunks with intra-chunk matmuls",
        "the chunkwise-parallel reformulation",
    ),
    "state_resident": (
        "keeping the recurrent state resident on chip across steps",
        "the state-resident reformulation",
        "holding the state in registers for the whole update",
    ),
    "grouped_gemm": (
        "a grouped GEMM across all experts",
        "one grouped launch over every expert",
        "the grouped-GEMM reformulation",
    ),
    "token_parallel_routing": (
        "one warp per token doing the softmax, top-k and renormalisation in registers",
        "the token-parallel routing reformulation",
        "routing each token in registers with warp-level top-k",
    ),
    "dequant_in_register": (
        "dequantising in registers and feeding the low-precision tensor cores directly",
        "the dequant-in-register reformulation",
        "applying the block scales in registers around a low-precision GEMM",
    ),
    "vectorised_scatter": (
        "a coalesced vectorised scatter per token",
        "the vectorised-scatter reformulation",
        "wide coalesced copies driven by the slot mapping",
    ),
    "row_single_pass": (
        "a single-pass row reduction held in registers",
        "the one-pass row reformulation",
        "keeping each row in registers for one pass",
    ),
    "eager_gemm_glue_fusion": (
        "keeping the matmuls in eager PyTorch and fusing all elementwise glue into one DSL kernel",
        "the matmul-eager, glue-fused reformulation",
        "fusing the glue around eager matmuls",
    ),
}

# The reader's lexicon: most specific first; a matched span is blanked before the next kind is tried.
_MENTIONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            "reformulated",
            r"split-kv|splitting the kv|online-softmax|running softmax|flash-style|chunked form|in chunks|"
            r"chunkwise|state-resident|state resident|state in registers|grouped[- ]gemm|grouped launch|"
            r"dequant-in-register|dequantising in registers|scales in registers|vectorised[- ]scatter|"
            r"coalesced vectorised|wide coalesced copies|single-pass row|one-pass row|each row in registers|"
            r"matmul-eager|glue-fused|glue around eager matmuls|fusing all elementwise glue|one warp per token|"
            r"token-parallel routing|warp-level top-k|reformulation",
        ),
        ("fused_tiled", r"tiled, vectorised fused|fused kernel with tiling|tiling the fused kernel|tiled fused"),
        (
            "fused",
            r"single fused kernel|fully fused|fusing all stages|\bfus(?:ing|ion) (?:beyond|further)|further fusion",
        ),
        ("multi_kernel", r"one dsl kernel per stage|separate dsl kernels|multi-kernel"),
        (
            "split_dominant",
            r"dominant stage into a single dsl kernel|one dsl kernel for the dominant|eager-plus-one-kernel",
        ),
        ("minimal_dsl", r"light dsl kernel|offloading only|minimal dsl port"),
        ("eager_only", r"pure eager|everything in eager"),
    )
)


def plan_phrase(kind: str, reformulation: str | None, variant: int) -> str:
    phrases = REFORMULATION_PHRASES[reformulation] if kind == "reformulated" and reformulation else PLAN_PHRASES[kind]
    return phrases[variant % len(phrases)]


@lru_cache(maxsize=1 << 16)
def mentioned_plans(sentence: str) -> tuple[str, ...]:
    """Plan kinds a sentence mentions, in order of appearance."""
    found: list[tuple[int, str]] = []
    text = sentence
    for kind, pattern in _MENTIONS:
        for m in pattern.finditer(text):
            found.append((m.start(), kind))
            text = text[: m.start()] + " " * (m.end() - m.start()) + text[m.end() :]
    return tuple(dict.fromkeys(kind for _, kind in sorted(found)))


# Sentence templates per rubric category (DESIGN §7). Fields: {plan} {Plan} {other} {x} {y} {ms} {cause}.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "evidence_backed_finding": (
        "{Plan} passed verification at {x}x over eager ({ms} ms).",
        "The verifier measured {ms} ms for {plan}, a {x}x speedup over the eager reference.",
        "With {plan} the kernel ran {x}x faster than eager, measured on the production shape.",
        "Measured: {plan} reached {x}x against eager PyTorch.",
    ),
    "negative_finding": (
        "{Plan} measured only {x}x, slower than {other} at {y}x.",
        "The verifier timed {plan} at {x}x, below the {y}x of {other}.",
    ),
    "verified_reformulation": (
        "Reformulating the problem as {plan} was verified correct and reached {x}x.",
        "Recasting the computation as {plan} kept outputs within tolerance on every draw and ran at {ms} ms.",
        "The rewrite as {plan} is equivalent to the reference: it passed verification at {x}x.",
    ),
    "work_partitioning": (
        "Work split that held up: {plan}.",
        "Partitioning used: {plan}; the remaining glue is cheap next to the main stage.",
        "How the work was divided: {plan}, with nothing else worth moving out of eager PyTorch.",
    ),
    "failure_diagnosis": (
        "{Plan} failed because of {cause}.",
        "The failure of {plan} was traced to {cause}.",
        "{Plan} broke due to {cause}.",
    ),
    "applicability_condition": (
        "These numbers hold for the production shape only; at much smaller sizes launch overhead would dominate.",
        "The ranking of the plans depends on the production shape, where the main stage dominates the runtime.",
        "This applies as long as the workload keeps its production proportions.",
    ),
    "open_question": (
        "It is still unclear whether {plan} would beat {other} here.",
        "Whether {plan} pays off at this shape remains open.",
        "I did not find out whether {plan} can meet the tolerance.",
    ),
    "unsupported_closure": (
        "{Plan} is not worth pursuing for this problem.",
        "There is no benefit in {plan}; the current version is already at the limit.",
        "{Plan} cannot work here, so do not spend time on it.",
        "Avoid {plan}: it is a dead end on this problem.",
    ),
    "agenda_handoff": (
        "Next step: try {plan}.",
        "A later attempt should implement {plan}.",
        "Worth trying next: {plan}, then tuning tile sizes.",
    ),
    "ambition_capping": (
        "A {x}x speedup is good enough for this problem; going further is not needed.",
        "Stopping at {plan} is sensible; the remaining gains look marginal.",
        "The current {x}x is acceptable and further work has diminishing returns.",
    ),
    "unverified_claim": (
        "{Plan} should be roughly {x}x faster than eager.",
        "{Plan} is probably the fastest option here.",
        "I expect {plan} to reach about {x}x with modest tuning.",
    ),
}
FAILURE_CAUSES: dict[str, tuple[str, ...]] = {
    "precision": (
        "partial sums accumulated in reduced precision instead of fp32",
        "an intermediate rounded to bf16 before the final reduction",
    ),
    "indexing": (
        "an off-by-one in the offsets at sequence boundaries",
        "reads past the last valid entry of the index structure",
    ),
    "compile_error": (
        "shared-memory and register tile shapes that did not agree at build time",
        "a layout mismatch between the copy stage and the compute stage",
    ),
    "timeout": (
        "thread blocks that walked the whole sequence serially",
        "a launch grid far too small to fill the machine",
    ),
}
# API-level detail that only makes sense in the DSL it was written in (rubric: dsl_recipe_leak)
RECIPES: dict[str, tuple[str, ...]] = {
    "cutedsl": (
        "In CuTe DSL, coalesced loads needed a tiled copy atom with 128-bit vectors and a swizzled shared layout.",
        "In CuTe DSL, the thread-value layout had to be composed from the tile shape and the warp layout first.",
        "The CuTe kernel only compiled once the register fragment layouts matched the MMA atom.",
    ),
    "tirx": (
        "In TIRx, the tile primitives were dispatched only once the storage scopes of shared buffers were declared.",
        "TIRx needed the buffer declarations annotated with their layout before the block primitives would lower.",
        "In TIRx the launch parameters come from the outer loop annotations, so the grid is fixed by the schedule.",
    ),
}
# which failure causes a reader can carry to another DSL: numerics and indexing are DSL-neutral
TRANSFERABLE_CAUSE = re.compile(r"precision|fp32|bf16|rounded|offset|boundar|index|off-by-one", re.IGNORECASE)
