"""The study's shape: its qualitative statements about the whole panel, checked on one simulated campaign.

Each statement quotes the sentence of the study summary (``shared/paper/metakernelbench-summary.txt``) it
comes from, and says how it is read as a check (where the study gives a number, "about" is a stated band
around it). A statement about a named study model is checked on the campaign's profile for that model
(``AgentProfile.study_model``); one whose model is not in the campaign is not applicable (None).
``benchmarks/shape_over_seeds.py`` reports the share of seeds each statement holds at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mkbsim.catalog import FAMILIES
from mkbsim.metrics import DIRECTIONS, paired_lift, reverse_direction
from mkbsim.simulator._stats import CampaignRecords, ProfileStats, pooled_standing

GPT, DEEPSEEK, GLM, GEMINI, GLM_FLASH, QWEN = (
    "GPT-5.6 Sol", "DeepSeek-V4-Pro", "GLM-5.3", "Gemini 3.7 Flash", "GLM-5.3-Flash", "Qwen3.8-Flash",
)  # fmt: skip
LARGER = (GPT, DEEPSEEK, GLM)
FLASH = (GEMINI, GLM_FLASH, QWEN)
C2T, T2C = "cutedsl2tirx", "tirx2cutedsl"
BAND = 0.10  # "about" a share or lift the study states: within 10 points of it
STUDY_SPEARMAN = 0.49
SPEARMAN_BAND = 0.25
INLINE_CUDA_PASSES = 21  # Gemini 3.7 Flash's excluded TIRx passes, of 74 solos
INLINE_CUDA_BAND = 10


@dataclass(frozen=True)
class Panel:
    """One campaign's per-model statistics, keyed by study model, with the records they come from."""

    stats: Mapping[str, ProfileStats]  # study model -> statistics
    records: CampaignRecords
    profile_of: Mapping[str, str]  # study model -> profile name
    problems: int

    def get(self, model: str, name: str) -> float | None:
        s = self.stats.get(model)
        return None if s is None else s.flat().get(name)


@dataclass(frozen=True)
class Statement:
    key: str
    text: str  # the check, in words
    quote: str  # the study's sentence
    models: tuple[str, ...]  # study models it needs (empty: any panel)
    check: Callable[[Panel], tuple[bool, float | None]]  # holds, and the value it turns on (for the report)


@dataclass(frozen=True)
class StatementVerdict:
    key: str
    holds: bool | None  # None: not applicable to this campaign
    value: float | None


def panel(rec: CampaignRecords, stats: Mapping[str, ProfileStats], study_model: Mapping[str, str],
          problems: int) -> Panel:  # fmt: skip
    """``study_model``: profile name -> the study model it stands for."""
    by_model = {study_model[p]: s for p, s in stats.items()}
    return Panel(by_model, rec, {m: p for p, m in study_model.items()}, problems)


def check_all(p: Panel) -> list[StatementVerdict]:
    out = []
    for s in STATEMENTS:
        if not all(m in p.stats for m in s.models) or (not s.models and len(p.stats) < 2):
            out.append(StatementVerdict(s.key, None, None))
            continue
        holds, value = s.check(p)
        out.append(StatementVerdict(s.key, holds, value))
    return out


# -- the checks -------------------------------------------------------------------------------------------------


def _lifts(p: Panel, model: str) -> list[float | None]:
    return [p.get(model, f"paired_lift.{d}") for d in DIRECTIONS]


def _count(p: Panel, test: Callable[[str], bool]) -> int:
    return sum(1 for m in p.stats if test(m))


def _positive_both(p: Panel) -> tuple[bool, float]:
    n = _count(p, lambda m: all((x or 0) > 0 for x in _lifts(p, m)))
    return n >= 3, n


def _negative_both(p: Panel) -> tuple[bool, float]:
    n = _count(p, lambda m: all(x is not None and x < 0 for x in _lifts(p, m)))
    return n >= 1, n


def _cell_values(p: Panel, kind: str) -> list[float]:
    return [v for m in p.stats for d in DIRECTIONS if (v := p.get(m, f"{kind}.{d}")) is not None]


def _harm_every_cell(p: Panel) -> tuple[bool, float]:
    low = min(_cell_values(p, "harm_rate"))
    return low >= 0.10, low


def _help_every_cell(p: Panel) -> tuple[bool, float]:
    values = _cell_values(p, "help_rate")
    return min(values) >= 0.216 - BAND / 2 and max(values) <= 0.405 + BAND / 2, min(values)


