"""The transfer metric rules of DESIGN §6, as pure functions: one definition for projections, reports
and the simulator.

A comparison pairs the target-DSL solo attempt (baseline) with the skill-conditioned attempt in the
same DSL (treatment). Verdicts here are *scored* verdicts: a verifier pass that used inline CUDA is not
a scored pass (DESIGN §5 excludes it from scored pass rates by default).
"""

from __future__ import annotations

from typing import Literal

CLIP_LOW = 0.25
CLIP_HIGH = 4.0
HELP_AT = 1.25  # 5/4, inclusive
HARM_AT = 0.8  # 4/5, inclusive
TIER_THRESHOLDS = (0.5, 1.0, 2.0, 4.0)

#: The inclusive boundaries (5/4, 4/5 and the tier thresholds) are compared with this relative
#: tolerance: runtimes are decimal measurements and e.g. 0.3 / 0.24 is 1.2499999999999998 in binary
#: floating point. 1e-9 is far below any measurable runtime difference.
BOUNDARY_RTOL = 1e-9

Outcome = Literal["helped", "harmed", "neutral"]
#: What a compared arm is (DESIGN §4): the treatment (``<direction>_skill``) or one of its control arms
#: (``<direction>_aa``, ``<direction>_placebo``, ``<direction>_matched``).
ArmKind = Literal["skill", "aa", "placebo", "matched"]
VerdictChange = Literal["rescue", "break", "none"]
Standing = Literal["above", "same", "below"]

#: Direction name → (source DSL, target DSL). The skill arm is ``<direction>_skill``.
DIRECTIONS: dict[str, tuple[str, str]] = {
    "cutedsl2tirx": ("cutedsl", "tirx"),
    "tirx2cutedsl": ("tirx", "cutedsl"),
}
ARM_KINDS: tuple[ArmKind, ...] = ("skill", "aa", "placebo", "matched")
OUTCOMES: tuple[Outcome, ...] = ("helped", "harmed", "neutral")
STANDINGS: tuple[Standing, ...] = ("above", "same", "below")


def reaches(value: float, threshold: float) -> bool:
    """``value >= threshold``, with the boundary tolerance."""
    return value >= threshold * (1.0 - BOUNDARY_RTOL)


def at_most(value: float, threshold: float) -> bool:
    """``value <= threshold``, with the boundary tolerance."""
    return value <= threshold * (1.0 + BOUNDARY_RTOL)


def scored_pass(passed: bool, inline_cuda: bool) -> bool:
    return passed and not inline_cuda


def ratio(
    baseline_passed: bool,
    baseline_runtime_ms: float | None,
    treatment_passed: bool,
    treatment_runtime_ms: float | None,
    *,
    skipped: bool = False,
    clip: tuple[float, float] = (CLIP_LOW, CLIP_HIGH),
    flips: tuple[float, float] = (CLIP_LOW, CLIP_HIGH),
) -> float:
    """r of one comparison: clipped runtime ratio when both pass, 4 for a rescue, 1/4 for a break,
    1 for a joint failure or a skipped treatment (which inherits the baseline outcome). ``clip`` and
    ``flips`` (break, rescue) exist for the robustness section; DESIGN §6's values are the defaults."""
    if skipped:
        return 1.0
    if baseline_passed and treatment_passed:
        if not (baseline_runtime_ms and treatment_runtime_ms and min(baseline_runtime_ms, treatment_runtime_ms) > 0):
            raise ValueError(f"passing attempts need positive runtimes: {baseline_runtime_ms}, {treatment_runtime_ms}")
        return min(clip[1], max(clip[0], baseline_runtime_ms / treatment_runtime_ms))
    if treatment_passed:
        return flips[1]
    if baseline_passed:
        return flips[0]
    return 1.0


def outcome(r: float, *, help_at: float = HELP_AT, harm_at: float = HARM_AT) -> Outcome:
    if reaches(r, help_at):
        return "helped"
    if at_most(r, harm_at):
        return "harmed"
    return "neutral"


def verdict_change(baseline_passed: bool, treatment_passed: bool, *, skipped: bool = False) -> VerdictChange:
    if skipped or baseline_passed == treatment_passed:
        return "none"
    return "rescue" if treatment_passed else "break"


def tier(passed: bool, speedup: float | None) -> int:
    """0 if failed, else 1 + the number of thresholds in (0.5, 1, 2, 4) the speedup reaches."""
    if not passed:
        return 0
    reached = 1
    if speedup is not None:
        for threshold in TIER_THRESHOLDS:
            if reaches(speedup, threshold):
                reached += 1
    return reached


def standing(source_tier: int, baseline_tier: int) -> Standing:
    """Where the source attempt stands relative to the target solo (the baseline)."""
    if source_tier > baseline_tier:
        return "above"
    if source_tier == baseline_tier:
        return "same"
    return "below"


def arm_kind(arm: str) -> tuple[str, ArmKind] | None:
    """A compared arm's direction and kind: ``cutedsl2tirx_placebo`` → (``cutedsl2tirx``, ``placebo``); None for
    solo arms and arms this version does not know."""
    direction, _, kind = arm.rpartition("_")
    if direction in DIRECTIONS and kind in ARM_KINDS:
        return direction, kind
    return None


def direction_of_arm(arm: str) -> str | None:
    """``cutedsl2tirx_skill`` → ``cutedsl2tirx``: the direction of a treatment arm; None for solo and control
    arms and arms this version does not know."""
    known = arm_kind(arm)
    return known[0] if known is not None and known[1] == "skill" else None


def reverse_direction(direction: str) -> str:
    source, target = DIRECTIONS[direction]
    return f"{target}2{source}"
