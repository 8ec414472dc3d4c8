"""Campaigns at scale (issue 8): configuration files, the deterministic plan and its fingerprint,
resumable runs on a local process pool or a Ray cluster, live progress.

    campaign = load_simulated_campaign("examples/simulated.toml")
    with EventStore("events.sqlite", create=True) as store:
        result = run_simulated(store, campaign, executor="ray", progress=True)

LLM campaign files run through ``mkbsim.agents.run_llm_campaign`` and share the file checks
(``Table``, ``ConfigError``).
"""

from mkbsim.campaigns._config import (
    Limits,
    SimCampaign,
    campaign_kind,
    default_workers,
    load_simulated_campaign,
)
from mkbsim.campaigns._executors import Executor, LocalExecutor, RayExecutor
from mkbsim.campaigns._plan import Plan, PlannedAttempt, fingerprint_parts, plan_campaign
from mkbsim.campaigns._runner import RunResult, run_simulated, simulate_events
from mkbsim.campaigns._toml import ConfigError, Table, read_toml

__all__ = [
    "ConfigError",
    "Executor",
    "Limits",
    "LocalExecutor",
    "Plan",
    "PlannedAttempt",
    "RayExecutor",
    "RunResult",
    "SimCampaign",
    "Table",
    "campaign_kind",
    "default_workers",
    "fingerprint_parts",
    "load_simulated_campaign",
    "plan_campaign",
    "read_toml",
    "run_simulated",
    "simulate_events",
]
