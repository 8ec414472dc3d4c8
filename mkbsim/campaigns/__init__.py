"""The campaign lifecycle: the one place a campaign starts and its events are written (DESIGN §3, §4).

Every campaign — simulated or LLM; plain, filtered, chained, re-run or with control arms — is a plan
(``Plan``: its attempts, what each reads, one fingerprint) run by ``run_campaign`` on an executor
(a local process pool or worker threads, or Ray tasks) and written by one ``CampaignRecorder``, the only
emitter of ``CampaignStarted`` and ``CampaignFinished``. Each attempt runs behind the ``AttemptRunner``
protocol: ``mkbsim.simulator.SimulatedRunner`` or ``mkbsim.agents.LlmRunner``.

    campaign = load_simulated_campaign("examples/simulated.toml")      # or SimCampaign(CampaignConfig(...))
    with EventStore("events.sqlite", create=True) as store:
        summary = run_campaign(store, campaign, executor="ray", progress=True)

LLM campaigns are ``mkbsim.agents.LlmCampaign`` (a campaign file, the verifier's scorers, the model
client), run the same way. ``simulate_plan`` runs a plan in memory, without a store (calibration).
"""

from mkbsim.campaigns._attempt import (
    STUDY_BUDGET,
    AttemptOutcome,
    AttemptRunner,
    AttemptTask,
    PlannedAttempt,
    SkillText,
    SkillTransform,
)
from mkbsim.campaigns._controls import CONTROLS, neutral_note
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
from mkbsim.campaigns._lifecycle import Campaign, Execution, guarded, run_campaign, simulate_plan
from mkbsim.campaigns._plan import Plan, fingerprint_parts, transfer_attempts
from mkbsim.campaigns._recorder import CampaignRecorder, code_version
from mkbsim.campaigns._signals import StopFlag
from mkbsim.campaigns._simulated import (
    Rerun,
    SimCampaign,
    campaign_kind,
    default_workers,
    load_simulated_campaign,
    read_controls,
    rerun_campaign,
)
from mkbsim.campaigns._summary import CampaignSummary
from mkbsim.campaigns._toml import ConfigError, Table, read_toml

__all__ = [
    "CONTROLS",
    "STUDY_BUDGET",
    "AttemptOutcome",
    "AttemptRunner",
    "AttemptTask",
    "Campaign",
    "CampaignRecorder",
    "CampaignSummary",
    "ConfigError",
    "Dispatch",
    "Execution",
    "Executor",
    "LocalExecutor",
    "Plan",
    "PlannedAttempt",
    "RayExecutor",
    "RemoteStop",
    "RemoteStore",
    "Rerun",
    "SimCampaign",
    "SkillText",
    "SkillTransform",
    "StopFlag",
    "Table",
    "ThreadDispatch",
    "campaign_kind",
    "code_version",
    "connect_ray",
    "default_workers",
    "fingerprint_parts",
    "guarded",
    "load_simulated_campaign",
    "neutral_note",
    "read_controls",
    "read_toml",
    "rerun_campaign",
    "run_campaign",
    "simulate_plan",
    "start_writer",
    "transfer_attempts",
]
