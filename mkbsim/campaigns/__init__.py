"""Campaigns at scale (issue 8): configuration files, the deterministic plan and its fingerprint,
resumable runs on a local process pool or a Ray cluster, live progress.

    campaign = load_simulated_campaign("examples/simulated.toml")
    with EventStore("events.sqlite", create=True) as store:
        result = run_simulated(store, campaign, executor="ray", progress=True)

LLM campaign files run through ``mkbsim.agents.run_llm_campaign`` and share the file checks
(``Table``, ``ConfigError``) and the dispatch (``ThreadDispatch`` or ``RayExecutor``, whose attempts
record through ``RemoteStore``).
"""

from mkbsim.campaigns._config import (
    Limits,
    SimCampaign,
    campaign_kind,
    default_workers,
    load_simulated_campaign,
)
from mkbsim.campaigns._executors import (
    Dispatch,
    Executor,
    LocalExecutor,
    RayExecutor,
    RemoteStop,
    RemoteStore,
    ThreadDispatch,
    connect_ray,
    start_writer,
)
from mkbsim.campaigns._plan import Plan, PlannedAttempt, fingerprint_parts, plan_campaign
from mkbsim.campaigns._runner import RunResult, run_simulated, simulate_events
from mkbsim.campaigns._signals import StopFlag
from mkbsim.campaigns._toml import ConfigError, Table, read_toml

__all__ = [
    "ConfigError",
    "Dispatch",
    "Executor",
    "Limits",
    "LocalExecutor",
    "Plan",
    "PlannedAttempt",
    "RayExecutor",
    "RemoteStop",
    "RemoteStore",
    "RunResult",
    "SimCampaign",
    "StopFlag",
    "Table",
    "ThreadDispatch",
    "campaign_kind",
    "connect_ray",
    "default_workers",
    "fingerprint_parts",
    "load_simulated_campaign",
    "plan_campaign",
    "read_toml",
    "run_simulated",
    "simulate_events",
    "start_writer",
]
