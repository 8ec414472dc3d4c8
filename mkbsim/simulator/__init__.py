"""The simulator: mechanistic simulated agents, simulated campaigns and their calibration (issue 6).

    from mkbsim.simulator import CampaignConfig, run_campaign, shipped_profiles, select_problems
    config = CampaignConfig(tuple(shipped_profiles().values()), tuple(select_problems(None)))
    with EventStore("events.sqlite", create=True) as store:
        run_campaign(store, config, progress=True)

Attempts choose among implementation plans derived from each problem's cost model (``DesignSpace``),
are scored by an analytic verifier, write natural-language skills, and read the other DSL's skill as
text through ``mkbsim.claims``. Transfer effects emerge from what the skill text says and from the
profile, never from a draw on the outcome. ``rerun_treatments`` re-runs a stored campaign's
skill-conditioned attempts with transformed skills against the same solo baselines.
"""

from mkbsim.simulator._attempt import AttemptResult, AttemptSpec, simulate_attempt, started_event
from mkbsim.simulator._calibrate import (
    STATISTICS,
    FitResult,
    Target,
    TargetStat,
    evaluate,
    fit,
    load_target,
    shipped_targets,
)
from mkbsim.simulator._campaign import (
    ARMS,
    CampaignConfig,
    CampaignExists,
    CampaignSummary,
    SlotResult,
    SourceSkill,
    attempt_id,
    attempt_spec,
    rerun_treatments,
    run_campaign,
    simulate_slots,
    skill_of_events,
)
from mkbsim.simulator._chain import ChainConfig, chain_attempt_id, run_chains
from mkbsim.simulator._design import PLAN_KINDS, DesignSpace, Plan, derive_design_space, solution_plan
from mkbsim.simulator._device import DeviceProfile, load_device
from mkbsim.simulator._profiles import AgentProfile, get_profile, parameter_names, parse_profile, shipped_profiles
from mkbsim.simulator._scoring import AnalyticVerifier, choose_scorer
from mkbsim.simulator._spaces import all_design_spaces, select_problems
from mkbsim.simulator._stats import ProfileStats, summarize

__all__ = [
    "ARMS",
    "PLAN_KINDS",
    "STATISTICS",
    "AgentProfile",
    "AnalyticVerifier",
    "AttemptResult",
    "AttemptSpec",
    "CampaignConfig",
    "CampaignExists",
    "CampaignSummary",
    "ChainConfig",
    "DesignSpace",
    "DeviceProfile",
    "FitResult",
    "Plan",
    "ProfileStats",
    "SlotResult",
    "SourceSkill",
    "Target",
    "TargetStat",
    "all_design_spaces",
    "attempt_id",
    "attempt_spec",
    "chain_attempt_id",
    "choose_scorer",
    "derive_design_space",
    "evaluate",
    "fit",
    "get_profile",
    "load_device",
    "load_target",
    "parameter_names",
    "parse_profile",
    "rerun_treatments",
    "run_campaign",
    "run_chains",
    "select_problems",
    "shipped_profiles",
    "shipped_targets",
    "simulate_attempt",
    "simulate_slots",
    "skill_of_events",
    "solution_plan",
    "started_event",
    "summarize",
]
