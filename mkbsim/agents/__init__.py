"""Real LLM agents: the terminal-agent loop, its sandbox, budgets, skill capture, and the runner of LLM
campaigns (DESIGN §4).

    from mkbsim.agents import LlmCampaign, VerifierSlots, load_llm_campaign
    from mkbsim.campaigns import run_campaign

    config = load_llm_campaign("examples/llm.toml")
    with VerifierSlots(config.verifier_backend, config.protocol, config.gpu_verifier_slots) as scorers:
        summary = run_campaign(store, LlmCampaign(config, load_catalog(), scorers))

Campaigns start and are recorded in ``mkbsim.campaigns``; ``LlmCampaign`` gives the lifecycle the plan and
the execution (threads here, or with ``executor="ray"`` and ``RayVerifiers`` as the scorers, Ray tasks), and
``LlmRunner`` runs each attempt. ``run_attempt`` runs one attempt and ``run_transfer_pair`` a solo →
skill-conditioned pair by hand, both appending every model request and reply, command, observation,
submission, verifier result and skill to an ``EventStore``; ``replay_requests`` rebuilds the exact requests
from those events. litellm is imported only when a model is called.
"""

from mkbsim.agents._attempt import AttemptSpec, BudgetClock, LoopConfig, run_attempt
from mkbsim.agents._campaign import LlmCampaign, LlmRunner, attempt_cpus
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
    "AttemptSpec",
    "BudgetClock",
    "BudgetEnded",
    "Command",
    "CommandResult",
    "Completion",
    "ConfigError",
    "ContextOverflow",
    "Conversation",
    "CostLedger",
    "FormatRefused",
    "Isolation",
    "LlmCampaign",
    "LlmCampaignConfig",
    "LlmRunner",
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
    "recorded_skill",
    "replay_requests",
    "reply_instructions",
    "run_attempt",
    "run_transfer_pair",
    "run_treatment",
    "sandbox_isolation",
    "structured_request",
    "unscorable",
    "write_docs_index",
]