def _lift_range(p: Panel) -> tuple[bool, float]:
    values = _cell_values(p, "paired_lift")
    return abs(min(values) + 0.191) <= BAND and abs(max(values) - 0.293) <= BAND, max(values) - min(values)


def _tirx_faster(p: Panel) -> tuple[bool, float]:
    def faster(m: str) -> bool:
        c, t = p.get(m, "speedup_geomean.cutedsl"), p.get(m, "speedup_geomean.tirx")
        return c is not None and t is not None and t > c

    n = _count(p, faster)
    return n == len(p.stats), n


def _highest(p: Panel, model: str, name: str, lowest: bool = False) -> tuple[bool, float | None]:
    values = {m: v for m in p.stats if (v := p.get(m, name)) is not None}
    if model not in values:
        return False, None
    best = (min if lowest else max)(values, key=values.__getitem__)
    return best == model, values[model]


def _qwen_highest_tirx(p: Panel) -> tuple[bool, float | None]:
    return _highest(p, QWEN, "speedup_geomean.tirx")


def _gpt_quantization(p: Panel) -> tuple[bool, float | None]:
    best = p.get(GPT, f"family_rank.{C2T}.quantization") == 1
    without = p.get(GPT, f"lift_without_best.{C2T}")
    lift = p.get(GPT, f"paired_lift.{C2T}")
    holds = best and (lift or 0) > 0 and without is not None and without < 0
    return holds, p.get(GPT, f"family_lift.{C2T}.quantization")


def _flips(p: Panel, direction: str) -> tuple[int, int]:
    """(positive lifts in ``direction``, how many of them turn negative without their best family)."""
    positive = [m for m in p.stats if (p.get(m, f"paired_lift.{direction}") or 0) > 0]
    flipped = [m for m in positive if (p.get(m, f"lift_without_best.{direction}") or 0) < 0]
    return len(positive), len(flipped)


def _cute_skill_lifts_flip(p: Panel) -> tuple[bool, float]:
    _, flipped = _flips(p, C2T)
    return flipped >= 4, flipped


def _tirx_skill_lifts_hold(p: Panel) -> tuple[bool, float]:
    positive, flipped = _flips(p, T2C)
    return flipped == 0 and positive > 0, positive - flipped


def _reverse_every_model(p: Panel) -> tuple[bool, float]:
    n = _count(p, lambda m: (p.get(m, "reverse_of_helped.margin") or 0) > 0)
    return n == len(p.stats), n


def _reverse_pooled(p: Panel) -> tuple[bool, float | None]:
    helped = [c for c in p.records.comparisons if c.outcome == "helped"]
    outcome = {(c.model, c.problem, c.replicate, c.direction): c.outcome for c in p.records.comparisons}
    back = [outcome.get((c.model, c.problem, c.replicate, reverse_direction(c.direction))) for c in helped]
    if not back:
        return False, None
    harmed, helped_back = back.count("harmed") / len(back), back.count("helped") / len(back)
    return abs(harmed - 0.415) <= BAND and abs(helped_back - 0.231) <= BAND, harmed


def _follow_cells(p: Panel) -> list[tuple[float, float]]:
    cells: dict[tuple[str, str], list[tuple[str | None, float]]] = {}
    for c in p.records.comparisons:
        if c.r is not None:
            cells.setdefault((c.model, c.family), []).append((p.records.follow.get(c.treatment_attempt_id), c.r))
    points = []
    for cell in cells.values():
        levels = [f for f, _ in cell if f is not None]
        if levels:
            points.append((levels.count("full") / len(levels), paired_lift([r for _, r in cell])))
    return points


def _follow_lift_correlation(p: Panel) -> tuple[bool, float | None]:
    import warnings

    from scipy.stats import spearmanr

    points = _follow_cells(p)
    if len(points) < 3:
        return False, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant side gives nan, which fails the check below
        rho = float(spearmanr([x for x, _ in points], [y for _, y in points]).statistic)
    return abs(rho - STUDY_SPEARMAN) <= SPEARMAN_BAND, rho


def _follow_less_when_harmed(models: tuple[str, ...]) -> Callable[[Panel], tuple[bool, float | None]]:
    def check(p: Panel) -> tuple[bool, float | None]:
        gaps = [p.get(m, "follow_full.gap") for m in models]
        known = [g for g in gaps if g is not None]
        return len(known) == len(models) and min(known) > 0, min(known) if known else None

    return check


