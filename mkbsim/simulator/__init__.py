"""The simulator: mechanistic simulated agents, the runner of simulated campaigns, and their calibration.

    from mkbsim.campaigns import SimCampaign, run_campaign
    from mkbsim.simulator import CampaignConfig, shipped_profiles, select_problems
    config = CampaignConfig(tuple(shipped_profiles().values()), tuple(select_problems(None)))
    with EventStore("events.sqlite", create=True) as store:
        run_campaign(store, SimCampaign(config), progress=True)

Campaigns start and are recorded in ``mkbsim.campaigns``; this package provides their attempts' runner
(``SimulatedRunner``, an ``AttemptRunner``) and ``simulate``, a campaign simulated in memory (calibration).
Attempts choose among implementation plans derived from each problem's cost model (``DesignSpace`` of
``KernelPlan``s), are scored by an analytic verifier, write natural-language skills, and read the other
DSL's skill as text through ``mkbsim.claims``. Transfer effects emerge from what the skill text says and
from the profile, never from a draw on the outcome.
"""

from mkbsim.simulator._attempt import simulate_attempt
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
    SimulatedRunner,
    attempt_id,
    attempt_seed,
    profile_from_config,
    simulate,
)
from mkbsim.simulator._chain import chain_attempt_id, chain_seed
from mkbsim.simulator._design import PLAN_KINDS, DesignSpace, KernelPlan, derive_design_space, solution_plan
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
    "CampaignConfig",
    "DesignSpace",
    "DeviceProfile",
    "FitResult",
    "KernelPlan",
    "ProfileStats",
    "SimulatedRunner",
    "Target",
    "TargetStat",
    "all_design_spaces",
    "attempt_id",
    "attempt_seed",
    "chain_attempt_id",
    "chain_seed",
    "choose_scorer",
    "derive_design_space",
    "evaluate",
    "fit",
    "get_profile",
    "load_device",
    "load_target",
    "parameter_names",
    "parse_profile",
    "profile_from_config",
    "select_problems",
    "shipped_profiles",
    "shipped_targets",
    "simulate",
    "simulate_attempt",
    "solution_plan",
    "summarize",
]
