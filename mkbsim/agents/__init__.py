"""Real LLM agents (issue 7): the terminal-agent loop, its sandbox, budgets, skill capture and transfer.

    from mkbsim.agents import load_llm_campaign, run_llm_campaign, VerifierScorers

    config = load_llm_campaign("examples/llm.toml")
    with VerifierSlots(config.verifier_backend, config.verifier_protocol, config.gpu_verifier_slots) as scorers:
        summary = run_llm_campaign(config, store, load_catalog(), scorers)

With ``executor="ray"`` (and ``RayVerifiers`` as the scorers) the attempts run as Ray tasks.

``run_attempt`` runs one attempt and ``run_transfer_pair`` a solo → skill-conditioned pair, both
appending every model request and reply, command, observation, submission, verifier result and
skill to an ``EventStore``; ``replay_requests`` rebuilds the exact requests from those events.
litellm is imported only when a model is called.
"""

from mkbsim.agents._attempt import AttemptOutcome, AttemptSpec, BudgetClock, LoopConfig, run_attempt
from mkbsim.agents._campaign import CampaignSummary, attempt_cpus, plan_fingerprint, run_llm_campaign
from mkbsim.agents._config import LlmCampaignConfig, load_env_file, load_llm_campaign
from mkbsim.agents._conversation import Conversation, replay_requests
from mkbsim.agents._docs import docs_index_text, write_docs_index
from mkbsim.agents._ledger import CostLedger
from mkbsim.agents._model import (
    DEFAULT_CONTEXT_TOKENS,
    BudgetEnded,
    Completion,
    ContextOverflow,
    FormatRefused,
    ModelClient,
    ModelConfig,
    ModelUnavailable,
    ReplyFormats,
    RetryNote,
    is_transient,
)
from mkbsim.agents._ray import RayVerifiers
from mkbsim.agents._reply import (
    REPLY_FORMATS,
    REPLY_KEYS,
    REPLY_SCHEMA,
    Command,
    Reply,
    ReplyError,
    parse_reply,
    reply_instructions,
    structured_request,
)
from mkbsim.agents._sandbox import (
    CommandResult,
    Isolation,
    Sandbox,
    SandboxConfig,
    SandboxError,
    sandbox_isolation,
)
from mkbsim.agents._scoring import Scorer, ScorerFactory, Unscorable, Verdict, VerifierScorers, unscorable
from mkbsim.agents._slots import (
    ScoringSlots,
    SlottedScorers,
    VerifierSlots,
    default_verifier_slots,
    limit_scoring,
)
from mkbsim.agents._transfer import (
    DIRECTIONS,
    SkillFilter,
    SourceNotFinished,
    TransferPair,
    attempt_id_for,
    latest_finish,
    recorded_skill,
    run_transfer_pair,
    run_treatment,
)
from mkbsim.campaigns._toml import ConfigError

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "DIRECTIONS",
    "REPLY_FORMATS",
    "REPLY_KEYS",
    "REPLY_SCHEMA",
    "AttemptOutcome",
    "AttemptSpec",
    "BudgetClock",
    "BudgetEnded",
    "CampaignSummary",
    "Command",
    "CommandResult",
    "Completion",
    "ConfigError",
    "ContextOverflow",
    "Conversation",
    "CostLedger",
    "FormatRefused",
    "Isolation",
    "LlmCampaignConfig",
    "LoopConfig",
    "ModelClient",
    "ModelConfig",
    "ModelUnavailable",
    "RayVerifiers",
    "Reply",
    "ReplyError",
    "ReplyFormats",
    "RetryNote",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "Scorer",
    "ScorerFactory",
    "ScoringSlots",
    "SkillFilter",
    "SlottedScorers",
    "SourceNotFinished",
    "TransferPair",
    "Unscorable",
    "Verdict",
    "VerifierScorers",
    "VerifierSlots",
    "attempt_cpus",
    "attempt_id_for",
    "default_verifier_slots",
    "docs_index_text",
    "is_transient",
    "latest_finish",
    "limit_scoring",
    "load_env_file",
    "load_llm_campaign",
    "parse_reply",
    "plan_fingerprint",
    "recorded_skill",
    "replay_requests",
    "reply_instructions",
    "run_attempt",
    "run_llm_campaign",
    "run_transfer_pair",
    "run_treatment",
    "sandbox_isolation",
    "structured_request",
    "unscorable",
    "write_docs_index",
]