def _inline_cuda(p: Panel) -> tuple[bool, float | None]:
    share = p.get(GEMINI, "inline_cuda_share.tirx")
    if share is None:
        return False, None
    passes = share * p.problems
    scaled = INLINE_CUDA_PASSES * p.problems / 74  # the study's count on this campaign's number of problems
    return abs(passes - scaled) <= INLINE_CUDA_BAND * p.problems / 74, passes


def _pooled_standing(which: str, study: float) -> Callable[[Panel], tuple[bool, float | None]]:
    def check(p: Panel) -> tuple[bool, float | None]:
        n, helped, harmed = pooled_standing(p.records.comparisons)[which]
        value = helped if which == "above" else harmed
        return n > 0 and abs(value - study) <= BAND, value

    return check


def _standing_every_model(p: Panel) -> tuple[bool, float]:
    def within(m: str) -> bool:
        above, below = p.get(m, "standing_help.above"), p.get(m, "standing_harm.below")
        return (above is not None and 0.55 - BAND <= above <= 0.941 + BAND
                and below is not None and 0.353 - BAND <= below <= 0.724 + BAND)  # fmt: skip

    n = _count(p, within)
    return n == len(p.stats), n


def _qwen_mixed(p: Panel) -> tuple[bool, float | None]:
    c2t, t2c = p.get(QWEN, f"paired_lift.{C2T}"), p.get(QWEN, f"paired_lift.{T2C}")
    return c2t is not None and t2c is not None and c2t > 0 > t2c, c2t


def _deepseek_solo(p: Panel) -> tuple[bool, float | None]:
    passes = all(p.get(DEEPSEEK, f"solo_pass_rate.{d}") == 1.0 for d in ("cutedsl", "tirx"))
    slowest = all(_highest(p, DEEPSEEK, f"speedup_geomean.{d}", lowest=True)[0] for d in ("cutedsl", "tirx"))
    return passes and slowest, p.get(DEEPSEEK, "solo_pass_rate.tirx")


def _pooled_pass(p: Panel, m: str) -> float:
    return sum(p.get(m, f"solo_pass_rate.{d}") or 0.0 for d in ("cutedsl", "tirx")) / 2


def _qwen_lowest_pass(p: Panel) -> tuple[bool, float | None]:
    lowest = all(_highest(p, QWEN, f"solo_pass_rate.{d}", lowest=True)[0] for d in ("cutedsl", "tirx"))
    return lowest, _pooled_pass(p, QWEN)


def _top_pass_rates_gain(p: Panel) -> tuple[bool, float]:
    ranked = sorted(p.stats, key=lambda m: -_pooled_pass(p, m))
    top = set(ranked[:4])
    return top == {GPT, DEEPSEEK, GLM, GEMINI}, len(top & {GPT, DEEPSEEK, GLM, GEMINI})


def _opposing_families(p: Panel) -> tuple[bool, float]:
    cells = 0
    for m in p.stats:
        for d in DIRECTIONS:
            lifts = [v for f in FAMILIES if (v := p.get(m, f"family_lift.{d}.{f}")) is not None]
            cells += bool(lifts) and min(lifts) < 0 < max(lifts)
    return cells >= 10, cells


def _glm_families(p: Panel) -> tuple[bool, float | None]:
    kv_t2c, kv_c2t, la_t2c, la_c2t = (p.get(GLM, f"family_lift.{d}.{f}") or 0.0
                                      for f in ("kv_cache", "linear_attention") for d in (T2C, C2T))  # fmt: skip
    return kv_t2c > 0 > kv_c2t and la_c2t > 0 > la_t2c, kv_t2c


def _same_tier_larger(p: Panel) -> tuple[bool, float | None]:
    lifts = [p.get(m, "standing_lift.same") for m in LARGER]
    known = [x for x in lifts if x is not None]
    return len(known) == 3 and min(known) > 0, min(known) if known else None


def _verdict_changes(p: Panel) -> tuple[bool, float | None]:
    cs = p.records.comparisons
    helped = [c.verdict_change == "rescue" for c in cs if c.outcome == "helped"]
    harmed = [c.verdict_change == "break" for c in cs if c.outcome == "harmed"]
    if not helped or not harmed:
        return False, None
    a, b = sum(helped) / len(helped), sum(harmed) / len(harmed)
    return abs(a - 76 / 277) <= BAND and abs(b - 75 / 223) <= BAND, a


def _closure_harms(p: Panel) -> tuple[bool, float]:
    n = _count(p, lambda m: (p.get(m, "prevalence_gap.unsupported_closure") or 0) > 0)
    return n >= 5, n


