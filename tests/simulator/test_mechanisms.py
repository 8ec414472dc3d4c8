"""Mechanisms behind the study's statements (never a drawn outcome): inline CUDA in TIRx, and follow levels that
reflect what an attempt carried through."""

from __future__ import annotations

from collections.abc import Iterator

from mkbsim.campaigns import AttemptTask, PlannedAttempt
from mkbsim.simulator import (
    CampaignConfig,
    all_design_spaces,
    get_profile,
    select_problems,
    simulate,
    simulate_attempt,
)
from mkbsim.simulator._stats import profile_stats, records

TIRX_PROBLEMS = "p28,p36,p45,p52,p58,p62,p72"


def _inline_share(inline_cuda: float) -> tuple[int, int, float]:
    """(verifier passes with inline CUDA among TIRx solos, verifier passes, scored TIRx pass rate)."""
    profile = get_profile("sim-gemini-3.7-flash").replace({"inline_cuda": inline_cuda, "skill": -1.0})
    config = CampaignConfig((profile,), tuple(select_problems(TIRX_PROBLEMS)), replicates=3, seed=11)
    simulated = simulate(config)
    inline = passed = 0
    for a, outcome in simulated:
        if a.arm != "solo_tirx":
            continue
        final = next(e.payload for e in outcome.events
                     if e.type == "VerifierResult" and e.payload["submission"] == "final")  # fmt: skip
        assert final["passed"] == outcome.passed  # AttemptFinished carries the verifier's verdict
        passed += outcome.passed
        inline += bool(final["inline_cuda"])
        assert not final["inline_cuda"] or final["passed"]  # inline CUDA is recorded on passing kernels
    stats = profile_stats(records(config.campaign_id, simulated))[profile.name]
    return inline, passed, stats.solo_pass_rate["tirx"]


def test_tirx_build_failures_lead_some_agents_to_inline_cuda_which_passes_but_does_not_score() -> None:
    inline, passed, scored = _inline_share(1.0)
    assert inline > 0
    assert scored == (passed - inline) / (3 * len(TIRX_PROBLEMS.split(",")))  # excluded from the scored rate
    none, _, _ = _inline_share(0.0)
    assert none == 0  # the profile's tendency, not a draw on the outcome


SKILL = """# Skill for p53 (CuTe DSL variant)

## Findings

The dequant-in-register reformulation passed verification at 12.0x over eager (1.520 ms).
"""


def _treatments(skill: float) -> Iterator[tuple[str, str]]:
    """(follow level, trajectory) of TIRx attempts reading SKILL, by a close follower of the given skill."""
    reader = get_profile("sim-glm-5.3").replace({"follow": 1.0, "reverify": 0.0, "skill": skill, "persistence": 1.0})
    space = all_design_spaces()["p53"]
    for seed in range(24):
        planned = PlannedAttempt(f"a{seed}", reader.name, "p53", space.family, "tirx", "cutedsl2tirx_skill", 0, seed)
        outcome = simulate_attempt(AttemptTask("c", planned, skill=SKILL, source_attempt_id="s"), reader, space)
        labels = next(e.payload["labels"] for e in outcome.events if e.type == "LabelAssigned"
                      and e.payload["subject"] == "comparison")  # fmt: skip
        steps = "\n".join(e.payload["content"] for e in outcome.events if e.type == "AgentStep")
        yield labels["follow"], steps


def test_an_attempt_that_gives_up_on_the_plan_a_skill_vouched_for_did_not_follow_it_fully() -> None:
    """Every read sentence is adopted (follow 1, no checking); what the attempt then did decides the level."""
    weak = list(_treatments(-2.0))
    gave_up = [level for level, steps in weak if "Giving up on reformulated" in steps]
    assert gave_up and all(level != "full" for level in gave_up)
    strong = [level for level, _ in _treatments(5.0)]
    assert strong.count("full") > sum(level == "full" for level, _ in weak)
