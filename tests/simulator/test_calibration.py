"""Calibration: the six shipped profiles reproduce the study's headline shape, within stated tolerances.

Checked on the default campaign of `mkbsim run` (six profiles × 74 problems × 4 arms, seed 0), simulated
in memory — no store, events or report — to keep the suite fast. Tolerances:
- solo pass: the strongest profile passes everything; the weakest (Qwen-like) passes 55-80%;
- every profile's TIRx passing-only speedup exceeds its CuTe DSL one; the cautious profile's are lowest;
- paired lift: four profiles positive in both directions, the GLM-5.3-Flash-like one negative in both,
  the Qwen3.8-Flash-like one mixed (gains from CuTe DSL skills, loses from TIRx skills), the panel
  spanning at least −12% … +20% (study: −19.1% … +29.3%);
- every model × direction cell harms 8-45% and helps 18-45% of its comparisons (study: 16-45%, 22-41%);
- standing, pooled: ≥ 55% helped and ≤ 10% harmed when the source stands above (study 71%, 8%),
  ≥ 35% harmed and ≤ 15% helped when it stands below (study 54%, 11%);
- every shipped target statistic within 2 of its tolerances (each target file states them).
"""

from __future__ import annotations

import itertools
import math

import pytest

from mkbsim.simulator import (
    STATISTICS,
    CampaignConfig,
    ProfileStats,
    parameter_names,
    select_problems,
    shipped_profiles,
    shipped_targets,
    simulate,
)
from mkbsim.simulator._stats import comparisons, pooled_standing, profile_stats, slot_outcomes

POSITIVE_BOTH = ("sim-gpt-5.6-sol", "sim-deepseek-v4-pro", "sim-glm-5.3", "sim-gemini-3.7-flash")
NEGATIVE_BOTH = "sim-glm-5.3-flash"
DIRECTIONS = ("cutedsl2tirx", "tirx2cutedsl")


@pytest.fixture(scope="module")
def default() -> tuple[dict[str, ProfileStats], dict[str, tuple[int, float, float]]]:
    problems = tuple(select_problems(None))
    config = CampaignConfig(tuple(shipped_profiles().values()), problems, seed=0)
    groups = slot_outcomes(config.campaign_id, simulate(config))
    comps = comparisons(groups)
    return profile_stats(itertools.chain.from_iterable(groups), comps), pooled_standing(comps)


def test_targets_name_shipped_profiles_and_known_parameters() -> None:
    targets = shipped_targets()
    assert set(targets) == set(shipped_profiles())
    for target in targets.values():
        assert target.fit and set(target.fit) <= set(parameter_names())
        assert set(target.statistics) == set(STATISTICS)


def test_solo_quality_shape(default: tuple[dict[str, ProfileStats], object]) -> None:
    stats = default[0]
    assert stats["sim-deepseek-v4-pro"].solo_pass_rate == {"cutedsl": 1.0, "tirx": 1.0}
    mean_pass = {m: sum(s.solo_pass_rate.values()) / 2 for m, s in stats.items()}
    weakest = min(mean_pass, key=mean_pass.__getitem__)
    assert weakest == "sim-qwen3.8-flash" and 0.55 <= mean_pass[weakest] <= 0.80
    for model, s in stats.items():
        assert (s.speedup_geomean["tirx"] or 0) > (s.speedup_geomean["cutedsl"] or math.inf), model
    lowest = min(stats, key=lambda m: stats[m].speedup_geomean["cutedsl"] or 0)
    assert lowest == "sim-deepseek-v4-pro"


def test_transfer_shape(default: tuple[dict[str, ProfileStats], object]) -> None:
    stats = default[0]
    for model in POSITIVE_BOTH:
        assert all(stats[model].paired_lift[d] > 0 for d in DIRECTIONS), (model, stats[model].paired_lift)
    assert all(stats[NEGATIVE_BOTH].paired_lift[d] < 0 for d in DIRECTIONS), stats[NEGATIVE_BOTH].paired_lift
    mixed = stats["sim-qwen3.8-flash"].paired_lift
    assert mixed["cutedsl2tirx"] > 0 > mixed["tirx2cutedsl"], mixed
    lifts = [s.paired_lift[d] for s in stats.values() for d in DIRECTIONS]
    assert min(lifts) <= -0.12 and max(lifts) >= 0.20
    for model, s in stats.items():
        for d in DIRECTIONS:
            assert 0.08 <= s.harm_rate[d] <= 0.45, (model, d, s.harm_rate[d])
            assert 0.18 <= s.help_rate[d] <= 0.45, (model, d, s.help_rate[d])


def test_standing_effect(default: tuple[object, dict[str, tuple[int, float, float]]]) -> None:
    standing = default[1]
    _, above_help, above_harm = standing["above"]
    _, below_help, below_harm = standing["below"]
    assert above_help >= 0.55 and above_harm <= 0.10
    assert below_harm >= 0.35 and below_help <= 0.15


def test_each_profile_meets_its_target_within_two_tolerances(default: tuple[dict[str, ProfileStats], object]) -> None:
    for name, target in shipped_targets().items():
        achieved = default[0][name].flat()
        misses = {k: round(stat.miss(achieved.get(k)), 2) for k, stat in target.statistics.items()}
        assert all(abs(m) <= 2 for m in misses.values()), (name, misses)