def _agenda_harms_larger(p: Panel) -> tuple[bool, float]:
    n = sum((p.get(m, "prevalence_gap.agenda_handoff") or 0) > 0 for m in LARGER)
    return n == 3, n


def _misled_vs_stumble(p: Panel) -> tuple[bool, float | None]:
    larger = [v for m in LARGER if (v := p.get(m, "cause_mix.skill_side")) is not None]
    flash = [v for m in (GLM_FLASH, QWEN) if (v := p.get(m, "cause_mix.skill_side")) is not None]
    if len(larger) < len(LARGER) or len(flash) < 2:
        return False, None
    return min(larger) > max(flash), min(larger)


def _propagation(p: Panel) -> tuple[bool, float]:
    n = _count(p, lambda m: (p.get(m, "propagation.harmed") or 0) > (p.get(m, "propagation.helped") or 0))
    return n == len(p.stats), n


STATEMENTS: tuple[Statement, ...] = (
    Statement("positive_both", "at least 3 models gain in both directions (study: 4)",
              "Four models gain in both directions, by 2.3% to 29.3%", (), _positive_both),
    Statement("negative_both", "at least 1 model loses in both directions (study: GLM-5.3-Flash)",
              "GLM-5.3-Flash is negative in both directions", (), _negative_both),
    Statement("harm_every_cell", "every model × direction harms at least 10% of its comparisons",
              "Every model in every direction harms some problems, at rates of 16.2% to 44.6%", (), _harm_every_cell),
    Statement("tirx_faster", "every model's TIRx speedup above its CuTe DSL speedup",
              "Every model's TIRx speedup exceeds its CuTe DSL speedup", (), _tirx_faster),
    Statement("qwen_highest_tirx", "Qwen3.8-Flash has the highest TIRx speedup",
              "Qwen3.8-Flash has the lowest pass rates (64.9% CuTe DSL, 62.2% TIRx) yet the highest TIRx speedup, 8.7×",
              (QWEN,), _qwen_highest_tirx),
    Statement("gpt_quantization",
              "GPT-5.6 Sol's best CuTe→TIRx family is Quantization; without it the lift is negative",
              "GPT-5.6 Sol's 8.7% CuTe→TIRx lift comes from the 10 Quantization problems, where it reaches 99.1% "
              "against −1.1% on the other 64", (GPT,), _gpt_quantization),
    Statement("cute_skill_lifts_flip", "removing the best family turns at least 4 positive CuTe-skill lifts negative",
              "Removing each cell's best family turns that lift and three of the other four positive CuTe-skill lifts "
              "negative", (), _cute_skill_lifts_flip),
    Statement("tirx_skill_lifts_hold", "every positive TIRx-skill lift stays positive without its best family",
              "while all four positive TIRx-skill lifts stay positive", (), _tirx_skill_lifts_hold),
    Statement("reverse_every_model", "for every model, the reverse of a helped comparison is harmed more often than "
              "helped", "with harm exceeding help for all six models", (), _reverse_every_model),
    Statement("reverse_pooled", "reverse of helped comparisons: harmed about 41.5%, helped about 23.1% (±10 points)",
              "Among the 277 helped comparisons, the reverse direction on the same model and problem is harmed 41.5% "
              "of the time and helped 23.1%", (), _reverse_pooled),
    Statement("follow_lift_correlation", "Spearman's ρ of full-follow share and lift over model × family cells "
              "about +0.49 (±0.25)", "has a rank correlation of 0.49 with paired lift across the 36 model-and-family "
              "cells", (), _follow_lift_correlation),
    Statement("glm_follow_less_when_harmed", "both GLM models follow skills fully less often when harmed",
              "the three Flash-tier models follow it 24 to 39 points less often", (GLM, GLM_FLASH),
              _follow_less_when_harmed((GLM, GLM_FLASH))),
    Statement("all_follow_less_when_harmed", "every model follows skills fully less often when harmed than helped",
              "The three larger models follow it fully 6 to 16 points less often when harmed than when helped; the "
              "three Flash-tier models follow it 24 to 39 points less often", (*LARGER, *FLASH),
              _follow_less_when_harmed((*LARGER, *FLASH))),
    Statement("inline_cuda", "Gemini 3.7 Flash's TIRx solos: about 21 of 74 pass with inline CUDA, excluded (±10)",
              "Gemini 3.7 Flash's scored TIRx pass rate excludes 21 verifier-passing implementations that used inline "
              "CUDA", (GEMINI,), _inline_cuda),
    Statement("standing_above", "source above: about 71.2% helped (±10 points, pooled)",
              "When the source attempt stands above the target's solo attempt, 71.2% of comparisons are helped", (),
              _pooled_standing("above", 0.712)),
    Statement("standing_below", "source below: about 53.8% harmed (±10 points, pooled)",
              "when the source stands below, 10.6% helped and 53.8% harmed", (), _pooled_standing("below", 0.538)),
    Statement("standing_every_model", "every model: 45-100% helped above, 25-82% harmed below (study ±10 points)",
              "Within each model, 55.0% to 94.1% are helped when the source stands above, and 35.3% to 72.4% are "
              "harmed when it stands below", (), _standing_every_model),
    Statement("same_tier_larger", "the three larger models gain at the same tier",
              "At the same tier, the three larger models still retain lifts of 7.2% to 16.4%", LARGER,
              _same_tier_larger),
    Statement("qwen_mixed", "Qwen3.8-Flash gains from CuTe DSL skills and loses from TIRx skills",
              "Qwen3.8-Flash gains 4.7% from CuTe DSL skills and loses 2.6% from TIRx skills", (QWEN,), _qwen_mixed),
    Statement("deepseek_solo", "DeepSeek-V4-Pro passes every solo and has the lowest speedups in both DSLs",
              "DeepSeek-V4-Pro passes every variant in both DSLs but has the lowest passing-only geometric mean "
              "speedups", (DEEPSEEK,), _deepseek_solo),
    Statement("qwen_lowest_pass", "Qwen3.8-Flash has the lowest pass rates in both DSLs",
              "Qwen3.8-Flash has the lowest pass rates (64.9% CuTe DSL, 62.2% TIRx)", (QWEN,), _qwen_lowest_pass),
    Statement("top_pass_rates_gain", "the four highest pooled solo pass rates are the four models gaining both ways",
              "The four models with the highest pooled solo pass rates are the four with positive lift in both "
              "directions", (*LARGER, *FLASH), _top_pass_rates_gain),
    Statement("lift_range", "panel lift range about −19.1% … +29.3% (each end ±10 points)",
              "paired lift over solo attempts ranges from −19.1% to +29.3%", (), _lift_range),
    Statement("help_every_cell", "every cell helps 16.6-45.5% of its comparisons (study 21.6-40.5%, ±5 points)",
              "alongside help rates of 21.6% to 40.5%", (), _help_every_cell),
    Statement("verdict_changes", "verdict changes: about 27% of helped, 34% of harmed comparisons (±10 points)",
              "Verdict changes account for 76 of the 277 helped comparisons and 75 of the 223 harmed ones", (),
              _verdict_changes),
    Statement("opposing_families", "families of opposite sign in at least 10 of the 12 model × direction cells",
              "Pooled lifts mix families with opposite signs in 11 of the 12 model-and-direction cells", (),
              _opposing_families),
    Statement("glm_families", "GLM-5.3: KV Cache gains from TIRx skills, loses from CuTe DSL skills; the reverse "
              "on Linear Attention", "GLM-5.3 gains 67.9% on KV Cache from TIRx skills but loses 40.9% from CuTe DSL "
              "skills, with the signs reversed on Linear Attention", (GLM,), _glm_families),
    Statement("closure_harms", "unsupported closure more prevalent in harmed than helped comparisons for ≥ 5 models",
              "is 7 to 17 percentage points more prevalent in harmed than helped comparisons for five of six models",
              (), _closure_harms),
    Statement("agenda_harms_larger", "agenda handoff more prevalent in harmed comparisons for the three larger models",
              "is 11 to 27 points more prevalent in harmed comparisons for the three larger models", LARGER,
              _agenda_harms_larger),
    Statement("misled_vs_stumble", "skill-side failure classes a larger share for each larger model than for "
              "GLM-5.3-Flash and Qwen3.8-Flash", "The two skill-side failure classes (search truncation and "
              "unverified adoption) account for 65% to 86% of assigned causes for the three larger models and 39% for "
              "Gemini 3.7 Flash, against 33% for GLM-5.3-Flash and 6% for Qwen3.8-Flash", (*LARGER, GLM_FLASH, QWEN),
              _misled_vs_stumble),
    Statement("propagation", "every model: unverified source claims reappear more often in harmed than helped",
              "Unverified source claims reappear in the attempt's own skill in 17% to 68% of harmed comparisons "
              "versus 5% to 32% of helped ones, for every model", (), _propagation),
)  # fmt: skip

SHAPE = ("positive_both", "negative_both", "harm_every_cell", "tirx_faster")  # issue: ≥ 80% of seeds each
